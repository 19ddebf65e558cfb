"""The paper's figures, drawn for real: tick labels never overlap and every value axis names its unit."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")  # headless: the window extents below come from the Agg renderer
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from analysis_lib import Study, analyse_comparisons
from analysis_lib.core import registry
from analysis_lib.inference.comparisons import RATE_DIFFERENCE_UNIT
from analysis_lib.report import figures, tables
from analysis_lib.report.paper import FIGURE_CAPTIONS
from analysis_lib.simulate.model import simulate_metrics
from analysis_lib.study.plan import load_plan

# The profile names of the sample runs: "codecanvas" and "codegraph" side by side once ran into each other.
PROFILES = {"text": "text", "codegraph": "codegraph", "codecanvas": "codecanvas"}


@pytest.fixture(scope="module")
def paper_figures() -> dict[str, plt.Figure]:
    """Every figure the paper includes, made as the notebooks make them, from a simulated study of 24 tasks."""
    metrics = simulate_metrics(seed=20261121, n_tasks=24, repetitions=3)
    study = analyse_comparisons(Study.from_table(metrics, baseline="text"), load_plan())
    comp, colors = study.comparisons, figures.profile_colors(sorted(metrics["profile"].unique()))
    out = {"rates": figures.plot_rates(study.rates, True, colors),
           "task_outcomes": figures.plot_task_outcomes(figures.task_outcomes(metrics), True),
           "forest": figures.plot_forest(comp, True, colors),
           "tool_mix": figures.plot_tool_mix(tables.tool_mix(pd.DataFrame(
               [(p, c, n) for p in PROFILES for c, n in zip(("read", "search", "edit", "execute", "mcp", "other"),
                                                            (30, 12, 9, 20, 0 if p == "text" else 15, 2), strict=True)],
               columns=["profile", "category", "calls"])), True)}
    for metric in ("total_tokens", "total_cost_usd"):
        out[f"per_task_{metric}"] = figures.plot_per_task_changes(figures.per_task_changes(comp, metrics, metric), comp,
                                                                  metric, True, colors)
    rng = np.random.default_rng(0)
    cc = pd.DataFrame({"profile": np.repeat(sorted(PROFILES), 20), "informed_editing_score": rng.uniform(0, 1, 60),
                       "blast_radius_edit_rate": rng.uniform(0, 1, 60), "deliberation_depth": rng.integers(0, 6, 60)})
    out["codecanvas"] = figures.plot_codecanvas(cc, list(figures.CODECANVAS_AXES), True, colors)
    yield out
    for fig in out.values():
        plt.close(fig)


def _overlaps(labels) -> list[tuple[str, str]]:
    boxes = [(t.get_text(), t.get_window_extent()) for t in labels if t.get_visible() and t.get_text()]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def test_the_paper_uses_exactly_these_figures(paper_figures):
    assert set(paper_figures) == set(FIGURE_CAPTIONS)


@pytest.mark.parametrize("name", sorted(FIGURE_CAPTIONS))
def test_tick_labels_do_not_overlap(paper_figures, name):
    fig = paper_figures[name]
    fig.canvas.draw()
    for ax in fig.axes:
        for axis in ("x", "y"):
            labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
            assert not _overlaps(labels), f"{name}: {axis} tick labels overlap: {_overlaps(labels)}"


@pytest.mark.parametrize("name", sorted(FIGURE_CAPTIONS))
def test_every_value_axis_names_its_unit(paper_figures, name):
    """A numeric axis label says its unit: (%), (pp), the registry's unit, a share or a count of something."""
    units = {f"({m.unit})" for m in registry.METRICS.values() if m.unit} | {"(%)", f"({RATE_DIFFERENCE_UNIT})", "share", "(0 to 1)",
                                                                          "(claims + plan decisions)"}
    for ax in paper_figures[name].axes:
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            if label and ax.get_label() != "<colorbar>":
                assert any(u in label for u in units), f"{name}: axis label {label!r} names no unit"


def test_the_outcome_heatmap_slants_profile_names_that_would_collide():
    """Regression: at one column's width the heatmap's profile names ran together ("codecanvacodegraph")."""
    metrics = simulate_metrics(seed=3, n_tasks=6, repetitions=3)
    fig = figures.plot_task_outcomes(figures.task_outcomes(metrics), True)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == sorted(metrics["profile"].unique())
    assert not _overlaps(ax.get_xticklabels())
    plt.close(fig)


def test_long_task_names_keep_the_per_task_figures_one_column_wide(paper_figures):
    """The paper includes every figure at the column's width: a figure widened by its labels is shrunk, labels and
    all (real task ids such as CodeScaleBench's made them 3-4 pt). Long names are shortened in the middle instead."""
    metrics = simulate_metrics(seed=3, n_tasks=6, repetitions=1)
    long = {t: f"element-web-unread-indicators-diverge-fix-{i:03d}-{t}" for i, t in enumerate(sorted(metrics["task_id"].unique()))}
    metrics["task_id"] = metrics["task_id"].map(long)
    study = analyse_comparisons(Study.from_table(metrics, baseline="text"), load_plan())
    comp = study.comparisons
    made = {"per_task": figures.plot_per_task_changes(figures.per_task_changes(comp, metrics, "total_tokens"), comp,
                                                      "total_tokens", True),
            "task_outcomes": figures.plot_task_outcomes(figures.task_outcomes(metrics), True)}
    for name, fig in made.items():
        fig.canvas.draw()
        width_pt = fig.get_tightbbox(fig.canvas.get_renderer()).width * 72
        scale = min(1.0, figures.WIDTH_IN * 72 / width_pt)  # \includegraphics[width=\columnwidth] shrinks a wider one
        sizes = [t.get_fontsize() * scale for t in fig.axes[0].get_yticklabels() if t.get_text()]
        assert sizes and min(sizes) >= 5.5, f"{name}: task labels print at {min(sizes):.1f} pt"
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
        assert all(len(x) <= figures.TASK_LABEL_CHARS and "…" in x for x in labels), labels
        plt.close(fig)
    assert figures.task_label("linux-hda-intel-suspend-fault-001") == "linux-hda-intel-sus…-fault-001"
