"""Legacy Terminal-Bench 1 (``tb run``) run directories, imported as trials.

Layout (FORMATS.md §1)::

    <run_id>/run_metadata.json          agent_name, model_name, dataset, ...
    <run_id>/results.json               run level: {results: [trial record, ...], accuracy, ...}
    <run_id>/<task>/<task>.<k>-of-<n>.<run_id>/results.json   one trial record

A trial record carries ``is_resolved``, ``failure_mode``, ``parser_results`` (test -> status),
``total_input_tokens`` / ``total_output_tokens`` and the trial, agent and test timestamps; there is
no trajectory, so the metrics come as :attr:`Trial.carried_metrics`.

Decisions, each a documented rule rather than a guess per file:

* profile = ``<agent_name>@<model>``, the model's one name across providers (:mod:`.identity`:
  ``openhands`` + ``openai/neulab/claude-sonnet-4-20250514`` -> ``openhands@claude-sonnet-4-20250514``);
  ``<agent_name>`` alone when no model is recorded, ``tb1`` when there is no run_metadata.json.
  The full model name stays in ``metadata["model_name"]``.
* reward = 1.0 / 0.0 from ``is_resolved`` whatever the ``failure_mode`` (TB1 grades the container
  state after the agent stops, so a run can be resolved *and* time out; ``failure_mode`` is kept in
  metadata and, when set, in :attr:`Trial.exception`, as Harbor does for an agent timeout).
* ``is_resolved: null`` follows TB1's own accounting (its ``accuracy`` divides by every trial):
  a failure mode that is a verdict on the agent's attempt (:data:`VERDICT_MODES`: ``test_timeout``,
  ``parse_error``, ``agent_timeout``, ``unknown_agent_error``, ``fatal_llm_parse_error``,
  ``context_length_exceeded``, ``output_length_exceeded``) or tests that ran make reward 0.0,
  timestamps or not. Only ``agent_installation_failed`` (the harness could not install the agent:
  nothing was attempted) and a null verdict with no failure mode and no test run have no reward:
  with the exception set, Layer 1 reports them as infrastructure errors.
* trial names: ``<task>.<k>-of-<n>.<run_id>`` and, from older ``tb`` versions, ``<task>.<k>-of-<n>``
  without the run suffix; the repetition is ``k`` in both.
* results files: every run-level ``results.json`` and ``<anything>_results.json`` (a resumed or
  merged run keeps a timestamped second file) is read; records are deduplicated by trial name,
  the per-trial file first, then the run-level files in name order (plain ``results.json`` first);
  a later copy that disagrees on ``is_resolved`` gives a warning row.
* tokens: TB1 writes ``0`` for both counts when the agent does not report usage (mini-swe-agent and
  OpenHands did not), so ``0``/``0`` and ``null``/``null`` mean *unknown* and are not carried;
  ``metadata["tokens_reported"]`` says which case applied. TB1 does not split cached tokens.
* ``elapsed_sec`` = agent_started_at -> agent_ended_at, else trial_started_at -> trial_ended_at.
* Trials come from the per-trial ``results.json`` files; run-level ``results[]`` records fill in the
  trials whose directory is missing (and stand in, with a warning, for a per-trial file that is broken).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..core.fileio import read_json
from ..core.trial import IngestError, InputError, TestResult, Timing, Trial
from ._carried import one_line, parse_time, seconds_between, test_counts, test_status
from .harbor import profile_from_agent
from .identity import canonical_model

STAGE = "import"
RUN_METADATA = "run_metadata.json"
RESULTS = "results.json"
SOURCE_FORMAT = "tb1"

# <task>.<k>-of-<n>[.<run_id>]; task ids contain dots ("eval-mteb.hard"), so the task part is lazy.
_TRIAL_NAME = re.compile(r"^(?P<task>.+?)\.(?P<k>\d+)-of-(?P<n>\d+)(?:\.(?P<run>.+))?$")
# Run-level results files: results.json and <timestamp>_results.json (any prefix ending in _results.json).
_RUN_RESULTS = re.compile(r"^(?:.+_)?results\.json$")
# TB1 failure modes that are a verdict on the attempt: TB1 counts these trials as unresolved.
VERDICT_MODES = frozenset({
    "test_timeout", "parse_error", "agent_timeout", "unknown_agent_error", "fatal_llm_parse_error",
    "context_length_exceeded", "output_length_exceeded",
})
# The harness could not set the agent up: no attempt was made, so no verdict (an infrastructure error).
INFRA_MODES = frozenset({"agent_installation_failed"})
# failure_mode values that mean "nothing went wrong".
_NO_FAILURE = {None, "", "unset", "none"}


def run_results_files(run_dir: str | os.PathLike) -> list[Path]:
    """The run-level results files of a folder: ``results.json`` first, then ``*_results.json`` in name order."""
    p = Path(run_dir)
    try:
        names = [e.name for e in os.scandir(p) if _RUN_RESULTS.match(e.name) and e.is_file()]
    except OSError:
        return []
    return [p / n for n in sorted(names, key=lambda n: (n != RESULTS, n))]


def is_tb1_run(path: str | os.PathLike) -> bool:
    """True for a TB1 run directory: it holds ``run_metadata.json`` and/or a run-level results file with ``results[]``."""
    p = Path(path)
    try:
        if not p.is_dir():
            return False
        if (p / RUN_METADATA).is_file():
            return True
        files = run_results_files(p)
    except OSError:
        return False
    for res in files:
        try:
            obj = read_json(res, STAGE)
        except (InputError, OSError):
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("results"), list):
            continue
        first = next((r for r in obj["results"] if isinstance(r, dict)), None)
        # mcpbr and others also have lists; a TB1 record always names its trial or task.
        if first is None or "trial_name" in first or "is_resolved" in first:
            return True
    return False


def _run_level_records(run_dir: Path, errors: list[IngestError]) -> tuple[dict[str, tuple[dict[str, Any], Path]], list[Path]]:
    """Trial name -> (record, file) over every run-level results file, first copy kept; and the files read."""
    records: dict[str, tuple[dict[str, Any], Path]] = {}
    files = run_results_files(run_dir)
    for run_path in files:
        run_obj = _read_object(run_path, errors)
        if run_obj and not isinstance(run_obj.get("results"), list):
            errors.append(IngestError(str(run_path), STAGE, "run-level results file has no results[] list"))
        for i, rec in enumerate(run_obj.get("results") or []):
            name = rec.get("trial_name") if isinstance(rec, dict) else None
            if not isinstance(name, str) or not name:
                errors.append(IngestError(str(run_path), STAGE, f"results[{i}] is not a trial record (no trial_name)"))
                continue
            if name in records:
                kept, where = records[name]
                if kept.get("is_resolved") != rec.get("is_resolved"):
                    errors.append(IngestError(str(run_path), STAGE, f"trial {name} is also in {where.name} with another "
                                              f"is_resolved ({kept.get('is_resolved')!r} there, {rec.get('is_resolved')!r} here); "
                                              f"the first copy is used", "warning"))
                continue
            records[name] = (rec, run_path)
    return records, files


def read_tb1_run(path: str | os.PathLike) -> tuple[list[Trial], list[IngestError]]:
    """Read one TB1 run directory: one :class:`Trial` per trial record, one :class:`IngestError` per unreadable input."""
    run_dir = Path(path)
    errors: list[IngestError] = []
    if not run_dir.is_dir():
        return [], [IngestError(str(run_dir), STAGE, "not a directory")]

    meta = _read_object(run_dir / RUN_METADATA, errors) if (run_dir / RUN_METADATA).is_file() else {}
    run_records, run_files = _run_level_records(run_dir, errors)
    ctx = _RunContext(run_dir=run_dir, meta=meta or {}, run_results=run_files[0] if run_files else None)
    trials: list[Trial] = []
    for trial_dir in _trial_dirs(run_dir, errors):
        fallback, fallback_path = run_records.pop(trial_dir.name, (None, None))
        rp = trial_dir / RESULTS
        try:
            if not rp.is_file():
                if fallback is None:
                    raise InputError(str(trial_dir), STAGE, "trial directory without results.json")
                trials.append(_trial(fallback, ctx, trial_path=str(trial_dir), record_path=fallback_path))
                continue
            try:
                rec = read_json(rp, STAGE)
                if not isinstance(rec, dict):
                    raise InputError(str(rp), STAGE, f"expected a JSON object, got {type(rec).__name__}")
                trials.append(_trial(rec, ctx, trial_path=str(trial_dir), record_path=rp))
            except InputError as exc:
                if fallback is None:
                    raise
                # The run-level copy of the same record still gives the trial; keep the problem visible.
                t = _trial(fallback, ctx, trial_path=str(trial_dir), record_path=fallback_path)
                note = f"{exc.error.message}; used the run-level record instead"
                t.warnings.append(f"{exc.error.path}: {note}")
                errors.append(IngestError(exc.error.path, STAGE, note, "warning"))
                trials.append(t)
        except InputError as exc:
            errors.append(exc.error)

    # Records whose trial directory is absent (leaderboard uploads often keep only the run-level file).
    for name, (rec, rec_path) in run_records.items():
        try:
            trials.append(_trial(rec, ctx, trial_path=f"{rec_path}#{name}", record_path=rec_path))
        except InputError as exc:
            errors.append(exc.error)
    trials.sort(key=lambda t: (t.task_id, t.repetition, t.trial_path))
    return trials, errors


class _RunContext:
    """What every trial of one run shares: its directory, run_metadata.json and run-level results file."""

    __slots__ = ("run_dir", "meta", "run_results", "profile")

    def __init__(self, run_dir: Path, meta: dict[str, Any], run_results: Path | None):
        self.run_dir = run_dir
        self.meta = meta
        self.run_results = run_results
        self.profile = tb1_profile(meta) if meta else SOURCE_FORMAT


def tb1_profile(meta: dict[str, Any]) -> str:
    """Profile of a TB1 run: ``<agent_name>@<model without provider prefix>``, the Harbor rule (see the module docstring)."""
    agent = meta.get("agent_name") if isinstance(meta.get("agent_name"), str) and meta.get("agent_name") else SOURCE_FORMAT
    kwargs = meta.get("agent_kwargs") if isinstance(meta.get("agent_kwargs"), dict) else {}
    model = canonical_model(meta.get("model_name")) or canonical_model(kwargs.get("model_name"))
    # One rule for Harbor and TB1 runs, so that a TB1 run and a Harbor run of the same agent and model pair up.
    return profile_from_agent(agent, model)


def _read_object(path: Path, errors: list[IngestError]) -> dict[str, Any]:
    try:
        obj = read_json(path, STAGE)
    except InputError as exc:
        errors.append(exc.error)
        return {}
    if not isinstance(obj, dict):
        errors.append(IngestError(str(path), STAGE, f"expected a JSON object, got {type(obj).__name__}"))
        return {}
    return obj


def _trial_dirs(run_dir: Path, errors: list[IngestError]) -> list[Path]:
    """``<run>/<task>/<task>.<k>-of-<n>.<run>/`` folders, two fixed levels (no recursion, so no symlink loop)."""
    found: list[Path] = []
    try:
        task_dirs = sorted(p for p in run_dir.iterdir() if p.is_dir())
    except OSError as exc:
        errors.append(IngestError(str(run_dir), STAGE, f"cannot list directory ({exc.strerror or exc})"))
        return found
    for task_dir in task_dirs:
        try:
            found.extend(sorted(p for p in task_dir.iterdir() if p.is_dir() and _TRIAL_NAME.match(p.name)))
        except OSError as exc:
            errors.append(IngestError(str(task_dir), STAGE, f"cannot list directory ({exc.strerror or exc})"))
    return found


def _tests(parser_results: Any, path: str) -> list[TestResult] | None:
    """``parser_results`` (test id -> status) as tests; None when the tests produced no parsable result."""
    if parser_results is None:
        return None
    if not isinstance(parser_results, dict):
        raise InputError(path, STAGE, f"parser_results is a {type(parser_results).__name__}, expected an object")
    tests = []
    for key, status in parser_results.items():
        name, message = str(key), None
        # Some runs key a collection failure by pytest's summary line "<file> - <Error>: <text>".
        left, sep, right = name.partition(" - ")
        if sep and left and not any(c.isspace() for c in left):
            name, message = left, right
        tests.append(TestResult(name=name, status=test_status(status), message=message))
    return tests


def _trial(rec: dict[str, Any], ctx: _RunContext, trial_path: str, record_path: Path) -> Trial:
    """One trial record -> :class:`Trial` (raises :class:`InputError` for a record that cannot be one)."""
    where = str(record_path)
    name = rec.get("trial_name") if isinstance(rec.get("trial_name"), str) else ""
    m = _TRIAL_NAME.match(name) or _TRIAL_NAME.match(Path(trial_path.split("#")[0]).name)
    task_id = rec.get("task_id") if isinstance(rec.get("task_id"), str) and rec.get("task_id") else (m["task"] if m else None)
    if not task_id:
        raise InputError(where, STAGE, f"trial record {name or '?'} has neither task_id nor a <task>.<k>-of-<n>.<run> trial_name")
    repetition = int(m["k"]) if m else 1

    resolved = rec.get("is_resolved")
    if resolved is not None and not isinstance(resolved, bool):
        raise InputError(where, STAGE, f"trial {name or task_id}: is_resolved is {resolved!r}, expected true, false or null")
    failure_mode = rec.get("failure_mode")
    tests = _tests(rec.get("parser_results"), where)

    timing = Timing(
        started_at=parse_time(rec.get("trial_started_at")),
        finished_at=parse_time(rec.get("trial_ended_at")),
        agent_started_at=parse_time(rec.get("agent_started_at")),
        agent_finished_at=parse_time(rec.get("agent_ended_at")),
    )
    tests_ran = rec.get("test_started_at") is not None or tests is not None
    mode = str(failure_mode).strip().lower() if isinstance(failure_mode, str) else None
    warnings: list[str] = []
    if resolved is not None:
        reward: float | None = 1.0 if resolved else 0.0
    elif mode in VERDICT_MODES or (tests_ran and mode not in INFRA_MODES):
        reward = 0.0
        warnings.append(f"is_resolved is null (failure_mode {failure_mode}); counted as unresolved, as TB1 does")
    else:
        reward = None
    exception = None
    if failure_mode not in _NO_FAILURE:
        exception = f"TB1 failure_mode: {failure_mode}"
    elif reward is None:
        exception = "TB1: no verdict (is_resolved null and the tests never ran)"

    carried: dict[str, Any] = {}
    if reward is not None:
        carried["success"] = reward == 1.0
        carried["reward"] = reward
    if tests is not None:
        carried.update(test_counts(tests))
    tin, tout = rec.get("total_input_tokens"), rec.get("total_output_tokens")
    tokens_reported = any(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (tin, tout))
    if tokens_reported:
        for key, v in (("total_input_tokens", tin), ("total_output_tokens", tout)):
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                carried[key] = v
    elapsed = seconds_between(timing.agent_started_at, timing.agent_finished_at)
    if elapsed is None:
        elapsed = seconds_between(timing.started_at, timing.finished_at)
    if elapsed is not None:
        carried["elapsed_sec"] = elapsed

    meta = ctx.meta
    metadata: dict[str, Any] = {
        "agent_name": meta.get("agent_name"),
        "model_name": meta.get("model_name"),
        "failure_mode": failure_mode,
        "is_resolved": resolved,
        "tokens_reported": tokens_reported,
        "trial_name": name or None,
        "trial_uuid": rec.get("id"),
        "run_uuid": meta.get("uuid"),
        "tb1_run_id": meta.get("run_id"),
        "dataset_name": meta.get("dataset_name"),
        "dataset_version": meta.get("dataset_version"),
        "n_attempts": int(m["n"]) if m else meta.get("n_attempts"),
        "commit_hash": meta.get("commit_hash"),
        "recording_path": rec.get("recording_path"),
        "test_started_at": rec.get("test_started_at"),
        "test_ended_at": rec.get("test_ended_at"),
    }
    # output_path and username are left out on purpose: they are another machine's paths and a person's name.
    paths = {"result": str(record_path)}
    if (ctx.run_dir / RUN_METADATA).is_file():
        paths["run_metadata"] = str(ctx.run_dir / RUN_METADATA)
    if record_path.parent == ctx.run_dir:
        paths["run_results"] = str(record_path)
    elif ctx.run_results is not None:
        paths["run_results"] = str(ctx.run_results)
    return Trial(
        profile=ctx.profile,
        task_id=task_id,
        repetition=repetition,
        run_id=ctx.run_dir.name,
        trial_path=trial_path,
        source_format=SOURCE_FORMAT,
        tests=tests,
        reward=reward,
        timing=timing,
        exception=one_line(exception) if exception else None,
        paths=paths,
        metadata={k: v for k, v in metadata.items() if v is not None},
        carried_metrics=carried,
        warnings=warnings,
    )
