"""Trials into arms: a study design (:mod:`analysis_lib.design`) applied to the rows of the trials table.

Each row's arm, task id, repetition and dataset version come from the design; rows it cannot place
are left out with one warning row each; of a trial run more than once (same arm, task and
repetition), the design's ``reruns`` rule keeps the first, the last, or all of them as further
repetitions, and every rerun is listed (with which was kept) for the design audit. The rows stay
what the metrics made of each trial: a design relabels them, so a changed study file needs no
re-reading.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

import orjson

from .design import StudyDesign, assign
from .trial import IngestError

__all__ = ["apply_design", "RERUN_COLUMNS"]

RERUN_COLUMNS = ["arm", "task_id", "repetition", "trial_path", "started_at", "kept", "rule"]


def _rel(path: str, root_dir: str) -> str:
    prefix = root_dir.rstrip(os.sep) + os.sep
    rel = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root_dir)
    return rel.replace(os.sep, "/")


def apply_design(rows: list[dict[str, Any]], design: StudyDesign, root_dir: str
                 ) -> tuple[list[dict[str, Any]], list[IngestError], list[dict[str, Any]]]:
    """The rows placed by ``design`` (arm in ``profile``), a warning per row left out, and the reruns met."""
    placed: list[dict[str, Any]] = []
    errors: list[IngestError] = []
    for row in rows:
        record = orjson.loads(row.get("run_config") or "{}")
        record["profile"] = row["profile"]
        record["source_format"] = row.get("source_format")
        a = assign(design, rel_path=_rel(row["trial_path"], root_dir), task_id=str(row["task_id"]),
                   task_name=row.get("task_name"), trial_name=row.get("trial_name"), record=record)
        if a.arm is None:
            errors.append(IngestError(row["trial_path"], "design", f"{a.problem}; not analysed", "warning"))
            continue
        arm = design.arms[a.arm]
        new = {**row, "profile": a.arm, "task_id": a.task_id}
        if a.repetition is not None:
            new["repetition"] = a.repetition
        if a.dataset_version is not None:
            new["dataset_version"] = a.dataset_version
        if arm.mcp and new.get("mcp_used") is None and new.get("mcp_tool_calls") is not None:
            # An arm offered MCP tools: a trial used them when an MCP call ran.
            new["mcp_used"] = bool(new["mcp_tool_calls"] > 0)
        placed.append(new)
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
