"""Two trials of the same task side by side: aligned step lanes, cumulative usage, where they part,
the files only one arm touched, and each arm's outcome and tests.

Plain functions return frames and dataclasses (tested); ``render_*`` turn them into HTML that needs
no JavaScript: each step is a ``<details>`` element, so clicking it shows its tool calls, arguments
and a trimmed result even in a notebook viewed without a kernel. Works for every ingested format:
trials without a trajectory get an empty lane and keep their outcome.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from numbers import Real
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import orjson
import pandas as pd

from ..core import registry
from ..core.tools import DEFAULT_MCP_TOOLS, categorize, files_touched
from ..core.trial import Step, Trial
from ..metrics.trial_metrics import trial_metrics
from . import numbers as fmt
from .figures import WIDTH_IN, set_style, title
from .tables import _as_bool

__all__ = [
    "CATEGORY_COLORS", "OUTCOME_COLORS", "OUTCOME_LABELS", "GRID_SORTS", "PairView", "step_lane", "step_detail",
    "divergence",
    "files_compared", "arm_outcomes", "pair_view", "schedule_pair", "pair_options", "find_pair",
    "outcome_grid", "grid_difference", "grid_legend_html", "quantity_label", "quantity_value", "plot_cumulative",
    "render_grid_html", "render_pair_html"
]

# Okabe-Ito colours (distinguishable with colour blindness), light enough for black text; "message" is
# a step without tool calls.
CATEGORY_COLORS = {"read": "#56B4E9", "search": "#F0E442", "edit": "#E69F00", "execute": "#4FBF9A",
                   "mcp": "#CC79A7", "other": "#BBBBBB", "message": "#E8E8E8"}
OUTCOME_COLORS = {"succeeded": "#009E73", "failed": "#D55E00", "infra_error": "#999999", "missing": "#FFFFFF"}
OUTCOME_LABELS = {"succeeded": "succeeded", "failed": "failed", "infra_error": "infrastructure error (no outcome)",
                  "missing": "no trial"}
ERROR_COLOR = "#D55E00"
GRID_SORTS = ("difference", "-difference", "task")
RESULT_CHARS = 600  # result text shown per call when a step is opened
ARGUMENT_CHARS = 600
LANE_COLUMNS = ["position", "step_id", "source", "category", "tools", "n_calls", "mcp_calls", "errors", "tokens",
                "cost_usd", "cum_tokens", "cum_cost_usd", "summary", "signature"]


def _trim(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


def _step_category(categories: list[str]) -> str:
    """The step's colour: MCP wins (it is what A/B studies compare), then edit, execute, the most frequent."""
    if not categories:
        return "message"
    for cat in ("mcp", "edit", "execute"):
        if cat in categories:
            return cat
    return max(set(categories), key=lambda c: (categories.count(c), c))


def _key_argument(args: dict[str, Any]) -> str:
    for k in ("file_path", "path", "command", "cmd", "pattern", "query", "keystrokes", "url"):
        v = args.get(k)
        if isinstance(v, (str, list)) and v:
            return " ".join(v) if isinstance(v, list) else v
    return ""


def _args_json(args: dict[str, Any]) -> str:
    return orjson.dumps(args, option=orjson.OPT_SORT_KEYS, default=str).decode()


def _root_steps(trial: Trial) -> list[Step]:
    """The root trajectory's steps outside copied context (what the metrics count)."""
    if trial.trajectory is None:
        return []
    return [s for s in trial.trajectory.steps if not s.is_copied_context]


def step_lane(trial: Trial, mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS) -> pd.DataFrame:
    """One row per root step: colour category, tools, MCP and errored calls, step and cumulative tokens and cost.

    Tokens are prompt (cached included) plus completion of agent steps, each API call (usage key)
    counted once, as in ``metrics.trajectory_tokens``; ``cost_usd`` is what the step reports (NA: not said).
    """
    rows, seen_keys = [], set()
    cum_tokens, cum_cost, any_cost = 0, 0.0, False
    for pos, s in enumerate(_root_steps(trial), start=1):
        cats = [categorize(c.name, c.arguments, mcp_tools) for c in s.tool_calls]
        counted = s.source == "agent" and (s.usage_key is None or s.usage_key not in seen_keys)
        if s.usage_key is not None:
            seen_keys.add(s.usage_key)
        tokens = (s.prompt_tokens or 0) + (s.completion_tokens or 0) if counted else 0
        cost = s.cost_usd if counted else None
        cum_tokens += tokens
        if cost is not None:
            cum_cost += cost
            any_cost = True
        first = s.tool_calls[0] if s.tool_calls else None
        if first is not None:
            summary = f"{first.name} {_key_argument(first.arguments)}".strip()
            if len(s.tool_calls) > 1:
                summary += f" (+{len(s.tool_calls) - 1})"
        else:
            summary = s.message.strip().splitlines()[0] if s.message.strip() else ""
        rows.append({
            "position": pos, "step_id": s.step_id, "source": s.source, "category": _step_category(cats),
            "tools": ", ".join(c.name for c in s.tool_calls), "n_calls": len(s.tool_calls),
            "mcp_calls": cats.count("mcp"), "errors": sum(bool(c.is_error) for c in s.tool_calls),
            "tokens": tokens, "cost_usd": cost, "cum_tokens": cum_tokens, "cum_cost_usd": cum_cost if any_cost else None,
            "summary": _trim(summary, 80),
            # What the step did, for divergence: who acted, which tools with which arguments.
            "signature": _args_json({"source": s.source, "calls": [[c.name, c.arguments] for c in s.tool_calls]}),
        })
    df = pd.DataFrame(rows, columns=LANE_COLUMNS)
    for c in ("position", "step_id", "n_calls", "mcp_calls", "errors", "tokens", "cum_tokens"):
        df[c] = df[c].astype("Int64")
    for c in ("cost_usd", "cum_cost_usd"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Float64")
    return df


def step_detail(trial: Trial, position: int, mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS) -> dict[str, Any]:
    """The step at 1-based ``position`` of :func:`step_lane`: message and each call's name, arguments and trimmed result."""
    steps = _root_steps(trial)
    if not 1 <= position <= len(steps):
        raise ValueError(f"position={position}; allowed: 1..{len(steps)} (steps of {trial.profile}/{trial.task_id})")
    s = steps[position - 1]
    calls = [{"name": c.name, "category": categorize(c.name, c.arguments, mcp_tools),
              "arguments": _trim(orjson.dumps(c.arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2,
                                              default=str).decode(), ARGUMENT_CHARS),
              "is_error": c.is_error, "result": _trim(c.output, RESULT_CHARS), "result_chars": c.output_chars}
             for c in s.tool_calls]
    return {"position": position, "step_id": s.step_id, "source": s.source, "message": _trim(s.message, RESULT_CHARS),
            "observations": [_trim(o, RESULT_CHARS) for o in s.observations], "calls": calls}


def divergence(lane_a: pd.DataFrame, lane_b: pd.DataFrame) -> int | None:
    """First position where the arms differ (another actor, tool or argument, or one lane ended); None if identical."""
    sig_a, sig_b = list(lane_a["signature"]), list(lane_b["signature"])
    for i, (x, y) in enumerate(zip(sig_a, sig_b, strict=False), start=1):
        if x != y:
            return i
    return None if len(sig_a) == len(sig_b) else min(len(sig_a), len(sig_b)) + 1


def _files(trial: Trial, mcp_tools: frozenset[str]) -> tuple[set[str], set[str]]:
    reads, edits = set(), set()
    for s in _root_steps(trial):
        for c in s.tool_calls:
            r, e = files_touched(c.name, c.arguments, categorize(c.name, c.arguments, mcp_tools))
            reads.update(r)
            edits.update(e)
    return reads, edits


def files_compared(trial_a: Trial, trial_b: Trial, mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS) -> dict[str, list[str]]:
    """Files read or edited by one arm and not by the other (sorted), and those both edited."""
    ra, ea = _files(trial_a, mcp_tools)
    rb, eb = _files(trial_b, mcp_tools)
    return {"read_only_by_a": sorted(ra - rb), "read_only_by_b": sorted(rb - ra),
            "edited_only_by_a": sorted(ea - eb), "edited_only_by_b": sorted(eb - ea), "edited_by_both": sorted(ea & eb)}


def _outcome(success: Any) -> str:
    if success is None or (isinstance(success, float) and pd.isna(success)) or success is pd.NA:
        return "infra_error"
    return "succeeded" if bool(success) else "failed"


OUTCOME_ROWS = ["outcome", "reward", "tests_passed", "tests_failed", "tests_total", "total_tokens", "total_cost_usd",
                "agent_steps", "tool_calls_count", "tool_error_count", "mcp_tool_calls", "elapsed_sec"]


def arm_outcomes(trial_a: Trial, trial_b: Trial) -> pd.DataFrame:
    """Outcome, tests and totals of both arms (rows: quantities; columns ``A``, ``B``), from ``trial_metrics``."""
    cols = {}
    for arm, t in (("A", trial_a), ("B", trial_b)):
        m = trial_metrics(t)
        m["outcome"] = _outcome(m.get("success"))
        cols[arm] = [m.get(k) for k in OUTCOME_ROWS]
    return pd.DataFrame(cols, index=pd.Index(OUTCOME_ROWS, name="quantity"), dtype=object)


def _failed_tests(trial: Trial) -> list[str]:
    return [r.name for r in trial.tests or [] if r.status == "failed"]


@dataclass
class PairView:
    """Everything the paired view shows for two trials (arm A and arm B)."""

    a: Trial
    b: Trial
    lane_a: pd.DataFrame
    lane_b: pd.DataFrame
    divergence: int | None
    files: dict[str, list[str]]
    outcomes: pd.DataFrame
    failed_tests: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def pair_view(trial_a: Trial, trial_b: Trial, mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS) -> PairView:
    """The paired view of two trials; a trial without a trajectory gets an empty lane and a warning line."""
    lane_a, lane_b = step_lane(trial_a, mcp_tools), step_lane(trial_b, mcp_tools)
    warnings = [f"{arm}: {t.profile}/{t.task_id} has no step-level trajectory ({t.source_format}); outcome only"
                for arm, t in (("A", trial_a), ("B", trial_b)) if t.trajectory is None]
    if trial_a.task_id != trial_b.task_id:
        warnings.append(f"the arms ran different tasks: {trial_a.task_id} and {trial_b.task_id}")
    both = len(lane_a) and len(lane_b)
    return PairView(trial_a, trial_b, lane_a, lane_b, divergence(lane_a, lane_b) if both else None,
                    files_compared(trial_a, trial_b, mcp_tools), arm_outcomes(trial_a, trial_b),
                    {"A": _failed_tests(trial_a), "B": _failed_tests(trial_b)}, warnings)


def schedule_pair(trial: Trial) -> int | None:
    """The schedule's pair number the benchmark runner wrote into the trial's ``result.json`` (``bench.pair``), if any."""
    path = trial.paths.get("result")
    if not path:
        return None
    try:
        data = orjson.loads(Path(path).read_bytes())
        return int(data["bench"]["pair"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pair_options(trials: Iterable[Trial], profile_a: str, profile_b: str) -> pd.DataFrame:
    """(task_id, repetition) where both profiles have a trial, with the schedule pair when the runner recorded one."""
    by_key: dict[tuple[str, int], dict[str, Trial]] = {}
    for t in trials:
        if t.profile in (profile_a, profile_b):
            by_key.setdefault((t.task_id, t.repetition), {}).setdefault(t.profile, t)
    rows = [{"task_id": task, "repetition": rep, "pair": schedule_pair(arms[profile_b])}
            for (task, rep), arms in sorted(by_key.items()) if profile_a in arms and profile_b in arms]
    df = pd.DataFrame(rows, columns=["task_id", "repetition", "pair"])
    df["repetition"] = df["repetition"].astype("Int64")
    df["pair"] = pd.to_numeric(df["pair"]).astype("Int64")
    return df


def find_pair(trials: Iterable[Trial], profile_a: str, profile_b: str, task_id: str,
              repetition: int) -> tuple[Trial | None, Trial | None]:
    """The two trials of (task_id, repetition) under profile A and profile B (None where absent)."""
    found: dict[str, Trial] = {}
    for t in trials:
        if t.task_id == task_id and t.repetition == repetition and t.profile in (profile_a, profile_b):
            found.setdefault(t.profile, t)
    return found.get(profile_a), found.get(profile_b)


def outcome_grid(metrics: pd.DataFrame, profile_a: str, profile_b: str, sort: str = "difference") -> pd.DataFrame:
    """Tidy task x repetition x arm outcomes with the per-task difference (B's pass rate minus A's).

    ``sort``: ``difference`` (B ahead first), ``-difference`` (A ahead first) or ``task``. A
    repetition one arm lacks is ``missing``.
    """
    if sort not in GRID_SORTS:
        raise ValueError(f"sort={sort!r}; allowed: {', '.join(GRID_SORTS)}")
    if profile_a == profile_b:
        raise ValueError(f"profile_b={profile_b!r} equals profile_a: pick two different profiles")
    sub = metrics[metrics["profile"].isin([profile_a, profile_b])].copy()
    sub["success"] = _as_bool(sub["success"])
    sub["repetition"] = pd.to_numeric(sub["repetition"]).astype(int)
    tasks, reps = sorted(sub["task_id"].unique()), sorted(sub["repetition"].unique())
    idx = pd.MultiIndex.from_product([tasks, reps, ["A", "B"]], names=["task_id", "repetition", "arm"])
    sub["arm"] = sub["profile"].map({profile_a: "A", profile_b: "B"})
    sub = sub.drop_duplicates(["task_id", "repetition", "arm"]).set_index(["task_id", "repetition", "arm"])
    grid = pd.DataFrame(index=idx).join(sub[["success"]]).reset_index()
    grid["profile"] = grid["arm"].map({"A": profile_a, "B": profile_b})
    present = grid.set_index(["task_id", "repetition", "arm"]).index.isin(sub.index)
    grid["outcome"] = [("missing" if not p else _outcome(None if pd.isna(s) else s))
                       for p, s in zip(present, grid["success"], strict=True)]
    rate = grid.assign(s=grid["success"].astype("Float64")).groupby(["task_id", "arm"])["s"].mean().unstack("arm")
    diff = (rate.get("B") - rate.get("A")).astype(float)
    grid["difference"] = grid["task_id"].map(diff).round(3)
    order = {"task": ["task_id"], "difference": ["difference", "task_id"], "-difference": ["difference", "task_id"]}[sort]
    asc = {"task": [True], "difference": [False, True], "-difference": [True, True]}[sort]
    grid = grid.sort_values(order + ["repetition", "arm"], ascending=asc + [True, True], kind="stable",
                            na_position="last")
    return grid[["task_id", "repetition", "arm", "profile", "outcome", "difference"]].reset_index(drop=True)


def grid_difference(d: float) -> str:
    """A task's B−A of the grid: the difference of pass rates in points, as the comparisons print one."""
    return "" if fmt.missing(d) else fmt.difference("success", d, rate=True)


def grid_legend_html(profile_a: str, profile_b: str, reps: Iterable[int], interactive: bool = False) -> str:
    """What the outcome grid's colours, column headers and B−A column mean (the widget's grid and the static one)."""
    reps = sorted(int(r) for r in reps)
    swatches = " ".join(f"<span style='background:{OUTCOME_COLORS[k]};border:1px solid #999;padding:0 6px'>"
                        f"{'&#10003;' if k == 'succeeded' else '&nbsp;'}</span> {OUTCOME_LABELS[k]}"
                        for k in OUTCOME_COLORS)
    heads = f"{reps[0]}A &hellip; {reps[-1]}B" if reps else "1A"
    return (f"<div class='pv-legend' style='font-size:12px;line-height:1.6'><b>Outcome grid</b>: one row per task, one "
            f"cell per trial. A = {_e(profile_a)}, B = {_e(profile_b)}.<br>"
            f"Colours: {swatches}.<br>"
            f"Columns {heads}: repetition &times; arm (2B = repetition 2 of arm B). "
            f"<b>B&minus;A</b>: the task's pass rate under B minus under A, in percentage points "
            f"(+100 pp: B solved every repetition, A none)."
            f"{' Click a cell to open that pair below.' if interactive else ''}</div>")


def plot_cumulative(view: PairView, simulated: bool) -> plt.Figure:
    """Cumulative tokens (top) and reported cost (bottom) of both arms on one step axis, divergence marked."""
    set_style()
    fig, (ax_t, ax_c) = plt.subplots(2, 1, figsize=(WIDTH_IN * 2, 3.0), sharex=True)
    for arm, lane, color in (("A", view.lane_a, "C0"), ("B", view.lane_b, "C1")):
        t = view.a if arm == "A" else view.b
        if len(lane):
            x = lane["position"].to_numpy(dtype=float)
            ax_t.step(x, lane["cum_tokens"].to_numpy(dtype=float), where="post", color=color, label=f"{arm}: {t.profile}")
            cost = lane["cum_cost_usd"].to_numpy(dtype=float, na_value=float("nan"))
            ax_c.step(x, cost, where="post", color=color, label=f"{arm}: {t.profile}")
    for ax in (ax_t, ax_c):
        if view.divergence is not None:
            ax.axvline(view.divergence, color="0.4", linestyle=":", linewidth=1)
    ax_t.set_ylabel("tokens")
    ax_c.set_ylabel("cost (USD)")
    ax_c.set_xlabel("step")
    ax_t.legend(fontsize=6, loc="upper left")
    note = f", arms part at step {view.divergence}" if view.divergence is not None else ""
    ax_t.set_title(title(f"Cumulative usage: {view.a.task_id} rep {view.a.repetition}{note}", simulated))
    fig.tight_layout()
    return fig


# -- HTML ------------------------------------------------------------------------------------------

def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def quantity_label(quantity: str) -> str:
    """A row of the outcomes table by its registry label and unit (``outcome`` is the trial's outcome in words)."""
    return registry.metric(quantity).axis_label if registry.is_known(quantity) else quantity.replace("_", " ")


def quantity_value(quantity: str, value: Any) -> str:
    """A value of the outcomes table as text: the outcome in words, a flag as yes/no, a number by its registry precision."""
    if fmt.missing(value):
        return fmt.DASH
    if quantity == "outcome":
        return OUTCOME_LABELS.get(str(value), str(value))
    if isinstance(value, bool) or (registry.is_known(quantity) and registry.metric(quantity).kind == "binary"):
        return "yes" if bool(value) else "no"
    if registry.is_known(quantity) and isinstance(value, Real):
        return fmt.value(quantity, value)
    return str(value)


def render_grid_html(grid: pd.DataFrame, max_tasks: int = 60) -> str:
    """The outcome grid as a static HTML table with its legend: one row per task, a coloured cell per repetition and arm."""
    reps = sorted(grid["repetition"].unique())
    profiles = grid.drop_duplicates("arm").set_index("arm")["profile"].to_dict()
    head = "".join(f"<th style='padding:2px 4px'>{r}{arm}</th>" for r in reps for arm in ("A", "B"))
    body = []
    for task, g in list(grid.groupby("task_id", sort=False))[:max_tasks]:
        cells = "".join(
            f"<td title='{_e(row.profile)}, repetition {row.repetition}: {_e(OUTCOME_LABELS[row.outcome])}' "
            f"style='background:{OUTCOME_COLORS[row.outcome]};border:1px solid #ccc;min-width:28px;text-align:center'>"
            f"{'&#10003;' if row.outcome == 'succeeded' else ''}</td>"
            for row in g.sort_values(["repetition", "arm"]).itertuples())
        body.append(f"<tr><td style='text-align:left;padding-right:8px'>{_e(task)}</td>"
                    f"<td style='text-align:right;padding-right:8px'>{grid_difference(g['difference'].iloc[0])}</td>"
                    f"{cells}</tr>")
    more = f"<p>{grid['task_id'].nunique() - max_tasks} more tasks not shown.</p>" if grid["task_id"].nunique() > max_tasks else ""
    return (f"<div class='pv-grid'>{grid_legend_html(profiles.get('A', ''), profiles.get('B', ''), reps)}"
            f"<table style='border-collapse:collapse;font-size:12px'><tr><th style='text-align:left'>task</th>"
            f"<th>B&minus;A</th>{head}</tr>" + "".join(body) + f"</table>{more}</div>")


def _step_cell(trial: Trial, row: Any, mcp_tools: frozenset[str], diverged: bool, results: bool = True) -> str:
    d = step_detail(trial, int(row.position), mcp_tools)
    color = CATEGORY_COLORS[row.category]
    border = f"3px solid {ERROR_COLOR}" if row.errors else "1px solid #bbb"
    marks = ("<b title='MCP call'> [MCP]</b>" if row.mcp_calls else "") + \
            (f"<b style='color:{ERROR_COLOR}' title='errored call'> &#10007;{int(row.errors)}</b>" if row.errors else "")
    parts = []
    if d["message"]:
        parts.append(f"<div><i>message</i><pre style='white-space:pre-wrap;margin:2px 0'>{_e(d['message'])}</pre></div>")
    for c in d["calls"]:
        err = f" <b style='color:{ERROR_COLOR}'>error</b>" if c["is_error"] else ""
        parts.append(f"<div class='pv-call'><b>{_e(c['name'])}</b> ({_e(c['category'])}){err}"
                     f"<pre style='white-space:pre-wrap;margin:2px 0;background:#f6f6f6'>{_e(c['arguments'])}</pre>"
                     f"<i>result</i> ({c['result_chars']:,} characters)"
                     + (f"<pre style='white-space:pre-wrap;margin:2px 0;background:#f6f6f6'>{_e(c['result'])}</pre>"
                        if results else " shown when the notebook runs") + "</div>")
    for o in d["observations"]:
        parts.append(f"<div><i>observation</i><pre style='white-space:pre-wrap;margin:2px 0'>{_e(o)}</pre></div>")
    detail = "".join(parts) or "<i>no message or tool call</i>"
    # Inline left alignment: JupyterLab right-aligns table cells of HTML outputs.
    return (f"<td style='vertical-align:top;text-align:left;padding:1px 4px;{'background:#fff7d6;' if diverged else ''}'>"
            f"<details class='pv-step'><summary style='cursor:pointer;text-align:left;background:{color};border:{border};"
            f"padding:1px 4px;border-radius:3px;list-style-position:inside;overflow:hidden;white-space:nowrap;"
            f"text-overflow:ellipsis'><span style='float:right;color:#222;padding-left:6px'>{int(row.cum_tokens):,} tok</span>"
            f"<span class='pv-source'>{_e(row.source)}</span> {_e(row.summary)}{marks}</summary>"
            f"<div class='pv-detail' style='text-align:left;padding:4px;border:1px solid #ddd;font-size:11px;"
            f"background:#fff'>{detail}</div>"
            f"</details></td>")


def render_pair_html(view: PairView, mcp_tools: frozenset[str] = DEFAULT_MCP_TOOLS, max_steps: int = 400,
                     results: bool = True) -> str:
    """The paired view as HTML: outcomes, divergence, files only one arm touched, then the two step lanes.

    ``results=False`` leaves the calls' result texts out (a stored notebook output: results carry
    durations and paths of the agent's machine that would churn or leak).
    """
    a, b = view.a, view.b
    out = [f"<div class='pv-pair'><h4 style='margin:4px 0'>{_e(a.task_id)}, repetition {a.repetition}: "
           f"A = {_e(a.profile)} vs B = {_e(b.profile)}</h4>"]
    for w in view.warnings:
        out.append(f"<p style='color:#8a5a00'>{_e(w)}</p>")
    rows = "".join(f"<tr><td style='text-align:left'>{_e(quantity_label(q))}</td>"
                   f"<td>{_e(quantity_value(q, view.outcomes.at[q, 'A']))}</td>"
                   f"<td>{_e(quantity_value(q, view.outcomes.at[q, 'B']))}</td></tr>" for q in view.outcomes.index)
    for arm in ("A", "B"):
        failed = view.failed_tests.get(arm) or []
        if failed:
            shown = ", ".join(_e(n) for n in failed[:8]) + (f" (+{len(failed) - 8})" if len(failed) > 8 else "")
            rows += f"<tr><td style='text-align:left'>failed tests {arm}</td><td colspan='2' style='text-align:left'>{shown}</td></tr>"
    out.append(f"<table class='pv-outcomes' style='font-size:12px'><tr><th></th><th>A: {_e(a.profile)}</th>"
               f"<th>B: {_e(b.profile)}</th></tr>{rows}</table>")
    if view.divergence is not None:
        out.append(f"<p class='pv-divergence'><b>First divergence: step {view.divergence}</b> "
                   f"(steps before it are the same actor, tools and arguments in both arms; highlighted below).</p>")
    elif len(view.lane_a) and len(view.lane_b):
        out.append("<p class='pv-divergence'><b>The two trajectories take the same steps.</b></p>")
    f = view.files
    labels = {"read_only_by_a": "read only by A", "read_only_by_b": "read only by B", "edited_only_by_a":
              "edited only by A", "edited_only_by_b": "edited only by B", "edited_by_both": "edited by both"}
    items = "".join(f"<li>{label} ({len(f[k])}): {', '.join(_e(p) for p in f[k][:12])}"
                    f"{f' (+{len(f[k]) - 12})' if len(f[k]) > 12 else ''}</li>" for k, label in labels.items() if f[k])
    out.append(f"<ul class='pv-files' style='font-size:12px'>{items or '<li>no file differences</li>'}</ul>")
    legend = " ".join(f"<span style='background:{c};border:1px solid #bbb;padding:0 6px'>{k}</span>"
                      for k, c in CATEGORY_COLORS.items())
    out.append(f"<p style='font-size:11px'>{legend} <span style='border:3px solid {ERROR_COLOR};padding:0 4px'>"
               f"errored call</span> [MCP] = MCP call. Click a step to see its calls, arguments and result.</p>")
    n = max(len(view.lane_a), len(view.lane_b))
    body = []
    for i in range(min(n, max_steps)):
        diverged = view.divergence is not None and i + 1 == view.divergence
        cells = []
        for trial, lane in ((a, view.lane_a), (b, view.lane_b)):
            cells.append(_step_cell(trial, lane.iloc[i], mcp_tools, diverged, results) if i < len(lane) else "<td></td>")
        body.append(f"<tr><td style='vertical-align:top;text-align:right;color:#666'>{i + 1}</td>{''.join(cells)}</tr>")
    more = f"<p>{n - max_steps} more steps not shown.</p>" if n > max_steps else ""
    out.append(f"<table class='pv-lanes' style='width:100%;table-layout:fixed;font-size:12px;text-align:left'>"
               f"<colgroup><col style='width:3em'><col><col></colgroup>"
               f"<tr><th>step</th><th style='text-align:left'>A: {_e(a.profile)} ({len(view.lane_a)} steps)</th>"
               f"<th style='text-align:left'>B: {_e(b.profile)} ({len(view.lane_b)} steps)</th></tr>"
               + "".join(body) + f"</table>{more}</div>")
    return "".join(out)
