"""Layer 1: deterministic metrics of one trial, the same for every agent and format.

Definitions (also in the README's metric reference; one id everywhere):

- ``success``: reward == 1.0 (or the study file's success rule, ``MetricsConfig.success_rule``).
  A trial whose harness raised (Harbor ``exception_info``) counts
  as a failure only when its verifier still produced a reward; with no reward it is an
  infrastructure error (``infra_error``), ``success`` is empty and it is left out of rates.
- ``total_input_tokens``: every prompt token (cached reads and cache writes included), each API
  call counted once; ``total_tokens`` = input + output. Where they come from, and which source
  wins, is :mod:`analysis_lib.tokens` (``token_source`` names it per trial).
- ``total_cost_usd``: recorded cost (final_metrics, steps, Harbor), else estimated from
  litellm's offline price map (``cost_estimated`` = True; a subagent's tokens at its own model's
  rate), else empty.
- ``token_efficiency``: successes per 1M tokens (success / total_tokens * 1e6). Cost per success
  is a profile-level quantity (total cost / total successes, :mod:`analysis_lib.registry`), never
  a per-trial column: a failed trial has no finite cost per success.
- ``elapsed_sec``: agent execution time: Harbor's ``agent_execution`` phase, else the trial's
  start to finish, else first to last step timestamp.
- Tool-call metrics count the calls of subagent trajectories too; step counts are the root's.
- ``loop_count``: tool calls identical (same name, same canonical arguments) to the call just
  before. ``backtrack_count``: edits of a file the trial already edited.
  ``exploration_breadth``: |files read or edited| (a read whose call failed reads no file). ``grep_before_edit``: a search call came
  before the first edit (empty when nothing was edited).
- Exploratory (pre-registered in ``params/analysis_plan.yaml``): ``mcp_calls_by_tool`` (JSON
  object MCP tool name -> calls, and one ``mcp_calls__<tool>`` column per MCP tool seen, see
  :func:`mcp_column`); ``time_to_first_edit_sec`` (first step's timestamp to the timestamp of the
  step holding the first edit, root trajectory) and ``steps_to_first_edit`` (1-based position of
  that step among the root trajectory's steps, copied context excluded), both empty when the root
  trajectory never edits; ``duplicate_reads`` (reads of a file already read with no edit of it
  in between). Formats without a trajectory leave them empty.
- Flags: ``tool_misuse`` (> 30 % of calls errored), ``infinite_loop`` (a streak of more than
  5 identical consecutive calls), ``budget_exhaustion`` (failed with > 80k tokens),
  ``premature_stop`` (failed with < 10 steps), ``context_omission`` (reserved, empty).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import orjson
import pandas as pd

from . import pricing
from .design import DEFAULT_SUCCESS, reward_succeeds
from .tokens import trajectory_tokens, trial_tokens
from .tools import (
    DEFAULT_MCP_TOOLS,
    call_effects,
    categorize,
    discovers_mcp,
    is_discovery,
    is_permission_denial,
    name_category,
)
from .trial import Step, ToolCall, Trajectory, Trial

IDENTITY_COLUMNS = ["profile", "task_id", "repetition", "run_id", "trial_path"]
METRIC_COLUMNS = [
    "success",
    "reward",
    "tests_passed",
    "tests_failed",
    "tests_total",
    "tests_passed_ratio",
    "total_input_tokens",
    "total_output_tokens",
    "total_cached_tokens",
    "total_tokens",
    "total_cost_usd",
    "cost_estimated",
    "token_efficiency",
    "total_steps",
    "agent_steps",
    "tool_calls_count",
    "unique_tools",
    "tools_per_step",
    "steps_per_minute",
    "elapsed_sec",
    "tool_distribution",
    "tool_success_rate",
    "tool_error_count",
    "mcp_tools_used",
    "mcp_tool_calls",
    "native_tool_calls",
    "mcp_discovery_calls",
    "mcp_exposed",
    "mcp_used",
    "loop_count",
    "backtrack_count",
    "exploration_breadth",
    "files_read",
    "files_edited",
    "grep_before_edit",
    "mcp_calls_by_tool",
    "time_to_first_edit_sec",
    "steps_to_first_edit",
    "duplicate_reads",
    "tool_misuse",
    "infinite_loop",
    "budget_exhaustion",
    "premature_stop",
    "context_omission",
]
CONTEXT_COLUMNS = ["source_format", "agent_name", "model_name", "task_dataset", "started_at", "infra_error", "exception",
                   "token_source", "other_token_source", "other_input_tokens"]
CATEGORY_COLUMNS = ["calls_read", "calls_search", "calls_edit", "calls_execute", "calls_mcp", "calls_other"]
# Prefix of the per-MCP-tool call count columns (one per tool seen; see mcp_column).
MCP_TOOL_PREFIX = "mcp_calls__"


@dataclass(frozen=True)
class MetricsConfig:
    """Thresholds and MCP tool names of the Layer 1 metrics (defaults as documented above)."""

    mcp_tools: frozenset[str] = field(default_factory=lambda: DEFAULT_MCP_TOOLS)
    tool_misuse_error_rate: float = 0.30
    infinite_loop_streak: int = 5
    budget_exhaustion_tokens: int = 80_000
    premature_stop_steps: int = 10
    # When a reward is a pass (a study file may declare e.g. "reward > 0": partial credit scored as the study did).
    success_rule: str = DEFAULT_SUCCESS


DEFAULT_CONFIG = MetricsConfig()  # frozen: one shared default


def _ts(v: str | None) -> datetime | None:
    if not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
    except ValueError:
        return None


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        s = (b - a).total_seconds()
    except TypeError:  # naive vs aware
        return None
    return s if s >= 0 else None


SubagentUsage = tuple[str | None, int, int, int, int]  # model, input, output, cached, cache-write tokens


def _own_model(traj: Trajectory, fallback: str | None) -> str | None:
    """A trajectory's model: its agent's, else its first agent step's, else ``fallback``."""
    if traj.model_name:
        return traj.model_name
    return next((s.model_name for s in traj.steps if s.source == "agent" and s.model_name), fallback)


def _subagent_usage(traj: Trajectory, parent_model: str | None = None) -> Iterator[SubagentUsage]:
    """(model, input, output, cached, cache writes) of every subagent, nested ones apart from their parent."""
    model = _own_model(traj, parent_model)
    for sub in traj.subagents:
        sub_model = _own_model(sub, model)
        own = trajectory_tokens(sub)
        nested = list(_subagent_usage(sub, model))
        if own["input"] is not None:
            yield (
                sub_model,
                max(0, own["input"] - sum(n[1] for n in nested)),
                max(0, (own["output"] or 0) - sum(n[2] for n in nested)),
                max(0, (own["cached"] or 0) - sum(n[3] for n in nested)),
                max(0, (own.get("cache_write") or 0) - sum(n[4] for n in nested)),
            )
        yield from nested


def estimate_cost(
    model: str | None, tin: int, tout: int, tcached: int, subagents: Iterable[SubagentUsage] = (), cache_write: int = 0
) -> float | None:
    """Estimated cost of a trial's tokens: each subagent's at its own model's rate (its parent's when its
    model has no price), the rest at ``model``'s, cache writes at the cache-write rate; None when
    ``model`` has no price."""
    if pricing.model_prices(model) is None:
        return None
    rest_in, rest_out, rest_cached, rest_written, total = tin, tout, tcached, cache_write or 0, 0.0
    for sub_model, sin, sout, scached, swritten in subagents:
        priced = sub_model if pricing.model_prices(sub_model) is not None else model
        total += pricing.estimate_cost(priced, sin, sout, scached, swritten) or 0.0
        rest_in, rest_out, rest_cached, rest_written = rest_in - sin, rest_out - sout, rest_cached - scached, rest_written - swritten
    return total + (pricing.estimate_cost(model, max(0, rest_in), max(0, rest_out), max(0, rest_cached), max(0, rest_written)) or 0.0)


def _iter_calls(traj: Trajectory) -> Iterator[ToolCall]:
    """Tool calls of the trajectory, then of its subagents (their work is the trial's work)."""
    for s in traj.steps:
        if s.is_copied_context:
            continue
        yield from s.tool_calls
    for sub in traj.subagents:
        yield from _iter_calls(sub)


def _calls_with_steps(steps: list[Step], subagents: list[Trajectory]) -> Iterator[tuple[ToolCall, tuple[int, str | None] | None]]:
    """Every call as :func:`_iter_calls` orders them, with (1-based position of its step among ``steps``,
    that step's timestamp) for a call of the root trajectory, None for a subagent's."""
    for position, s in enumerate(steps, start=1):
        for call in s.tool_calls:
            yield call, (position, s.timestamp)
    for sub in subagents:
        for call in _iter_calls(sub):
            yield call, None


def trial_metrics(trial: Trial, config: MetricsConfig = DEFAULT_CONFIG) -> dict[str, Any]:
    """Every Layer 1 metric of one trial, as a flat dict (identity columns included)."""
    m: dict[str, Any] = {
        "profile": trial.profile,
        "task_id": trial.task_id,
        "repetition": trial.repetition,
        "run_id": trial.run_id,
        "trial_path": trial.trial_path,
        "source_format": trial.source_format,
        "agent_name": trial.metadata.get("agent_name"),
        "model_name": trial.metadata.get("model_name"),
        "task_dataset": trial.metadata.get("task_dataset"),
        "exception": trial.exception,
        "started_at": trial.timing.started_at.isoformat() if trial.timing.started_at else None,
    }
    carried = trial.carried_metrics
    traj = trial.trajectory
    steps = [s for s in traj.steps if not s.is_copied_context] if traj is not None else []

    # Outcome
    reward = trial.reward if trial.reward is not None else carried.get("reward")
    success = carried.get("success")
    if reward is not None:
        success = reward_succeeds(reward, config.success_rule)
    infra = trial.exception is not None and reward is None and success is None
    m["reward"] = reward
    m["success"] = None if infra else (bool(success) if success is not None else None)
    m["infra_error"] = infra
    passed: int | None
    failed: int | None
    total: int | None
    if trial.tests is not None:
        passed = sum(t.status == "passed" for t in trial.tests)
        failed = sum(t.status == "failed" for t in trial.tests)
        total = len(trial.tests)
    else:
        passed, failed, total = carried.get("tests_passed"), carried.get("tests_failed"), carried.get("tests_total")
    m["tests_passed"], m["tests_failed"], m["tests_total"] = passed, failed, total
    m["tests_passed_ratio"] = (passed / total) if total and passed is not None else None

    # Economics: each API call counted once, from the first source that knows (analysis_lib.tokens)
    tok = trial_tokens(trial)
    tin, tout, tcached, cost, estimated = tok.input, tok.output, tok.cached, tok.cost, tok.cost_estimated
    if cost is None and tin is not None:
        from_traj = tok.source == "trajectory" and traj is not None
        est = estimate_cost(
            m["model_name"] or (traj.model_name if traj is not None else None),
            tin,
            tout or 0,
            tcached or 0,
            _subagent_usage(traj) if from_traj and traj is not None else (),
            tok.cache_write or 0,
        )
        if est is not None:
            cost, estimated = est, True
    m["token_source"] = tok.source
    m["other_token_source"], m["other_input_tokens"] = tok.other_source, tok.other_input
    m["total_input_tokens"], m["total_output_tokens"], m["total_cached_tokens"] = tin, tout, tcached
    total_tokens = (tin or 0) + (tout or 0) if tin is not None or tout is not None else None
    m["total_tokens"] = total_tokens
    m["total_cost_usd"] = cost
    m["cost_estimated"] = estimated
    m["token_efficiency"] = (1.0 if m["success"] else 0.0) / total_tokens * 1e6 if total_tokens and m["success"] is not None else None

    # Timing
    t = trial.timing
    elapsed = _seconds(t.agent_started_at, t.agent_finished_at)
    if elapsed is None:
        elapsed = _seconds(t.started_at, t.finished_at)
    stamps = [s.timestamp for s in steps if s.timestamp]
    if elapsed is None and len(stamps) >= 2:
        elapsed = _seconds(_ts(stamps[0]), _ts(stamps[-1]))
    if elapsed is None:
        elapsed = carried.get("elapsed_sec")
    m["elapsed_sec"] = elapsed
    # Measured by the benchmark runner for treatment trials (result.json "bench"): empty elsewhere.
    m["mcp_exposed"], m["mcp_used"] = trial.metadata.get("mcp_exposed"), trial.metadata.get("mcp_used")

    if traj is None:
        _carried_process(m, carried, config)
    else:
        _process_metrics(m, steps, traj.subagents, config)

    failed = m["success"] is False
    m["budget_exhaustion"] = bool(failed and (total_tokens or 0) > config.budget_exhaustion_tokens)
    m["premature_stop"] = bool(failed and m["total_steps"] is not None and m["total_steps"] < config.premature_stop_steps)
    m["context_omission"] = None
    return m


def _carried_process(m: dict, carried: dict, config: MetricsConfig) -> None:
    dist = carried.get("tool_distribution")
    calls = carried.get("tool_calls_count", sum(dist.values()) if isinstance(dist, dict) else None)
    m["total_steps"] = carried.get("total_steps")
    m["agent_steps"] = carried.get("agent_steps")
    m["tool_calls_count"] = calls
    m["unique_tools"] = len(dist) if isinstance(dist, dict) else None
    m["tools_per_step"] = None
    m["steps_per_minute"] = m["total_steps"] / (m["elapsed_sec"] / 60) if m["total_steps"] and m["elapsed_sec"] else None
    m["tool_distribution"] = orjson.dumps(dist, option=orjson.OPT_SORT_KEYS).decode() if isinstance(dist, dict) else None
    errs = carried.get("tool_error_count")
    m["tool_error_count"] = errs
    m["tool_success_rate"] = (1 - errs / calls) if calls and errs is not None else None
    for k in (
        "mcp_tools_used",
        "mcp_tool_calls",
        "native_tool_calls",
        "mcp_discovery_calls",
        "loop_count",
        "backtrack_count",
        "exploration_breadth",
        "files_read",
        "files_edited",
        "grep_before_edit",
    ):
        m[k] = carried.get(k)
    # Per-tool MCP counts, first edit and re-reads need the ordered calls of a trajectory.
    for k in ("mcp_calls_by_tool", "time_to_first_edit_sec", "steps_to_first_edit", "duplicate_reads"):
        m[k] = None
    for k in CATEGORY_COLUMNS:
        m[k] = None
    m["tool_misuse"] = bool(calls and errs is not None and errs / calls > config.tool_misuse_error_rate)
    m["infinite_loop"] = None


def _process_metrics(m: dict, steps: list[Step], subagents: list[Trajectory], config: MetricsConfig) -> None:
    """The process metrics of a trajectory: ``steps``, its root steps outside copied context, and its subagents."""
    m["total_steps"] = len(steps)
    agent_steps = sum(1 for s in steps if s.source == "agent")
    m["agent_steps"] = agent_steps
    names: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    errors = 0
    loops = 0
    streak = max_streak = 1
    prev_key = None
    read_files: set[str] = set()
    edited_files: set[str] = set()
    backtracks = 0
    searched = False
    grep_before_edit = None
    mcp_names: set[str] = set()
    mcp_calls = 0
    mcp_by_tool: Counter[str] = Counter()
    discovery = mcp_discovery = refused_mcp = 0
    first_edit: tuple[int, str | None] | None = None  # where the first call that edits a file is (see _calls_with_steps)
    first_edited = False
    # Files read since their last edit: reading one again is a duplicate read.
    read_unchanged: set[str] = set()
    duplicate_reads = 0
    n = 0
    mcp_tools = config.mcp_tools if isinstance(config.mcp_tools, frozenset) else frozenset(config.mcp_tools)
    for call, where in _calls_with_steps(steps, subagents):
        n += 1
        name, arguments = call.name, call.arguments
        names[name] += 1
        cat = name_category(name, mcp_tools) or categorize(name, arguments, mcp_tools)
        refused = bool(call.is_error) and is_permission_denial(call.output)
        if is_discovery(name):
            # ToolSearch loads deferred tools' schemas: neither a native call nor a use of MCP.
            discovery += 1
            mcp_discovery += discovers_mcp(arguments)
        elif cat == "mcp" and refused:
            refused_mcp += 1  # the agent refused to run it: not a use of MCP
        else:
            cats[cat] += 1
        if cat == "mcp" and not refused:
            mcp_calls += 1
            mcp_names.add(name)
            mcp_by_tool[name] += 1
        if call.is_error:
            errors += 1
        # Dict equality ignores key order: the same canonical arguments.
        key = (name, arguments)
        if key == prev_key:
            loops += 1
            streak += 1
            max_streak = max(max_streak, streak)
        else:
            streak = 1
        prev_key = key
        # A call the agent refused to run read, searched and edited nothing.
        reads, edits, search = ((), (), False) if refused else call_effects(name, arguments, cat)
        if search:
            searched = True
        if call.is_error:
            reads = ()  # a failed read (a directory, a missing file) read no file
        for p in reads:
            p = _norm(p)
            read_files.add(p)
            if p in read_unchanged:
                duplicate_reads += 1
            else:
                read_unchanged.add(p)
        if edits and not first_edited:
            first_edited, first_edit = True, where
        for p in edits:
            p = _norm(p)
            read_unchanged.discard(p)
            if p in edited_files:
                backtracks += 1
            else:
                if grep_before_edit is None:
                    grep_before_edit = searched
                edited_files.add(p)
    m["tool_calls_count"] = n
    m["unique_tools"] = len(names)
    m["tools_per_step"] = n / agent_steps if agent_steps else None
    m["steps_per_minute"] = len(steps) / (m["elapsed_sec"] / 60) if m["elapsed_sec"] else None
    m["tool_distribution"] = orjson.dumps(dict(sorted(names.items()))).decode()
    m["tool_error_count"] = errors
    m["tool_success_rate"] = 1 - errors / n if n else None
    m["mcp_tools_used"] = len(mcp_names)
    m["mcp_tool_calls"] = mcp_calls
    m["native_tool_calls"] = n - mcp_calls - discovery - refused_mcp
    m["mcp_discovery_calls"] = mcp_discovery
    m["loop_count"] = loops
    m["backtrack_count"] = backtracks
    m["exploration_breadth"] = len(read_files | edited_files)
    m["files_read"] = len(read_files)
    m["files_edited"] = len(edited_files)
    m["grep_before_edit"] = grep_before_edit
    m["mcp_calls_by_tool"] = orjson.dumps(dict(sorted(mcp_by_tool.items()))).decode()
    for name, count in mcp_by_tool.items():
        col = mcp_column(name)
        m[col] = m.get(col, 0) + count  # two raw names may map onto one column id
    if first_edit is None:  # no edit, or a subagent's: it has no position among the root's steps
        m["time_to_first_edit_sec"] = m["steps_to_first_edit"] = None
    else:
        position, stamp = first_edit
        m["time_to_first_edit_sec"] = _seconds(_ts(steps[0].timestamp), _ts(stamp))
        m["steps_to_first_edit"] = position
    m["duplicate_reads"] = duplicate_reads
    m["tool_misuse"] = bool(n and errors / n > config.tool_misuse_error_rate)
    m["infinite_loop"] = bool(n and max_streak > config.infinite_loop_streak)
    for c in ("read", "search", "edit", "execute", "mcp", "other"):
        m[f"calls_{c}"] = cats.get(c, 0)


@functools.lru_cache(maxsize=4096)  # once per call of every trial when the table is built
def mcp_column(name: str) -> str:
    """Column id of an MCP tool's call count: ``mcp_calls__`` + the name without its ``mcp__`` prefix,
    lower-cased, other characters than ``[a-z0-9_]`` as ``_`` (``mcp__codegraph__search_code`` ->
    ``mcp_calls__codegraph__search_code``)."""
    base = name[5:] if name.startswith("mcp__") else name
    return MCP_TOOL_PREFIX + re.sub(r"[^a-z0-9_]", "_", base.lower())


@functools.lru_cache(maxsize=8192)  # called for every path of every call; agents touch the same files again
def _norm(path: str) -> str:
    """Normalise a file path for counting: strip quotes, ``./`` and trailing slashes."""
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or p


_BOOL_COLUMNS = frozenset(
    {
        "success",
        "infra_error",
        "cost_estimated",
        "grep_before_edit",
        "tool_misuse",
        "infinite_loop",
        "mcp_exposed",
        "mcp_used",
        "budget_exhaustion",
        "premature_stop",
    }
)
_NUMERIC_COLUMNS = frozenset(
    c for c in METRIC_COLUMNS + CATEGORY_COLUMNS if c not in _BOOL_COLUMNS | {"tool_distribution", "context_omission", "mcp_calls_by_tool"}
)


def _column(name: str, values: list) -> Any:
    """One column of the metrics table, typed (built column by column: 2x faster than from row dicts)."""
    if name in _NUMERIC_COLUMNS or name.startswith(MCP_TOOL_PREFIX):
        try:
            return np.array(values, dtype="float64")  # None becomes NaN
        except (TypeError, ValueError):
            return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("float64").to_numpy()
    if name in _BOOL_COLUMNS:
        try:
            return pd.array(values, dtype="boolean")
        except (TypeError, ValueError):
            return pd.Series(values, dtype=object).astype("boolean").array
    if name == "repetition":
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("Int64").array
    return values if values else np.array([], dtype=object)


def metrics_frame(rows: list[dict[str, Any]], *, sort: bool = True) -> pd.DataFrame:
    """Rows to a frame with the documented column order (identity, metrics, categories, context, extensions),
    sorted by profile, task, repetition and run unless ``sort`` is False (rows kept in the given order).

    The ``mcp_calls__<tool>`` columns are derived from ``mcp_calls_by_tool`` (see :func:`mcp_column`).
    """
    names = [k for k in dict.fromkeys(k for r in rows for k in r) if not k.startswith(MCP_TOOL_PREFIX)]
    data = {c: [r.get(c) for r in rows] for c in names}
    n = len(rows)
    base = IDENTITY_COLUMNS + METRIC_COLUMNS + CATEGORY_COLUMNS + CONTEXT_COLUMNS
    typed = {c: _column(c, data[c] if c in data else [None] * n) for c in base}
    typed.update((c, _column(c, data[c])) for c in names if c not in typed)
    typed.update(_mcp_tool_columns(data.get("mcp_calls_by_tool") or [None] * n))
    columns = base + sorted(set(typed) - set(base))
    df = pd.DataFrame(typed, columns=columns)
    if not sort:
        return df
    return df.sort_values(["profile", "task_id", "repetition", "run_id"], kind="stable").reset_index(drop=True)


def _mcp_tool_columns(by_tool: list) -> dict[str, np.ndarray]:
    """One ``mcp_calls__<tool>`` column per MCP tool in the ``mcp_calls_by_tool`` JSON objects: the calls of
    that tool, 0 for a trial with per-tool counts that did not call it, NaN for one without counts."""
    per_row: list[dict[str, float] | None] = []
    for v in by_tool:
        if isinstance(v, str):
            counts: dict[str, float] = {}
            for name, k in orjson.loads(v).items():
                col = mcp_column(name)
                counts[col] = counts.get(col, 0) + k  # two raw names may map onto one column id
            per_row.append(counts)
        else:
            per_row.append(None)
    tools = sorted({c for d in per_row if d for c in d})
    nan = float("nan")
    return {c: np.array([nan if d is None else d.get(c, 0) for d in per_row], dtype="float64") for c in tools}
