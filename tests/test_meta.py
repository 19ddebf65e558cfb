"""The random-effects procedures (``analysis_lib.stats.meta``) against independent references.

References, each beside its value with the call that produced it and a tolerance:

* statsmodels' ``combine_effects`` (DerSimonian-Laird and Paule-Mandel tau^2; ``conf_int(use_t=True)``'s fourth
  interval is the Hartung-Knapp-Sidik-Jonkman one, ``var_hksj_re``);
* R ``metafor`` as stored in statsmodels' own test results (``statsmodels/stats/tests/results/results_meta.py``:
  Kacker 2004's nine means, ``rma(y, v, method="PM" | "DL", test="knha")``) and as printed in metafor's README
  (the BCG vaccine trials, REML with ``test="knha"``, and the ``~ ablat`` meta-regression);
* R ``meta`` 4.11-0 in the same statsmodels file (``metabin(..., method.tau="DL", hakn=TRUE)`` on
  ``dat.fine1993``): Q, I^2 and H with their test-based intervals;
* the REML tau^2 as the maximiser of the restricted likelihood, found by scipy's bounded scalar search;
* for the prediction interval, R ``pimeta``'s vignette (Nagashima, Noma & Furukawa's parametric bootstrap on the 13
  cisapride trials of Hartung & Knapp 2001, data printed there), closed forms of weighted chi-squared sums
  (scipy's chi-squared, the hypoexponential law), Imhof's integral and simulation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from scipy.optimize import minimize_scalar
from statsmodels.stats.meta_analysis import combine_effects
from statsmodels.stats.tests.results import results_meta as R

from analysis_lib import stats
from analysis_lib.stats import meta

# metafor's dat.bcg (Colditz et al. 1994): tpos, tneg, cpos, cneg of the 13 trials, and their absolute latitude.
BCG = [(4, 119, 11, 128), (6, 300, 29, 274), (3, 228, 11, 209), (62, 13536, 248, 12619), (33, 5036, 47, 5761),
       (180, 1361, 372, 1079), (8, 2537, 10, 619), (505, 87886, 499, 87892), (29, 7470, 45, 7232),
       (17, 1699, 65, 1600), (186, 50448, 141, 27197), (5, 2493, 3, 2338), (27, 16886, 29, 17825)]
ABLAT = [44, 55, 42, 52, 13, 44, 19, 13, 27, 42, 18, 33, 33]


def bcg_log_rr() -> tuple[np.ndarray, np.ndarray]:
    """``escalc(measure="RR", ai=tpos, bi=tneg, ci=cpos, di=cneg, data=dat.bcg)``: log risk ratios and variances."""
    y = np.array([np.log(a / (a + b) / (c / (c + d))) for a, b, c, d in BCG])
    v = np.array([1 / a - 1 / (a + b) + 1 / c - 1 / (c + d) for a, b, c, d in BCG])
    return y, v


def test_escalc_values_of_the_bcg_trials_are_metafors():
    y, v = bcg_log_rr()
    # metafor's README prints yi and vi to 4 decimals (first, sixth and last trial here).
    assert np.round([y[0], y[5], y[12]], 4).tolist() == [-0.8893, -0.7861, -0.0173]
    assert np.round([v[0], v[5], v[12]], 4).tolist() == [0.3256, 0.0069, 0.0714]


def test_reml_with_hksj_equals_metafor_on_the_bcg_trials():
    """metafor README: rma(yi, vi, data=dat, test="knha"): tau^2 0.3132, estimate -0.7145, se 0.1808, t -3.9522,
    df 12, p 0.0019, CI [-1.1084, -0.3206]; I^2 92.22 % is metafor's tau^2-based I^2, ours is Q's (below)."""
    y, v = bcg_log_rr()
    r = meta.random_effects(y, v).iloc[0]
    assert r["tau2"] == pytest.approx(0.3132, abs=5e-5)
    assert (r["estimate"], r["se"], r["statistic"]) == (pytest.approx(-0.7145, abs=5e-5),
                                                        pytest.approx(0.1808, abs=5e-5), pytest.approx(-3.9522, abs=5e-5))
    assert r["df"] == 12 and r["p_val"] == pytest.approx(0.0019, abs=5e-5)
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(-1.1084, abs=5e-5), pytest.approx(-0.3206, abs=5e-5))
    # metafor: predict(res, transf=exp) with test="knha" gives pi [0.14, 1.76]: its prediction interval uses t on
    # k - 1 df and the HKSJ standard error. Ours (Higgins et al. 2009) uses t on k - 2 df and the model's SE:
    z_se = np.sqrt(1 / np.sum(1 / (v + r["tau2"])))
    half = sps.t.ppf(0.975, 11) * np.sqrt(r["tau2"] + z_se**2)
    assert (r["pi_hts_low"], r["pi_hts_high"]) == (pytest.approx(r["estimate"] - half, rel=1e-12),
                                                   pytest.approx(r["estimate"] + half, rel=1e-12))
    metafor_half = sps.t.ppf(0.975, 12) * np.sqrt(r["tau2"] + r["se"] ** 2)
    assert np.round(np.exp([r["estimate"] - metafor_half, r["estimate"] + metafor_half]), 2).tolist() == [0.14, 1.76]


def test_reml_tau2_maximises_the_restricted_likelihood():
    y, v = bcg_log_rr()

    def neg_restricted_loglik(t2: float) -> float:
        w = 1 / (v + t2)
        mu = np.sum(w * y) / np.sum(w)
        return 0.5 * (np.sum(np.log(v + t2)) + np.log(np.sum(w)) + np.sum(w * (y - mu) ** 2))

    best = minimize_scalar(neg_restricted_loglik, bounds=(0, 5), method="bounded", options={"xatol": 1e-12}).x
    assert meta.tau2_estimate(y, v) == pytest.approx(best, rel=1e-7)


@pytest.mark.parametrize("method", ["dl", "pm"])
def test_dl_and_pm_with_hksj_equal_statsmodels(method):
    """statsmodels combine_effects(y, v, method_re=method).conf_int(use_t=True)[3] is the HKSJ interval."""
    y, v = bcg_log_rr()
    ref = combine_effects(y, v, method_re=method, use_t=True)
    r = meta.random_effects(y, v, method=method).iloc[0]
    assert r["tau2"] == pytest.approx(ref.tau2, rel=1e-8)
    assert r["estimate"] == pytest.approx(ref.mean_effect_re, rel=1e-10)
    low, high = ref.conf_int(use_t=True)[3]
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(low, rel=1e-8), pytest.approx(high, rel=1e-8))
    z = meta.random_effects(y, v, method=method, interval="z").iloc[0]
    low, high = ref.conf_int(use_t=False)[1]  # the random-effects normal interval
    assert (z["ci_low"], z["ci_high"]) == (pytest.approx(low, rel=1e-8), pytest.approx(high, rel=1e-8))


def test_kacker_example_equals_metafor_in_statsmodels_results():
    """R: rma(y, v, method="PM") and method="DL" (test="knha"), control=list(tol=1e-9), as stored by statsmodels."""
    y, v = R.exk1_metafor.yi, R.exk1_metafor.vi
    pm = meta.random_effects(y, v, method="pm", interval="z").iloc[0]
    assert pm["tau2"] == pytest.approx(R.exk1_metafor.tau2, rel=1e-7)  # 0.705395309224248
    assert pm["estimate"] == pytest.approx(R.exk1_metafor.b, rel=1e-9)  # 62.4076199113286
    assert pm["se"] == pytest.approx(R.exk1_metafor.se, rel=1e-7)  # 0.338030602684471
    dl = meta.random_effects(y, v, method="dl").iloc[0]
    assert dl["tau2"] == pytest.approx(R.exk1_dl.tau2, rel=1e-9)  # 0.288049246973751
    assert dl["se"] == pytest.approx(R.exk1_dl_hksj.se, rel=1e-9)  # 0.29477605699879 (knha)
    assert (dl["ci_low"], dl["ci_high"]) == (pytest.approx(R.exk1_dl_hksj.ci_lb, rel=1e-10),  # 61.710383798052
                                             pytest.approx(R.exk1_dl_hksj.ci_ub, rel=1e-10))  # 63.0698934108488
    assert dl["p_val"] == pytest.approx(R.exk1_dl_hksj.pval, rel=1e-6)  # 2.77938607433693e-16
    q = meta.cochran_q(y, v).iloc[0]
    assert q["Q"] == pytest.approx(R.exk1_dl.QE, rel=1e-10) and q["p_val"] == pytest.approx(R.exk1_dl.QEp, rel=1e-8)
    assert 100 * q["I2"] == pytest.approx(R.exk1_dl.I2, rel=1e-10)  # 67.744403741711: DL's I^2 is Q's


def test_i2_and_h_intervals_equal_r_meta():
    """R meta 4.11-0: metabin(..., method.tau="DL", hakn=TRUE) on dat.fine1993 (17 odds ratios): Q 16.1814, I^2 0.0112
    [0, 0.5164], H 1.0057 [1, 1.4379]; tau^2 0.0016784 and the HKSJ interval [0.23535, 0.62369]."""
    ref = R.results_or_dl_hk
    y, v = ref.TE, ref.seTE**2
    q = meta.cochran_q(y, v).iloc[0]
    assert q["Q"] == pytest.approx(ref.Q, rel=1e-10) and q["df"] == ref.df_Q
    assert q["I2"] == pytest.approx(ref.I2, rel=1e-9)
    assert (q["I2_low"], q["I2_high"]) == (pytest.approx(ref.lower_I2, abs=1e-12), pytest.approx(ref.upper_I2, rel=1e-9))
    assert (q["H"], q["H_low"], q["H_high"]) == (pytest.approx(ref.H, rel=1e-9), pytest.approx(ref.lower_H, rel=1e-12),
                                                 pytest.approx(ref.upper_H, rel=1e-9))
    r = meta.random_effects(y, v, method="dl").iloc[0]
    assert r["tau2"] == pytest.approx(ref.tau2, rel=1e-8)
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(ref.lower_random, rel=1e-8),
                                           pytest.approx(ref.upper_random, rel=1e-8))


def test_i2_interval_when_q_exceeds_k():
    """Higgins & Thompson (2002), Appendix, Q > k: se(ln H) = (ln Q - ln(k-1)) / (2 (sqrt(2Q) - sqrt(2k-3))), here by hand
    for the BCG trials (Q 152.2330, k 13)."""
    y, v = bcg_log_rr()
    q = meta.cochran_q(y, v).iloc[0]
    se = 0.5 * (np.log(152.2330) - np.log(12)) / (np.sqrt(2 * 152.2330) - np.sqrt(23))
    h = np.sqrt(152.2330 / 12)
    lo, hi = h * np.exp(-1.959964 * se), h * np.exp(1.959964 * se)
    assert (q["I2_low"], q["I2_high"]) == (pytest.approx(1 - 1 / lo**2, abs=1e-5), pytest.approx(1 - 1 / hi**2, abs=1e-5))


def test_tau2_q_profile_interval_equals_metafor():
    """metafor confint(rma(yi, vi, data=dat)) on the BCG trials: tau^2 [0.1197, 1.1115]; its ends solve the
    generalised Q = chi-squared quantiles (checked here by putting them back)."""
    y, v = bcg_log_rr()
    r = meta.tau2_interval(y, v).iloc[0]
    assert (r["tau2_low"], r["tau2_high"]) == (pytest.approx(0.1197, abs=5e-5), pytest.approx(1.1115, abs=5e-5))
    for t2, q in ((r["tau2_low"], 0.975), (r["tau2_high"], 0.025)):
        w = 1 / (v + t2)
        gq = np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2)
        assert gq == pytest.approx(sps.chi2.ppf(q, 12), rel=1e-8)


def test_tau2_interval_is_zero_zero_when_the_effects_agree_more_than_chance():
    y, v = [0.1, 0.1001, 0.0999, 0.1], [0.01, 0.01, 0.01, 0.01]
    r = meta.tau2_interval(y, v).iloc[0]
    assert (r["tau2_low"], r["tau2_high"]) == (0.0, 0.0)
    assert all(meta.tau2_estimate(y, v, method=m) == 0.0 for m in meta.TAU2_METHODS)


def test_meta_regression_equals_metafor_on_latitude():
    """metafor README: rma(yi, vi, mods = ~ ablat, data=dat, test="knha"): intercept 0.2515 (se 0.2839, t 0.8857,
    p 0.3948, CI [-0.3735, 0.8764]), ablat -0.0291 (se 0.0082, t -3.5483, p 0.0046, CI [-0.0472, -0.0111]),
    QE(df = 11) = 30.7331, p 0.0012. metafor stops REML at a change below 1e-5 (its tau^2 0.0764, F 12.5905, R^2
    75.62 %); converged, tau^2 is 0.07635."""
    y, v = bcg_log_rr()
    m = meta.meta_regression(y, v, ABLAT, ["ablat"])
    c = m.coefficients.set_index("term")
    assert c.loc["intercept", ["estimate", "se", "statistic", "p_val", "ci_low", "ci_high"]].round(4).tolist() == \
        [0.2515, 0.2839, 0.8857, 0.3947, -0.3734, 0.8764]
    assert c.loc["ablat", ["estimate", "se", "statistic", "p_val", "ci_low", "ci_high"]].round(4).tolist() == \
        [-0.0291, 0.0082, -3.5484, 0.0046, -0.0472, -0.0111]
    assert (m.qe, m.qe_df, m.qe_p) == (pytest.approx(30.7331, abs=5e-5), 11, pytest.approx(0.0012, abs=5e-5))
    assert m.tau2 == pytest.approx(0.0764, abs=1e-4) and m.f == pytest.approx(12.5905, abs=1e-3)
    assert m.r2 == pytest.approx(0.7562, abs=2e-4) and m.f_p == pytest.approx(0.0046, abs=5e-5)


def test_meta_regression_with_a_category_equals_weighted_least_squares_by_hand():
    """With tau^2 fixed by the model, the coefficients are WLS with weights 1/(v + tau^2) (numpy lstsq here)."""
    y, v = bcg_log_rr()
    alloc = np.array([1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0], dtype=float)  # random allocation vs not (dat.bcg alloc)
    m = meta.meta_regression(y, v, alloc, ["random"], method="dl")
    w = np.sqrt(1 / (v + m.tau2))
    x = np.column_stack([np.ones(13), alloc])
    b = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0]
    assert m.coefficients["estimate"].tolist() == pytest.approx(b.tolist(), rel=1e-10)


@pytest.mark.parametrize("bad, message", [
    (([0.1], [0.01]), "at least 2"),
    (([0.1, 0.2], [0.01]), "same length"),
    (([0.1, 0.2], [0.01, 0.0]), "positive"),
    (([0.1, np.nan], [0.01, 0.01]), "finite"),
])
def test_bad_inputs_raise_one_line(bad, message):
    with pytest.raises(ValueError, match=message):
        meta.random_effects(*bad)


def test_identical_effects_have_no_heterogeneity_and_no_warning():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = meta.cochran_q([0.2, 0.2, 0.2], [0.01, 0.02, 0.01]).iloc[0]
        r = meta.random_effects([0.2, 0.2, 0.2], [0.01, 0.02, 0.01]).iloc[0]
        p = meta.prediction_interval([0.2, 0.2, 0.2], [0.01, 0.02, 0.01]).iloc[0]
    assert (q["Q"], q["I2"], r["tau2"], r["estimate"]) == (0.0, 0.0, 0.0, pytest.approx(0.2))
    assert np.isnan(q["I2_low"]) and np.isnan(q["I2_high"])
    # Q = 0: every draw of tau^2 is 0 and Hartung's variance is 0, so the bootstrap interval has no width (the
    # HKSJ interval's edge, docs/pooling.md).
    assert (p["pi_low"], p["pi_high"]) == (pytest.approx(0.2), pytest.approx(0.2))


def test_prediction_interval_needs_three_effects_and_hksj_two():
    r = meta.random_effects([0.1, 0.3], [0.01, 0.02]).iloc[0]
    assert r["df"] == 1 and np.isfinite(r["ci_low"]) and np.isnan(r["pi_hts_low"]) and np.isnan(r["pi_hts_high"])
    for method in meta.PI_METHODS:
        p = meta.prediction_interval([0.1, 0.3], [0.01, 0.02], method=method).iloc[0]
        assert p["k"] == 2 and np.isnan(p["pi_low"]) and np.isnan(p["pi_high"])


# pimeta's vignette (docs/articles/pimeta.html, pimeta 1.1.4): 13 placebo-controlled trials of cisapride
# (Hartung & Knapp 2001), successes m and patients n under treatment (1) and placebo (2).
CISAPRIDE = {"m1": [15, 12, 29, 42, 14, 44, 14, 29, 10, 17, 38, 19, 21],
             "n1": [16, 16, 34, 56, 22, 54, 17, 58, 14, 26, 44, 29, 38],
             "m2": [9, 1, 18, 31, 6, 17, 7, 23, 3, 6, 12, 22, 19],
             "n2": [16, 16, 34, 56, 22, 55, 15, 58, 15, 27, 45, 30, 38]}


def cisapride_log_or() -> tuple[np.ndarray, np.ndarray]:
    """``pimeta::convert_bin(m1, n1, m2, n2, type = "logOR")``: 0.5 added to every cell."""
    m1, n1, m2, n2 = (np.array(CISAPRIDE[c], dtype=float) for c in ("m1", "n1", "m2", "n2"))
    y = np.log((m1 + 0.5) * (n2 - m2 + 0.5) / ((n1 - m1 + 0.5) * (m2 + 0.5)))
    v = 1 / (m1 + 0.5) + 1 / (n1 - m1 + 0.5) + 1 / (m2 + 0.5) + 1 / (n2 - m2 + 0.5)
    return y, v


def test_cisapride_log_odds_ratios_are_pimetas():
    y, v = cisapride_log_or()
    # head(dat, n = 3) in the vignette: y 2.098986 3.357026 1.565232, se 0.9847737 1.0165653 0.5747840.
    assert y[:3] == pytest.approx([2.098986, 3.357026, 1.565232], abs=5e-7)
    assert np.sqrt(v[:3]) == pytest.approx([0.9847737, 1.0165653, 0.5747840], abs=5e-8)


def test_bootstrap_prediction_interval_equals_pimeta_on_the_cisapride_trials():
    """pimeta vignette: ``pima(dat$y, dat$se, seed = 2236067, parallel = 4)`` (B = 25000), printed with
    ``trans = "exp"``: 4.141 [95 % PI 0.533, 33.692], [95 % CI 2.224, 7.820], tau^2 0.718, I^2 69.9 %.

    The deterministic parts to pimeta's printed digits (mu with DerSimonian-Laird weights, DL tau^2, I^2). The
    bootstrap ends are Monte-Carlo estimates in pimeta's run as in ours: one run of 25,000 draws has a standard
    error of 0.022-0.024 on the log scale per end (measured over 60 seeds), so the mean of 8 of our runs is
    compared with pimeta's single run at 4 standard errors of the difference, 0.1 (2.4 % of the interval's width).
    The confidence interval of the same draws (pimeta's ``mu(tau^2_b) - t_b se_HK(tau^2_b)`` quantiles) checks the
    draws of tau^2 from its confidence distribution without the new study's own deviation."""
    y, v = cisapride_log_or()
    dl = meta.random_effects(y, v, method="dl").iloc[0]
    assert np.exp(dl["estimate"]) == pytest.approx(4.141, abs=5e-4)
    assert dl["tau2"] == pytest.approx(0.718, abs=5e-4)
    assert 100 * meta.cochran_q(y, v).iloc[0]["I2"] == pytest.approx(69.9, abs=0.05)
    rows = [meta.prediction_interval(y, v, draws=25000, seed=seed).iloc[0] for seed in range(8)]
    low, high = np.mean([r["pi_low"] for r in rows]), np.mean([r["pi_high"] for r in rows])
    assert low == pytest.approx(np.log(0.533), abs=0.1) and high == pytest.approx(np.log(33.692), abs=0.1)
    assert all(r["method"] == "boot" and r["draws"] == 25000 and r["k"] == 13 for r in rows)
    ci = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        u, t = rng.random(25000), rng.standard_t(12, 25000)
        tau2 = meta._tau2_cd_quantile(y, v, u)
        w = 1 / (v + tau2[:, None])
        mu = (w * y).sum(1) / w.sum(1)
        se = np.sqrt((w * (y - mu[:, None]) ** 2).sum(1) / (12 * w.sum(1)))
        ci.append(np.quantile(mu - t * se, [0.025, 0.975]))
    assert np.mean(ci, axis=0) == pytest.approx(np.log([2.224, 7.820]), abs=0.03)


def test_bootstrap_prediction_interval_is_seeded_and_its_monte_carlo_error_is_as_documented():
    y, v = cisapride_log_or()
    a, b = (meta.prediction_interval(y, v, seed=7).iloc[0] for _ in range(2))
    assert (a["pi_low"], a["pi_high"]) == (b["pi_low"], b["pi_high"]) and a["seed"] == 7
    ends = np.array([[r["pi_low"], r["pi_high"]] for r in
                     (meta.prediction_interval(y, v, seed=s).iloc[0] for s in range(40))])
    # PI_DRAWS = 5000: each end's standard error about 1 / sqrt(5000) of the width (docstring), here 0.8-1.3 of it.
    ratio = ends.std(axis=0, ddof=1) / np.mean(ends[:, 1] - ends[:, 0]) * np.sqrt(meta.PI_DRAWS)
    assert np.all((ratio > 0.6) & (ratio < 1.4)), ratio


def test_plug_in_prediction_intervals_are_hts_and_partlett_riley():
    """HTS: DL tau^2, se^2 = 1 / sum w, t on k - 2 df (pimeta ``pima_hts``); Partlett-Riley: REML tau^2 with
    Hartung-Knapp's se (pimeta ``method = "HK"``)."""
    y, v = bcg_log_rr()
    hts = meta.prediction_interval(y, v, method="hts").iloc[0]
    dl = meta.random_effects(y, v, method="dl", interval="z").iloc[0]
    assert (hts["pi_low"], hts["pi_high"]) == pytest.approx((dl["pi_hts_low"], dl["pi_hts_high"]), rel=1e-12)
    assert hts["tau2_method"] == "dl" and hts["draws"] == 0
    hk = meta.prediction_interval(y, v, method="hk").iloc[0]
    reml = meta.random_effects(y, v).iloc[0]  # REML with the HKSJ interval: its se is Hartung-Knapp's
    half = sps.t.ppf(0.975, 11) * np.sqrt(reml["tau2"] + reml["se"] ** 2)
    assert (hk["pi_low"], hk["pi_high"]) == pytest.approx((reml["estimate"] - half, reml["estimate"] + half), rel=1e-10)
    with pytest.raises(ValueError, match="method must be one of"):
        meta.prediction_interval(y, v, method="normal")
    with pytest.raises(ValueError, match="draws must be"):
        meta.prediction_interval(y, v, draws=10)


@pytest.mark.parametrize("x", [0.5, 4.0, 15.0, 60.0])
def test_weighted_chisq_cdf_equals_closed_forms_and_imhofs_integral(x):
    # Equal weights: lambda chi-squared(n) (scipy).
    assert meta.weighted_chisq_cdf(x, [2.5] * 7)[0] == pytest.approx(sps.chi2.cdf(x / 2.5, 7), abs=1e-13)
    # Two weights twice each: a sum of two exponentials (means 2a, 2b), 1 - (b e^(-x/2b) - a e^(-x/2a)) / (b - a).
    a, b = 1.5, 40.0
    exact = 1 - (b * np.exp(-x / (2 * b)) - a * np.exp(-x / (2 * a))) / (b - a)
    assert meta.weighted_chisq_cdf(x, [a, a, b, b])[0] == pytest.approx(exact, abs=1e-13)
    # Spread weights (the Fourier path) and mild ones (the recursion) against Imhof's integral.
    for lam in ([1.0, 1.3, 2.0, 4.0, 9.0], [1.0, 3.0, 200.0, 1000.0, 1500.0]):
        assert meta.weighted_chisq_cdf(x, lam)[0] == pytest.approx(meta._imhof_cdf(x, np.array(lam)), abs=2e-8)


def test_weighted_chisq_cdf_paths_agree_and_rows_are_independent():
    lam = np.array([[1.0, 1.3, 2.0, 2.5, 4.0], [1.0, 2.0, 50.0, 700.0, 900.0]])
    g = 1 - lam.min(axis=1, keepdims=True) / lam
    recursive, done = meta._ruben_weights_recursive(g, 2000)
    fourier = meta._ruben_weights_fourier(g)
    assert list(done) == [True, False]  # the spread row needs more terms than the recursion is allowed: the transform
    m = min(recursive.shape[1], fourier.shape[1])
    assert np.abs(recursive[:, :m] - fourier[:, :m]).max() < 1e-14
    both = meta.weighted_chisq_cdf([3.0, 300.0], lam)
    assert both == pytest.approx([meta.weighted_chisq_cdf(3.0, lam[0])[0], meta.weighted_chisq_cdf(300.0, lam[1])[0]],
                                 abs=1e-15)
    with pytest.raises(ValueError, match="positive"):
        meta.weighted_chisq_cdf(1.0, [1.0, 0.0])


def test_exact_distribution_of_q_matches_simulation():
    """Q (inverse-variance weights) of effects drawn from the random-effects model, 200,000 times: its empirical
    distribution function equals the exact one within 4 binomial standard errors."""
    v = np.array([0.01, 0.02, 0.05, 0.2, 0.04, 0.09])
    tau2 = 0.03
    rng = np.random.default_rng(5)
    y = 0.3 + rng.standard_normal((200_000, 6)) * np.sqrt(v + tau2)
    w = 1 / v
    mu = (y * w).sum(1) / w.sum()
    q = (w * (y - mu[:, None]) ** 2).sum(1)
    for x in (2.0, 6.0, 12.0, 30.0):
        exact = meta._q_cdf(x, v, np.array([tau2]))[0]
        assert abs(np.mean(q <= x) - exact) < 4 * np.sqrt(exact * (1 - exact) / 200_000), x


def test_confidence_distribution_of_tau2_starts_at_the_q_test_and_its_draws_invert_it():
    y, v = bcg_log_rr()
    assert meta.tau2_confidence_distribution(y, v, [0.0])[0] == pytest.approx(meta.cochran_q(y, v).iloc[0]["p_val"],
                                                                              abs=1e-12)
    for yy, vv in ((y, v), cisapride_log_or(), ([0.1, 0.3, 0.25], [0.0016, 0.0016, 0.002])):
        yy, vv = np.asarray(yy), np.asarray(vv)
        h0 = meta.tau2_confidence_distribution(yy, vv, [0.0])[0]
        u = np.array([0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 0.9999])
        got = meta._tau2_cd_quantile(yy, vv, u)
        assert np.all(got[u <= h0] == 0)
        # The exact quantile lies within 5e-4 of the interpolated one: H (increasing) brackets u there.
        lo, hi = meta.tau2_confidence_distribution(yy, vv, np.r_[got[u > h0] * (1 - 5e-4), got[u > h0] * (1 + 5e-4)]
                                                   ).reshape(2, -1)
        assert np.all((lo <= u[u > h0]) & (u[u > h0] <= hi)), (u, lo, hi)


def test_the_statistics_namespace_exports_the_procedures():
    assert {"cochran_q", "random_effects", "tau2_estimate", "tau2_interval", "meta_regression", "prediction_interval",
            "tau2_confidence_distribution", "weighted_chisq_cdf"} <= set(stats.__all__)
    assert isinstance(stats.random_effects([0.1, 0.2, 0.4], [0.01, 0.01, 0.02]), pd.DataFrame)
