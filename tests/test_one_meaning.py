"""One meaning per word: each summary names its unit of aggregation, one unit for rate differences, one tier
title, one per-task value behind both the estimate and the per-task figure."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from analysis_lib import Study, analyse_comparisons, stats
from analysis_lib.inference import comparisons as C
from analysis_lib.report import figures, latex, paper
from analysis_lib.report import numbers as fmt
from analysis_lib.report.comparison_report import tier_table, tier_title
from analysis_lib.simulate.model import simulate_metrics
from analysis_lib.study.plan import load_plan

ROOT = Path(__file__).resolve().parents[1]
PLANS = {"majority": ROOT / "params" / "analysis_plan.yaml", "all": ROOT / "params" / "analysis_plan_all_repetitions.yaml"}


@pytest.fixture(scope="module")
def studies():
    metrics = simulate_metrics(seed=4, n_tasks=12, repetitions=3)
    return metrics, {k: analyse_comparisons(Study.from_table(metrics, baseline="text"), load_plan(p)) for k, p in PLANS.items()}


def _tex_rows(tex: str) -> list[list[str]]:
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    return [[c.strip() for c in line.rstrip("\\ ").split(" & ")] for line in body.strip().splitlines()]


def _tex_head(tex: str) -> list[str]:
    return [c.strip() for c in tex.split("\\toprule", 1)[1].split("\\midrule", 1)[0].strip().rstrip("\\ ").split(" & ")]


def test_every_median_and_mean_header_names_what_it_runs_over(studies):
    metrics, by_plan = studies
    head = _tex_head(paper.summary_tex(metrics, True))
    assert "{Mean over trials}" in head and "{Median over trials}" in head
    words = {}
    for reps, study in by_plan.items():
        tex = paper.comparisons_tex(study.comparisons, True)
        # The TeX table says it once in its note, each summary with the metrics whose rows it describes.
        note = tex.split("A and B are the ", 1)[1].split("(rates in", 1)[0]
        for row in study.comparisons[study.comparisons["estimate"].notna()
                                     & (study.comparisons["tier"] != "exploratory")].itertuples():
            summary = C.sides_summary(row.scale, C.repetition_aggregate(row.metric, row.repetitions), row.test)
            assert summary == row.a_b_summary
            part = next(p for p in note.split("; ") if p.startswith(summary + " for "))
            assert latex.escape_tex(row.label) in part
        tokens = study.comparisons[(study.comparisons["metric"] == "total_tokens") & (study.comparisons["tier"] == "primary")]
        words[reps] = tokens["a_b_summary"].iloc[0]
        md = tier_table(study.comparisons, "primary")
        assert "| A and B are |" in md and words[reps] in md
    # The same column names two summaries under two plans, each saying which.
    assert words == {"majority": "median over tasks of per-task medians",
                     "all": "median over tasks of per-task geometric means"}
    # The value in the A column is that summary, computed from the trials here.
    study = by_plan["all"]
    row = study.comparisons[(study.comparisons["metric"] == "total_tokens") & (study.comparisons["tier"] == "primary")].iloc[0]
    per_task = stats.aggregate_repetitions(C.usable_trials(metrics), "total_tokens", how="geometric_mean")
    pairs = C.task_pairs(C.usable_trials(metrics), "total_tokens", row.profile_a, row.profile_b, "all")
    a = per_task[(per_task["profile"] == row.profile_a) & per_task["task_id"].isin(pairs["task_id"])]["value"]
    assert row.a_value == pytest.approx(float(np.median(a)), rel=1e-12)


def test_a_rate_difference_has_one_unit_everywhere(studies):
    _, by_plan = studies
    comp = by_plan["all"].comparisons
    points = comp[comp["scale"].isin(C.POINT_SCALES)]
    assert len(points) and set(points["unit"]) == {C.RATE_DIFFERENCE_UNIT} == {"pp"}
    for r in points.itertuples():
        assert fmt.comparison_unit(r.scale, r.unit) == r.unit
        assert fmt.estimate(r).endswith(" pp") and fmt.tex_quantity(1.0, 1, r.unit).endswith("\\,pp")
    tex = paper.comparisons_tex(comp, True)
    bare = re.compile(r"(?<!percentage )points")  # "pp (percentage points)" defines the abbreviation once
    assert not bare.search(tex) and not bare.search(paper.FIGURE_CAPTIONS["forest"])
    fig = figures.plot_forest(comp, True)
    labels = [ax.get_xlabel() for ax in fig.axes]
    assert any("(pp)" in x for x in labels) and not any(bare.search(x) for x in labels)


def test_tier_titles_are_one_wording(studies):
    _, by_plan = studies
    study = by_plan["all"]
    sections = dict(paper._markdown_sections(paper.PaperInputs(study.comparisons.iloc[:0], study.comparisons,
                                                               plan=paper.PlanRecord("0" * 64, "p")), []))
    assert tier_title("primary", "holm", "primary") in sections
    assert tier_title("secondary", "fdr_bh") in sections
    tex = paper.comparisons_tex(study.comparisons, True, "primary")
    titles = re.findall(r"\\emph\{([^}]*)\}", tex)
    assert titles == [tier_title(t, str(study.comparisons.loc[study.comparisons["tier"] == t, "correction"].iloc[0]),
                                 "primary").replace("%", "\\%")
                      for t in ("primary", "secondary", "sensitivity")]


@pytest.mark.parametrize("reps", ["majority", "all"])
def test_the_per_task_figure_pairs_tasks_as_the_estimate_does(studies, reps):
    metrics, by_plan = studies
    comp = by_plan[reps].comparisons
    changes = figures.per_task_changes(comp, metrics, "total_tokens")
    trials = C.usable_trials(metrics)
    for profile, sub in changes.groupby("profile", observed=True):
        row = comp[(comp["metric"] == "total_tokens") & (comp["profile_b"] == profile) & (comp["tier"] == "primary")].iloc[0]
        how = {"majority": "median", "all": "geometric_mean"}[reps]
        pairs = stats.pair_tasks(trials, "total_tokens", row.profile_a, profile, binary=False, how=how).set_index("task_id")
        got = sub.set_index(sub["task_id"].astype(str))
        assert len(got) == row.n_pairs
        np.testing.assert_allclose(got["change_pct"], 100 * (pairs.loc[got.index, "b"] / pairs.loc[got.index, "a"] - 1),
                                   rtol=1e-12)
        # The estimate is the Hodges-Lehmann shift of exactly these per-task log ratios.
        hl = stats.hodges_lehmann(np.log1p(got["change_pct"].to_numpy() / 100), zero_method="pratt",
                                  decimals=C.LOG_RATIO_DECIMALS).iloc[0]
        assert row.estimate == pytest.approx(100 * np.expm1(hl["estimate"]), rel=1e-9)
    fig = figures.plot_per_task_changes(changes, comp, "total_tokens", True)
    word = {"majority": "per-task median", "all": "per-task geometric mean"}[reps]
    assert word in fig.axes[0].get_xlabel()


def test_per_task_medians_and_geometric_means_differ_here(studies):
    """The check above can fail: on these runs the two ways of combining repetitions give other values."""
    metrics, _ = studies
    trials = C.usable_trials(metrics)
    med = stats.pair_tasks(trials, "total_tokens", "text", "codecanvas", binary=False, how="median")
    geo = stats.pair_tasks(trials, "total_tokens", "text", "codecanvas", binary=False, how="geometric_mean")
    assert not np.allclose(med["b"] / med["a"], geo["b"] / geo["a"])


def test_rate_headers_name_trials_or_tasks(studies):
    _, by_plan = studies
    head = _tex_head(paper.rates_tex(by_plan["majority"].rates, True))
    assert "{Pass rate per trial}" in head and "{Resolve rate per task}" in head


def test_every_output_file_is_named_in_one_place():
    """Writers and readers (the package and the notebooks) name an output file through analysis_lib.core.outputs, never
    by spelling it again: a string equal to a declared file name appears nowhere else (docstrings aside)."""
    import ast
    from pathlib import Path

    from analysis_lib.core import outputs as files

    root = Path(__file__).resolve().parents[1]
    declared = {v for k, v in vars(files).items() if k.isupper() and isinstance(v, str) and "." in v}
    found = []
    for path in [*root.glob("analysis_lib/**/*.py"), *root.glob("notebooks/*.py")]:
        if path == root / "analysis_lib" / "core" / "outputs.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        found += [f"{path.relative_to(root)}:{n.lineno}: {n.value}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in declared and id(n) not in docs]
    assert not found, found
