"""The paper's figures: one seaborn style, a colour-blind-safe palette, column width, reproducible files.

Every figure is 3.3 in wide (one column of a two-column paper), uses seaborn's "colorblind"
palette, computes its own intervals (no seaborn bootstrap, so nothing random is drawn) and is saved
as PNG and PDF with the metadata that carries dates and versions removed, so that the same data
give byte-identical files. When the runs are simulated, the title says "simulated data".
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

# No matplotlib.use() here: in a notebook the inline backend must stay; headless runs fall back to Agg.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .. import stats
from ..core import registry
from ..core.fileio import atomic_write_bytes
from ..inference.comparisons import POINT_SCALES, per_task_value, repetition_aggregate, task_pairs, usable_trials
from ..inference.pooling import Pooled
from .numbers import comparison_unit, number, p_value

WIDTH_IN = 3.3
PALETTE = "colorblind"
# PNG/PDF metadata keys that hold versions or dates; None removes them (byte reproducibility).
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}

__all__ = ["set_style", "save_figure", "remove_figure", "plot_rates", "per_task_changes", "plot_per_task_changes",
           "task_outcomes", "plot_task_outcomes", "forest_rows", "plot_forest", "FOREST_NOTE", "plot_tool_mix",
           "plot_codecanvas", "title", "pooled_forest_rows", "plot_pooled_forest"]


def set_style() -> None:
    """Apply the one style of every figure (seaborn paper context, white grid, colorblind palette)."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE, font_scale=0.9,
                  rc={"figure.dpi": 100, "savefig.dpi": 200, "font.family": "DejaVu Sans",
                      "axes.titlesize": 8, "pdf.fonttype": 42, "svg.hashsalt": "analysis_lib"})


def title(text: str, simulated: bool) -> str:
    """Figure title, marked when the data are simulated."""
    return f"{text} (simulated data)" if simulated else text


def profile_colors(profiles: list[str]) -> dict[str, tuple]:
    """A stable colour per profile: sorted profile names take the palette in order.

    Pass the study's full profile list and hand the result to every figure, so a profile keeps
    its colour across figures.
    """
    colors = sns.color_palette(PALETTE, n_colors=max(len(profiles), 1))
    return {p: colors[i] for i, p in enumerate(sorted(profiles))}


def save_figure(fig: plt.Figure, out_dir: str | Path, name: str) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.png`` and ``.pdf`` atomically, without date/version metadata."""
    paths = []
    for ext, meta in (("png", PNG_METADATA), ("pdf", PDF_METADATA)):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, metadata=meta, bbox_inches="tight")
        paths.append(atomic_write_bytes(Path(out_dir) / f"{name}.{ext}", buf.getvalue()))
    return paths


def remove_figure(out_dir: str | Path, name: str) -> None:
    """Delete ``name``'s PNG and PDF: a figure not drawn this run must not survive from an earlier one."""
    for ext in ("png", "pdf"):
        (Path(out_dir) / f"{name}.{ext}").unlink(missing_ok=True)


# Task names longer than this are shortened in the middle on an axis (their start and their suffix stay).
TASK_LABEL_CHARS = 30


def task_label(task_id: str, limit: int = TASK_LABEL_CHARS) -> str:
    """A task id as a tick label: shortened in the middle past ``limit`` characters, so that the labels leave the
    plot its width at a readable size (``element-web-unread-indicators-diverge-fix-001`` -> ``element-web-unrea…-fix-001``)."""
    if len(task_id) <= limit:
        return task_id
    tail = max(8, limit // 3)
    return task_id[: limit - tail - 1] + "…" + task_id[-tail:]


def _wrap(text: str, width: int = 52) -> str:
    """A long axis label on two lines, so that it does not widen the figure beyond the column."""
    return textwrap.fill(text, width) if len(text) > width else text


def _figure(height: float, *, labels_inside: bool = False) -> tuple[plt.Figure, plt.Axes]:
    """A figure one column wide. ``labels_inside``: long tick labels (task names) take room from the axes instead of
    widening the saved figure, which the paper would then shrink, labels and all, to fit the column."""
    set_style()
    return plt.subplots(figsize=(WIDTH_IN, height), layout="constrained" if labels_inside else None)


def plot_rates(rates: pd.DataFrame, simulated: bool, colors: dict | None = None) -> plt.Figure:
    """Per profile: pass rate per trial (task-clustered 95 % CI) and resolve rate per task (Wilson over tasks).

    ``rates`` is :func:`analysis_lib.inference.rates.profile_rates`. Two quantities, two markers, one legend.
    """
    fig, ax = _figure(0.9 + 0.45 * len(rates))
    colors = colors or profile_colors(list(rates["profile"]))
    for i, r in enumerate(rates.itertuples()):
        for off, est, lo, hi, marker in ((-0.13, r.pass_rate, r.pass_rate_low, r.pass_rate_high, "o"),
                                         (0.13, r.resolve_rate, r.resolve_rate_low, r.resolve_rate_high, "s")):
            if pd.isna(est):
                continue
            ax.errorbar(100 * est, i + off, xerr=[[100 * (est - lo)], [100 * (hi - est)]], fmt=marker,
                        color=colors[r.profile], capsize=2, markersize=4)
        ax.annotate(f"{r.successes}/{r.n_outcome} trials, {r.tasks_resolved}/{r.n_tasks} tasks",
                    (100 * max(r.pass_rate_high, r.resolve_rate_high), i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=6)
    ax.set_yticks(range(len(rates)), list(rates["profile"]))
    ax.set_xlim(0, 135)
    ax.set_xticks(range(0, 101, 20))
    ax.invert_yaxis()
    handles = [plt.Line2D([], [], color="0.3", marker=m, linestyle="", markersize=4) for m in ("o", "s")]
    ax.legend(handles, [registry.DERIVED["pass_rate"].label, registry.DERIVED["resolve_rate"].label], fontsize=6, loc="lower center",
              bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    ax.set_xlabel("rate (%), 95% CI")
    ax.set_title(title("Pass and resolve rates per profile", simulated), pad=14)
    fig.tight_layout()
    return fig


def _planned_rows(comparisons: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The comparison rows of ``metric`` with an estimate, sensitivity restatements left out (one per pair)."""
    return comparisons[(comparisons["metric"] == metric) & comparisons["estimate"].notna()
                       & (comparisons["tier"] != "sensitivity")]


def per_task_changes(comparisons: pd.DataFrame, metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per task and compared profile: B's change against A in %, on the per-task values the estimate pairs
    (:func:`analysis_lib.inference.comparisons.task_pairs` with the row's ``repetitions``: medians under ``majority``,
    the registry's mean under ``all``).

    Columns: task_id, profile, a, b, change_pct; tasks where A or B is not positive are left out (as in the
    estimate). The tasks come sorted by their mean change over the profiles.
    """
    trials = usable_trials(metrics)
    rows = []
    for r in _planned_rows(comparisons, metric).itertuples():
        pairs = task_pairs(trials, metric, r.profile_a, r.profile_b, str(r.repetitions)).dropna(subset=["a", "b"])
        pairs = pairs[(pairs["a"] > 0) & (pairs["b"] > 0)]
        rows += [{"task_id": t, "profile": r.profile_b, "a": a, "b": b, "change_pct": 100.0 * (b / a - 1.0)}
                 for t, a, b in zip(pairs["task_id"], pairs["a"], pairs["b"], strict=True)]
    out = pd.DataFrame(rows, columns=["task_id", "profile", "a", "b", "change_pct"])
    order = out.groupby("task_id")["change_pct"].mean().sort_values().index
    out["task_id"] = pd.Categorical(out["task_id"], categories=list(order), ordered=True)
    return out.sort_values(["task_id", "profile"]).reset_index(drop=True)


def plot_per_task_changes(changes: pd.DataFrame, comparisons: pd.DataFrame, metric: str, simulated: bool,
                          colors: dict | None = None) -> plt.Figure:
    """Per-task change vs the baseline, tasks sorted by effect; the dashed line is each profile's estimate."""
    tasks = list(changes["task_id"].cat.categories) if len(changes) else []
    fig, ax = _figure(0.9 + 0.12 * len(tasks), labels_inside=True)  # 6 pt labels need 0.12 in a row
    profiles = sorted(changes["profile"].unique())
    colors = colors or profile_colors(profiles)
    pos = {t: i for i, t in enumerate(tasks)}
    for j, profile in enumerate(profiles):
        sub = changes[changes["profile"] == profile]
        offset = (j - (len(profiles) - 1) / 2) * 0.25
        ax.scatter(sub["change_pct"], [pos[t] + offset for t in sub["task_id"]], s=9, color=colors[profile],
                   label=profile, zorder=3)
        planned = _planned_rows(comparisons, metric)
        est = planned[planned["profile_b"] == profile]["estimate"]
        if len(est) and pd.notna(est.iloc[0]):
            ax.axvline(est.iloc[0], color=colors[profile], linestyle="--", linewidth=0.9)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_yticks(range(len(tasks)), [task_label(str(t)) for t in tasks], fontsize=6)
    ax.invert_yaxis()
    planned = _planned_rows(comparisons, metric)
    label = planned["label"].iloc[0] if len(planned) else metric
    value = per_task_value(repetition_aggregate(metric, str(planned["repetitions"].iloc[0]))) if len(planned) else "per-task value"
    ax.set_xlabel(_wrap(f"{label}: change vs baseline of the {value} (%)", 36))
    ax.legend(fontsize=6, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    # Over the figure, not the axes: long task names push the axes right, and a title centred on them would overflow.
    fig.suptitle(title("Per-task change (dashed: estimate)", simulated), fontsize=plt.rcParams["axes.titlesize"])
    return fig


def task_outcomes(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per task and profile: passes, repetitions with an outcome, and the majority verdict (a tie fails)."""
    agg = stats.aggregate_repetitions(usable_trials(metrics), "success", binary=True)
    agg["share"] = agg["n_pass"] / agg["n_reps"]
    order = agg.groupby("task_id")["share"].mean().sort_values(ascending=False).index
    agg["task_id"] = pd.Categorical(agg["task_id"], categories=list(order), ordered=True)
    return agg.sort_values(["task_id", "profile"]).reset_index(drop=True)


def plot_task_outcomes(outcomes: pd.DataFrame, simulated: bool) -> plt.Figure:
    """Tasks by profiles: the share of repetitions that passed, with the count; tasks sorted by success."""
    wide = outcomes.pivot(index="task_id", columns="profile", values="share")
    text = outcomes.assign(t=outcomes["n_pass"].astype(int).astype(str) + "/" + outcomes["n_reps"].astype(str)) \
        .pivot(index="task_id", columns="profile", values="t")
    wide.index = [task_label(str(t)) for t in wide.index]
    text.index = wide.index
    fig, ax = _figure(max(2.0, 0.9 + 0.14 * len(wide)))  # a few tasks still leave room for the title and colour bar
    sns.heatmap(wide, ax=ax, cmap="Blues", vmin=0, vmax=1, annot=text, fmt="", annot_kws={"fontsize": 5},
                cbar_kws={"label": "share of repetitions passed"}, linewidths=0.3, linecolor="white")
    ax.set_ylabel("")
    ax.set_xlabel("")
    ax.tick_params(axis="y", labelsize=6)
    # Profile names are wider than a heatmap column: slanted, they never run into each other.
    ax.tick_params(axis="x", labelsize=6, rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
        label.set_rotation_mode("anchor")
    ax.set_title(_wrap(title("Per-task outcomes (majority of repetitions decides)", simulated), 44))
    fig.tight_layout()
    return fig


def forest_rows(comparisons: pd.DataFrame, tiers: tuple[str, ...] = ("primary", "secondary")) -> pd.DataFrame:
    """The rows a forest plot draws: the engine's estimates and intervals, unchanged, on their own scales.

    Rates are differences in percentage points (x 100), ratio metrics % changes; rows without an estimate are
    dropped. Columns: label, metric, profile_b, scale, estimate, low, high, significant, p_adjusted.
    """
    df = comparisons[comparisons["tier"].isin(tiers) & comparisons["estimate"].notna()
                     & comparisons["scale"].isin([*POINT_SCALES, "ratio", "cost_per_success"])].copy()
    k = np.where(df["scale"].isin(POINT_SCALES), 100.0, 1.0)
    # A study with configurations compares one treatment in each: its configuration names the row.
    b = df["configuration"] if "configuration" in df else df["profile_b"]
    out = pd.DataFrame({"label": df["label"].astype(str) + ": " + b.astype(str),
                        "metric": df["metric"], "profile_b": df["profile_b"], "scale": df["scale"],
                        "estimate": df["estimate"] * k, "low": df["ci_low"] * k, "high": df["ci_high"] * k,
                        "significant": df["significant"], "p_adjusted": df["p_adjusted"]})
    return out.reset_index(drop=True)


FOREST_NOTE = ("Filled markers are significant after the plan's correction (adjusted p at the right). Intervals are "
               "unadjusted 95% intervals of each estimate. The resolve-rate interval is Tango's score interval; the "
               "planned McNemar exact test is more conservative, so that interval can exclude 0 while the test "
               "does not reject (the exact odds-ratio interval, which agrees with the test, is in the table). An arrow at "
               "the edge marks an interval that continues beyond it (too few tasks to bound it).")


def plot_forest(comparisons: pd.DataFrame, simulated: bool, colors: dict | None = None,
                tiers: tuple[str, ...] = ("primary", "secondary")) -> plt.Figure:
    """Forest plot of the comparisons: resolve-rate differences (pp) and % changes, one panel each."""
    rows = forest_rows(comparisons, tiers)
    panels = [(s, rows[rows["scale"].isin(s)]) for s in (["rate"], ["pass_rate"], ["ratio", "cost_per_success"])]
    panels = [(s, r.reset_index(drop=True)) for s, r in panels if len(r)]
    set_style()
    heights = [max(len(r), 1) for _, r in panels] or [1]
    fig, axes = plt.subplots(len(heights), 1, figsize=(WIDTH_IN, 0.7 + 0.22 * sum(heights) + 0.4 * len(heights)),
                             squeeze=False, gridspec_kw={"height_ratios": heights})
    colors = colors or profile_colors(sorted(rows["profile_b"].unique()))
    for ax, (scale, sub) in zip(axes[:, 0], panels, strict=True):
        # An interval unbounded on one side (too few tasks for a 95% interval) runs to the panel's edge
        # and ends in an arrow there; the axis is scaled to the finite values only.
        finite = np.r_[sub["estimate"], sub["low"], sub["high"], 0.0]
        finite = finite[np.isfinite(finite)]
        lo, hi = float(finite.min()), float(finite.max())
        pad = 0.08 * (hi - lo or 1.0)
        lo, hi = lo - pad, hi + pad
        for i, r in enumerate(sub.itertuples()):
            sig = str(r.significant).strip().lower() in {"true", "1", "1.0"}
            low, high = max(r.low, lo), min(r.high, hi)
            ax.errorbar(r.estimate, i, xerr=[[r.estimate - low], [high - r.estimate]], fmt="o", capsize=2,
                        markersize=4, color=colors[r.profile_b], mfc=colors[r.profile_b] if sig else "white")
            for edge, unbounded, mark in ((lo, r.low < lo, "<"), (hi, r.high > hi, ">")):
                if unbounded:
                    ax.plot(edge, i, marker=mark, markersize=4, color=colors[r.profile_b], clip_on=False)
            ax.annotate(p_value(r.p_adjusted, prefix=True).replace("p", "adj. p", 1), (1.0, i),
                        xycoords=("axes fraction", "data"), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=5.5)
        ax.axvline(0, color="0.3", linewidth=0.8)
        ax.set_yticks(range(len(sub)), list(sub["label"]), fontsize=5.5)
        ax.set_ylim(-0.6, len(sub) - 0.4)
        ax.invert_yaxis()
        ax.set_xlim(lo, hi)
        pp = comparison_unit("rate")
        ax.set_xlabel({"rate": f"difference in resolve rate per task ({pp}), 95% CI",
                       "pass_rate": f"difference in pass@1, mean over tasks ({pp}), 95% CI"}.get(
                           scale[0], "typical per-task change (%), 95% CI"), fontsize=6.5)
        ax.tick_params(axis="x", labelsize=6)
    bases = sorted(comparisons["profile_a"].astype(str).unique())
    # Several baselines (one per configuration) would not fit a title: each row's B is compared with its own A.
    # "Against baseline baseline" says the name twice when the baseline arm is called so.
    one = bases[0] if len(bases) == 1 else None
    axes[0, 0].set_title(title(f"Each B against its own baseline A ({len(bases)} baselines)" if one is None else
                               f"Against {one}" if one.lower() == "baseline" else f"Against baseline {one}", simulated))
    fig.tight_layout()
    return fig


POOLED_AXES = {"rate": "difference in resolve rate per task", "pass_rate": "difference in pass@1, mean over tasks",
               "ratio": "typical per-task change", "cost_per_success": "change in cost per success"}


def pooled_forest_rows(pooled: Pooled) -> pd.DataFrame:
    """The rows a pooled forest plot draws, on the printed scale (rate differences in pp, ratios in %): one per
    configuration (``kind`` entry, with its weight), the primary pooled estimate (``pooled``) and the prediction
    interval (``prediction``). Columns: label, kind, estimate, low, high, weight."""
    k = 100.0 if pooled.comparison_scale in POINT_SCALES else 1.0
    e = pooled.effects
    rows = [{"label": r.label, "kind": "entry", "estimate": k * r.estimate, "low": k * r.ci_low, "high": k * r.ci_high,
             "weight": r.weight} for r in e.itertuples()]
    p = pooled.primary
    rows.append({"label": "Pooled (REML, HKSJ)", "kind": "pooled", "estimate": k * p["estimate"],
                 "low": k * p["ci_low"], "high": k * p["ci_high"], "weight": np.nan})
    rows.append({"label": f"{pooled.confidence:.0%} prediction interval", "kind": "prediction",
                 "estimate": k * p["estimate"], "low": k * p["pi_low"], "high": k * p["pi_high"], "weight": np.nan})
    return pd.DataFrame(rows, columns=["label", "kind", "estimate", "low", "high", "weight"])


def plot_pooled_forest(pooled: Pooled, simulated: bool, what: str | None = None) -> plt.Figure:
    """Forest plot of one metric pooled across configurations (or studies): each one's estimate and interval
    (marker area by its weight), the pooled diamond and the prediction interval for a new one, with the
    heterogeneity under the axis. ``what`` names the entries in the title (default: configurations)."""
    rows = pooled_forest_rows(pooled)
    unit = comparison_unit(pooled.comparison_scale, pooled.unit)
    fig, ax = _figure(1.1 + 0.24 * len(rows))
    color = sns.color_palette(PALETTE, 2)
    finite = np.r_[rows["low"], rows["high"], 0.0]
    finite = finite[np.isfinite(finite)]
    lo, hi = float(finite.min()), float(finite.max())
    pad = 0.06 * (hi - lo or 1.0)
    digits = 1 if unit in ("pp", "%") else 2
    for i, r in enumerate(rows.itertuples()):
        y = i + (0.5 if r.kind != "entry" else 0)  # a gap between the configurations and what pools them
        if r.kind == "entry":
            ax.plot([r.low, r.high], [y, y], color="0.25", linewidth=0.9)
            ax.plot(r.estimate, y, marker="s", color=color[0], markersize=2.5 + 5 * np.sqrt(r.weight / 100), linestyle="")
        elif r.kind == "pooled":
            ax.fill([r.low, r.estimate, r.high, r.estimate], [y, y - 0.3, y, y + 0.3], color=color[1], zorder=3)
        elif np.isfinite(r.low) and np.isfinite(r.high):
            ax.plot([r.low, r.high], [y, y], color=color[1], linewidth=2.2, solid_capstyle="butt")
        bounds = f"[{number(r.low, digits, sign=True)}, {number(r.high, digits, sign=True)}]"
        text = ("needs 3 or more" if not np.isfinite(r.low) else bounds if r.kind == "prediction"
                else f"{number(r.estimate, digits, sign=True)} {bounds}")
        ax.annotate(text, (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=5.5)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ys = [i + (0.5 if kind != "entry" else 0) for i, kind in enumerate(rows["kind"])]
    ax.set_yticks(ys, list(rows["label"]), fontsize=5.5)
    ax.set_ylim(max(ys) + 0.6, -0.6)
    ax.set_xlim(lo - pad, hi + pad)
    p = pooled.primary
    het = (f"τ² = {p['tau2']:.3g} [{p['tau2_low']:.3g}, {p['tau2_high']:.3g}], I² = {100 * p['I2']:.0f} % "
           f"[{100 * p['I2_low']:.0f}, {100 * p['I2_high']:.0f}], Q = {p['Q']:.2f} (df {int(p['Q_df'])}, "
           f"{p_value(p['Q_p'], prefix=True)})")
    axis = POOLED_AXES.get(pooled.comparison_scale, f"difference in {pooled.metric}")
    ax.set_xlabel(f"{axis} ({unit}), {pooled.confidence:.0%} CI\n{het}", fontsize=6)
    ax.tick_params(axis="x", labelsize=6)
    ax.set_title(title(f"{pooled.label}: {pooled.k} {what or 'configurations'} pooled", simulated))
    fig.tight_layout()
    return fig


def plot_tool_mix(mix: pd.DataFrame, simulated: bool) -> plt.Figure:
    """Stacked bars: share of tool calls per category within each profile (from :func:`tables.tool_mix`)."""
    wide = mix.pivot(index="profile", columns="category", values="share").fillna(0.0)
    order = [c for c in ("read", "search", "edit", "execute", "mcp", "other") if c in wide.columns]
    wide = wide[order + sorted(set(wide.columns) - set(order))]
    fig, ax = _figure(0.9 + 0.3 * len(wide))
    colors = sns.color_palette(PALETTE, n_colors=len(wide.columns))
    left = np.zeros(len(wide))
    for color, cat in zip(colors, wide.columns, strict=True):
        ax.barh(range(len(wide)), wide[cat].to_numpy(), left=left, color=color, label=cat, height=0.6)
        left += wide[cat].to_numpy()
    ax.set_yticks(range(len(wide)), list(wide.index))
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of tool calls")
    # Legend above the bars, so it never collides with the axis label below.
    ax.legend(ncol=6, fontsize=5.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False,
              handlelength=1.0, columnspacing=0.8)
    ax.set_title(title("Tool-usage mix per profile", simulated), pad=14)
    fig.tight_layout()
    return fig


# CodeCanvas metrics (analysis_lib.codecanvas.metrics) with their units, for the axes.
CODECANVAS_AXES = {"informed_editing_score": "informed editing score (0 to 1)",
                   "blast_radius_edit_rate": "edits inside the blast radius (share of edits)",
                   "deliberation_depth": "deliberation depth (claims + plan decisions)"}


def plot_codecanvas(table: pd.DataFrame, metrics: list[str], simulated: bool,
                    colors: dict | None = None) -> plt.Figure:
    """CodeCanvas metrics per profile: each trial a point, the profile median a bar (one panel per metric)."""
    set_style()
    present = [m for m in metrics if m in table and pd.to_numeric(table[m], errors="coerce").notna().any()]
    fig, axes = plt.subplots(len(present), 1, figsize=(WIDTH_IN, 0.4 + 1.0 * max(len(present), 1)), squeeze=False)
    for ax, metric in zip(axes[:, 0], present, strict=True):
        df = table.assign(value=pd.to_numeric(table[metric], errors="coerce")).dropna(subset=["value"])
        profiles = sorted(df["profile"].unique())
        pc = colors or profile_colors(profiles)
        for i, p in enumerate(profiles):
            v = df.loc[df["profile"] == p, "value"].to_numpy()
            # Deterministic jitter (evenly spaced), so the figure is reproducible without a random draw.
            jitter = np.linspace(-0.15, 0.15, len(v)) if len(v) > 1 else np.zeros(len(v))
            ax.scatter(v, i + jitter, s=5, color=pc[p], alpha=0.6)
            ax.plot([np.median(v)] * 2, [i - 0.3, i + 0.3], color="0.1", linewidth=1.2)
        ax.set_yticks(range(len(profiles)), profiles, fontsize=6)
        ax.set_xlabel(CODECANVAS_AXES.get(metric, metric), fontsize=7)
    axes[0, 0].set_title(title("CodeCanvas metrics per trial (bar = median)", simulated))
    fig.tight_layout()
    return fig
