"""analysis_lib.stats against independent references: R's documented examples, statsmodels,
scipy, pingouin, and brute-force enumeration. Each reference value sits beside the call that
produced it, with its tolerance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
import scipy.stats as sps
import statsmodels.api as sm
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint, proportion_effectsize

from analysis_lib import stats
from analysis_lib.stats import bootstrap, sample_size

# R, ?wilcox.test: Hollander & Wolfe (1973), p. 29, depression scale before (x) and after (y).
HW_X = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
HW_Y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
# R, ?mcnemar.test: Agresti (1990), p. 350, presidential approval (rows 1st survey, cols 2nd).
PERFORMANCE = [[794, 150], [86, 570]]


def _trials(rows):
    return pd.DataFrame(rows, columns=["profile", "task_id", "repetition", "success", "total_tokens"])


# --------------------------------------------------------------------------- pairing


def test_aggregate_repetitions_majority_vote_ties_fail_and_medians():
    df = _trials([
        ("A", "t1", 0, True, 10), ("A", "t1", 1, True, 30), ("A", "t1", 2, False, 20),
        ("A", "t2", 0, True, 5), ("A", "t2", 1, False, 7),  # tie: one pass, one fail
        ("A", "t3", 0, None, 1), ("A", "t3", 1, False, 3), ("A", "t3", 2, False, 2),  # missing outcome left out
    ])
    agg = stats.aggregate_repetitions(df, "success").set_index("task_id")
    assert agg.loc["t1", "value"] == 1.0 and not agg.loc["t1", "tie"]
    assert agg.loc["t2", "value"] == 0.0 and agg.loc["t2", "tie"]
    assert agg.loc["t3", "n_reps"] == 2 and agg.loc["t3", "value"] == 0.0
    med = stats.aggregate_repetitions(df, "total_tokens").set_index("task_id")["value"]
    assert med.to_dict() == {"t1": 20.0, "t2": 6.0, "t3": 2.0}


def test_pair_tasks_keeps_common_tasks_only():
    df = _trials([
        ("A", "t1", 0, True, 10), ("A", "t2", 0, False, 20), ("A", "t3", 0, True, 5),
        ("B", "t1", 0, False, 8), ("B", "t2", 0, True, 15), ("B", "t9", 0, True, 1),
    ])
    p = stats.pair_tasks(df, "total_tokens", "A", "B")
    assert p["task_id"].tolist() == ["t1", "t2"]
    assert p["a"].tolist() == [10.0, 20.0] and p["b"].tolist() == [8.0, 15.0]


def test_as_outcome_reads_csv_spellings_and_keeps_missing_missing():
    out = stats.as_outcome(["True", "false", "", None, 1, 0.0, "maybe"])
    assert out.iloc[:2].tolist() == [1.0, 0.0]
    assert out.iloc[[2, 3, 6]].isna().all()
    assert out.iloc[4:6].tolist() == [1.0, 0.0]


def test_pair_trials_blocks_by_task_and_repetition_and_refuses_duplicates():
    df = _trials([("A", "t1", 0, True, 1), ("A", "t1", 1, True, 2), ("B", "t1", 1, False, 3), ("B", "t1", 0, True, 4)])
    p = stats.pair_trials(df, "total_tokens", "A", "B")
    assert p[["repetition", "a", "b"]].to_numpy().tolist() == [[0, 1, 4], [1, 2, 3]]
    dup = pd.concat([df, df.iloc[[0]]])
    with pytest.raises(ValueError, match="occurs twice"):
        stats.pair_trials(dup, "total_tokens", "A", "B")


# --------------------------------------------------------------------------- McNemar


@pytest.mark.parametrize("table", [[[10, 3], [9, 2]], [[5, 0], [0, 7]], [[1, 12], [2, 0]], PERFORMANCE, [[0, 25], [30, 0]]])
def test_mcnemar_exact_matches_statsmodels_and_scipy_binomtest(table):
    ours = stats.mcnemar_from_table(table, exact=True).iloc[0]
    ref = sm_mcnemar(np.array(table), exact=True)  # statsmodels: statistic = min(n10, n01), binomial p
    assert ours["statistic"] == pytest.approx(ref.statistic, abs=1e-12)
    assert ours["p_val"] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
    n10, n01 = table[0][1], table[1][0]
    if n10 + n01:
        assert ours["p_val"] == pytest.approx(sps.binomtest(n01, n10 + n01, 0.5).pvalue, rel=1e-9, abs=1e-15)


def test_mcnemar_chi2_reproduces_r_help_page_example():
    # R: mcnemar.test(Performance) -> McNemar's chi-squared = 16.818, df = 1, p-value = 4.115e-05
    corr = stats.mcnemar_from_table(PERFORMANCE, exact=False, correction=True).iloc[0]
    assert corr["statistic"] == pytest.approx(16.818, abs=5e-4)
    assert corr["p_val"] == pytest.approx(4.115e-05, rel=5e-4)
    # R: mcnemar.test(Performance, correct = FALSE) -> McNemar's chi-squared = 17.356, p-value = 3.099e-05
    raw = stats.mcnemar_from_table(PERFORMANCE, exact=False, correction=False).iloc[0]
    assert raw["statistic"] == pytest.approx(17.356, abs=5e-4)
    assert raw["p_val"] == pytest.approx(3.099e-05, rel=5e-4)
    ref = sm_mcnemar(np.array(PERFORMANCE), exact=False, correction=True)
    assert corr["statistic"] == pytest.approx(ref.statistic, rel=1e-12)
    assert corr["p_val"] == pytest.approx(ref.pvalue, rel=1e-9)


def test_mcnemar_from_outcomes_builds_the_table_and_counts_discordant_pairs():
    a = [1, 1, 1, 0, 0, 0, 0, 1]
    b = [1, 0, 1, 1, 1, 1, 0, 1]
    t = stats.mcnemar_table(a, b)
    assert t.to_numpy().tolist() == [[3, 1], [3, 1]]
    r = stats.mcnemar(a, b).iloc[0]
    assert (r["n_a_only"], r["n_b_only"]) == (1, 3)
    assert r["p_val"] == pytest.approx(sm_mcnemar(t.to_numpy(), exact=True).pvalue, abs=1e-12)


# --------------------------------------------------------------------------- Wilcoxon


def test_wilcoxon_reproduces_r_help_page_exact():
    # R: wilcox.test(x, y, paired = TRUE) -> V = 40, p-value = 0.03906 (exactly 20/512)
    r = stats.wilcoxon(HW_X, HW_Y).iloc[0]
    assert r["V"] == 40.0 and r["method"] == "exact"
    assert r["p_val"] == pytest.approx(20 / 512, abs=1e-12)
    assert r["p_val"] == pytest.approx(sps.wilcoxon(HW_X, HW_Y, method="exact").pvalue, abs=1e-12)


def test_wilcoxon_normal_approximation_matches_r_without_correction():
    # R: wilcox.test(x, y, paired = TRUE, exact = FALSE, correct = FALSE) -> V = 40, p-value = 0.03815
    r = stats.wilcoxon(HW_X, HW_Y, method="approx", correction=False).iloc[0]
    assert r["p_val"] == pytest.approx(0.03815, abs=5e-6)
    # and with R's default continuity correction the same as scipy's asymptotic, correction=True
    rc = stats.wilcoxon(HW_X, HW_Y, method="approx", correction=True).iloc[0]
    ref = sps.wilcoxon(HW_X, HW_Y, method="asymptotic", correction=True)
    assert rc["p_val"] == pytest.approx(ref.pvalue, rel=1e-10)


def test_rank_biserial_matches_pingouin_and_r_effectsize():
    # pingouin.wilcoxon RBC, and R: effectsize::rank_biserial(x, y, paired = TRUE) -> r = 0.78
    ref = pg.wilcoxon(HW_X, HW_Y)["RBC"].iloc[0]
    assert stats.rank_biserial(HW_X, HW_Y) == pytest.approx(ref, abs=1e-12)
    assert stats.rank_biserial(HW_X, HW_Y) == pytest.approx(0.78, abs=0.005)
    assert stats.rank_biserial(HW_Y, HW_X) == pytest.approx(-ref, abs=1e-12)


@pytest.mark.parametrize("zero_method", ["wilcox", "pratt"])
def test_wilcoxon_with_ties_and_zeros_matches_scipy_asymptotic(zero_method):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 8, size=60).astype(float)
    y = rng.integers(0, 8, size=60).astype(float) + 0.5 * (rng.random(60) < 0.2)
    ours = stats.wilcoxon(x, y, zero_method=zero_method).iloc[0]
    assert ours["n_zero"] > 0 and ours["method"].startswith("normal")
    ref = sps.wilcoxon(x, y, zero_method=zero_method, correction=True, method="asymptotic")
    assert ours["p_val"] == pytest.approx(ref.pvalue, rel=1e-9)
    # RBC from pingouin (zeros dropped) for the wilcox convention
    if zero_method == "wilcox":
        assert ours["RBC"] == pytest.approx(pg.wilcoxon(x, y)["RBC"].iloc[0], abs=1e-12)


@pytest.mark.parametrize("n", [5, 13, 30, 49])
def test_wilcoxon_exact_matches_scipy_exact_distribution(n):
    rng = np.random.default_rng(n)
    d = rng.normal(0.3, 1.0, size=n)
    ours = stats.wilcoxon(d).iloc[0]
    assert ours["method"] == "exact"
    assert ours["p_val"] == pytest.approx(sps.wilcoxon(d, method="exact").pvalue, rel=1e-9, abs=1e-15)
    assert ours["V"] == pytest.approx(float(sps.rankdata(np.abs(d))[d > 0].sum()))


def test_wilcoxon_switches_to_normal_from_50_pairs_as_r_and_when_all_zero():
    # R: exact <- (n < 50) in wilcox.test.default; at 50 pairs the normal approximation is used.
    d = np.random.default_rng(1).normal(size=50)
    r = stats.wilcoxon(d).iloc[0]
    assert r["method"].startswith("normal")
    assert r["p_val"] == pytest.approx(sps.wilcoxon(d, method="asymptotic", correction=True).pvalue, rel=1e-9)
    z = stats.wilcoxon([1.0, 2.0], [1.0, 2.0]).iloc[0]
    assert (z["n"], z["p_val"], z["RBC"]) == (0, 1.0, 0.0)


def test_vectorised_wilcoxon_rows_equal_the_scalar_test():
    rng = np.random.default_rng(11)
    ints = rng.integers(-3, 4, size=(200, 30)).astype(float)  # ties and zeros
    cont = rng.normal(0.2, 1, size=(50, 12))  # exact path
    allzero = np.zeros((1, 5))
    for d in (ints, cont, allzero):
        ref = [stats.wilcoxon(row)["p_val"].iloc[0] for row in d]
        np.testing.assert_allclose(sample_size._wilcoxon_p_rows(d), ref, rtol=1e-12, atol=1e-15)


def test_wilcoxon_rejects_unknown_options():
    with pytest.raises(ValueError, match="zero_method"):
        stats.wilcoxon([1, 2], [0, 1], zero_method="zsplit")
    with pytest.raises(ValueError, match="method"):
        stats.wilcoxon([1, 2], [0, 1], method="permutation")


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_seeded_and_estimates_are_the_sample_statistics():
    rng = np.random.default_rng(3)
    a = rng.lognormal(10, 0.5, 40)
    b = a * rng.lognormal(-0.2, 0.2, 40)
    r1 = stats.bootstrap_paired(a, b, n_boot=2000, seed=11)
    r2 = stats.bootstrap_paired(a, b, n_boot=2000, seed=11)
    r3 = stats.bootstrap_paired(a, b, n_boot=2000, seed=12)
    pd.testing.assert_frame_equal(r1, r2)
    assert not np.allclose(r1["ci_low"], r3["ci_low"])
    e = r1.set_index("statistic")["estimate"]
    assert e["median_diff"] == pytest.approx(np.median(b - a))
    assert e["relative_change_pct"] == pytest.approx(100 * (np.median(b) - np.median(a)) / np.median(a))
    assert (r1["ci_low"] <= r1["estimate"]).all() and (r1["estimate"] <= r1["ci_high"]).all()


def test_bootstrap_matches_pingouin_percentile_within_monte_carlo_error():
    rng = np.random.default_rng(5)
    a = rng.lognormal(8, 0.6, 60)
    b = a * rng.lognormal(-0.15, 0.3, 60)
    n_ref = 3000
    ours_big = 40_000
    # pingouin: compute_bootci(x, y, func=..., paired=True, method="per", n_boot=3000, seed=1)
    ref = pg.compute_bootci(a, b, func=lambda x, y: np.median(y - x), paired=True, method="per",
                            n_boot=n_ref, seed=1, decimals=12)
    # The reference endpoints are order statistics of 3000 draws: their rank uncertainty is
    # sqrt(B q (1 - q)); map +-4 of those ranks through our (near-exact) bootstrap distribution.
    # A plain-numpy bootstrap distribution with many resamples stands in for the exact one.
    idx = np.random.default_rng(2).integers(0, a.size, size=(ours_big, a.size))
    dist = np.median(b[idx] - a[idx], axis=1)
    ours = stats.bootstrap_paired(a, b, statistics=("median_diff",), n_boot=n_ref, seed=3).iloc[0]
    for q, values in ((0.025, (ref[0], ours["ci_low"])), (0.975, (ref[1], ours["ci_high"]))):
        band = 4 * math.sqrt(q * (1 - q) / n_ref)
        for value in values:
            assert np.quantile(dist, max(q - band, 0)) <= value <= np.quantile(dist, min(q + band, 1))


@pytest.mark.parametrize("n", [1, 2, 7, 24, 501])
def test_resampled_medians_equal_numpy_median_with_ties(n):
    rng = np.random.default_rng(n)
    v = rng.integers(0, 5, size=n).astype(float)  # many ties
    idx = rng.integers(0, n, size=(300, n)).astype(np.int16)
    np.testing.assert_array_equal(bootstrap._resampled_medians(v, idx), np.median(v[idx], axis=1))


def test_bootstrap_mean_diff_of_outcomes_is_rate_difference():
    a = np.array([1, 0, 1, 1, 0, 0, 1, 0], float)
    b = np.array([1, 1, 1, 1, 0, 1, 1, 0], float)
    r = stats.bootstrap_paired(a, b, statistics=("mean_diff",), n_boot=500, seed=0).iloc[0]
    assert r["estimate"] == pytest.approx(b.mean() - a.mean())
    assert -1 <= r["ci_low"] <= r["ci_high"] <= 1


def test_bootstrap_rejects_bad_arguments():
    with pytest.raises(ValueError, match="statistic"):
        stats.bootstrap_paired([1, 2], [2, 3], statistics=("mode",), n_boot=10)
    with pytest.raises(ValueError, match="equal length"):
        stats.bootstrap_paired([1, 2], [2], n_boot=10)


# --------------------------------------------------------------------------- proportions, Holm


def test_wilson_matches_statsmodels():
    k = np.array([0, 1, 5, 12, 24, 7])
    n = np.array([24, 24, 24, 24, 24, 9])
    ours = stats.wilson_ci(k, n)
    # statsmodels: proportion_confint(k, n, alpha=0.05, method="wilson")
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    np.testing.assert_allclose(ours["ci_low"], lo, atol=1e-12)
    np.testing.assert_allclose(ours["ci_high"], hi, atol=1e-12)
    assert stats.wilson_ci(0, 0)["proportion"].isna().all()


@pytest.mark.parametrize("n", [2, 3, 12, 87, 261])
def test_wilson_interval_holds_the_proportion_exactly_at_none_and_all(n):
    """At 0 or n successes the Wilson interval's end is the proportion itself: rounding (1e-17) must not put it on
    the wrong side, where an error bar from the proportion to its end would have a negative length."""
    none, every = stats.wilson_ci([0, n], [n, n]).itertuples()
    assert (none.ci_low, every.ci_high) == (0.0, 1.0)
    assert none.ci_low <= none.proportion and every.proportion <= every.ci_high
    # statsmodels: proportion_confint(0, n, method="wilson")[1], the other end, to 1e-12
    assert none.ci_high == pytest.approx(proportion_confint(0, n, alpha=0.05, method="wilson")[1], abs=1e-12)
    clustered = stats.clustered_proportion(pd.Series([0, 0, 0]), pd.Series([2, 3, 2])).iloc[0]
    assert clustered["ci_low"] == 0.0 == clustered["proportion"]


def test_cohens_h_matches_statsmodels_and_cohen_table():
    # statsmodels: proportion_effectsize(p1, p2) = 2 asin(sqrt(p1)) - 2 asin(sqrt(p2)); ours is B - A
    for pa, pb in [(0.5, 0.25), (0.55, 0.67), (0.1, 0.9)]:
        assert stats.cohens_h(pa, pb) == pytest.approx(proportion_effectsize(pb, pa), abs=1e-12)
    # Cohen (1988), Table 6.2.1: phi(0.50) - phi(0.25) = 1.5708 - 1.0472 = 0.52
    assert stats.cohens_h(0.25, 0.50) == pytest.approx(0.5236, abs=1e-4)


def test_holm_matches_statsmodels_and_keeps_nan():
    p = [0.01, 0.04, 0.03, 0.20, 0.002]
    # statsmodels: multipletests(p, method="holm")[1]
    np.testing.assert_allclose(stats.holm(p), multipletests(p, method="holm")[1], atol=1e-12)
    out = stats.holm([0.02, np.nan, 0.04])
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2]], multipletests([0.02, 0.04], method="holm")[1], atol=1e-12)


# --------------------------------------------------------------------------- clustered SE


def test_clustered_mean_difference_matches_statsmodels_cluster_ols():
    rng = np.random.default_rng(9)
    tasks = np.repeat([f"t{i}" for i in range(15)], 3)
    task_effect = np.repeat(rng.normal(0, 2, 15), 3)
    a = rng.normal(10, 1, 45)
    b = a + 0.5 + task_effect + rng.normal(0, 1, 45)
    pairs = pd.DataFrame({"task_id": tasks, "a": a, "b": b})
    ours = stats.clustered_mean_difference(pairs).iloc[0]
    # statsmodels: OLS(d, const).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
    codes = pd.factorize(tasks)[0]
    fit = sm.OLS(b - a, np.ones(45)).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
    assert ours["mean_diff"] == pytest.approx(fit.params[0], rel=1e-12)
    assert ours["se_cluster"] == pytest.approx(fit.bse[0], rel=1e-10)
    lo, hi = fit.conf_int(0.05)[0]
    assert (ours["ci_low"], ours["ci_high"]) == pytest.approx((lo, hi), rel=1e-10)
    assert ours["design_effect"] > 1  # shared task effects inflate the variance


# --------------------------------------------------------------------------- pass@k


def _brute_pass(outcomes, k):
    subsets = list(itertools.combinations(outcomes, k))
    return np.mean([any(s) for s in subsets]), np.mean([all(s) for s in subsets])


def test_pass_at_k_and_pass_hat_k_match_enumeration_of_all_k_subsets():
    reps = {"t1": [1, 0, 0, 1, 0], "t2": [0, 0, 0, 0, 0], "t3": [1, 1, 1, 0, 1], "t4": [1, 1]}
    rows = [("A", t, i, bool(v), 0) for t, vs in reps.items() for i, v in enumerate(vs)]
    df = _trials(rows)
    for k in (1, 2, 3):
        r = stats.pass_at_k(df, k).iloc[0]
        usable = [v for v in reps.values() if len(v) >= k]
        ref = np.array([_brute_pass(v, k) for v in usable])
        assert r["n_tasks"] == len(usable) and r["n_tasks_short"] == len(reps) - len(usable)
        assert r["pass_at_k"] == pytest.approx(ref[:, 0].mean(), abs=1e-12)
        assert r["pass_hat_k"] == pytest.approx(ref[:, 1].mean(), abs=1e-12)


# --------------------------------------------------------------------------- planning


def _exact_mcnemar_power(n, p10, p01, alpha):
    """Exact power of the exact McNemar test: sum over discordant counts (independent reference)."""
    pd_ = p10 + p01
    power = 0.0
    for m in range(n + 1):
        pm = sps.binom.pmf(m, n, pd_)
        if m == 0:
            continue
        k = np.arange(m + 1)
        pvals = np.minimum(1, 2 * sps.binom.cdf(np.minimum(k, m - k), m, 0.5))
        power += pm * np.sum(sps.binom.pmf(k, m, p01 / pd_) * (pvals < alpha))
    return power


def test_plan_binary_matches_exact_power_within_monte_carlo_error():
    # pilot: 20 tasks, A solves 10; B loses 2 of those
    a = np.array([1] * 10 + [0] * 10, float)
    b = np.array([1] * 8 + [0] * 2 + [0] * 10, float)
    plan = stats.plan_sample_size(pd.DataFrame({"a": a, "b": b}), effect=0.2, kind="binary",
                                  n_tasks=(20, 60, 120), n_sim=4000, seed=3)
    p_a, q_minus = 0.5, 0.2
    q_plus = (0.2 + p_a * q_minus) / (1 - p_a)
    for row in plan.itertuples():
        ref = _exact_mcnemar_power(row.n_tasks, p_a * q_minus, (1 - p_a) * q_plus, 0.05)
        assert abs(row.power - ref) <= 4 * math.sqrt(ref * (1 - ref) / 4000) + 1e-9
    assert plan["n_required"].iloc[0] in (60.0, 120.0)


def test_plan_continuous_null_stays_near_alpha_and_effect_raises_power():
    rng = np.random.default_rng(4)
    a = rng.lognormal(11, 0.5, 24)
    b = a * rng.lognormal(-0.3, 0.3, 24)  # the pilot's own effect is removed by centring
    pilot = pd.DataFrame({"a": a, "b": b})
    null = stats.plan_sample_size(pilot, effect=0.0, n_tasks=(30,), n_sim=600, seed=1)
    assert null["power"].iloc[0] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 600)
    plan = stats.plan_sample_size(pilot, effect=0.2, n_tasks=(10, 30, 60), n_sim=300, seed=1)
    assert plan["power"].is_monotonic_increasing
    assert plan["power"].iloc[-1] > 0.8 and plan["n_required"].iloc[0] <= 60
    with pytest.raises(ValueError, match="kind"):
        stats.plan_sample_size(pilot, effect=0.2, kind="ordinal")


def test_project_spend_multiplies_pilot_median_and_p90():
    pilot = pd.DataFrame({"profile": ["A"] * 5 + ["B"] * 4,
                          "total_cost_usd": [1, 2, 3, 4, 10, 2, 2, 2, 6],
                          "total_tokens": [10] * 9, "elapsed_sec": [60] * 9})
    out = stats.project_spend(pilot, n_tasks=50, repetitions=3, metrics=("total_cost_usd",)).set_index("profile")
    assert out.loc["A", "per_run_median"] == 3 and out.loc["A", "projected_median"] == 150 * 3
    assert out.loc["A", "per_run_p90"] == pytest.approx(np.percentile([1, 2, 3, 4, 10], 90))
    assert out.loc["B", "projected_p90"] == pytest.approx(150 * np.percentile([2, 2, 2, 6], 90))
    assert out.loc["(all)", "projected_median"] == pytest.approx(150 * 3 + 150 * 2)
