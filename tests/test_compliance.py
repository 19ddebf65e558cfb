"""The effect among trials that used MCP (CACE): the Wald ratio, its delta-method and Fieller intervals, use.

References sit beside the calls that produced them: statsmodels' two-stage least squares for the Wald
estimate and a hand-computed cluster-robust sandwich for its standard error; GraphPad QuickCalcs'
published Fieller example; the inversion of scipy's one-sample t test for the Fieller interval of
paired data; a simulation with known compliance for coverage (``benchmarks/calibration.py`` runs
the full-size version).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as sps

from analysis_lib.core.success import used_mcp
from analysis_lib.inference.beside_itt import compliance as CO
from analysis_lib.inference.comparisons import compare, usable_trials
from analysis_lib.simulate.imperfect import Imperfections, imperfect_truth, simulate_imperfect
from analysis_lib.study import plan as P


def _paired_iv_data(seed: int, n_tasks: int = 30):
    """One trial per arm and task: y = task effect + 0.5 (used MCP) + noise; B's trials use MCP with p = 0.7."""
    rng = np.random.default_rng(seed)
    tasks = np.repeat(np.arange(n_tasks), 2)
    z = np.tile([0, 1], n_tasks)
    used = (rng.random(2 * n_tasks) < 0.7) * z
    y = rng.normal(size=2 * n_tasks) + 0.5 * used + np.repeat(rng.normal(size=n_tasks), 2)
    return tasks, z, used.astype(float), y


def test_the_wald_ratio_equals_two_stage_least_squares_with_task_effects():
    from statsmodels.sandbox.regression.gmm import IV2SLS

    tasks, z, used, y = _paired_iv_data(1)
    n = tasks.max() + 1
    dummies = np.zeros((len(tasks), n))
    dummies[np.arange(len(tasks)), tasks] = 1.0
    x, instruments = np.column_stack([used, dummies]), np.column_stack([z, dummies])
    fit = IV2SLS(y, x, instruments).fit()  # statsmodels 0.15: 2SLS, assignment instruments use
    d, u = y[z == 1] - y[z == 0], used[z == 1]
    r = CO.ratio_of_means(d, u)
    assert r["estimate"] == pytest.approx(fit.params[0], abs=1e-12)
    # Cluster-robust (by task) sandwich of the just-identified IV estimator, by hand from the 2SLS residuals
    # (Cameron & Miller 2015, JHR 50:317-372, eq. for IV): (Z'X)^-1 (sum_g Z_g' e_g e_g' Z_g) (X'Z)^-1.
    e = y - x @ fit.params
    inv = np.linalg.inv(instruments.T @ x)
    meat = sum(np.outer(instruments[tasks == g].T @ e[tasks == g], instruments[tasks == g].T @ e[tasks == g])
               for g in range(n))
    se_cr0 = math.sqrt((inv @ meat @ inv.T)[0, 0])
    # The delta method uses the sample variance (n - 1): the same SE up to sqrt(n / (n - 1)).
    assert r["se"] * math.sqrt((n - 1) / n) == pytest.approx(se_cr0, rel=1e-10)


def test_fieller_interval_matches_graphpads_published_example():
    # GraphPad QuickCalcs "CI of a quotient" (graphpad.com/quickcalcs/errorProp2), as documented with DCSTATS'
    # Fieller notebook: A mean 14, SD 3; B mean 7, SD 2; n = 6 each, unpaired -> A/B = 2.00, 95 % CI 1.46 to 2.83.
    n = 6
    q = sps.t.ppf(0.975, 2 * n - 2)  # df = na + nb - 2 = 10
    lo, hi = CO.fieller_interval(14.0, 7.0, 9 / n, 4 / n, 0.0, q)
    assert lo == pytest.approx(1.46, abs=0.005)
    assert hi == pytest.approx(2.83, abs=0.005)


def test_fieller_on_paired_data_is_the_inversion_of_the_paired_t_test():
    tasks, z, used, y = _paired_iv_data(7, n_tasks=16)
    d, u = y[z == 1] - y[z == 0], used[z == 1]
    r = CO.ratio_of_means(d, u)
    assert r["interval"].startswith("Fieller") and r["g"] >= CO.FINNEY_G
    # Independent: the theta where scipy's one-sample t test of d - theta u = 0 has p = 0.05.
    p = lambda theta: sps.ttest_1samp(d - theta * u, 0.0).pvalue - 0.05  # noqa: E731
    lo = optimize.brentq(p, r["estimate"] - 50, r["estimate"])
    hi = optimize.brentq(p, r["estimate"], r["estimate"] + 50)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi), abs=1e-7)


def test_delta_interval_when_the_share_is_precise_and_unbounded_fieller_when_it_is_not():
    d = np.array([0.1, 0.3, -0.1, 0.2, 0.4, 0.0, 0.2, 0.1])
    precise = CO.ratio_of_means(d, np.array([0.9, 1.0, 0.9, 1.0, 0.9, 1.0, 1.0, 0.9]))
    assert precise["interval"].startswith("delta") and precise["g"] < CO.FINNEY_G
    q = sps.t.ppf(0.975, 7)
    assert precise["ci_high"] - precise["estimate"] == pytest.approx(q * precise["se"])
    weak = CO.ratio_of_means(d, np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]))  # one user in eight tasks
    assert weak["interval"].startswith("Fieller") and math.isinf(weak["ci_low"]) and math.isinf(weak["ci_high"])


def test_use_is_recorded_when_known_else_an_mcp_call_ran():
    assert used_mcp(True, 0) is True and used_mcp(False, 5) is False  # the runner's record wins
    assert used_mcp(None, 3) is True and used_mcp(None, 0) is False and used_mcp(None, float("nan")) is None
    assert used_mcp(np.bool_(True), None) is True and used_mcp("False", 2) is False
    t = pd.DataFrame({"mcp_used": [True, None, None, pd.NA], "mcp_tool_calls": [0, 2, 0, np.nan]})
    assert CO.mcp_use(t).tolist()[:3] == [1.0, 1.0, 0.0] and math.isnan(CO.mcp_use(t).iloc[3])


def _hand_study() -> pd.DataFrame:
    """Three tasks, two repetitions per arm; B's trials that used MCP are marked."""
    rows = []
    for task, a, b, used in (("t1", (0, 0), (1, 1), (1, 1)), ("t2", (1, 0), (1, 0), (1, 0)), ("t3", (0, 1), (1, 1), (0, 1))):
        for rep in (0, 1):
            rows.append({"profile": "base", "task_id": task, "repetition": rep + 1, "success": bool(a[rep]),
                         "mcp_tool_calls": 0})
            rows.append({"profile": "mcp", "task_id": task, "repetition": rep + 1, "success": bool(b[rep]),
                         "mcp_tool_calls": 4 * used[rep]})
    return pd.DataFrame(rows)


def test_the_four_estimands_by_hand():
    rows = {r["estimand"]: r for r in CO.compliance_rows(_hand_study(), "success", "base", "mcp")}
    # Per task: d = (1 - 0, 0.5 - 0.5, 1 - 0.5) = (1, 0, 0.5); u = (1, 0.5, 0.5).
    assert rows["itt_mean"]["estimate"] == pytest.approx(0.5)
    assert rows["share_used"]["estimate"] == pytest.approx(2 / 3)
    assert rows["cace"]["estimate"] == pytest.approx(0.5 / (2 / 3))
    # Users only: t1 (1, 1) -> 1 - 0; t2 (1) -> 1 - 0.5; t3 (1) -> 1 - 0.5: mean 2/3, labelled biased.
    assert rows["naive_users"]["estimate"] == pytest.approx(2 / 3)
    assert "biased" in rows["naive_users"]["note"] and "biased" in CO.ESTIMANDS["naive_users"]
    assert rows["cace"]["n_used"] == 4 and rows["cace"]["n_trials_b"] == 6


def test_the_cace_numerator_is_the_engines_pass_at_1_effect_of_assignment():
    imp = Imperfections(infra_rate_a=0.05, infra_rate_b=0.1)
    m = simulate_imperfect(3, 24, 3, imp)
    d = P.load_plan(P.default_plan_path().parent / "analysis_plan_all_repetitions.yaml").model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = 200
    plan = P.parse_plan(d)
    table = compare(m, plan, [("A", "B")])
    engine = table[(table["tier"] == "primary") & (table["metric"] == "success")].iloc[0]
    rows = {r["estimand"]: r for r in CO.compliance_rows(usable_trials(m), "success", "A", "B")}
    assert engine["scale"] == "pass_rate" and rows["itt_mean"]["estimate"] == pytest.approx(engine["estimate"])
    assert rows["itt_mean"]["ci_low"] == pytest.approx(engine["ci_low"])  # both paired t over tasks


def test_only_pairs_with_one_sided_non_compliance_get_rows():
    m = pd.concat([_hand_study(), _hand_study().query("profile == 'mcp'").assign(profile="mcp2")])
    offered = {"base": False, "mcp": True, "mcp2": True}
    t = CO.compliance_table(m, [("base", "mcp"), ("mcp", "mcp2"), ("base", "mcp2")], ["success"], offered)
    assert sorted(set(zip(t["profile_a"], t["profile_b"], strict=True))) == [("base", "mcp"), ("base", "mcp2")]
    assert list(t.columns) == CO.COLUMNS and set(t["estimand"]) == set(CO.ESTIMANDS)
    tok = CO.compliance_table(m.assign(total_tokens=1000.0), [("base", "mcp")], ["total_tokens"], offered)
    assert CO.TOKEN_CAVEAT in tok.loc[tok["estimand"] == "cace", "note"].iloc[0]


def test_no_user_means_no_cace_and_says_why():
    m = _hand_study().assign(mcp_tool_calls=0)
    rows = {r["estimand"]: r for r in CO.compliance_rows(m, "success", "base", "mcp")}
    assert math.isnan(rows["cace"]["estimate"]) and "no trial of mcp called an MCP tool" in rows["cace"]["note"]


def test_the_arms_offered_mcp_come_from_the_audit():
    audit = pd.DataFrame({"arm": ["text", "codegraph", "x"], "mcp_offered": ["False", True, np.nan]})
    assert CO.mcp_arms(audit) == {"text": False, "codegraph": True, "x": None}


def test_the_cace_interval_covers_the_effect_among_compliers_in_simulation():
    # A small version of benchmarks/calibration.py (2 x 2,000 studies there): 300 studies at low compliance,
    # where users are the harder trials (the naive comparison is biased) and Fieller's interval is used.
    imp = Imperfections(compliance=0.35)
    truth = imperfect_truth(imp, n_trials=400_000)["cace_success"][0]
    hits, naive = [], []
    for i in range(300):
        t = CO.compliance_table(simulate_imperfect(50_000 + i, 24, 3, imp), [("A", "B")], ["success"], {"B": True})
        c, n = (t[t["estimand"] == e].iloc[0] for e in ("cace", "naive_users"))
        hits.append(c["ci_low"] <= truth <= c["ci_high"])
        naive.append(n["estimate"])
    cover = float(np.mean(hits))
    assert 0.91 <= cover <= 0.985, cover  # 95 % +- 3.3 Monte-Carlo standard errors (SE 1.26 points at 300)
    assert np.mean(naive) < truth - 0.02  # users are the harder trials: the naive effect is too small


def _weak_uptake_trials(metric: str) -> pd.DataFrame:
    """Eight tasks, three trials per arm: B does better on every task, but only 2 of its 24 trials call an MCP tool,
    so the share of users is not significantly above 0 (t = 1.53 on 7 df)."""
    b_wins = [1, 1, 2, 1, 1, 1, 2, 1]  # B's successes of 3 (A never succeeds)
    b_users = [0, 0, 0, 1, 0, 0, 1, 0]
    rows = []
    for t, (wins, users) in enumerate(zip(b_wins, b_users, strict=True)):
        for rep in range(3):
            rows.append({"profile": "A", "task_id": f"t{t}", "repetition": rep + 1, "success": False, "mcp_used": None,
                         "total_tokens": 100_000.0, "infra_error": False})
            rows.append({"profile": "B", "task_id": f"t{t}", "repetition": rep + 1, "success": rep < wins,
                         "mcp_used": rep < users, "total_tokens": 100_000.0 * (0.5 if rep < wins else 0.8),
                         "infra_error": False})
    return pd.DataFrame(rows)


def test_an_unbounded_fieller_set_is_two_rays_that_can_exclude_zero():
    from types import SimpleNamespace

    from analysis_lib.report import beside_itt as BR

    d = np.array([1, 1, 2, 1, 1, 1, 2, 1]) / 3
    u = np.array([0, 0, 0, 1, 0, 0, 1, 0]) / 3
    r = CO.ratio_of_means(d, u)
    assert r["interval"].startswith("Fieller") and r["ci_set"] == "two rays"
    # Independent: the theta where scipy's one-sample t test of d - theta u does not reject at 0.05.
    keep = lambda theta: sps.ttest_1samp(d - theta * u, 0.0).pvalue >= 0.05  # noqa: E731
    lo, hi = r["ci_gap_low"], r["ci_gap_high"]
    assert optimize.brentq(lambda th: sps.ttest_1samp(d - th * u, 0.0).pvalue - 0.05, lo - 1, lo + 0.5) == \
        pytest.approx(lo, abs=1e-7)
    assert lo < 0 < hi < r["estimate"] and not keep(0.0) and keep(lo - 1e-3) and keep(hi + 1e-3)
    assert all(keep(th) == (th <= lo or th >= hi) for th in np.linspace(-20, 20, 401) if min(abs(th - lo), abs(th - hi)) > 1e-6)
    # In the table: the union as it is, saying it excludes 0, the reason beside it, the estimate flagged (+500 pp).
    comp = CO.compliance_table(_weak_uptake_trials("success"), [("A", "B")], ["success", "total_tokens"],
                               {"A": False, "B": True})
    cace = comp[comp["estimand"] == "cace"].set_index("metric")
    s = cace.loc["success"]
    assert s["ci_set"] == "two rays" and s["estimate"] == pytest.approx(5.0) and s["outside_parameter_space"]
    assert "two rays (it excludes 0)" in s["note"] and s["note"].startswith("outside the parameter space")
    md = "\n".join(BR.compliance_markdown(comp))
    row = SimpleNamespace(**{**s.to_dict(), "metric": "success"})
    assert BR.confidence_set(row) == (f"(−∞, {100 * s['ci_gap_low']:+.1f}] ∪ [{100 * s['ci_gap_high']:+.1f}, +∞), "
                                      "excludes 0").replace("-", "−")
    assert BR.confidence_set(row) in md and "(outside the parameter space)" in md
    assert "Fieller, t (tasks): two rays, the share of users is not significantly above 0" in md
    # A ratio metric never goes below -100 %: the left ray starts there, open.
    t = cace.loc["total_tokens"]
    assert t["ci_set"] == "two rays" and t["ci_low"] == -100.0 and t["estimate"] > -100
    assert BR.confidence_set(SimpleNamespace(**{**t.to_dict(), "metric": "total_tokens"})).startswith("(−100.0, ")
    macros = {m.name: m.text for m in BR.beside_macros({"compliance": comp}, "results")}
    assert "CaceSuccessBVsASet" in macros and "CaceSuccessBVsALow" not in macros and "\\cup" in macros["CaceSuccessBVsASet"]
    # The whole line when even a large effect is not distinguishable from none.
    assert CO.fieller_set(0.1, 0.05, 0.04, 0.01, 0.0, 2.0).kind == "whole line"
    assert CO.fieller_set(14.0, 7.0, 1.5, 4 / 6, 0.0, 2.228).kind == "interval"
