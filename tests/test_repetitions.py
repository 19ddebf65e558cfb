"""Variance components against statsmodels' REML; pass@k against its definition by enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from analysis_lib.inference import repetitions


def test_anova_components_equal_reml_on_a_balanced_design():
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(30), 4)
    y = rng.normal(0, 1, 30)[g] + rng.normal(0, 0.5, 120)
    between, within, n_groups, n = repetitions._one_way(y, g)
    fit = smf.mixedlm("y ~ 1", pd.DataFrame({"y": y, "g": g}), groups="g").fit(reml=True)
    assert (n_groups, n) == (30, 120)
    assert between == pytest.approx(float(fit.cov_re.iloc[0, 0]), rel=1e-4) and within == pytest.approx(fit.scale, rel=1e-4)


def test_variance_components_per_profile_on_the_right_scale():
    trials = pd.DataFrame({"profile": ["a"] * 6, "task_id": ["t1"] * 3 + ["t2"] * 3, "infra_error": False,
                           "success": [True, True, True, False, False, False],
                           "total_tokens": [100, 100, 100, 1000, 1000, 1000]})
    v = repetitions.variance_components(trials).set_index("metric")
    assert v.loc["success", "within_task"] == 0 and v.loc["success", "icc"] == 1.0
    assert v.loc["total_tokens", "scale"] == "log"
    assert v.loc["total_tokens", "between_task"] == pytest.approx(np.var(np.log([100, 1000]), ddof=1), rel=1e-12)


def test_pass_at_k_is_the_share_of_k_subsets_by_enumeration_and_pairs_tasks():
    outcomes = {"t1": [1, 0, 0, 1], "t2": [0, 0, 1], "t3": [1, 1, 1, 1]}
    rows = [{"profile": p, "task_id": t, "infra_error": False, "success": bool(o)}
            for p in ("a", "b") for t, os_ in outcomes.items() for o in (os_ if p == "a" else [1] * len(os_))]
    table = repetitions.pass_at_k_table(pd.DataFrame(rows), [("a", "b")], n_boot=500).set_index(["k", "profile", "vs", "measure"])

    def by_subsets(k, all_pass):
        vals = []
        for os_ in outcomes.values():
            if len(os_) >= k:
                subs = list(itertools.combinations(os_, k))
                vals.append(np.mean([all(s) if all_pass else any(s) for s in subs]))
        return np.mean(vals)

    assert 1 not in table.index.get_level_values("k")  # pass@1 is the pass rate, reported elsewhere
    for k in (2, 3):
        assert table.loc[(k, "a", "", "pass@k"), "estimate"] == pytest.approx(by_subsets(k, False))
        assert table.loc[(k, "a", "", "pass^k"), "estimate"] == pytest.approx(by_subsets(k, True))
        diff = table.loc[(k, "b", "a", "pass^k")]
        assert diff["estimate"] == pytest.approx(1 - by_subsets(k, True)) and diff["ci_low"] <= diff["estimate"] <= diff["ci_high"]
    assert table.loc[(4, "a", "", "pass@k"), "n_tasks_short"] == 1  # t2 has 3 repetitions only
    # the paired row leaves t2 out at k = 4 too, and says so (it used to report 0 short tasks)
    assert table.loc[(4, "b", "a", "pass@k"), "n_tasks"] == 2 and table.loc[(4, "b", "a", "pass@k"), "n_tasks_short"] == 1
    assert table.loc[(3, "b", "a", "pass@k"), "n_tasks_short"] == 0


def _uneven_repetitions() -> pd.DataFrame:
    """Counts of trials per (profile, task) 3, 3, 3, 1, 1, 2, 2, 5: mode 3, median 2.5, maximum 5; one
    infrastructure error on top of a task with 3, which must not make it 4."""
    counts = {("a", "t1"): 3, ("a", "t2"): 3, ("b", "t1"): 3, ("a", "t3"): 1, ("b", "t2"): 1, ("b", "t3"): 2,
              ("a", "t4"): 2, ("b", "t4"): 5}
    rows = [{"profile": p, "task_id": t, "repetition": i + 1, "infra_error": False, "success": i % 2 == 0,
             "total_tokens": 100 + i, "total_cost_usd": 0.01 * (i + 1)}
            for (p, t), n in counts.items() for i in range(n)]
    rows.append({"profile": "a", "task_id": "t1", "repetition": 4, "infra_error": True, "success": None,
                 "total_tokens": None, "total_cost_usd": None})
    return pd.DataFrame(rows)


def test_the_usual_number_of_repetitions_is_the_mode_of_attempted_trials_per_task():
    trials = _uneven_repetitions()
    assert repetitions.usual_repetitions(trials) == 3  # not the median (2.5 -> 2) nor the maximum (5)
    assert repetitions.usual_repetitions(trials.iloc[:0]) == 3  # no trials: the default
    tie = pd.DataFrame({"profile": "a", "task_id": ["t1", "t1", "t2", "t2", "t2"], "infra_error": False})
    assert repetitions.usual_repetitions(tie) == 3  # one task with 2, one with 3: the larger


def test_pass_at_k_the_spend_projection_and_the_paper_read_one_usual_number_of_repetitions():
    from pathlib import Path

    from analysis_lib.report import comparison_report, paper
    from analysis_lib.study.plan import load_plan

    trials = _uneven_repetitions()
    table = repetitions.pass_at_k_table(trials, [("a", "b")], n_boot=50)
    assert int(table["k"].max()) == 3
    lines = comparison_report._planning_section(trials[~trials["infra_error"]], [("a", "b")],
                                                load_plan(Path(__file__).resolve().parents[1] / "params" / "analysis_plan.yaml"),
                                                power_analysis=False, seed=0)
    assert any("× 3 repetitions per profile" in line for line in lines)
    macros = {m.name: m.text for m in paper.quoted_macros(paper.PaperInputs(trials))}
    assert macros["NumRepetitions"] == "3"
