"""The metric registry: one entry per quantity, the only definition of each metric.

A metric's id is its column in ``metrics_detail.csv``. Its entry says what it means, its unit,
which direction is better, how the repetitions of one task are combined before two profiles are
compared, on which scale a comparison is reported, how it is printed (label, decimals), whether
subagents' work counts, and holds the function that computes it from a trial
(:func:`analysis_lib.metrics.trial_metrics.trial_metrics` is a loop over these entries). A metric some sources
state instead of a trajectory (TB1, Inspect, mcpbr, the benchmark runner) names the fields its
value is carried from. The analysis plan is validated against the registry, the README's metric
reference is generated from it (``python tools/metric_reference.py``), and tables, axis labels and
TeX macros take their labels and precision from it, so one quantity has one name and one
definition everywhere. ``tests/test_metric_definitions.py`` holds one hand-computed case per id.

Three profile-level quantities are not columns but are derived from them, and are named apart
from the per-trial column they come from: ``pass_rate`` (share of trials that succeeded),
``resolve_rate`` (share of tasks whose repetitions' majority succeeded) and
``cost_per_success`` (total cost over total successes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from .facts import Facts
from .trial import TOOL_CATEGORIES

__all__ = ["Metric", "METRICS", "DERIVED", "MCP_TOOL_PREFIX", "CATEGORY_IDS", "CALL_ORDER", "metric", "is_known",
           "reference_table"]

MCP_TOOL_PREFIX = "mcp_calls__"
# One column per tool taxonomy category (analysis_lib.core.tools).
CATEGORY_IDS = tuple(f"calls_{c}" for c in TOOL_CATEGORIES)

# The one rule for subagents' work (Metric.subagents says, per metric, whether it counts).
CALL_ORDER = ("Call order: the root trajectory's calls in step order; a subagent's calls are placed by the time of "
              "their steps, never before the call that started the subagent (without step times: right after that "
              "call); the calls of a subagent no result refers to come last. Copied context is left out.")
_CALLS = "counted, in call order"
_STEPS = "not counted (the root trajectory's steps)"
_FIRST_EDIT = "counted, in call order; a subagent's edit takes the position of the root step whose call started it"
_TOKENS = "counted (every API call of the trial once)"

Kind = Literal["binary", "continuous", "count", "record"]
Compute = Callable[[Facts], Any]


@dataclass(frozen=True)
class Metric:
    """One metric: id (= column), display label, unit, definition, direction, aggregation, printing and its function."""

    id: str
    label: str
    unit: str
    definition: str
    kind: Kind = "continuous"
    direction: Literal["lower", "higher", "none"] = "none"
    # How a comparison is reported: "ratio" = per-task log ratio B/A shown as % change,
    # "difference" = per-task difference B - A in the unit, "rate" = difference of rates in points.
    scale: Literal["ratio", "difference", "rate", "none"] = "difference"
    decimals: int = 0
    exploratory_only: bool = False
    # The value of one trial from its facts (None = unknown); None for a metric only ever carried.
    compute: Compute | None = None
    # Source fields the value is carried from when the source states it (read from Trial.carried_metrics[id]
    # where compute gives no value); empty when no source carries it.
    carried: str = ""
    # Process metrics: whether subagents' work counts, and in which order (see CALL_ORDER).
    subagents: str = ""

    @property
    def aggregation(self) -> str:
        """How the repetitions of one task are combined before A and B are paired."""
        if self.kind == "binary":
            return "majority vote (a tie counts as fail)"
        return "median" if self.kind in ("continuous", "count") else "not aggregated"

    @property
    def mean_of_repetitions(self) -> str:
        """How a plan that counts every repetition combines a task's repetitions, by the comparison scale.

        A ratio (log B/A) needs positive values: their geometric mean. On the difference scale the
        arithmetic mean, which keeps zeros: counts such as duplicate reads or calls of one MCP tool are
        often 0, and a geometric mean would leave such a task out.
        """
        return "geometric_mean" if self.scale == "ratio" else "mean"

    @property
    def axis_label(self) -> str:
        """The label with its unit, for axes and table headers."""
        if not self.unit or self.unit in ("share", "flag") or self.label.endswith(self.unit):
            return self.label
        return f"{self.label} ({self.unit})"

    @property
    def process(self) -> bool:
        """Whether the metric describes what the agent did (its calls, steps, MCP use), as opposed to the outcome,
        tokens or time: unknown, never 0, for a trial whose agent never reached a model."""
        return self.subagents not in ("", _TOKENS) or self.id in ("mcp_used", "mcp_exposed")

    @property
    def testable(self) -> bool:
        return self.kind in ("binary", "continuous", "count")

    @property
    def dtype(self) -> str:
        """The column's type in the metrics table: nullable boolean, float (NaN = unknown) or JSON text."""
        if self.kind == "binary" or self.unit == "flag":
            return "boolean"
        return "float64" if self.kind in ("continuous", "count") else "object"


def _ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``, None when either is unknown or the denominator is 0."""
    return num / den if num is not None and den else None


def _json(counts: dict | None) -> str | None:
    """A JSON object with sorted keys (a tool distribution), None when unknown."""
    return None if counts is None else orjson.dumps(counts, option=orjson.OPT_SORT_KEYS).decode()


def _failed(f: Facts) -> bool:
    return f["success"] is False


def _flag(condition: Any) -> bool:
    return bool(condition)


def _failed_with(f: Facts, metric_id: str, test: Callable[[Any], bool]) -> bool | None:
    """A failure flag that tests another metric: false unless the trial failed, unknown (None) when it failed
    and that metric is unknown (a count no source records is not 0)."""
    if not _failed(f):
        return False
    value = f[metric_id]
    return None if value is None else _flag(test(value))


def _category_calls(category: str) -> Compute:
    """Calls of a trajectory in one taxonomy category."""
    return lambda f: f.walk.categories.get(category, 0) if f.walk else None


_M = Metric
_ENTRIES = [
    _M("success", "success", "flag", "reward == 1.0, or the study file's success rule (e.g. reward > 0 where a study "
       "scores partial credit). A trial whose harness raised counts as a failure only when its "
       "verifier still produced a reward; with no reward it is an infrastructure error (`infra_error`), `success` is "
       "empty and it is left out of rates", "binary", "higher", "rate",
       compute=lambda f: f.outcome.success, carried="TB1 `is_resolved`, Inspect score, mcpbr `resolved`"),
    _M("reward", "reward", "", "verifier reward: Harbor `verifier_result.rewards`, else `reward.txt`, else "
       "`reward.json` (flat `reward` key, the only number, or nested `final_score.result/total`)", decimals=2,
       compute=lambda f: f.outcome.reward, carried="TB1 `is_resolved`, Inspect score, mcpbr `resolved`"),
    _M("tests_passed", "tests passed", "tests", "CTRF tests with status passed", "count",
       compute=lambda f: f.tests[0] if f.tests else None, carried="TB1 `parser_results`, mcpbr `fail_to_pass`/`pass_to_pass`"),
    _M("tests_failed", "tests failed", "tests", "CTRF tests with status failed", "count",
       compute=lambda f: f.tests[1] if f.tests else None, carried="TB1 `parser_results`, mcpbr `fail_to_pass`/`pass_to_pass`"),
    _M("tests_total", "tests", "tests", "CTRF tests of the trial", "count",
       compute=lambda f: f.tests[2] if f.tests else None, carried="TB1 `parser_results`, mcpbr `fail_to_pass`/`pass_to_pass`"),
    _M("tests_passed_ratio", "share of tests passed", "share", "tests_passed / tests_total", decimals=2,
       direction="higher", compute=lambda f: _ratio(f["tests_passed"], f["tests_total"])),
    _M("total_input_tokens", "input tokens", "tokens", "every prompt token (cached reads and cache writes included), "
       "each API call counted once: steps or lines repeating one call's usage count once (Claude Code and Harbor's "
       "conversion of it repeat it per content block), cache writes a producer left out of the prompt count are added. "
       "A trajectory's `final_metrics` win over the sum of its steps (they include subagents and calls without a step) "
       "unless they only sum the repeated usage; the last segment of a continuation chain holds the cumulative totals. "
       "Source, first that knows: the trajectory, a study's own per-trial metrics, Harbor's `agent_result`, what a "
       "legacy format carries (`token_source`). Empty when no source records it, never 0",
       "count", "lower", "ratio", compute=lambda f: f.tokens.input, subagents=_TOKENS,
       carried="TB1 `total_input_tokens`, Inspect `model_usage`, mcpbr `tokens.input`"),
    _M("total_output_tokens", "output tokens", "tokens", "completion tokens, each API call once (its largest count); same sources as input tokens",
       "count", "lower", "ratio", compute=lambda f: f.tokens.output, subagents=_TOKENS,
       carried="TB1 `total_output_tokens`, Inspect `model_usage`, mcpbr `tokens.output`"),
    _M("total_cached_tokens", "cached tokens", "tokens", "cached (cache-read) tokens, a subset of input; empty when "
       "no source records them", "count", compute=lambda f: f.tokens.cached, subagents=_TOKENS,
       carried="Inspect `model_usage` (`input_tokens_cache_read`)"),
    _M("total_tokens", "total tokens", "tokens", "input + output tokens; empty when either is unknown", "count", "lower",
       "ratio", subagents=_TOKENS, compute=lambda f: (f["total_input_tokens"] + f["total_output_tokens"]
                                                      if f["total_input_tokens"] is not None
                                                      and f["total_output_tokens"] is not None else None),
       carried="a results table's `tokens`"),
    _M("total_cost_usd", "cost per trial", "USD", "recorded cost (final_metrics, steps, Harbor `agent_result`), else "
       "estimated from litellm's offline price map (`metrics.estimated_cost`): each API call at the model that "
       "answered it, `(input − cached − cache writes)·p_in + cached·p_cache_read + cache writes·p_cache_write + "
       "output·p_out`; empty when a model with tokens has no price", "continuous", "lower", "ratio", decimals=3,
       compute=lambda f: f.cost[0], subagents=_TOKENS, carried="Inspect `model_usage`, mcpbr `cost`"),
    _M("cost_estimated", "cost estimated", "flag", "true when `total_cost_usd` came from the price map", "record",
       compute=lambda f: f.cost[1]),
    _M("token_efficiency", "successes per million tokens", "per 1M tokens", "success / total_tokens × 10⁶",
       direction="higher", decimals=2,
       compute=lambda f: (float(f["success"]) / f["total_tokens"] * 1e6
                          if f["total_tokens"] and f["success"] is not None else None)),
    _M("total_steps", "steps", "steps", "ATIF steps (copied context excluded)", "count", "lower", "ratio",
       compute=lambda f: len(f.steps) if f.traj is not None else None, subagents=_STEPS, carried="mcpbr `iterations`"),
    _M("agent_steps", "agent steps", "steps", "steps whose source is the agent", "count", "lower", "ratio",
       compute=lambda f: sum(s.source == "agent" for s in f.steps) if f.traj is not None else None, subagents=_STEPS),
    _M("tool_calls_count", "tool calls", "calls", "tool calls", "count", "lower", "ratio",
       compute=lambda f: f.walk.calls if f.walk else None, subagents=_CALLS,
       carried="mcpbr `tool_calls`, a study's per-trial metrics (CodeScaleBench `task_metrics.json` `tool_calls`)"),
    _M("unique_tools", "distinct tools", "tools", "distinct tool names called", "count",
       compute=lambda f: len(f.tool_names) if f.tool_names is not None else None, subagents=_CALLS),
    _M("tools_per_step", "tool calls per step", "calls/step", "tool calls per agent step", decimals=2,
       compute=lambda f: _ratio(f.walk.calls, f.walk.agent_steps) if f.walk else None,
       subagents="calls and agent steps both counted"),
    _M("steps_per_minute", "steps per minute", "steps/min", "total_steps / (elapsed_sec / 60)", decimals=1,
       compute=lambda f: _ratio(f["total_steps"], f["elapsed_sec"] / 60 if f["elapsed_sec"] else None), subagents=_STEPS),
    _M("elapsed_sec", "wall-clock time", "s", "agent execution time: Harbor's `agent_execution` phase, else trial "
       "start→finish, else first→last step timestamp", "continuous", "lower", "ratio", decimals=1,
       compute=lambda f: f.elapsed, carried="TB1 agent (else trial) start→end, Inspect `total_time`, mcpbr `runtime_seconds`"),
    _M("tool_distribution", "tool distribution", "", "JSON object tool name → calls", "record",
       compute=lambda f: _json(f.tool_names), subagents=_CALLS),
    _M("tool_success_rate", "tool success rate", "share", "1 − errors / calls", direction="higher", decimals=2,
       compute=lambda f: (1 - f["tool_error_count"] / f["tool_calls_count"]
                          if f["tool_calls_count"] and f["tool_error_count"] is not None else None), subagents=_CALLS),
    _M("tool_error_count", "errored tool calls", "calls", "errored calls. An error is the producer's own mark "
       "(`is_error`, `status: error`, Inspect `error`); without one, a result starting `Error`/`Traceback`/"
       "`<tool_use_error>`, a non-zero exit code or `command not found` in the output of a shell (or MCP) call",
       "count", "lower", compute=lambda f: f.walk.errors if f.walk else None, subagents=_CALLS,
       carried="mcpbr `tool_failures`"),
    _M("mcp_tools_used", "distinct MCP tools", "tools", "distinct MCP tools called", "count",
       compute=lambda f: len(f.walk.mcp_by_tool) if f.walk else None, subagents=_CALLS,
       carried="a study's per-trial tool distribution (CodeScaleBench `task_metrics.json` `tool_distribution`)"),
    _M("mcp_tool_calls", "MCP calls", "calls", "MCP calls (prefix `mcp__` or a configured base name: `canvas`, "
       "`init_repository`, `get_dependencies`, `search_code`, `list_entrypoints`, `show_call_graph_neighborhood`); "
       "a call the agent refused for lack of permission never ran and is not counted", "count",
       compute=lambda f: f.walk.mcp_calls if f.walk else None, subagents=_CALLS,
       carried="a study's per-trial metrics (CodeScaleBench `task_metrics.json` `mcp_calls`)"),
    _M("native_tool_calls", "native tool calls", "calls", "tool calls that are not MCP calls, tool discovery "
       "(`ToolSearch`) or MCP calls the agent refused for lack of permission", "count",
       compute=lambda f: f.walk.calls - f.walk.mcp_calls - f.walk.discovery - f.walk.refused_mcp if f.walk else None,
       subagents=_CALLS),
    _M("mcp_discovery_calls", "MCP discovery calls", "calls", "`ToolSearch` calls selecting or searching MCP tools "
       "(`select:mcp__server__tool`; Claude Code 2.1.3xx defers MCP tools behind it): the treatment's tool "
       "being found, not used", "count", compute=lambda f: f.walk.mcp_discovery if f.walk else None, subagents=_CALLS),
    _M("mcp_exposed", "MCP tools reached the model", "flag", "treatment trials of the benchmark runner: an MCP tool was "
       "offered at start (Claude Code `init` event), a server reported `connected`, or an MCP call ran; empty for "
       "baseline trials and other sources. With `mcp_used`, separates the effect of assignment from that of use "
       "(a per-trial flag, not compared between conditions)", "record",
       carried="the benchmark runner's result.json `bench.mcp_exposed`"),
    _M("mcp_used", "MCP tool used", "flag", "treatment trials of the benchmark runner: an MCP call ran (one refused for "
       "lack of permission does not count); empty for baseline trials and other sources", "record",
       carried="the benchmark runner's result.json `bench.mcp_used`"),
    _M("loop_count", "repeated calls", "calls", "calls identical (same name, same canonical arguments) to the call "
       "just before", "count", "lower", compute=lambda f: f.walk.loops if f.walk else None, subagents=_CALLS),
    _M("backtrack_count", "re-edits", "edits", "edits of a file the trial already edited", "count", "lower",
       compute=lambda f: f.walk.backtracks if f.walk else None, subagents=_CALLS),
    _M("exploration_breadth", "files explored", "files", "\\|files read ∪ files edited\\|", "count", "none", "ratio",
       compute=lambda f: len(f.walk.read_files | f.walk.edited_files) if f.walk else None, subagents=_CALLS),
    _M("files_read", "files read", "files", "distinct files read (from tool arguments, and from shell commands: "
       "`cat`, `head`, `sed -n`); a read whose call failed reads no file", "count",
       compute=lambda f: len(f.walk.read_files) if f.walk else None, subagents=_CALLS),
    _M("files_edited", "files edited", "files", "distinct files edited (`sed -i`, `>`/`>>`, `tee`, `cp`/`mv` "
       "targets, `apply_patch` envelopes)", "count",
       compute=lambda f: len(f.walk.edited_files) if f.walk else None, subagents=_CALLS,
       carried="a study's per-trial metrics (CodeScaleBench `task_metrics.json` `files_modified`: distinct files "
               "written by Edit or Write calls; none recorded for a trial without such a call)"),
    _M("grep_before_edit", "search before first edit", "flag", "a search call (search tool or `grep`/`rg`/`find`/"
       "`ls` in a shell) came before the first edit, or with it; empty when nothing was edited", "binary",
       compute=lambda f: f.walk.searched_before_edit if f.walk else None, subagents=_FIRST_EDIT),
    _M("mcp_calls_by_tool", "MCP calls per tool", "", "JSON object MCP tool name → calls; also one column "
       "`mcp_calls__<tool>` per MCP tool seen (name without `mcp__`, lower-cased, other characters than `[a-z0-9_]` "
       "as `_`; 0 for trials with per-tool counts that did not call it, empty for trials without). Without a "
       "trajectory, the MCP tools of the tool distribution the source recorded (CodeScaleBench `task_metrics.json` "
       "`tool_calls_by_name`)", "record", compute=lambda f: _json(f.mcp_by_tool), subagents=_CALLS),
    _M("time_to_first_edit_sec", "time to first edit", "s", "seconds from the timestamp of the root trajectory's "
       "first step (copied context excluded) to the timestamp of the step holding the first edit; empty when "
       "nothing was edited or a timestamp is missing", "continuous", "lower", "ratio", decimals=1,
       exploratory_only=True, compute=lambda f: f.first_edit_seconds, subagents=_FIRST_EDIT),
    _M("steps_to_first_edit", "steps to first edit", "steps", "1-based position among the root trajectory's steps "
       "(copied context excluded) of the step holding the first edit; empty when nothing was edited", "count",
       "lower", "difference", exploratory_only=True,
       compute=lambda f: f.walk.first_edit_position if f.walk else None, subagents=_FIRST_EDIT),
    _M("duplicate_reads", "duplicate reads", "reads", "reads of a file already read with no edit of it in between",
       "count", "lower", "difference", exploratory_only=True,
       compute=lambda f: f.walk.duplicate_reads if f.walk else None, subagents=_CALLS),
    _M("tool_misuse", "tool misuse", "flag", "more than 30 % of calls errored (`MetricsConfig.tool_misuse_error_rate`); "
       "empty when the calls or their errors are unknown", "binary", "lower", subagents=_CALLS,
       compute=lambda f: False if f["tool_calls_count"] == 0 else None
       if f["tool_calls_count"] is None or f["tool_error_count"] is None
       else _flag(f["tool_error_count"] / f["tool_calls_count"] > f.config.tool_misuse_error_rate)),
    _M("infinite_loop", "loop", "flag", "a streak of more than 5 identical consecutive calls "
       "(`MetricsConfig.infinite_loop_streak`)", "binary", "lower", subagents=_CALLS,
       compute=lambda f: _flag(f.walk.calls and f.walk.max_streak > f.config.infinite_loop_streak) if f.walk else None),
    _M("budget_exhaustion", "budget exhaustion", "flag", "failed with more than 80,000 tokens "
       "(`MetricsConfig.budget_exhaustion_tokens`); empty when a failed trial's tokens are unknown", "binary", "lower",
       compute=lambda f: _failed_with(f, "total_tokens", lambda n: n > f.config.budget_exhaustion_tokens)),
    _M("premature_stop", "premature stop", "flag", "failed with fewer than 10 steps "
       "(`MetricsConfig.premature_stop_steps`); empty when a failed trial's steps are unknown", "binary", "lower",
       subagents=_STEPS, compute=lambda f: _failed_with(f, "total_steps", lambda n: n < f.config.premature_stop_steps)),
    _M("context_omission", "context omission", "", "reserved (always empty)", "record"),
] + [
    _M(c, f"{c.removeprefix('calls_')} calls", "calls", f"calls in the taxonomy category `{c.removeprefix('calls_')}` "
       "(tool names of Claude Code, Codex, OpenHands, Terminus, mini-swe-agent, gemini-cli mapped onto one taxonomy "
       "in `analysis_lib/core/tools.py`)", "count", subagents=_CALLS, compute=_category_calls(c.removeprefix("calls_")))
    for c in CATEGORY_IDS
]
METRICS: dict[str, Metric] = {m.id: m for m in _ENTRIES}

# Profile-level quantities derived from the columns; never a column of their own.
DERIVED: dict[str, Metric] = {m.id: m for m in (
    _M("pass_rate", "pass rate (per trial)", "%", "trials that succeeded / trials with an outcome (infrastructure "
       "errors excluded); interval: Wilson at the design-effective size, repetitions of a task being clustered",
       "binary", "higher", "rate", decimals=1),
    _M("resolve_rate", "resolve rate (task majority)", "%", "tasks whose repetitions succeeded by majority (a tie "
       "counts as fail) / tasks with an outcome; interval: Wilson over tasks", "binary", "higher", "rate", decimals=1),
    _M("cost_per_success", "cost per success", "USD", "total cost of a profile's trials / their total successes "
       "(undefined without a success); interval: bootstrap over tasks", "continuous", "lower", "ratio", decimals=3),
)}


def _per_tool(column: str) -> Metric:
    tool = column.removeprefix(MCP_TOOL_PREFIX)
    return Metric(column, f"MCP calls to {tool}", "calls", f"calls of the MCP tool `{tool}` (see mcp_calls_by_tool)",
                  "count", "none", "difference", exploratory_only=True, subagents=_CALLS)


def is_known(metric_id: str) -> bool:
    return metric_id in METRICS or metric_id in DERIVED or metric_id.startswith(MCP_TOOL_PREFIX)


def metric(metric_id: str) -> Metric:
    """The registry entry of a column or derived quantity; ValueError naming the known ids otherwise."""
    if metric_id in METRICS:
        return METRICS[metric_id]
    if metric_id in DERIVED:
        return DERIVED[metric_id]
    if metric_id.startswith(MCP_TOOL_PREFIX):
        return _per_tool(metric_id)
    raise ValueError(f"unknown metric {metric_id!r}; metrics are the columns of metrics_detail.csv "
                     f"(README, Metric reference) or {', '.join(DERIVED)}")


def reference_table() -> str:
    """The README's metric reference: one Markdown row per metric and derived quantity, then the call-order rule."""
    rows = ["| id | label (unit) | definition | subagents | repetitions of a task | compared as |",
            "|---|---|---|---|---|---|"]
    scale = {"ratio": "% change (per-task log ratio)", "difference": "difference B − A", "rate": "difference in points",
             "none": "–"}
    for m in list(METRICS.values()) + list(DERIVED.values()):
        agg = "–" if m.id in DERIVED else m.aggregation
        definition = m.definition + (f". Carried from {m.carried} for sources without a trajectory" if m.carried else "")
        rows.append(f"| `{m.id}` | {m.axis_label} | {definition} | {m.subagents or '–'} | {agg} | "
                    f"{scale[m.scale] if m.testable else '–'} |")
    return "\n".join(rows) + f"\n\n{CALL_ORDER}"
