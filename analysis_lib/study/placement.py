"""Placing trials into the arms a study file declares: one trial's assignment, many rows at once, reruns."""

from __future__ import annotations

import functools
import os
import re
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.success import used_mcp
from ..core.trial import IngestError, Trial, trial_record
from ..ingest.load import load_trials, number_repetitions
from ..ingest.results_table import profile_name
from .study_file import Arm, ConfigurationRule, DesignError, StudyDesign, TaskRule, glob_regex

__all__ = ["placement", "place_trials", "load_placed_trials", "Assignment", "assign", "matching_arms", "RERUN_COLUMNS",
           "apply_design", "configuration_of", "configuration_profile", "CONFIGURATION_COLUMNS"]

# The columns a study with configurations adds to the placed trials table: the trial's configuration and its arm
# within it (``profile`` is then ``<configuration> / <arm>``).
CONFIGURATION_COLUMNS = ("configuration", "arm")


def configuration_profile(configuration: str, arm: str) -> str:
    """The profile of an arm within a configuration, ``<configuration> / <arm>``: the name a results table's trials
    carry by default, so that a study file's arms and a table's own name one profile alike."""
    return profile_name(configuration, arm)


def _lookup(record: dict[str, Any], key: str) -> Any:
    """A dotted key of a flattened record, or of its nested form (``agent.kwargs.x``)."""
    if key in record:
        return record[key]
    prefix = key + "."
    nested = {k[len(prefix):]: v for k, v in record.items() if k.startswith(prefix)}
    return nested or None


def _matches(value: Any, wanted: Any) -> bool:
    if wanted is None:  # null: the key is absent or empty (not configured)
        return value is None or value == {} or value == []
    if isinstance(wanted, list):
        return any(_matches(value, w) for w in wanted)
    if isinstance(value, (dict, list)) or isinstance(wanted, (dict, list)):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == orjson.dumps(wanted, option=orjson.OPT_SORT_KEYS)
    if isinstance(wanted, bool) or isinstance(value, bool):
        return value is wanted
    if isinstance(wanted, (int, float)) and isinstance(value, (int, float)):
        return float(value) == float(wanted)
    return value is not None and str(value) == str(wanted)


def _arm_matches(arm: Arm, rel_path: str, record: dict[str, Any]) -> bool:
    if arm.paths and not any(glob_regex(p).match(rel_path) for p in arm.paths):
        return False
    return all(_matches(_lookup(record, k), v) for k, v in arm.fields.items())


def matching_arms(design: StudyDesign, rel_path: str, record: dict[str, Any]) -> list[str]:
    """The arms of ``design`` whose selectors all match the trial at ``rel_path`` (``/`` between folders) with
    configuration ``record``, in the study file's order."""
    rel_path = rel_path.replace(os.sep, "/")
    return [name for name, arm in design.arms.items() if _arm_matches(arm, rel_path, record)]


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a trial goes under a design: its arm and task id, the repetition its folder names (None: by
    start time) and its dataset version; ``problem`` says why it goes nowhere (no arm, several arms)."""

    arm: str | None
    task_id: str
    repetition: int | None = None
    dataset_version: str | None = None
    problem: str | None = None
    configuration: str | None = None


def assign(design: StudyDesign, *, rel_path: str, task_id: str, task_name: str | None, trial_name: str | None,
           record: dict[str, Any]) -> Assignment:
    """The arm, task id, repetition and dataset version of one trial under ``design``.

    ``rel_path``: the trial's folder (or file) relative to the runs folder, with ``/``; ``task_id``:
    the id the default rules gave; ``task_name``/``trial_name``: as the source names them;
    ``record``: the trial's configuration, flattened to dotted keys (plus ``profile``).
    """
    rel_path = rel_path.replace(os.sep, "/")
    arms = matching_arms(design, rel_path, record)
    if len(arms) != 1:
        problem = (f"matches no arm of the study design ({', '.join(sorted(design.arms))})" if not arms
                   else f"matches several arms of the study design ({', '.join(arms)}); arms must not overlap")
        return Assignment(None, task_id, problem=problem)
    name = arms[0]
    arm = design.arms[name]
    configuration = None
    if design.configurations is not None:
        configuration, why = configuration_of(design.configurations, rel_path, record)
        if configuration is None:
            return Assignment(None, task_id, problem=why)
    folders = rel_path.split("/")
    task = _task_of(arm.task_id or design.task_id, folders, task_id, task_name, trial_name)
    if task is None:
        rule = arm.task_id or design.task_id
        return Assignment(None, task_id, problem=f"the task rule {rule.model_dump(exclude_none=True)} finds no task id "
                          f"in {rel_path!r}")
    rep = None
    if design.repetition is not None:
        m = re.search(design.repetition.regex, folders[-1])
        rep = int(m.group("rep")) if m and m.group("rep") and m.group("rep").isdigit() else None
    version_rule = arm.dataset_version or design.dataset_version
    version = None
    if version_rule is not None:
        raw = version_rule.value if version_rule.value is not None else _lookup(record, version_rule.field or "")
        version = None if raw is None else str(raw)
    return Assignment(name, task, rep, version, configuration=configuration)


def configuration_of(rule: ConfigurationRule, rel_path: str, record: dict[str, Any]) -> tuple[str | None, str]:
    """A trial's configuration under ``rule`` (its record's fields, a folder above it, or the globs it matches),
    else None with why not."""
    if rule.fields:
        values = [_lookup(record, k) for k in rule.fields]
        missing = [k for k, v in zip(rule.fields, values, strict=True) if v is None or v == "" or isinstance(v, (dict, list))]
        if missing:
            return None, f"its record has no value of {', '.join(missing)}, so it is in no configuration"
        return " + ".join(str(v) for v in values), ""
    folders = rel_path.split("/")
    if rule.folder is not None:
        if rule.folder < len(folders):
            return folders[-1 - rule.folder], ""
        return None, f"{rel_path!r} has no folder {rule.folder} levels above the trial's, so it is in no configuration"
    names = [n for n, globs in rule.paths.items() if any(glob_regex(g).match(rel_path) for g in globs)]
    if len(names) == 1:
        return names[0], ""
    if not names:
        return None, f"matches no configuration of the study design ({', '.join(sorted(rule.paths))})"
    return None, f"matches several configurations of the study design ({', '.join(names)}); configurations must not overlap"


def _task_of(rule: TaskRule | None, folders: list[str], task_id: str, task_name: str | None,
             trial_name: str | None) -> str | None:
    if rule is None:
        return task_id
    if rule.folder is not None:
        return folders[-1 - rule.folder] if rule.folder < len(folders) else None
    text = {"task_name": task_name, "trial_name": trial_name, "folder": folders[-1]}[rule.field]
    m = re.search(rule.regex or "", text or "")
    return m.group("task") if m and m.group("task") else None


RERUN_COLUMNS = ["arm", "task_id", "repetition", "trial_path", "started_at", "kept", "rule"]


def _rel(path: str, root_dir: str) -> str:
    prefix = root_dir.rstrip(os.sep) + os.sep
    rel = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root_dir)
    return rel.replace(os.sep, "/")


def apply_design(rows: list[dict[str, Any]], design: StudyDesign, root_dir: str
                 ) -> tuple[list[dict[str, Any]], list[IngestError], list[dict[str, Any]]]:
    """The rows placed by ``design`` (arm in ``profile``), a warning per row left out, and the reruns met.

    A row is a trial as the trials table has it (``profile``, ``task_id``, ``repetition``, ``trial_path``,
    ``started_at``, ``finished_at``, ``run_config`` as JSON, ``task_name``, ``trial_name``, ``source_format``,
    ``mcp_tool_calls``, ``mcp_used``); other keys travel along. Of a trial run more than once (same arm,
    task and repetition), the design's ``reruns`` rule keeps the first, the last, or all of them as further
    repetitions; every rerun is listed with whether it was kept, for the design audit.

    Raises :class:`~analysis_lib.study.study_file.DesignError` (one line naming the study file) when two arms select
    the same trial or an arm selects none of the rows: such a design cannot be compared as declared.
    """
    placed: list[dict[str, Any]] = []
    errors: list[IngestError] = []
    matched: dict[str, int] = dict.fromkeys(design.arms, 0)
    for row in rows:
        config = row.get("run_config") or {}
        record = dict(orjson.loads(config) if isinstance(config, str) else config)
        record["profile"] = row["profile"]
        record["source_format"] = row.get("source_format")
        rel_path = _rel(row["trial_path"], root_dir)
        arms = matching_arms(design, rel_path, record)
        if len(arms) > 1:
            # Overlapping arms are a study file that cannot work: no trial would be compared as declared.
            raise DesignError(f"{design.where}: arms {arms[0]} and {arms[1]} overlap: both select {rel_path}; "
                              "an arm's selectors must not match another arm's trials")
        for name in arms:
            matched[name] += 1
        a = assign(design, rel_path=rel_path, task_id=str(row["task_id"]),
                   task_name=row.get("task_name"), trial_name=row.get("trial_name"), record=record)
        if a.arm is None:
            errors.append(IngestError(row["trial_path"], "design", f"{a.problem}; not analysed", "warning"))
            continue
        arm = design.arms[a.arm]
        new = {**row, "profile": a.arm, "task_id": a.task_id}
        if a.configuration is not None:
            new.update(profile=configuration_profile(a.configuration, a.arm), configuration=a.configuration, arm=a.arm)
        if a.repetition is not None:
            new["repetition"] = a.repetition
        if a.dataset_version is not None:
            new["dataset_version"] = a.dataset_version
        if arm.mcp:
            new["mcp_used"] = used_mcp(new.get("mcp_used"), new.get("mcp_tool_calls"))
        placed.append(new)
    empty = [name for name, n in matched.items() if n == 0]
    if empty and rows:
        # An arm that selects nothing would leave a one-arm analysis that compares nothing it declared.
        name = empty[0]
        raise DesignError(f"{design.where}: arms.{name}: its selector ({design.arms[name].rule()}) matches none of the "
                          f"{len(rows)} trials read; every arm's selector must match a trial")
    kept, reruns = _reruns(placed, design.reruns)
    return kept, errors, reruns


def _reruns(rows: list[dict[str, Any]], rule: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Apply the reruns rule to trials sharing (arm, task, repetition); repetition 0 (not known yet) never clashes."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.get("repetition"):
            groups[(r["profile"], r["task_id"], r["repetition"])].append(i)
    drop: set[int] = set()
    renumber: set[tuple] = set()
    listed: list[dict[str, Any]] = []
    for (arm, task, rep), idx in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(idx) < 2:
            continue
        idx.sort(key=lambda i: (str(rows[i].get("started_at") or ""), str(rows[i].get("finished_at") or ""),
                                str(rows[i]["trial_path"])))
        keep = idx[:1] if rule == "first" else idx[-1:] if rule == "last" else idx
        for i in idx:
            if i not in keep:
                drop.add(i)
            listed.append({"arm": arm, "task_id": task, "repetition": rep, "trial_path": rows[i]["trial_path"],
                           "started_at": rows[i].get("started_at"), "kept": i in keep, "rule": rule})
        if rule == "all":
            renumber.add((arm, task))
    out = []
    for i, r in enumerate(rows):
        if i in drop:
            continue
        if (r["profile"], r["task_id"]) in renumber:
            r = {**r, "repetition": 0}  # every attempt is a repetition, numbered by start time
        out.append(r)
    return out, listed


def place_trials(trials: list[Trial], design: StudyDesign, runs_dir: str) -> tuple[list[Trial], list[IngestError]]:
    """The trials ``design`` places (arm, task id, repetition set on each, repetitions numbered), the same way as
    the table's rows; ``trials`` as :func:`analysis_lib.ingest.load.load_trials` read them with ``number=False``."""
    root = runs_dir if os.path.isdir(runs_dir) else os.path.dirname(runs_dir)
    rows = [{"_i": i, "profile": t.profile, "task_id": t.task_id, "repetition": t.repetition, "trial_path": t.trial_path,
             "started_at": t.timing.started_at.isoformat() if t.timing.started_at else None,
             "finished_at": t.timing.finished_at.isoformat() if t.timing.finished_at else None,
             "run_config": trial_record(t.metadata.get("config"), agent_name=t.metadata.get("agent_name"),
                                        model_name=t.metadata.get("model_name")),
             "task_name": t.metadata.get("task_name") or t.task_id, "trial_name": t.metadata.get("trial_name"),
             "source_format": t.source_format} for i, t in enumerate(trials)]
    placed, errors, _ = apply_design(rows, design, root)
    out = []
    for row in placed:
        t = trials[row["_i"]]
        t.profile, t.task_id, t.repetition = row["profile"], row["task_id"], row["repetition"]
        if "configuration" in row:  # the table made from these trials carries them (study_of_trials)
            t.metadata["placement"] = {c: row[c] for c in CONFIGURATION_COLUMNS}
        out.append(t)
    number_repetitions(out)
    return out, errors


def load_placed_trials(runs_dir: str | os.PathLike, design: StudyDesign | None,
                       trial_paths: Collection[str] | None = None) -> tuple[list[Trial], list[IngestError]]:
    """:func:`analysis_lib.ingest.load.load_trials`, then the trials placed in the arms of ``design`` (None: the
    readers' default profiles)."""
    if design is None:
        return load_trials(runs_dir, trial_paths)
    trials, errors = load_trials(runs_dir, trial_paths, number=False)
    placed, design_errors = place_trials(trials, design, os.fspath(runs_dir))
    return placed, errors + design_errors


def placement(design: StudyDesign) -> Callable[[list[dict[str, Any]], str], tuple[list[dict[str, Any]], list[IngestError], list[dict[str, Any]]]]:
    """What :func:`analysis_lib.metrics.trials_table.trials_table` calls to put its rows in the arms of ``design``."""
    return functools.partial(_apply, design)


def _apply(design: StudyDesign, rows: list[dict[str, Any]], root_dir: str):
    return apply_design(rows, design, root_dir)
