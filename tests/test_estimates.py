"""The estimators behind every comparison, against independent references and their agreeing tests.

References: R's ``wilcox.test`` algorithm for the exact Hodges-Lehmann interval (order statistics of
the Walsh averages at ``qsignrank``, here from a brute-force enumeration of sign patterns), a
numerical restricted maximum likelihood for Tango's score statistic, Clopper-Pearson from the
binomial tails, statsmodels' clustered variance, and direct enumeration for the mid-p test.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as sps

from analysis_lib import stats

# R: x <- c(1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30)
#    y <- c(0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29)
#    wilcox.test(x, y, paired = TRUE, conf.int = TRUE)  (the ?wilcox.test example)
#    -> V = 40, p-value = 0.03906, (pseudo)median 0.46
X = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
Y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]


def _qsignrank(alpha: float, n: int) -> int:
    """R's qsignrank(alpha, n) by enumerating all 2^n sign patterns (independent of stats._signrank_pmf)."""
    sums = sorted(sum(r for r, s in zip(range(1, n + 1), signs, strict=True) if s) for signs in itertools.product((0, 1), repeat=n))
    total = len(sums)
    for q in range(n * (n + 1) // 2 + 1):
        if sum(1 for v in sums if v <= q) / total >= alpha:
            return q
    raise AssertionError


def test_hodges_lehmann_matches_r_exact_interval():
    hl = stats.hodges_lehmann(X, Y).iloc[0]
    assert hl["estimate"] == pytest.approx(0.46, abs=1e-12)
    assert hl["p_val"] == pytest.approx(0.03906, abs=5e-6)
    # R: qu <- qsignrank(0.025, n); ql <- n(n+1)/2 - qu; CI = c(diffs[qu], diffs[ql + 1]) (sorted Walsh averages)
    d = np.subtract(X, Y)
    i, j = np.triu_indices(d.size)
    walsh = np.sort((d[i] + d[j]) / 2)
    qu = _qsignrank(0.025, d.size)
    ql = d.size * (d.size + 1) // 2 - qu
    assert (hl["ci_low"], hl["ci_high"]) == pytest.approx((walsh[qu - 1], walsh[ql]), abs=1e-12)


@pytest.mark.parametrize("n", [6, 12, 30, 49, 50, 80])
def test_hodges_lehmann_interval_agrees_with_the_wilcoxon_test(n):
    rng = np.random.default_rng(n)
    disagreements = 0
    for k in range(60):
        d = rng.normal(0.3 * (k % 3), 1.0, size=n)
        if k % 4 == 0:
            d = np.round(d, 1)  # ties: the normal approximation's tie correction
            d = d[d != 0]
        hl = stats.hodges_lehmann(d).iloc[0]
        p = stats.wilcoxon(d).iloc[0]["p_val"]
        assert hl["ci_low"] <= hl["estimate"] <= hl["ci_high"]
        i, j = np.triu_indices(d.size)
        if np.any(d[i] + d[j] == 0):
            continue  # 0 is a Walsh average: the test at 0 and the interval's end meet there (documented)
        excludes = not (hl["ci_low"] <= 0 <= hl["ci_high"])
        disagreements += (p < 0.05) != excludes
    assert disagreements == 0


def test_wilcoxon_exact_below_fifty_as_r_and_nan_without_pairs():
    rng = np.random.default_rng(1)
    assert stats.wilcoxon(rng.normal(size=49)).iloc[0]["method"] == "exact"
    assert stats.wilcoxon(rng.normal(size=50)).iloc[0]["method"].startswith("normal approximation")
    empty = stats.wilcoxon([]).iloc[0]
    assert math.isnan(empty["p_val"]) and "no pairs" in empty["method"]
    assert math.isnan(stats.hodges_lehmann([]).iloc[0]["estimate"])


def _tango_numeric(delta: float, n10: int, n01: int, n: int) -> float:
    """Tango's score statistic with the restricted MLE found numerically (multinomial, p01 - p10 = delta)."""
    n11 = n00 = (n - n10 - n01) / 2  # only n11 + n00 enters the likelihood

    def nll(p10):
        p01 = p10 + delta
        rest = 1 - p10 - p01
        if p10 <= 0 or p01 <= 0 or rest <= 0:
            return np.inf
        return -(n10 * math.log(p10) + n01 * math.log(p01) + (n11 + n00) * math.log(rest))

    lo, hi = max(0.0, -delta) + 1e-12, (1 - delta) / 2 - 1e-12
    p10 = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13}).x
    return (n01 - n10 - n * delta) / math.sqrt(n * (2 * p10 + delta * (1 - delta)))


@pytest.mark.parametrize("n10,n01,n", [(1, 7, 21), (6, 16, 161), (2, 5, 24), (0, 4, 30), (3, 3, 12)])
def test_tango_interval_solves_the_score_equation(n10, n01, n):
    t = stats.tango_interval(n10, n01, n).iloc[0]
    z = sps.norm.ppf(0.975)
    assert t["difference"] == pytest.approx((n01 - n10) / n)
    assert t["ci_low"] <= t["difference"] <= t["ci_high"]
    # The ends are where the score statistic (restricted MLE found numerically) equals -+1.96.
    assert _tango_numeric(t["ci_low"], n10, n01, n) == pytest.approx(z, abs=1e-5)
    assert _tango_numeric(t["ci_high"], n10, n01, n) == pytest.approx(-z, abs=1e-5)
    # At 0 the statistic is McNemar's uncorrected z, so the interval agrees with that test.
    if n10 + n01:
        mcz = (n01 - n10) / math.sqrt(n01 + n10)
        assert t["z"] == pytest.approx(mcz)
        p_score = stats.mcnemar_from_table([[0, n10], [n01, 0]], exact=False, correction=False).iloc[0]["p_val"]
        assert (p_score < 0.05) == (not t["ci_low"] <= 0 <= t["ci_high"])


def test_conditional_odds_ratio_interval_agrees_with_the_exact_test():
    for n10 in range(0, 25):
        for n01 in range(0, 25):
            if n10 + n01 == 0:
                continue
            o = stats.conditional_odds_ratio(n10, n01).iloc[0]
            p = stats.mcnemar_from_table([[0, n10], [n01, 0]], exact=True).iloc[0]["p_val"]
            assert o["ci_low"] <= o["odds_ratio"] <= o["ci_high"]
            assert (p < 0.05) == (not o["ci_low"] <= 1 <= o["ci_high"]), (n10, n01)
            # Clopper-Pearson ends from the binomial tails: P(X >= n01 | lower) = 0.025.
            if n01:
                pi_lo = o["ci_low"] / (1 + o["ci_low"])
                assert sps.binom.sf(n01 - 1, n10 + n01, pi_lo) == pytest.approx(0.025, abs=1e-9)


def test_midp_by_enumeration():
    from fractions import Fraction

    for n10, n01 in [(1, 7), (2, 5), (0, 3), (4, 4), (10, 2)]:
        m, k = n10 + n01, min(n10, n01)
        pmf = [Fraction(math.comb(m, i), 2**m) for i in range(m + 1)]
        expect = min(Fraction(1), 2 * (sum(pmf[:k]) + pmf[k] / 2))
        assert stats.mcnemar_midp(n10, n01) == pytest.approx(float(expect), abs=1e-12)


def test_clustered_proportion_variance_is_statsmodels_cluster_variance():
    import statsmodels.api as sm

    rng = np.random.default_rng(3)
    wins = rng.integers(0, 4, size=15)
    trials = np.full(15, 3)
    trials[:4] = 2
    wins = np.minimum(wins, trials)
    y = np.concatenate([[1] * w + [0] * (t - w) for w, t in zip(wins, trials, strict=True)])
    groups = np.repeat(np.arange(15), trials)
    fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    row = stats.clustered_proportion(wins, trials).iloc[0]
    p = wins.sum() / trials.sum()
    assert row["proportion"] == pytest.approx(p)
    var_cluster = row["design_effect"] * p * (1 - p) / trials.sum()
    assert var_cluster == pytest.approx(float(fit.bse[0]) ** 2, rel=1e-10)
    # Wilson at the design-effective size; deff >= 1 widens it against the trial-level Wilson.
    naive = stats.wilson_ci(int(wins.sum()), int(trials.sum())).iloc[0]
    assert row["ci_high"] - row["ci_low"] >= naive["ci_high"] - naive["ci_low"] - 1e-12


def test_one_trial_per_task_has_no_design_effect_and_the_two_rates_of_one_count_share_an_interval():
    # 7 of 9 tasks, one trial each (the CodeScaleBench slice's baseline): nothing is clustered, so the pass rate over
    # trials is Wilson's over the 9 trials (statsmodels proportion_confint(7, 9, method="wilson"): 0.45259, 0.93677),
    # exactly the resolve rate's interval over the 9 tasks. The CR1 formula alone would say G / (G - 1) = 1.125.
    r = stats.clustered_proportion([1, 1, 1, 0, 1, 1, 0, 1, 1], [1] * 9).iloc[0]
    w = stats.wilson_ci(7, 9).iloc[0]
    assert r["design_effect"] == 1.0 and r["n_effective"] == 9
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((0.45259, 0.93677), abs=5e-6)
    assert (r["ci_low"], r["ci_high"]) == (w["ci_low"], w["ci_high"])


@pytest.mark.slow  # 2,000 simulated studies (~10 s of CPU)
def test_clustered_proportion_covers_in_simulation_where_the_trial_level_wilson_does_not():
    rng = np.random.default_rng(7)
    n_tasks, reps, sims = 24, 3, 2000
    p_task = rng.beta(0.55 * 2.5, 0.45 * 2.5, size=(sims, n_tasks))
    wins = rng.binomial(reps, p_task)
    truth = 0.55
    cover_cluster = cover_naive = 0
    for w in wins:
        r = stats.clustered_proportion(w, np.full(n_tasks, reps)).iloc[0]
        cover_cluster += r["ci_low"] <= truth <= r["ci_high"]
        nv = stats.wilson_ci(int(w.sum()), n_tasks * reps).iloc[0]
        cover_naive += nv["ci_low"] <= truth <= nv["ci_high"]
    # Monte-Carlo SE of a coverage near 0.95 over 2000 studies: 0.005.
    assert cover_cluster / sims >= 0.93
    assert cover_naive / sims < 0.90


def test_ratio_of_totals_never_infinite():
    r = stats.ratio_of_totals([1.0, 2.0, 3.0], [0, 0, 1], [1.0, 1.0, 1.0], [1, 1, 0], n_boot=2000, seed=1).set_index("arm")
    assert r.loc["A", "estimate"] == pytest.approx(6.0) and r.loc["B", "estimate"] == pytest.approx(1.5)
    assert r.loc["B/A", "estimate"] == pytest.approx(0.25)
    assert r.loc["B/A", "n_undefined"] > 0  # resamples without a success in an arm are left out, counted
    assert np.isfinite(r[["ci_low", "ci_high"]].to_numpy()).all()
    none = stats.ratio_of_totals([1.0], [0], [1.0], [1], n_boot=100).set_index("arm")
    assert math.isnan(none.loc["A", "estimate"]) and math.isnan(none.loc["B/A", "estimate"])
    assert not np.isinf(pd.to_numeric(none["estimate"])).any()


# --------------------------------------------------------------------------- every repetition


def test_paired_t_is_scipys_one_sample_t_test_and_interval():
    d = np.random.default_rng(3).normal(0.1, 0.3, 17)
    r = stats.paired_t(d).iloc[0]
    ref = sps.ttest_1samp(d, 0.0)
    ci = ref.confidence_interval(0.95)
    assert r["p_val"] == pytest.approx(ref.pvalue, rel=1e-12) and r["statistic"] == pytest.approx(ref.statistic)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-12) and r["df"] == 16


def test_paired_t_is_the_cr2_satterthwaite_test_of_the_trial_level_model():
    """statsmodels' cluster-robust OLS of per-task differences on an intercept: CR2 = s^2/n for one row per task."""
    import statsmodels.api as sm

    d = np.random.default_rng(4).normal(0.0, 1.0, 12)
    fit = sm.OLS(d, np.ones((d.size, 1))).fit(cov_type="HC2")  # HC2 with one observation per cluster = CR2
    r = stats.paired_t(d).iloc[0]
    assert r["se"] == pytest.approx(float(fit.bse[0]), rel=1e-10)


@pytest.mark.parametrize("n", [6, 12, 16])
def test_sign_flip_exact_p_is_scipys_permutation_test(n):
    d = np.random.default_rng(n).normal(0.4, 1.0, n)
    ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
    r = stats.sign_flip(d).iloc[0]
    assert r["exact"] and r["p_val"] == pytest.approx(ref.pvalue, rel=1e-12)


def test_sign_flip_interval_inverts_the_test_and_monte_carlo_states_its_error():
    d = np.random.default_rng(7).normal(0.3, 1.0, 24)  # 2^24 patterns: Monte Carlo
    r = stats.sign_flip(d, n_resamples=20_000, seed=1).iloc[0]
    ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=200_000, alternative="two-sided",
                               random_state=0)
    assert not r["exact"] and 0 < r["mc_se"] < 0.005 and abs(r["p_val"] - ref.pvalue) < 4 * r["mc_se"] + 0.002
    assert r["ci_low"] < r["estimate"] < r["ci_high"]
    for bound, outward in ((r["ci_low"], -1e-6), (r["ci_high"], 1e-6)):
        assert stats.sign_flip(d - bound, n_resamples=20_000, seed=1).iloc[0]["p_val"] > 0.05
        assert stats.sign_flip(d - bound - outward, n_resamples=20_000, seed=1).iloc[0]["p_val"] <= 0.05
    assert (r["ci_low"] > 0) == (r["p_val"] <= 0.05)


def test_repetitions_aggregate_by_pass_rate_and_geometric_mean():
    trials = pd.DataFrame({"profile": ["a"] * 5, "task_id": ["t1", "t1", "t1", "t2", "t2"],
                           "success": [True, False, True, True, False], "tokens": [10.0, 1000.0, 100.0, 4.0, 0.0]})
    rate = stats.aggregate_repetitions(trials, "success", how="mean").set_index("task_id")
    assert rate.loc["t1", "value"] == pytest.approx(2 / 3) and rate.loc["t2", "value"] == 0.5
    assert not rate["tie"].any()  # no ties: an even split is a pass rate of one half, not a failure
    assert stats.aggregate_repetitions(trials, "success").set_index("task_id").loc["t2", "value"] == 0.0
    geo = stats.aggregate_repetitions(trials, "tokens", binary=False, how="geometric_mean").set_index("task_id")
    assert geo.loc["t1", "value"] == pytest.approx(100.0) and np.isnan(geo.loc["t2", "value"])
    with pytest.raises(ValueError, match="cannot aggregate pass/fail repetitions by 'median'"):
        stats.aggregate_repetitions(trials, "success", how="median")


def _mancl_derouen_se(y, x, groups, rho):
    """The bias-reduced sandwich of Mancl & DeRouen (2001) for a Gaussian GEE with identity link and exchangeable
    working correlation rho, written out from the paper's formula (an independent check of statsmodels' version):
    B = sum D'V^-1 D, meat = sum D'V^-1 (I - H_g)^-1 r r' (I - H_g)^-T V^-1 D, H_g = D_g B^-1 D_g' V_g^-1."""
    X = np.column_stack([np.ones_like(x), x])
    beta = None
    blocks = []
    for g in np.unique(groups):
        Xg, yg = X[groups == g], y[groups == g]
        m = len(yg)
        V = (1 - rho) * np.eye(m) + rho * np.ones((m, m))
        blocks.append((Xg, yg, np.linalg.inv(V)))
    bread = sum(Xg.T @ Vi @ Xg for Xg, _, Vi in blocks)
    beta = np.linalg.solve(bread, sum(Xg.T @ Vi @ yg for Xg, yg, Vi in blocks))
    binv = np.linalg.inv(bread)
    meat = np.zeros((2, 2))
    for Xg, yg, Vi in blocks:
        H = Xg @ binv @ Xg.T @ Vi
        u = Xg.T @ Vi @ np.linalg.solve(np.eye(len(yg)) - H, yg - Xg @ beta)
        meat += np.outer(u, u)
    cov = binv @ meat @ binv
    return beta[1], float(np.sqrt(cov[1, 1]))


def test_gee_difference_uses_the_mancl_derouen_sandwich_with_t_on_tasks_minus_one():
    """Balanced tasks: the estimate is the plain difference of pass rates; the SE is Mancl & DeRouen's bias-reduced
    sandwich (computed here from the formula, with statsmodels' estimate of the working correlation), larger than
    the plain sandwich (the CR0 cluster-robust SE of the OLS fit); test and interval use t with G - 1 df."""
    import statsmodels.api as sm

    rng = np.random.default_rng(11)
    tasks = np.repeat(np.arange(20), 6)
    arm = np.tile([0, 0, 0, 1, 1, 1], 20)
    p = rng.uniform(0.2, 0.8, 20)[tasks] + 0.1 * arm
    y = (rng.random(tasks.size) < p).astype(float)
    r = stats.gee_difference(y, arm, tasks).iloc[0]
    assert r["estimate"] == pytest.approx(y[arm == 1].mean() - y[arm == 0].mean(), abs=1e-10)
    fit = sm.GEE(y, sm.add_constant(arm.astype(float)), groups=tasks, family=sm.families.Gaussian(),
                 cov_struct=sm.cov_struct.Exchangeable()).fit()
    est, se = _mancl_derouen_se(y, arm.astype(float), tasks, float(fit.cov_struct.dep_params))
    assert r["estimate"] == pytest.approx(est, abs=1e-10) and r["se"] == pytest.approx(se, rel=1e-6)
    ols = sm.OLS(y, sm.add_constant(arm.astype(float))).fit(cov_type="cluster", cov_kwds={"groups": tasks, "use_correction": False})
    assert r["se"] > float(ols.bse[1])  # the plain sandwich is biased down with 20 clusters
    assert r["df"] == 19 and r["p_val"] == pytest.approx(2 * sps.t.sf(abs(r["estimate"] / r["se"]), 19), rel=1e-12)
    assert (r["ci_low"] > 0) == (r["p_val"] < 0.05)
