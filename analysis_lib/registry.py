"""The metric registry: one entry per quantity, read by everything that names, tests or prints one.

A metric's id is its column in ``metrics_detail.csv``. Its entry says what it means, its unit,
which direction is better, how the repetitions of one task are combined before two profiles are
compared, on which scale a comparison is reported, and how it is printed (label, decimals). The
analysis plan is validated against it, the README's metric reference is generated from it
(``python tools/metric_reference.py``), and tables, axis labels and TeX macros take their
labels and precision from it, so one quantity has one name and one definition everywhere.

Three profile-level quantities are not columns but are derived from them, and are named apart
from the per-trial column they come from: ``pass_rate`` (share of trials that succeeded),
``resolve_rate`` (share of tasks whose repetitions' majority succeeded) and
``cost_per_success`` (total cost over total successes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Metric", "METRICS", "DERIVED", "MCP_TOOL_PREFIX", "metric", "is_known", "reference_table"]

MCP_TOOL_PREFIX = "mcp_calls__"

Kind = Literal["binary", "continuous", "count", "record"]


@dataclass(frozen=True)
class Metric:
    """One metric: id (= column), display label, unit, definition, direction, aggregation and printing."""

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
    def testable(self) -> bool:
        return self.kind in ("binary", "continuous", "count")


_M = Metric
_ENTRIES = [
    _M("success", "success", "flag", "reward == 1.0. A trial whose harness raised counts as a failure only when its "
       "verifier still produced a reward; with no reward it is an infrastructure error (`infra_error`), `success` is "
       "empty and it is left out of rates", "binary", "higher", "rate"),
    _M("reward", "reward", "", "verifier reward: Harbor `verifier_result.rewards`, else `reward.txt`, else "
       "`reward.json` (flat `reward` key, the only number, or nested `final_score.result/total`)", decimals=2),
    _M("tests_passed", "tests passed", "tests", "CTRF tests with status passed", "count"),
    _M("tests_failed", "tests failed", "tests", "CTRF tests with status failed", "count"),
    _M("tests_total", "tests", "tests", "CTRF tests of the trial", "count"),
    _M("tests_passed_ratio", "share of tests passed", "share", "tests_passed / tests_total", decimals=2,
       direction="higher"),
    _M("total_input_tokens", "input tokens", "tokens", "prompt tokens in ATIF's sense (cached included). A "
       "trajectory's `final_metrics` win over the sum of its steps (they include subagents and calls without a step); "
       "the last segment of a continuation chain holds the cumulative totals; an API call repeated on several steps or "
       "lines is counted once", "count", "lower", "ratio"),
    _M("total_output_tokens", "output tokens", "tokens", "completion tokens", "count", "lower", "ratio"),
    _M("total_cached_tokens", "cached tokens", "tokens", "cached (cache-read) tokens, a subset of input", "count"),
    _M("total_tokens", "total tokens", "tokens", "input + output tokens", "count", "lower", "ratio"),
    _M("total_cost_usd", "cost per trial", "USD", "recorded cost (final_metrics, steps, Harbor `agent_result`), else "
       "estimated from litellm's offline price map as `(input − cached)·p_in + cached·p_cache + output·p_out`",
       "continuous", "lower", "ratio", decimals=3),
    _M("cost_estimated", "cost estimated", "flag", "true when `total_cost_usd` came from the price map", "record"),
    _M("token_efficiency", "successes per million tokens", "per 1M tokens", "success / total_tokens × 10⁶",
       direction="higher", decimals=2),
    _M("total_steps", "steps", "steps", "ATIF steps (copied context excluded)", "count", "lower", "ratio"),
    _M("agent_steps", "agent steps", "steps", "steps whose source is the agent", "count", "lower", "ratio"),
    _M("tool_calls_count", "tool calls", "calls", "tool calls, subagents' included", "count", "lower", "ratio"),
    _M("unique_tools", "distinct tools", "tools", "distinct tool names called", "count"),
    _M("tools_per_step", "tool calls per step", "calls/step", "tool calls per agent step", decimals=2),
    _M("elapsed_sec", "wall-clock time", "s", "agent execution time: Harbor's `agent_execution` phase, else trial "
       "start→finish, else first→last step timestamp", "continuous", "lower", "ratio", decimals=1),
    _M("steps_per_minute", "steps per minute", "steps/min", "total_steps / (elapsed_sec / 60)", decimals=1),
    _M("tool_distribution", "tool distribution", "", "JSON object tool name → calls", "record"),
    _M("tool_success_rate", "tool success rate", "share", "1 − errors / calls", direction="higher", decimals=2),
    _M("tool_error_count", "errored tool calls", "calls", "errored calls. An error is the producer's own mark "
       "(`is_error`, `status: error`, Inspect `error`); without one, a result starting `Error`/`Traceback`/"
       "`<tool_use_error>`, a non-zero exit code or `command not found` in the output of a shell (or MCP) call",
       "count", "lower"),
    _M("mcp_tools_used", "distinct MCP tools", "tools", "distinct MCP tools called", "count"),
    _M("mcp_tool_calls", "MCP calls", "calls", "MCP calls (prefix `mcp__` or a configured base name: `canvas`, "
       "`init_repository`, `get_dependencies`, `search_code`, `list_entrypoints`, `show_call_graph_neighborhood`); "
       "a call the agent refused for lack of permission never ran and is not counted", "count"),
    _M("native_tool_calls", "native tool calls", "calls", "tool calls that are not MCP calls, tool discovery "
       "(`ToolSearch`) or MCP calls the agent refused for lack of permission", "count"),
    _M("mcp_discovery_calls", "MCP discovery calls", "calls", "`ToolSearch` calls selecting or searching MCP tools "
       "(`select:mcp__server__tool`; Claude Code 2.1.3xx defers MCP tools behind it): the treatment's tool "
       "being found, not used", "count"),
    _M("mcp_exposed", "MCP tools reached the model", "flag", "treatment trials of the benchmark runner: an MCP tool was "
       "offered at start (Claude Code `init` event), a server reported `connected`, or an MCP call ran; empty for "
       "baseline trials and other sources. With `mcp_used`, separates the effect of assignment from that of use "
       "(a per-trial flag, not compared between conditions)", "record"),
    _M("mcp_used", "MCP tool used", "flag", "treatment trials of the benchmark runner: an MCP call ran (one refused for "
       "lack of permission does not count); empty for baseline trials and other sources", "record"),
    _M("loop_count", "repeated calls", "calls", "calls identical (same name, same canonical arguments) to the call "
       "just before", "count", "lower"),
    _M("backtrack_count", "re-edits", "edits", "edits of a file the trial already edited", "count", "lower"),
    _M("files_read", "files read", "files", "distinct files read (from tool arguments, and from shell commands: "
       "`cat`, `head`, `sed -n`)", "count"),
    _M("files_edited", "files edited", "files", "distinct files edited (`sed -i`, `>`/`>>`, `tee`, `cp`/`mv` "
       "targets, `apply_patch` envelopes)", "count"),
    _M("exploration_breadth", "files explored", "files", "\\|files read ∪ files edited\\|", "count", "none", "ratio"),
    _M("grep_before_edit", "search before first edit", "flag", "a search call (search tool or `grep`/`rg`/`find`/"
       "`ls` in a shell) came before the first edit; empty when nothing was edited", "binary"),
    _M("mcp_calls_by_tool", "MCP calls per tool", "", "JSON object MCP tool name → calls; also one column "
       "`mcp_calls__<tool>` per MCP tool seen (name without `mcp__`, lower-cased, other characters than `[a-z0-9_]` "
       "as `_`; 0 for trials with a trajectory that did not call it)", "record"),
    _M("time_to_first_edit_sec", "time to first edit", "s", "seconds from the timestamp of the root trajectory's "
       "first step (copied context excluded) to the timestamp of the step holding the first edit; empty when the "
       "root trajectory never edits or a timestamp is missing", "continuous", "lower", "ratio", decimals=1,
       exploratory_only=True),
    _M("steps_to_first_edit", "steps to first edit", "steps", "1-based position of that step among the root "
       "trajectory's steps (copied context excluded); empty when it never edits", "count", "lower", "difference",
       exploratory_only=True),
    _M("duplicate_reads", "duplicate reads", "reads", "reads of a file already read with no edit of it in between "
       "(subagents' calls included, in call order)", "count", "lower", "difference", exploratory_only=True),
    _M("tool_misuse", "tool misuse", "flag", "more than 30 % of calls errored", "binary", "lower"),
    _M("infinite_loop", "loop", "flag", "a streak of more than 5 identical consecutive calls", "binary", "lower"),
    _M("budget_exhaustion", "budget exhaustion", "flag", "failed with more than 80,000 tokens", "binary", "lower"),
    _M("premature_stop", "premature stop", "flag", "failed with fewer than 10 steps", "binary", "lower"),
    _M("context_omission", "context omission", "", "reserved (always empty)", "record"),
] + [
    _M(f"calls_{c}", f"{c} calls", "calls", f"calls in the taxonomy category `{c}` (tool names of Claude Code, "
       "Codex, OpenHands, Terminus, mini-swe-agent, gemini-cli mapped onto one taxonomy in `analysis_lib/tools.py`)",
       "count")
    for c in ("read", "search", "edit", "execute", "mcp", "other")
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
                  "count", "none", "difference", exploratory_only=True)


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
    """The README's metric reference: one Markdown row per metric and derived quantity."""
    rows = ["| id | label (unit) | definition | repetitions of a task | compared as |", "|---|---|---|---|---|"]
    scale = {"ratio": "% change (per-task log ratio)", "difference": "difference B − A", "rate": "difference in points",
             "none": "–"}
    for m in list(METRICS.values()) + list(DERIVED.values()):
        agg = "–" if m.id in DERIVED else m.aggregation
        rows.append(f"| `{m.id}` | {m.axis_label} | {m.definition} | {agg} | {scale[m.scale] if m.testable else '–'} |")
    return "\n".join(rows)
