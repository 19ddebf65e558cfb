"""Tidy frames at growing granularity, in the manner of Inspect AI's analysis API.

``trials_df`` (one row per trial, every Layer 1 metric: the ``metrics_detail.csv`` table),
``steps_df`` (one row per step), ``tool_calls_df`` (one row per tool call) and ``tests_df`` (one
row per verifier test). Each takes a runs folder or trials already loaded with
:func:`analysis_lib.ingest.load.load_trials`, and carries the identity columns
``profile, task_id, repetition, run_id, trial_path`` so that frames join on them. Of a runs folder,
``design`` (a study file or its path, :mod:`analysis_lib.design`) places the trials into arms.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import orjson
import pandas as pd

from ..core.tools import DEFAULT_MCP_TOOLS, categorize, files_touched
from ..core.trial import Trajectory, Trial
from ..metrics.trial_metrics import DEFAULT_CONFIG, IDENTITY_COLUMNS, MetricsConfig
from ..metrics.trials_table import ACTIONS_COLUMN, table_of_trials
from .study import open_study, study_of_trials
from .study_file import StudyDesign

MESSAGE_CHARS = 300  # message text kept per step row


Design = StudyDesign | str | os.PathLike | None


def _trials(source: str | os.PathLike | Iterable[Trial], design: Design = None) -> list[Trial]:
    if isinstance(source, (str, os.PathLike)):
        return study_of_trials(source, design)[1]  # placed in the study's arms, as its table has them
    return list(source)


def _identity(t: Trial) -> dict:
    return {"profile": t.profile, "task_id": t.task_id, "repetition": t.repetition, "run_id": t.run_id,
            "trial_path": t.trial_path}


def trials_df(source: str | os.PathLike | Iterable[Trial], config: MetricsConfig = DEFAULT_CONFIG,
              design: Design = None) -> pd.DataFrame:
    """One row per trial with every Layer 1 metric.

    Of a runs folder: exactly the ``metrics_detail.csv`` table that ``analyse`` writes (trial paths
    relative to the folder, a ``simulated`` column; arms as ``design`` places them). Of loaded trials:
    the same rows, with their paths as the trials give them, so that the table joins the other frames
    of those trials.
    """
    if isinstance(source, (str, os.PathLike)):
        return open_study(source, design, config=config).metrics  # the study's table, its success rule applied once
    return table_of_trials(source, config).drop(columns=[ACTIONS_COLUMN])


def _walk(traj: Trajectory, agent: str = ""):
    """(trajectory label, step) pairs: the root's steps, then each subagent's."""
    for s in traj.steps:
        yield agent, s
    for i, sub in enumerate(traj.subagents):
        yield from _walk(sub, f"{agent}/{sub.agent_name or 'subagent'}#{i + 1}".lstrip("/"))


def steps_df(source: str | os.PathLike | Iterable[Trial], design: Design = None) -> pd.DataFrame:
    """One row per trajectory step: source, time, tokens, tool calls and errors of the step."""
    rows = []
    for t in _trials(source, design):
        if t.trajectory is None:
            continue
        ident = _identity(t)
        for agent, s in _walk(t.trajectory):
            rows.append({
                **ident, "subagent": agent, "step_id": s.step_id, "source": s.source, "timestamp": s.timestamp,
                "model_name": s.model_name, "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens, "cached_tokens": s.cached_tokens, "cost_usd": s.cost_usd,
                "n_tool_calls": len(s.tool_calls), "n_tool_errors": sum(bool(c.is_error) for c in s.tool_calls),
                "is_copied_context": s.is_copied_context, "message": s.message[:MESSAGE_CHARS],
            })
    cols = IDENTITY_COLUMNS + ["subagent", "step_id", "source", "timestamp", "model_name", "prompt_tokens",
                               "completion_tokens", "cached_tokens", "cost_usd", "n_tool_calls", "n_tool_errors",
                               "is_copied_context", "message"]
    df = pd.DataFrame(rows, columns=cols)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce", format="ISO8601")
    return df


def tool_calls_df(source: str | os.PathLike | Iterable[Trial], mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS,
                  design: Design = None) -> pd.DataFrame:
    """One row per tool call: name, taxonomy category, arguments, error flag, files touched."""
    rows = []
    for t in _trials(source, design):
        if t.trajectory is None:
            continue
        ident = _identity(t)
        order = 0
        for agent, s in _walk(t.trajectory):
            for c in s.tool_calls:
                order += 1
                cat = categorize(c.name, c.arguments, mcp_tools)
                reads, edits = files_touched(c.name, c.arguments, cat)
                rows.append({
                    **ident, "subagent": agent, "step_id": s.step_id, "call_index": order, "call_id": c.call_id,
                    "name": c.name, "category": cat,
                    "arguments": orjson.dumps(c.arguments, option=orjson.OPT_SORT_KEYS, default=str).decode(),
                    "is_error": c.is_error, "output_chars": c.output_chars,
                    "files_read": "|".join(reads), "files_edited": "|".join(edits),
                })
    cols = IDENTITY_COLUMNS + ["subagent", "step_id", "call_index", "call_id", "name", "category", "arguments",
                               "is_error", "output_chars", "files_read", "files_edited"]
    return pd.DataFrame(rows, columns=cols)


def tests_df(source: str | os.PathLike | Iterable[Trial], design: Design = None) -> pd.DataFrame:
    """One row per verifier test (CTRF or imported): name, status, duration, file."""
    rows = []
    for t in _trials(source, design):
        for r in t.tests or []:
            rows.append({**_identity(t), "name": r.name, "status": r.status, "duration_sec": r.duration_sec,
                         "file_path": r.file_path, "suite": r.suite, "message": r.message})
    return pd.DataFrame(rows, columns=IDENTITY_COLUMNS + ["name", "status", "duration_sec", "file_path", "suite", "message"])
