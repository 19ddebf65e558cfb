"""Helpers of the interactive ``explore`` notebook: filter trials, one trajectory's step timeline, two side by
side, and the A-vs-B explorer (outcome grid and paired trajectory view, :mod:`.pair_view`)."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, display

from ..core import registry
from ..core.trial import Trial
from . import numbers as fmt
from . import pair_view as pv
from .figures import WIDTH_IN, set_style, title
from .live_output import set_outputs
from .tables import _as_bool

__all__ = ["filter_trials", "step_timeline", "plot_step_timeline", "find_trial", "side_by_side", "integer_counts",
           "metric_cell", "metric_table", "show", "pair_explorer", "same_profile_message", "table_html", "figure_html",
           "timeline_table", "filter_html", "timeline_html", "side_by_side_html", "pair_explorer_html"]


def integer_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Count columns (registry kind ``count``) as nullable integers, so tables show 62986, not 62986.0."""
    out = df.copy()
    for c in out.columns:
        if registry.is_known(c) and registry.metric(c).kind == "count":
            values = pd.to_numeric(out[c], errors="coerce")
            if values.dropna().mod(1).eq(0).all():
                out[c] = values.round().astype("Int64")
    return out


# Columns of the explorer's tables that are not metrics, by the name a reader sees.
COLUMN_NAMES = {"task_id": "task", "step_id": "step", "tool_calls": "tool calls", "tool_errors": "errored calls",
                "prompt_tokens": "prompt tokens", "completion_tokens": "completion tokens",
                "cached_tokens": "cached tokens", "difference": f"B {fmt.MINUS} A"}


def metric_cell(metric_id: str, x, *, mean: bool = False, delta: bool = False) -> str:
    """One value of a metric as the explorer prints it, by the registry's precision (:mod:`.numbers`).

    A pass/fail flag reads yes/no; averaged over repetitions (``mean``) it is a pass rate in %, and a
    difference of two such means is in points. ``delta`` signs the value with a real minus.
    """
    kind = registry.metric(metric_id).kind
    rate = kind == "binary" and (mean or delta)
    if delta:
        return fmt.difference(metric_id, x, rate=rate)
    if kind == "binary" and not mean:
        return fmt.DASH if fmt.missing(x) else ("yes" if bool(x) else "no")
    if isinstance(x, str):
        return x
    return fmt.value(metric_id, x, rate=rate)


def metric_table(df: pd.DataFrame, *, means: bool = False) -> pd.DataFrame:
    """``df`` as the explorer shows it: each metric (a column, or a row of a table indexed by metric) named by its
    registry label and unit and printed as text by :func:`metric_cell`; a ``difference`` column is B minus A.
    With ``means`` (values averaged over repetitions) a pass/fail flag is a pass rate."""
    out = df.copy().astype(object)
    by_row = out.index.name in ("metric", "quantity")
    for key in list(out.index if by_row else out.columns):
        if not registry.is_known(str(key)):
            continue
        if by_row:
            out.loc[key] = [metric_cell(str(key), v, mean=means, delta=col == "difference")
                            for col, v in out.loc[key].items()]
        else:
            out[key] = [metric_cell(str(key), v, mean=means) for v in out[key]]
    labels = {k: registry.metric(str(k)).axis_label if registry.is_known(str(k)) else COLUMN_NAMES.get(str(k), k)
              for k in (out.index if by_row else out.columns)}
    if by_row:
        out = out.rename(index=labels)
        out.index.name = None
        return out.rename(columns=COLUMN_NAMES)
    return out.rename(columns=labels)


def same_profile_message(profile_a: str, profile_b: str) -> str | None:
    """A one-line message when A and B are the same profile (nothing to compare), else None."""
    if profile_a == profile_b:
        return f"A and B are both {profile_a!r}: pick two different profiles to compare."
    return None


def show(widget, fallback_html: str, fallback_text: str) -> None:
    """Display a widget with a static HTML and text fallback for a notebook viewed before it is run.

    JupyterLab draws the live widget; a viewer without the widget (or a recorded notebook, whose
    widget views are not stored) shows the HTML, and a terminal the one-line text.
    """
    bundle = dict(widget._repr_mimebundle_())
    bundle["text/html"] = fallback_html
    bundle["text/plain"] = fallback_text
    display(bundle, raw=True)


def filter_trials(metrics: pd.DataFrame, profiles: list[str] | tuple[str, ...] = (),
                  tasks: list[str] | tuple[str, ...] = (), outcome: str = "any") -> pd.DataFrame:
    """Rows of metrics_detail matching the profiles and tasks (empty = all) and the outcome.

    ``outcome`` is one of any, succeeded, failed, infra_error.
    """
    allowed = ("any", "succeeded", "failed", "infra_error")
    if outcome not in allowed:
        raise ValueError(f"outcome={outcome!r}; allowed: {', '.join(allowed)}")
    df = metrics
    if profiles:
        df = df[df["profile"].isin(list(profiles))]
    if tasks:
        df = df[df["task_id"].isin(list(tasks))]
    success = _as_bool(df["success"])
    if outcome == "succeeded":
        df = df[success.fillna(False).astype(bool)]
    elif outcome == "failed":
        df = df[(~success.fillna(True)).astype(bool)]
    elif outcome == "infra_error":
        df = df[success.isna()]
    return df.reset_index(drop=True)


def step_timeline(trial: Trial) -> pd.DataFrame:
    """One row per step of the trial's trajectory: source, tool calls, errored calls, tokens.

    Columns: step_id, source, tools (comma-joined names), tool_calls, tool_errors, prompt_tokens,
    completion_tokens, cached_tokens. Empty when the trial has no trajectory.
    """
    cols = ["step_id", "source", "tools", "tool_calls", "tool_errors", "prompt_tokens", "completion_tokens",
            "cached_tokens"]
    if trial.trajectory is None:
        return pd.DataFrame(columns=cols)
    rows = []
    for s in trial.trajectory.steps:
        rows.append({"step_id": s.step_id, "source": s.source, "tools": ", ".join(c.name for c in s.tool_calls),
                     "tool_calls": len(s.tool_calls), "tool_errors": sum(bool(c.is_error) for c in s.tool_calls),
                     "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
                     "cached_tokens": s.cached_tokens})
    df = pd.DataFrame(rows, columns=cols)
    for c in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df


def plot_step_timeline(timeline: pd.DataFrame, label: str, simulated: bool) -> plt.Figure:
    """Tokens per step (bars: prompt and completion) with tool calls and errored calls marked above."""
    set_style()
    fig, (ax_tools, ax_tok) = plt.subplots(2, 1, figsize=(WIDTH_IN * 2, 3.2), sharex=True,
                                           gridspec_kw={"height_ratios": [1, 2]})
    x = timeline["step_id"].to_numpy()
    ax_tools.bar(x, timeline["tool_calls"], color="C0", label="tool calls")
    ax_tools.bar(x, timeline["tool_errors"], color="C3", label="errored calls")
    ax_tools.set_ylabel("calls")
    ax_tools.legend(fontsize=6, loc="upper right")
    prompt = timeline["prompt_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float)
    completion = timeline["completion_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float)
    ax_tok.bar(x, prompt, color="C1", label="prompt tokens")
    ax_tok.bar(x, completion, bottom=prompt, color="C2", label="completion tokens")
    ax_tok.set_xlabel("step")
    ax_tok.set_ylabel("tokens")
    ax_tok.legend(fontsize=6, loc="upper left")
    ax_tools.set_title(title(f"Step timeline: {label}", simulated))
    fig.tight_layout()
    return fig


def find_trial(trials: list[Trial], profile: str, task_id: str, repetition: int | None = None) -> Trial | None:
    """The trial of ``profile`` on ``task_id`` (lowest repetition unless given), or None."""
    hits = [t for t in trials if t.profile == profile and t.task_id == task_id
            and (repetition is None or t.repetition == repetition)]
    return min(hits, key=lambda t: (t.repetition, t.run_id)) if hits else None


def side_by_side(metrics: pd.DataFrame, task_id: str, profile_a: str, profile_b: str,
                 columns: list[str] | None = None) -> pd.DataFrame:
    """The same task under two profiles: mean of each metric over repetitions, one column per profile."""
    if profile_a == profile_b:
        raise ValueError(f"profile_b={profile_b!r} equals profile_a: pick two different profiles")
    columns = columns or ["success", "total_tokens", "total_cost_usd", "agent_steps", "tool_calls_count",
                          "tool_error_count", "mcp_tool_calls", "files_read", "files_edited", "elapsed_sec"]
    sub = metrics[(metrics["task_id"] == task_id) & metrics["profile"].isin([profile_a, profile_b])].copy()
    if "success" in sub:
        sub["success"] = _as_bool(sub["success"]).astype("Float64")
    cols = [c for c in columns if c in sub]
    vals = sub[["profile"] + cols].copy()
    for c in cols:
        # Plain floats: a nullable count unknown under both profiles (a trial that never reached the model) is NaN.
        vals[c] = pd.to_numeric(vals[c], errors="coerce").astype(float)
    wide = vals.groupby("profile")[cols].mean().T
    wide = wide.reindex(columns=[profile_a, profile_b])
    wide.index.name = "metric"
    wide["difference"] = wide[profile_b] - wide[profile_a]
    return wide.astype(float).replace([np.inf, -np.inf], np.nan)


GRID_SORT_LABELS = {"B ahead first": "difference", "A ahead first": "-difference", "by task": "task"}


def _pair_output(out, trials: list[Trial], profile_a: str, profile_b: str, task_id: str | None,
                 repetition: int | None, simulated: bool) -> None:
    """Draw the paired view of the selection into an Output widget (or a one-line reason)."""
    message = same_profile_message(profile_a, profile_b)
    if message is None and (task_id is None or repetition is None):
        message = f"No task has trials of both {profile_a!r} and {profile_b!r}."
    if message is None:
        a, b = pv.find_pair(trials, profile_a, profile_b, task_id, repetition)
        if a is None or b is None:
            message = f"{task_id} repetition {repetition}: no trial of {profile_a if a is None else profile_b!r}."
    if message is not None:
        set_outputs(out, HTML(f"<p class='pv-message'><b>{message}</b></p>"))
        return
    view = pv.pair_view(a, b)
    figs = [pv.plot_cumulative(view, simulated)] if len(view.lane_a) or len(view.lane_b) else []
    set_outputs(out, *figs, HTML(pv.render_pair_html(view)))
    for fig in figs:
        plt.close(fig)


def _grid_box(metrics: pd.DataFrame, profile_a: str, profile_b: str, sort: str, on_pick) -> list:
    """The outcome grid's legend and its buttons (task rows; one coloured cell per repetition and arm); a click calls
    ``on_pick``. Nothing when A and B are the same profile: the paired view below says why."""
    if same_profile_message(profile_a, profile_b):
        return []
    grid = pv.outcome_grid(metrics, profile_a, profile_b, sort)
    reps = sorted(grid["repetition"].unique())
    children = [widgets.HTML("<b>task</b>"), widgets.HTML("<b>B&minus;A</b>")]
    children += [widgets.HTML(f"<b>{r}{arm}</b>") for r in reps for arm in ("A", "B")]
    for task, g in grid.groupby("task_id", sort=False):
        children += [widgets.HTML(f"<span title='{task}'>{task}</span>"),
                     widgets.HTML(pv.grid_difference(g["difference"].iloc[0]))]
        for row in g.sort_values(["repetition", "arm"]).itertuples():
            b = widgets.Button(description="✓" if row.outcome == "succeeded" else "",
                               tooltip=f"{row.profile}, {task}, repetition {row.repetition}: {pv.OUTCOME_LABELS[row.outcome]}",
                               layout=widgets.Layout(width="26px", height="20px", padding="0"))
            b.style.button_color = pv.OUTCOME_COLORS[row.outcome]
            b.add_class("pv-cell")
            b.add_class(f"pv-cell-{row.arm}")
            b.on_click(lambda _b, t=task, r=int(row.repetition): on_pick(t, r))
            children.append(b)
    legend = widgets.HTML(pv.grid_legend_html(profile_a, profile_b, reps, interactive=True))
    return [legend, widgets.GridBox(children, layout=widgets.Layout(
        grid_template_columns=f"minmax(160px, 260px) 70px repeat({2 * len(reps)}, 28px)", grid_gap="1px 2px",
        max_height="320px", overflow="auto"))]


def pair_explorer(trials: list[Trial], metrics: pd.DataFrame, simulated: bool, profile_a: str,
                  profile_b: str | None = None, configurations: Mapping[str, tuple[str, str]] | None = None):
    """The A-vs-B explorer: profile, task and repetition pickers, the outcome grid and the paired view.

    ``profile_a``: the study's baseline (it opens as A; nothing here chooses one). Clicking a grid cell selects that
    task and repetition; choosing the same profile twice shows a message instead of a comparison. ``configurations``
    (a study with configurations: configuration -> its control and treatment profiles,
    :meth:`~analysis_lib.study.study.Study.configuration_pairs`) adds a configuration picker before A and B, whose
    choices are then that configuration's arms. Returns the widget (display it with :func:`show`).
    """
    profiles = sorted(metrics["profile"].unique())
    if profile_a not in profiles:
        raise ValueError(f"profile A {profile_a!r} is not a profile of these trials ({', '.join(map(str, profiles))}): "
                         "pass the study's baseline")
    config0 = next((c for c, ab in (configurations or {}).items() if profile_a in ab), next(iter(configurations or {}), None))
    if configurations and config0 is not None:
        profiles = list(configurations[config0])  # A and B are arms of one configuration
    a0 = profile_a if profile_a in profiles else profiles[0]  # a configuration's own control when A is another's
    b0 = profile_b if profile_b in profiles and profile_b != a0 else next((p for p in profiles if p != a0), a0)
    dd_a = widgets.Dropdown(options=profiles, value=a0, description="A")
    dd_b = widgets.Dropdown(options=profiles, value=b0, description="B")
    dd_config = widgets.Dropdown(options=list(configurations or {}), value=config0, description="configuration",
                                 layout=widgets.Layout(width="auto"))
    dd_sort = widgets.Dropdown(options=list(GRID_SORT_LABELS.items()), value="difference", description="sort grid")
    dd_task = widgets.Dropdown(description="task")
    dd_rep = widgets.Dropdown(description="repetition")
    grid_holder = widgets.VBox()
    out = widgets.Output()
    # The pairs of the chosen profiles, read once per choice (pair_options opens each trial's result.json).
    state: dict = {"busy": False, "opts": None}

    def configuration_changed(_=None) -> None:
        """A new configuration: its control as A and its treatment as B, then everything below."""
        a, b = (configurations or {})[dd_config.value]
        state["switching"] = True
        dd_a.options, dd_b.options = [a, b], [a, b]
        dd_a.value, dd_b.value = a, b
        state["switching"] = False
        options_changed()

    def options_changed(_=None) -> None:
        """New profiles: the tasks and repetitions both ran, then the grid and the view."""
        if state.get("switching"):
            return
        opts = pv.pair_options(trials, dd_a.value, dd_b.value) if dd_a.value != dd_b.value else pv.pair_options([], "", "")
        state["busy"], state["opts"] = True, opts
        tasks = sorted(opts["task_id"].unique())
        dd_task.options = tasks
        dd_task.value = dd_task.value if dd_task.value in tasks else (tasks[0] if tasks else None)
        task_changed()
        state["busy"] = False
        grid_holder.children = _grid_box(metrics, dd_a.value, dd_b.value, dd_sort.value, pick)
        redraw()

    def task_changed() -> None:
        opts = state["opts"]
        reps = sorted(int(r) for r in opts.loc[opts["task_id"] == dd_task.value, "repetition"])
        pairs = {int(r.repetition): r.pair for r in opts[opts["task_id"] == dd_task.value].itertuples()}
        was = state["busy"]
        state["busy"] = True
        dd_rep.options = [(f"{r}" + (f" (schedule pair {pairs[r]})" if not pd.isna(pairs[r]) else ""), r) for r in reps]
        dd_rep.value = dd_rep.value if dd_rep.value in reps else (reps[0] if reps else None)
        state["busy"] = was

    def redraw(_=None) -> None:
        if not state["busy"]:
            _pair_output(out, trials, dd_a.value, dd_b.value, dd_task.value, dd_rep.value, simulated)

    def pick(task_id: str, repetition: int) -> None:
        state["busy"] = True
        dd_task.value = task_id
        task_changed()
        dd_rep.value = repetition
        state["busy"] = False
        redraw()

    def on_task(_change) -> None:
        if not state["busy"]:
            state["busy"] = True
            task_changed()
            state["busy"] = False
            redraw()

    dd_config.observe(configuration_changed, "value")
    dd_a.observe(options_changed, "value")
    dd_b.observe(options_changed, "value")
    dd_sort.observe(lambda _c: setattr(grid_holder, "children",
                                       _grid_box(metrics, dd_a.value, dd_b.value, dd_sort.value, pick)), "value")
    dd_task.observe(on_task, "value")
    dd_rep.observe(redraw, "value")
    options_changed()
    pickers = [dd_config, dd_a, dd_b, dd_sort] if configurations else [dd_a, dd_b, dd_sort]
    box = widgets.VBox([widgets.HBox(pickers), grid_holder, widgets.HBox([dd_task, dd_rep]), out])
    box.add_class("pv-explorer")
    return box


# -- One rendering per section: the live widget draws it, and the same HTML is the stored notebook's static view. --

def table_html(df: pd.DataFrame, *, index: bool = False) -> str:
    """A table of text (from :func:`metric_table`) as HTML, left-aligned where JupyterLab would right-align it."""
    return df.to_html(index=index, border=0, classes="pv-table", na_rep=fmt.DASH, escape=True)


def figure_html(fig: plt.Figure) -> str:
    """A figure as an inline PNG (no metadata), so one HTML output holds the figure and its table; closes the figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return f"<img alt='figure' src='data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}'>"


def timeline_table(timeline: pd.DataFrame) -> pd.DataFrame:
    """The step timeline as text: readable column names, tokens with thousands separators, unknown as a dash."""
    out = timeline.astype(object).copy()
    for c in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        out[c] = [fmt.number(v) for v in timeline[c]]
    return out.rename(columns=COLUMN_NAMES)


def filter_html(metrics: pd.DataFrame, columns: list[str], profiles: list[str] | tuple[str, ...] = (),
                tasks: list[str] | tuple[str, ...] = (), outcome: str = "any", limit: int = 30) -> str:
    """The trials that pass :func:`filter_trials`, their ``columns`` by label and precision (the first ``limit``)."""
    df = filter_trials(metrics, profiles, tasks, outcome)
    shown = f" (the first {limit} shown)" if len(df) > limit else ""
    return f"<p>{fmt.plural(len(df), 'trial')}{shown}</p>" + table_html(metric_table(df[columns].head(limit)))


def timeline_html(trials: list[Trial], profile: str, task_id: str, repetition: int, simulated: bool,
                  max_rows: int = 20) -> str:
    """One trajectory's step timeline (figure) and its steps with tool calls (the first ``max_rows``), or why not."""
    trial = find_trial(trials, profile, task_id, repetition)
    if trial is None:
        return f"<p>No trial of {html.escape(profile)} on {html.escape(task_id)}, repetition {repetition}.</p>"
    timeline = step_timeline(trial)
    head = (f"<p>{html.escape(profile)} / {html.escape(task_id)} / repetition {repetition}: "
            f"{fmt.plural(len(timeline), 'step')}, {fmt.plural(int(timeline['tool_calls'].sum()), 'tool call')}, "
            f"{int(timeline['tool_errors'].sum())} errored. Steps with tool calls:</p>")
    fig = plot_step_timeline(timeline, f"{profile} / {task_id} / rep {repetition}", simulated)
    return figure_html(fig) + head + table_html(timeline_table(timeline[timeline["tool_calls"] > 0].head(max_rows)))


def side_by_side_html(metrics: pd.DataFrame, task_id: str, profile_a: str, profile_b: str) -> str:
    """:func:`side_by_side` by label, unit and precision (a pass rate for success), or the same-profile message."""
    message = same_profile_message(profile_a, profile_b)
    if message:
        return f"<p class='pv-message'><b>{html.escape(message)}</b></p>"
    table = metric_table(side_by_side(metrics, task_id, profile_a, profile_b), means=True)
    return (f"<p>{html.escape(task_id)}: mean over repetitions; B {fmt.MINUS} A is {html.escape(profile_b)} minus "
            f"{html.escape(profile_a)}.</p>" + table_html(table, index=True))


def pair_explorer_html(trials: list[Trial], metrics: pd.DataFrame, profile_a: str, profile_b: str,
                       simulated: bool = False) -> str:
    """The explorer as a notebook viewed without a kernel shows it: the outcome grid and the first pair, static."""
    message = same_profile_message(profile_a, profile_b)
    opts = pv.pair_options(trials, profile_a, profile_b) if message is None else pd.DataFrame()
    if message is not None or opts.empty:
        return f"<p class='pv-message'><b>{html.escape(message or f'No task has trials of both {profile_a!r} and {profile_b!r}.')}</b></p>"
    first = opts.iloc[0]
    a, b = pv.find_pair(trials, profile_a, profile_b, first["task_id"], int(first["repetition"]))
    view = pv.pair_view(a, b)
    figure = figure_html(pv.plot_cumulative(view, simulated)) if len(view.lane_a) or len(view.lane_b) else ""
    return (pv.render_grid_html(pv.outcome_grid(metrics, profile_a, profile_b)) + figure
            + pv.render_pair_html(view, results=False))
