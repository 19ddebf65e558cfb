"""The planner's power: exact McNemar power against enumeration, t power against statsmodels, the search exact."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis_lib.inference import power


def _enumerated_mcnemar_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Every (n10, n01) outcome of n tasks, its trinomial probability and scipy's exact binomial test."""
    total = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            if a + b and sps.binomtest(min(a, b), a + b, 0.5).pvalue < alpha:
                total += sps.multinomial.pmf([a, b, n - a - b], n, [p10, p01, 1 - p10 - p01])
    return total


@pytest.mark.parametrize("n,p10,p01", [(10, 0.05, 0.30), (24, 0.08, 0.20), (37, 0.10, 0.21)])
def test_exact_mcnemar_power_equals_enumeration(n, p10, p01):
    assert power.mcnemar_exact_power(n, p10, p01) == pytest.approx(_enumerated_mcnemar_power(n, p10, p01), abs=1e-12)


def test_paired_t_power_is_statsmodels_and_simulation():
    from statsmodels.stats.power import TTestPower

    assert power.paired_t_power(30, 0.1, 0.3) == pytest.approx(TTestPower().power(effect_size=1 / 3, nobs=30, alpha=0.05),
                                                               rel=1e-9)
    rng = np.random.default_rng(5)
    d = rng.normal(0.1, 0.3, size=(20_000, 30))
    t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(30))
    simulated = np.mean(np.abs(t) > sps.t.ppf(0.975, 29))
    assert abs(simulated - power.paired_t_power(30, 0.1, 0.3)) < 4 * np.sqrt(0.25 / 20_000)


def test_tasks_for_power_is_the_smallest_n_and_none_without_an_effect():
    at = lambda k: power.mcnemar_exact_power(k, 0.05, 0.15)  # noqa: E731
    n = power.tasks_for_power(at, 0.8)
    assert n == 168 and at(n) >= 0.8 and all(at(k) < 0.8 for k in range(2, n))
    # The exact test's rejection rate is not monotone in n (here its size, which saw-tooths below alpha).
    size = [power.mcnemar_exact_power(k, 0.2, 0.2) for k in range(40, 60)]
    assert any(b < a for a, b in zip(size, size[1:], strict=False)) and max(size) < 0.05
    assert power.tasks_for_power(lambda k: power.mcnemar_exact_power(k, 0.2, 0.2), 0.8) is None


def test_sensitivity_spans_the_pilots_interval_for_both_analyses():
    trials = pd.DataFrame({
        "profile": ["a"] * 60 + ["b"] * 60,
        "task_id": [f"t{i // 3}" for i in range(60)] * 2,
        "success": [i % 3 != 0 for i in range(60)] + [i % 4 != 0 for i in range(60)],
    })
    pilot = power.pilot_of(trials, "a", "b")
    assert pilot.n_tasks == 20 and pilot.n_a_pass == 20
    table = power.sensitivity(pilot, 0.05)
    maj = table[table["analysis"].str.startswith("majority")]
    assert list(maj["nuisance"]) == ["loss rate (low)", "loss rate (pilot)", "loss rate (high)"]
    need = maj["n_tasks"].dropna().astype(int).tolist()
    assert need == sorted(need)  # a higher loss rate needs more tasks
    t = table[table["analysis"].str.startswith("all")]
    assert (t["power_at_n"].dropna() >= 0.8).all() and t["n_tasks"].is_monotonic_increasing


def test_the_planner_plans_at_the_level_the_plan_tests_its_claim_at():
    from analysis_lib.study import plan as P

    default = P.load_plan("params/analysis_plan.yaml")
    level = power.claim_level(default, 2)
    # Holm over 3 primary metrics x 2 pairs: the first (smallest) level is alpha / 6.
    assert level.family == "primary" and level.alpha == pytest.approx(0.05 / 6) and "Holm" in level.why
    seq = power.claim_level(P.load_plan("params/analysis_plan_all_repetitions.yaml"), 2)
    assert seq.family == "hypotheses" and seq.alpha == pytest.approx(0.025)
    trials = pd.DataFrame({
        "profile": ["a"] * 60 + ["b"] * 60,
        "task_id": [f"t{i // 3}" for i in range(60)] * 2,
        "success": [i % 3 != 0 for i in range(60)] + [i % 5 != 0 for i in range(60)],
    })
    pilot = power.pilot_of(trials, "a", "b")
    at_level, at_alpha = (power.sensitivity(pilot, 0.10, alpha=x) for x in (level.alpha, 0.05))
    both = at_level["n_tasks"].notna() & at_alpha["n_tasks"].notna()
    assert both.any() and (at_level.loc[both, "n_tasks"] > at_alpha.loc[both, "n_tasks"]).all()


def test_planning_runs_on_request_and_shows_both_answers(tmp_path):
    from analysis_lib import Study, write_comparisons
    from analysis_lib.simulate.model import simulate_metrics
    from analysis_lib.study import plan as P

    m = simulate_metrics(3, 20, 3, ("text", "codegraph"))
    d = P.load_plan().model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = 200
    plan = P.parse_plan(d)
    check = P.PlanCheck(plan, P.plan_hash(plan), "plan.yaml")
    write_comparisons(Study.from_table(m, plan=check, baseline="text"), tmp_path / "quick")
    quick = (tmp_path / "quick" / "comparison_report.md").read_text()
    assert "computed on request" in quick and "--plan-next" in quick and "Tokens, 20% fewer" not in quick
    write_comparisons(Study.from_table(m, plan=check, baseline="text"), tmp_path / "full", plan_next=True)
    full = (tmp_path / "full" / "comparison_report.md").read_text()
    assert "**Planned at alpha 0.0167**" in full  # Holm over 3 metrics x 1 pair
    assert "tasks needed at alpha 0.0167 (the plan's)" in full and "at alpha 0.05 (a test alone)" in full
    assert "Tokens, 20% fewer" in full
