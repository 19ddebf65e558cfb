"""Inspect AI eval logs (``.json`` EvalLog, version 2, or the zipped ``.eval``), imported as trials.

One :class:`Trial` per sample and epoch (FORMATS.md §9). Rules:

* identity: ``task_id`` = the sample id, ``repetition`` = the epoch, ``run_id`` = ``eval.run_id``,
  ``profile`` = ``<eval.task>@<model>``, the model's one name across providers (:mod:`.identity`)
  (``popularity`` + ``ollama/gemma3`` -> ``popularity@gemma3``): Inspect A/B variants are usually
  separate tasks or models, and the task keeps logs of different tasks from colliding on a sample id.
  ``trial_path`` = ``<log>#<id>_epoch_<epoch>`` (Inspect's own sample file name), unique per trial.
* outcome: the first scorer's value (``results.scores[0]``, else the sample's first score), mapped to a
  reward as Inspect's ``value_to_float`` does: ``C`` 1.0, ``P`` 0.5, ``I``/``N`` 0.0, booleans, numbers,
  numeric strings, ``yes``/``true`` 1.0, ``no``/``false`` 0.0. A value it cannot map (a dict of several
  metrics, free text) gives no reward and a warning instead of Inspect's silent 0.0.
  ``success`` = reward == 1.0, as everywhere in Layer 1.
* tokens: the sample's ``model_usage`` summed over models. Inspect reports ``input_tokens`` *without*
  the cache (``input_tokens_cache_read`` and ``input_tokens_cache_write`` are separate counts), so
  ``total_input_tokens`` = input + cache read + cache write (ATIF semantics: prompt tokens including cached)
  and ``total_cached_tokens`` = cache read. No ``model_usage`` on the sample: tokens unknown.
* process: ``messages`` become a :class:`Trajectory` (system/user -> steps of that source, assistant ->
  agent steps with their ``tool_calls``); each ``tool`` message fills its call's output and ``is_error``
  (Inspect marks failed calls with ``error``, so a tool message without one succeeded). A tool message
  without a matching call still counts as a call, on a synthetic agent step.
* time: ``elapsed_sec`` = ``total_time`` (wall clock of the sample), else the span of the timing markers;
  ``working_time`` is kept in metadata. The markers are ``started_at``/``completed_at`` when the sample has
  them, else the first event's timestamp and that plus ``total_time`` (else the last event's timestamp).
* a sample ``error`` becomes :attr:`Trial.exception`; a sample without a score is kept without a reward.
"""

from __future__ import annotations

import os
import re
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..core.fileio import MAX_JSON_BYTES, loads_lenient, read_json
from ..core.trial import FinalMetrics, IngestError, InputError, Step, Timing, ToolCall, Trajectory, Trial
from ._carried import as_float, as_int, one_line, parse_time, seconds_between
from .atif import decode_arguments
from .identity import canonical_model

STAGE = "import"
SOURCE_FORMAT = "inspect"
SCHEMA_VERSION = "inspect-eval"
# Tool output kept per call (the full length is in output_chars).
OUTPUT_PREFIX = 2000
_HEAD_BYTES = 64 * 1024
_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}


def is_inspect_log(path: str | os.PathLike) -> bool:
    """True for an Inspect eval log: a JSON object that opens with ``version`` and ``eval``, or a ``.eval`` zip with ``header.json``.

    Only the first 64 KB are looked at, so that a truncated log is still claimed (and then reported
    by :func:`read_inspect_log`) and large logs are not parsed twice.
    """
    p = Path(path)
    try:
        if not p.is_file():
            return False
        with open(p, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return False
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(p) as zf:
                names = set(zf.namelist())
        except (zipfile.BadZipFile, OSError):
            return False
        return "header.json" in names or "_journal/start.json" in names
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text.startswith("{"):
        return False
    return bool(
        re.search(r'"version"\s*:\s*\d', text)
        and re.search(r'"eval"\s*:\s*\{', text)
        and re.search(r'"(status|plan|results|samples)"\s*:', text)
    )


def read_inspect_log(path: str | os.PathLike) -> tuple[list[Trial], list[IngestError]]:
    """Read one Inspect log: one :class:`Trial` per sample, one :class:`IngestError` per unreadable log or sample."""
    p = Path(path)
    errors: list[IngestError] = []
    try:
        log, samples = _load(p, errors)
        eval_ = log.get("eval")
        if not isinstance(eval_, dict):
            raise InputError(str(p), STAGE, "not an Inspect eval log: no eval object")
    except InputError as exc:
        return [], errors + [exc.error]
    if not samples and not errors:
        errors.append(IngestError(str(p), STAGE, f"no samples in the log (status {log.get('status')!r}; written with log_samples=False?)"))

    if log.get("status") not in (None, "success"):
        errors.append(
            IngestError(str(p), STAGE, f"the eval log has status {log.get('status')!r}: samples may be missing or partial", "warning")
        )
    ctx = _LogContext(p, log, eval_)
    trials: list[Trial] = []
    for where, sample in samples:
        try:
            trial = _trial(sample, ctx, where)
        except InputError as exc:
            errors.append(exc.error)
            continue
        trials.append(trial)
        errors.extend(IngestError(str(p), STAGE, f"{where}: {w}", "warning") for w in trial.warnings)
    return trials, errors


def _load(p: Path, errors: list[IngestError]) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The log object (without samples) and its samples, each with a label naming where it came from."""
    try:
        with open(p, "rb") as fh:
            zipped = fh.read(2) == b"PK"
    except OSError:
        zipped = False  # read_json below turns the OS error into a one-line InputError
    if not zipped:
        log = read_json(p, STAGE)
        if not isinstance(log, dict):
            raise InputError(str(p), STAGE, f"expected a JSON object, got {type(log).__name__}")
        samples = log.get("samples")
        if samples is not None and not isinstance(samples, list):
            raise InputError(str(p), STAGE, f"samples is a {type(samples).__name__}, expected a list")
        return log, [(f"samples[{i}]", s) for i, s in enumerate(samples or [])]
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(str(p), STAGE, f"not a readable .eval zip ({exc})") from None
    with zf:
        names = zf.namelist()
        header = "header.json" if "header.json" in names else "_journal/start.json" if "_journal/start.json" in names else None
        if header is None:
            raise InputError(str(p), STAGE, "not an Inspect .eval log: no header.json")
        log = _zip_json(zf, header, p)
        if not isinstance(log, dict):
            raise InputError(str(p), STAGE, f"{header}: expected a JSON object")
        samples: list[tuple[str, Any]] = []
        for name in sorted(n for n in names if n.startswith("samples/") and n.endswith(".json")):
            try:
                samples.append((name, _zip_json(zf, name, p)))
            except InputError as exc:
                errors.append(exc.error)
        return log, samples


def _zip_json(zf: zipfile.ZipFile, name: str, p: Path) -> Any:
    info = zf.getinfo(name)
    if info.file_size > MAX_JSON_BYTES:
        raise InputError(str(p), STAGE, f"{name}: {info.file_size / 1e6:.0f} MB exceeds the limit")
    try:
        data = zf.read(name)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputError(str(p), STAGE, f"{name}: cannot read from the zip ({exc})") from None
    try:
        return loads_lenient(data, p, STAGE)
    except InputError as exc:
        raise InputError(str(p), STAGE, f"{name}: {exc.error.message}") from None


class _LogContext:
    """What every sample of one log shares: path, eval header, first scorer and profile."""

    __slots__ = ("path", "log", "eval", "profile", "run_id", "first_scorer", "agent_name")

    def __init__(self, path: Path, log: dict[str, Any], eval_: dict[str, Any]):
        self.path = path
        self.log = log
        self.eval = eval_
        self.profile = inspect_profile(eval_)
        self.run_id = str(eval_.get("run_id") or path.stem)
        self.first_scorer = _first_scorer(log, eval_)
        plan = log.get("plan") if isinstance(log.get("plan"), dict) else {}
        solvers = [s.get("solver") for s in plan.get("steps") or [] if isinstance(s, dict) and s.get("solver")]
        self.agent_name = "+".join(solvers) if solvers else (eval_.get("solver") if isinstance(eval_.get("solver"), str) else None)


def inspect_profile(eval_: dict[str, Any]) -> str:
    """Profile of an Inspect log: ``<task>@<model without provider prefix>`` (see the module docstring)."""
    task = eval_.get("task") if isinstance(eval_.get("task"), str) and eval_.get("task") else None
    model = canonical_model(eval_.get("model"))
    if task and model:
        return f"{task}@{model}"
    return task or model or SOURCE_FORMAT


def _first_scorer(log: dict[str, Any], eval_: dict[str, Any]) -> str | None:
    results = log.get("results") if isinstance(log.get("results"), dict) else {}
    for s in results.get("scores") or []:
        if isinstance(s, dict) and isinstance(s.get("name"), str):
            return s["name"]
    for s in eval_.get("scorers") or []:
        if isinstance(s, dict) and isinstance(s.get("name"), str):
            return s["name"]
    return None


def score_to_reward(value: Any) -> float | None:
    """An Inspect score value as a float, following ``inspect_ai.scorer.value_to_float``; None when it has no float reading."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return as_float(value)
    if isinstance(value, str):
        v = value.strip()
        if v in _LETTERS:
            return _LETTERS[v]
        if v.lower() in ("yes", "true"):
            return 1.0
        if v.lower() in ("no", "false"):
            return 0.0
        try:
            return as_float(float(v))
        except ValueError:
            return None
    return None


def _text(content: Any) -> str:
    """Message content (a string or a list of content parts) as plain text; images become ``[image]``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for c in content:
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, dict):
                if c.get("type") == "text" and isinstance(c.get("text"), str):
                    parts.append(c["text"])
                elif c.get("type") in ("image", "audio", "video"):
                    parts.append(f"[{c['type']}]")
        return "\n".join(parts)
    return str(content)


def messages_to_trajectory(messages: list[Any], model: str | None = None, agent_name: str | None = None) -> Trajectory:
    """Inspect chat messages -> :class:`Trajectory` (agent steps with tool calls, tool results attached by id)."""
    steps: list[Step] = []
    calls: dict[str, tuple[ToolCall, Step]] = {}
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        text = _text(msg.get("content"))
        if role in ("system", "user"):
            steps.append(Step(step_id=len(steps) + 1, source=role, message=text))
        elif role == "assistant":
            step = Step(step_id=len(steps) + 1, source="agent", message=text, model_name=msg.get("model") or model)
            for tc in msg.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    continue
                call = ToolCall(
                    step_id=step.step_id,
                    name=str(tc.get("function") or tc.get("name") or "unknown"),
                    arguments=decode_arguments(tc.get("arguments")),
                    call_id=tc.get("id") if isinstance(tc.get("id"), str) else None,
                    # A call Inspect could not parse never ran as asked.
                    is_error=True if tc.get("parse_error") else None,
                )
                step.tool_calls.append(call)
                if call.call_id:
                    calls[call.call_id] = (call, step)
            steps.append(step)
        elif role == "tool":
            call_id = msg.get("tool_call_id") if isinstance(msg.get("tool_call_id"), str) else None
            call, step = calls.get(call_id, (None, None)) if call_id else (None, None)
            if call is None or step is None:
                # A result without its call still shows that a call ran; group such orphans on one synthetic step.
                if not steps or not steps[-1].extra.get("synthetic"):
                    steps.append(
                        Step(
                            step_id=len(steps) + 1,
                            source="agent",
                            model_name=model,
                            extra={"synthetic": "tool results without an assistant tool call"},
                        )
                    )
                step = steps[-1]
                call = ToolCall(step_id=step.step_id, name=str(msg.get("function") or "unknown"), arguments={}, call_id=call_id)
                step.tool_calls.append(call)
            error = msg.get("error")
            call.is_error = bool(error) or bool(call.is_error)
            out = text or (str(error.get("message") or "") if isinstance(error, dict) else "")
            call.output = out[:OUTPUT_PREFIX]
            call.output_chars = len(out)
            if isinstance(error, dict):
                # ToolCall has no extra field: the Inspect error type goes on the step, by call id.
                step.extra.setdefault("tool_errors", []).append({"call_id": call.call_id, "type": error.get("type")})
    return Trajectory(schema_version=SCHEMA_VERSION, agent_name=agent_name, model_name=model, steps=steps)


def _usage(model_usage: Any) -> dict[str, Any]:
    """Token totals of a sample's ``model_usage`` in Layer 1 ids (ATIF semantics, see the module docstring)."""
    if not isinstance(model_usage, dict) or not model_usage:
        return {}
    tin = tout = cached = 0
    seen_in = seen_out = seen_cache = False
    cost: float | None = None
    for usage in model_usage.values():
        if not isinstance(usage, dict):
            continue
        i, o = as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens"))
        cr, cw = as_int(usage.get("input_tokens_cache_read")), as_int(usage.get("input_tokens_cache_write"))
        if i is not None or cr is not None or cw is not None:
            seen_in = True
            tin += (i or 0) + (cr or 0) + (cw or 0)
        if o is not None:
            seen_out = True
            tout += o
        if cr is not None:
            seen_cache = True
            cached += cr
        c = as_float(usage.get("total_cost"))
        if c is not None:
            cost = (cost or 0.0) + c
    out: dict[str, Any] = {}
    if seen_in:
        out["total_input_tokens"] = tin
    if seen_out:
        out["total_output_tokens"] = tout
    if seen_cache:
        out["total_cached_tokens"] = cached
    if cost is not None:
        out["total_cost_usd"] = cost
    return out


def _trial(sample: Any, ctx: _LogContext, where: str) -> Trial:
    p = str(ctx.path)
    if not isinstance(sample, dict):
        raise InputError(p, STAGE, f"{where}: expected a sample object, got {type(sample).__name__}")
    sid = sample.get("id")
    if sid is None or isinstance(sid, (dict, list, bool)):
        raise InputError(p, STAGE, f"{where}: sample without an id")
    epoch = as_int(sample.get("epoch"))
    epoch = epoch if epoch else 1
    messages = sample.get("messages")
    if messages is not None and not isinstance(messages, list):
        raise InputError(p, STAGE, f"{where}: messages is a {type(messages).__name__}, expected a list")

    warnings: list[str] = []
    scores = sample.get("scores") if isinstance(sample.get("scores"), dict) else {}
    scorer = ctx.first_scorer if ctx.first_scorer in scores else next(iter(scores), None)
    reward = None
    score_value = None
    if scorer is not None:
        score = scores[scorer]
        score_value = score.get("value") if isinstance(score, dict) else score
        reward = score_to_reward(score_value)
        if reward is None:
            warnings.append(f"score {scorer!r} value {one_line(repr(score_value), 80)} has no float reading; no reward")

    model = ctx.eval.get("model") if isinstance(ctx.eval.get("model"), str) else None
    trajectory = messages_to_trajectory(messages or [], model=model, agent_name=ctx.agent_name)
    trajectory.source_path = p
    trajectory.session_id = sample.get("uuid") if isinstance(sample.get("uuid"), str) else None
    usage = _usage(sample.get("model_usage"))
    if usage:
        trajectory.final_metrics = FinalMetrics(
            prompt_tokens=usage.get("total_input_tokens"),
            completion_tokens=usage.get("total_output_tokens"),
            cached_tokens=usage.get("total_cached_tokens"),
            cost_usd=usage.get("total_cost_usd"),
        )

    events = [e for e in sample.get("events") or [] if isinstance(e, dict)]
    stamps = [t for t in (parse_time(e.get("timestamp")) for e in events) if t is not None]
    started = parse_time(sample.get("started_at")) or (min(stamps) if stamps else None)
    finished = parse_time(sample.get("completed_at"))
    elapsed = as_float(sample.get("total_time"))
    if finished is None and started is not None:
        # Layer 1 derives elapsed_sec from the markers: end them at total_time when Inspect gives it.
        finished = started + timedelta(seconds=elapsed) if elapsed is not None else (max(stamps) if stamps else None)
    timing = Timing(started_at=started, finished_at=finished)
    if elapsed is None:
        elapsed = seconds_between(timing.started_at, timing.finished_at)

    carried: dict[str, Any] = {}
    if reward is not None:
        carried["success"] = reward == 1.0
        carried["reward"] = reward
    carried.update(usage)
    if elapsed is not None:
        carried["elapsed_sec"] = elapsed

    error = sample.get("error")
    exception = None
    if isinstance(error, dict) and error.get("message"):
        exception = one_line(error["message"])
    elif isinstance(error, str) and error:
        exception = one_line(error)

    metadata: dict[str, Any] = {
        "model_name": model,
        "agent_name": ctx.agent_name,
        "eval_task": ctx.eval.get("task"),
        "eval_id": ctx.eval.get("eval_id"),
        "eval_task_id": ctx.eval.get("task_id"),
        "eval_status": ctx.log.get("status"),
        "log_version": ctx.log.get("version"),
        "task_args": ctx.eval.get("task_args") or None,
        "dataset": (ctx.eval.get("dataset") or {}).get("name") if isinstance(ctx.eval.get("dataset"), dict) else None,
        "inspect_version": (ctx.eval.get("packages") or {}).get("inspect_ai") if isinstance(ctx.eval.get("packages"), dict) else None,
        "scorer": scorer,
        "score_value": score_value if isinstance(score_value, (str, int, float, bool)) else None,
        "working_time": as_float(sample.get("working_time")),
        "limit": sample.get("limit") if isinstance(sample.get("limit"), dict) else None,
        "sample_uuid": sample.get("uuid"),
    }
    return Trial(
        profile=ctx.profile,
        task_id=str(sid),
        repetition=epoch,
        run_id=ctx.run_id,
        trial_path=f"{p}#{sid}_epoch_{epoch}",
        source_format=SOURCE_FORMAT,
        trajectory=trajectory,
        reward=reward,
        timing=timing,
        exception=exception,
        paths={"log": p},
        metadata={k: v for k, v in metadata.items() if v is not None},
        carried_metrics=carried,
        warnings=warnings,
    )
