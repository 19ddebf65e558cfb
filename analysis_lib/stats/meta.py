"""Random-effects pooling of per-study (per-configuration) effects: the between-study variance tau^2 by REML,
Paule-Mandel or DerSimonian-Laird, the Hartung-Knapp-Sidik-Jonkman interval, Cochran's Q with I^2 and its
interval, the Q-profile interval of tau^2, the prediction interval for a new study (the parametric bootstrap
from the confidence distribution of tau^2, with the plug-in intervals beside it), and a meta-regression.

Every function takes the effects ``y_i`` and their within-study variances ``v_i`` on one scale (a rate
difference, a log ratio) and assumes the random-effects model ``y_i = mu + u_i + e_i`` with
``u_i ~ N(0, tau^2)`` and ``e_i ~ N(0, v_i)``, ``v_i`` known (Borenstein, Hedges, Higgins & Rothstein 2009,
Introduction to Meta-Analysis, ch. 12). The methods follow metafor's ``rma.uni`` (Viechtbauer 2010, J. Stat.
Softw. 36(3)); the examples quote metafor's documented output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps
from scipy.integrate import quad
from scipy.interpolate import PchipInterpolator
from scipy.optimize import brentq

__all__ = ["TAU2_METHODS", "PI_METHODS", "PI_DRAWS", "PI_SEED", "cochran_q", "tau2_estimate", "tau2_interval",
           "random_effects", "weighted_chisq_cdf", "tau2_confidence_distribution", "prediction_interval", "MetaRegression",
           "meta_regression"]

TAU2_METHODS = ("reml", "pm", "dl")
# REML's Fisher scoring stops when tau^2 moves less than this (metafor's default threshold is 1e-5).
_REML_TOL = 1e-10
_REML_MAX_ITER = 1000
PI_METHODS = ("boot", "hts", "hk")
# Bootstrap draws of a new study's effect: the Monte-Carlo standard error of each end is about 1 / sqrt(draws) of
# the interval's width (1.4 % at 5,000; measured over seeds in tests/test_meta.py), far under the width's own
# sampling error with a handful of studies. pimeta's default is 25,000.
PI_DRAWS = 5000
PI_SEED = 20190601
# Ruben's series for the distribution of Q leaves out mixture weights summing to less than this. It needs about
# 35 r terms for within-study variances r times apart: Farebrother's recursion up to _RUBEN_RECURSIVE_TERMS, a
# Fourier transform beyond, and a refusal past _RUBEN_MAX_TERMS (r in the tens of thousands).
_RUBEN_TOL = 1e-13
_RUBEN_RECURSIVE_TERMS = 400
_RUBEN_MAX_TERMS = 2**21
# The confidence distribution of tau^2 is tabulated on a log grid from _CD_LOW times its scale (the larger of the
# DL estimate and the mean within-study variance) to the first power of ten of the scale where P(Q <= q) falls
# below _CD_TAIL, and inverted by monotone cubic interpolation (relative error under 5e-4 in tau^2); below the
# grid it is linear in tau^2, and draws beyond its 1 - _CD_TAIL quantile (a chance of 1e-12 each) take that one.
_CD_GRID = 160
_CD_LOW = 1e-6
_CD_DECADES = 16
_CD_TAIL = 1e-12


def _arrays(effects: ArrayLike, variances: ArrayLike, min_k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(effects, dtype=float).ravel()
    v = np.asarray(variances, dtype=float).ravel()
    if y.shape != v.shape:
        raise ValueError(f"effects and variances must have the same length, got {y.size} and {v.size}")
    if y.size < min_k:
        raise ValueError(f"pooling needs at least {min_k} effects, got {y.size}")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(v)) and np.all(v > 0)):
        raise ValueError("effects must be finite and variances finite and positive")
    return y, v


def _design(moderators: ArrayLike | None, k: int) -> np.ndarray:
    """The model matrix: an intercept, then the moderators' columns."""
    ones = np.ones((k, 1))
    if moderators is None:
        return ones
    m = np.asarray(moderators, dtype=float)
    m = m.reshape(k, -1) if m.ndim != 2 else m
    if m.shape[0] != k or not np.all(np.isfinite(m)):
        raise ValueError(f"moderators must be a finite k x m matrix with k = {k}, got shape {m.shape}")
    return np.hstack([ones, m])


def _wls(y: np.ndarray, v: np.ndarray, tau2: float, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Weighted least squares with weights 1/(v + tau^2): coefficients, their covariance, the weighted residual
    sum of squares (the generalised Q) and the weights."""
    w = 1.0 / (v + tau2)
    xtw = x.T * w
    cov = np.linalg.inv(xtw @ x)
    b = cov @ (xtw @ y)
    resid = y - x @ b
    return b, cov, float(np.sum(w * resid**2)), w


def _p_matrix(v: np.ndarray, tau2: float, x: np.ndarray) -> np.ndarray:
    """``P = W - W X (X'WX)^-1 X'W``, the residual-forming matrix of REML and of the DL moment estimator."""
    w = 1.0 / (v + tau2)
    wx = x * w[:, None]
    return np.diag(w) - wx @ np.linalg.inv(x.T @ wx) @ wx.T


def _generalised_q(y: np.ndarray, v: np.ndarray, tau2: float, x: np.ndarray) -> float:
    return _wls(y, v, tau2, x)[2]


def _root_above(f, target: float, scale: float) -> float:
    """The tau^2 >= 0 where the decreasing function ``f`` falls to ``target`` (f(0) > target)."""
    hi = max(scale, 1e-8)
    while f(hi) > target:
        hi *= 2.0
        if hi > 1e12:
            raise ValueError("tau^2 has no finite solution (effects too far apart for their variances)")
    return float(brentq(lambda t: f(t) - target, 0.0, hi, xtol=1e-14, rtol=1e-12, maxiter=500))


def _tau2(y: np.ndarray, v: np.ndarray, x: np.ndarray, method: str) -> float:
    k, p = x.shape
    if method not in TAU2_METHODS:
        raise ValueError(f"method must be one of {TAU2_METHODS}, got {method!r}")
    if k <= p:
        raise ValueError(f"estimating tau^2 needs more effects ({k}) than coefficients ({p})")
    q0 = _generalised_q(y, v, 0.0, x)
    p0 = _p_matrix(v, 0.0, x)
    dl = max(0.0, (q0 - (k - p)) / float(np.trace(p0)))
    if method == "dl":
        return dl
    if method == "pm":
        if q0 <= k - p:
            return 0.0
        return _root_above(lambda t: _generalised_q(y, v, t, x), k - p, max(dl, float(np.var(y))))
    tau2 = dl
    for _ in range(_REML_MAX_ITER):
        pm = _p_matrix(v, tau2, x)
        py = pm @ y
        step = (float(py @ py) - float(np.trace(pm))) / float(np.sum(pm * pm))
        new = max(0.0, tau2 + step)
        if abs(new - tau2) < _REML_TOL:
            return new
        tau2 = new
    raise ValueError(f"REML did not converge in {_REML_MAX_ITER} Fisher-scoring steps")


def tau2_estimate(effects: ArrayLike, variances: ArrayLike, *, method: str = "reml") -> float:
    """The between-study variance tau^2 of the random-effects model, by ``method``.

    * ``"reml"``: restricted maximum likelihood, by Fisher scoring from the DL value, truncated at 0
      (Viechtbauer 2005, J. Educ. Behav. Stat. 30:261-293);
    * ``"pm"``: Paule-Mandel, the tau^2 at which the generalised Q, ``sum (y_i - mu)^2 / (v_i + tau^2)``, equals its
      expectation k - 1 (0 when Q(0) <= k - 1; Paule & Mandel 1982, J. Res. NBS 87:377-385);
    * ``"dl"``: DerSimonian-Laird's moment estimator ``max(0, (Q - (k - 1)) / (sum w - sum w^2 / sum w))`` with
      ``w = 1/v`` (DerSimonian & Laird 1986, Control. Clin. Trials 7:177-188).

    Examples
    --------
    Kacker (2004)'s nine interlaboratory means; R ``metafor::rma(y, v, method="PM")`` gives
    tau^2 = 0.705395309 and ``method="DL"`` 0.288049247 (statsmodels' test results, ``results_meta.exk1_metafor``):

    >>> y = [61.0, 61.4, 62.21, 62.3, 62.34, 62.6, 62.7, 62.84, 65.9]
    >>> v = [0.2025, 1.21, 0.09, 0.2025, 0.3844, 0.5625, 0.0676, 0.0225, 1.8225]
    >>> print(f"PM {tau2_estimate(y, v, method='pm'):.9f}, DL {tau2_estimate(y, v, method='dl'):.9f}")
    PM 0.705395309, DL 0.288049247
    """
    y, v = _arrays(effects, variances)
    return _tau2(y, v, _design(None, y.size), method)


def cochran_q(effects: ArrayLike, variances: ArrayLike, *, confidence: float = 0.95) -> pd.DataFrame:
    """Cochran's Q test of homogeneity, with I^2 and H and their test-based intervals.

    ``Q = sum w_i (y_i - y_FE)^2`` with ``w_i = 1/v_i`` and ``y_FE`` the inverse-variance mean, compared to
    chi-squared with k - 1 df (Cochran 1954, Biometrics 10:101-129). ``I2 = max(0, (Q - (k-1)) / Q)``, the share of
    the variability of the effects that is between-study rather than sampling variance, and ``H = sqrt(Q/(k-1))``
    (Higgins & Thompson 2002, Stat. Med. 21:1539-1558). The interval of ln H is ``ln H +- z se``, with
    ``se = (ln Q - ln(k-1)) / (2 (sqrt(2Q) - sqrt(2k-3)))`` when Q > k, else
    ``sqrt(1/(2(k-2)) (1 - 1/(3(k-2)^2)))`` (their Appendix; R ``meta``'s interval); H's lower end is at least 1 and
    I^2's ends are ``(H^2 - 1)/H^2`` at H's ends.

    Returns one row: ``k, Q, df, p_val, I2, I2_low, I2_high, H, H_low, H_high``.

    Examples
    --------
    metafor's README (``rma(yi, vi, data=dat)`` on the BCG trials, log risk ratios) prints
    ``Q(df = 12) = 152.2330``; I^2 by Q is (152.2330 - 12) / 152.2330:

    >>> bcg = [(4, 119, 11, 128), (6, 300, 29, 274), (3, 228, 11, 209), (62, 13536, 248, 12619),
    ...        (33, 5036, 47, 5761), (180, 1361, 372, 1079), (8, 2537, 10, 619), (505, 87886, 499, 87892),
    ...        (29, 7470, 45, 7232), (17, 1699, 65, 1600), (186, 50448, 141, 27197), (5, 2493, 3, 2338),
    ...        (27, 16886, 29, 17825)]
    >>> y = [np.log(a / (a + b) / (c / (c + d))) for a, b, c, d in bcg]
    >>> v = [1 / a - 1 / (a + b) + 1 / c - 1 / (c + d) for a, b, c, d in bcg]
    >>> r = cochran_q(y, v).iloc[0]
    >>> print(f"Q = {r['Q']:.4f}, df = {r['df']:.0f}, I2 = {r['I2']:.4f}")
    Q = 152.2330, df = 12, I2 = 0.9212
    """
    y, v = _arrays(effects, variances)
    k = y.size
    q = _generalised_q(y, v, 0.0, _design(None, k))
    df = k - 1
    z = sps.norm.ppf((1 + confidence) / 2)
    h = np.sqrt(q / df)
    if q == 0:  # identical effects: H = 0, and the interval of ln H has no centre
        se = np.nan
    elif q > k:
        se = 0.5 * (np.log(q) - np.log(df)) / (np.sqrt(2 * q) - np.sqrt(2 * k - 3))
    elif k > 2:
        se = np.sqrt(1 / (2 * (k - 2)) * (1 - 1 / (3 * (k - 2) ** 2)))
    else:
        se = np.nan
    h_low = h_high = np.nan
    if np.isfinite(se):
        h_low, h_high = max(1.0, float(np.exp(np.log(h) - z * se))), max(1.0, float(np.exp(np.log(h) + z * se)))

    def i2(hh: float) -> float:
        return max(0.0, (hh**2 - 1) / hh**2) if np.isfinite(hh) else np.nan

    return pd.DataFrame([{"k": k, "Q": q, "df": df, "p_val": float(sps.chi2.sf(q, df)),
                          "I2": max(0.0, (q - df) / q) if q > 0 else 0.0, "I2_low": i2(h_low), "I2_high": i2(h_high),
                          "H": float(h), "H_low": h_low, "H_high": h_high}])


def tau2_interval(effects: ArrayLike, variances: ArrayLike, *, confidence: float = 0.95) -> pd.DataFrame:
    """The Q-profile confidence interval of tau^2 (Viechtbauer 2007, Stat. Med. 26:37-52).

    The generalised Q, ``sum (y_i - mu(tau^2))^2 / (v_i + tau^2)``, follows chi-squared with k - 1 df at the true
    tau^2 and falls as tau^2 grows; the interval is every tau^2 >= 0 at which it lies between the chi-squared
    quantiles ``(1 -+ confidence)/2``. An end that would be negative is 0. It holds whichever estimator gives the
    point value.

    Returns one row: ``tau2_low, tau2_high``.

    Examples
    --------
    metafor's ``confint(rma(yi, vi, data=dat))`` on the BCG trials (log risk ratios) prints tau^2 0.3132
    [0.1197, 1.1115]:

    >>> bcg = [(4, 119, 11, 128), (6, 300, 29, 274), (3, 228, 11, 209), (62, 13536, 248, 12619),
    ...        (33, 5036, 47, 5761), (180, 1361, 372, 1079), (8, 2537, 10, 619), (505, 87886, 499, 87892),
    ...        (29, 7470, 45, 7232), (17, 1699, 65, 1600), (186, 50448, 141, 27197), (5, 2493, 3, 2338),
    ...        (27, 16886, 29, 17825)]
    >>> y = [np.log(a / (a + b) / (c / (c + d))) for a, b, c, d in bcg]
    >>> v = [1 / a - 1 / (a + b) + 1 / c - 1 / (c + d) for a, b, c, d in bcg]
    >>> r = tau2_interval(y, v).iloc[0]
    >>> print(f"[{r['tau2_low']:.4f}, {r['tau2_high']:.4f}]")
    [0.1197, 1.1115]
    """
    y, v = _arrays(effects, variances)
    x = _design(None, y.size)
    df = y.size - 1
    q0 = _generalised_q(y, v, 0.0, x)
    scale = max(float(np.var(y)), float(np.mean(v)))

    def end(quantile: float) -> float:
        target = float(sps.chi2.ppf(quantile, df))
        return 0.0 if q0 <= target else _root_above(lambda t: _generalised_q(y, v, t, x), target, scale)

    return pd.DataFrame([{"tau2_low": end((1 + confidence) / 2), "tau2_high": end((1 - confidence) / 2)}])


def random_effects(effects: ArrayLike, variances: ArrayLike, *, method: str = "reml", interval: str = "hksj",
                   confidence: float = 0.95) -> pd.DataFrame:
    """The random-effects pooled effect mu with its interval, tau^2 and the plug-in prediction interval for a new study.

    ``mu = sum w_i y_i / sum w_i`` with ``w_i = 1/(v_i + tau^2)`` and tau^2 by ``method`` (:func:`tau2_estimate`);
    its standard error ``se = sqrt(1/sum w_i)``.

    * ``interval="hksj"``: Hartung-Knapp-Sidik-Jonkman, ``mu +- t_{k-1} se_HK`` with
      ``se_HK^2 = sum w_i (y_i - mu)^2 / ((k - 1) sum w_i)`` (Hartung & Knapp 2001, Stat. Med. 20:3875-3889; Sidik &
      Jonkman 2002, Stat. Med. 21:3153-3159); it keeps near-nominal coverage with few studies, where the
      normal interval is too narrow (IntHout, Ioannidis & Borm 2014, BMC Med. Res. Methodol. 14:25). The
      test is t on k - 1 df with the same standard error. Where the effects agree more closely than their
      variances predict, the interval is narrower than the normal one (zero-wide when they are identical);
      Roever, Knapp & Friede (2015, BMC Med. Res. Methodol. 15:99) discuss that edge.
    * ``interval="z"``: ``mu +- z se`` and the z test (DerSimonian & Laird's original).

    Beside them, the plug-in prediction interval for the effect of a new study, ``mu +- t_{k-2} sqrt(tau^2 + se^2)``
    with this tau^2 and the model's ``se`` (Higgins, Thompson & Spiegelhalter 2009, J. R. Stat. Soc. A 172:137-159;
    k >= 3). It treats the estimated tau^2 as known and covers too little with few studies: the prediction interval
    to report is :func:`prediction_interval`'s bootstrap.

    Returns one row: ``method, interval, k, estimate, se, ci_low, ci_high, df, statistic, p_val, tau2, tau,
    pi_hts_low, pi_hts_high`` (``df`` NaN for the z interval; ``se`` is the interval's own standard error).

    Examples
    --------
    metafor's README, ``rma(yi, vi, data=dat, test="knha")`` on the BCG trials (REML, log risk ratios): estimate
    -0.7145, se 0.1808, tval -3.9522, df 12, p 0.0019, 95 % CI [-1.1084, -0.3206], tau^2 0.3132:

    >>> bcg = [(4, 119, 11, 128), (6, 300, 29, 274), (3, 228, 11, 209), (62, 13536, 248, 12619),
    ...        (33, 5036, 47, 5761), (180, 1361, 372, 1079), (8, 2537, 10, 619), (505, 87886, 499, 87892),
    ...        (29, 7470, 45, 7232), (17, 1699, 65, 1600), (186, 50448, 141, 27197), (5, 2493, 3, 2338),
    ...        (27, 16886, 29, 17825)]
    >>> y = [np.log(a / (a + b) / (c / (c + d))) for a, b, c, d in bcg]
    >>> v = [1 / a - 1 / (a + b) + 1 / c - 1 / (c + d) for a, b, c, d in bcg]
    >>> r = random_effects(y, v).iloc[0]
    >>> print(f"{r['estimate']:.4f} se {r['se']:.4f} t {r['statistic']:.4f} df {r['df']:.0f} p {r['p_val']:.4f} "
    ...       f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}] tau2 {r['tau2']:.4f}")
    -0.7145 se 0.1808 t -3.9522 df 12 p 0.0019 [-1.1084, -0.3206] tau2 0.3132
    """
    if interval not in ("hksj", "z"):
        raise ValueError(f"interval must be 'hksj' or 'z', got {interval!r}")
    y, v = _arrays(effects, variances)
    k = y.size
    x = _design(None, k)
    tau2 = _tau2(y, v, x, method)
    b, cov, q_star, _ = _wls(y, v, tau2, x)
    mu, se = float(b[0]), float(np.sqrt(cov[0, 0]))
    if interval == "hksj":
        se_int = float(np.sqrt(q_star / (k - 1) * cov[0, 0]))
        df: float = k - 1
        quant = float(sps.t.ppf((1 + confidence) / 2, df))
        stat = mu / se_int if se_int > 0 else np.nan
        p = float(2 * sps.t.sf(abs(stat), df)) if np.isfinite(stat) else np.nan
    else:
        se_int, df = se, np.nan
        quant = float(sps.norm.ppf((1 + confidence) / 2))
        stat = mu / se
        p = float(2 * sps.norm.sf(abs(stat)))
    pi_low = pi_high = np.nan
    if k >= 3:
        half = float(sps.t.ppf((1 + confidence) / 2, k - 2)) * np.sqrt(tau2 + se**2)
        pi_low, pi_high = mu - half, mu + half
    return pd.DataFrame([{"method": method, "interval": interval, "k": k, "estimate": mu, "se": se_int,
                          "ci_low": mu - quant * se_int, "ci_high": mu + quant * se_int, "df": df, "statistic": stat,
                          "p_val": p, "tau2": tau2, "tau": float(np.sqrt(tau2)), "pi_hts_low": pi_low,
                          "pi_hts_high": pi_high}])


def _ruben_weights_recursive(gamma: np.ndarray, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``terms`` mixture weights of Ruben's series by Farebrother's recursion (``m p_m = sum_j c_j p_{m-j}``,
    ``c_j = sum_i g_i^j / 2``, from the generating function's logarithmic derivative), stopping once every row's
    left-out mass is under _RUBEN_TOL; and which rows got there."""
    rows = gamma.shape[0]
    p, c = np.zeros((rows, terms)), np.zeros((rows, terms))
    p[:, 0] = np.exp(0.5 * np.log1p(-gamma).sum(axis=1))
    total, power = p[:, 0].copy(), np.ones_like(gamma)
    m = 0
    while np.any(1.0 - total >= _RUBEN_TOL) and m + 1 < terms:
        m += 1
        power *= gamma
        c[:, m] = 0.5 * power.sum(axis=1)
        p[:, m] = np.einsum("ij,ij->i", c[:, 1:m + 1], p[:, m - 1::-1]) / m
        total += p[:, m]
    return p[:, :m + 1], 1.0 - total < _RUBEN_TOL


def _ruben_weights_fourier(gamma: np.ndarray) -> np.ndarray:
    """Ruben's mixture weights as the coefficients of N's generating function, read off by a discrete Fourier
    transform of its values on the unit circle: exact up to the mass of N beyond the transform's length, which a
    Chernoff bound keeps under _RUBEN_TOL. For spread weights, where the recursion would need thousands of terms."""
    top = gamma.max(axis=1)
    # P(N >= L) <= E[s^N] s^-L at s = top^(-1/2).
    log_mgf = 0.5 * (np.log1p(-gamma) - np.log1p(-gamma / np.sqrt(top)[:, None])).sum(axis=1)
    need = float(((np.log(_RUBEN_TOL) - log_mgf) / (0.5 * np.log(top))).max())
    if need > _RUBEN_MAX_TERMS:
        raise ValueError("the within-study variances are too far apart for the exact distribution of Q (its series "
                         f"would need {need:.3g} terms)")
    size = int(2 ** np.ceil(np.log2(need)))
    z = np.exp(2j * np.pi * np.arange(size // 2 + 1) / size)  # the upper half circle: the coefficients are real
    log_pgf = 0.5 * (np.log1p(-gamma)[:, :, None] - np.log(1.0 - gamma[:, :, None] * z)).sum(axis=1)
    return np.fft.irfft(np.exp(log_pgf).conj(), n=size, axis=1)


def _ruben_cdf(x: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``P(sum_j lam_ij chi2_1 <= x_i)`` for each row i by Ruben's series (Ruben 1962, Ann. Math. Stat.
    33:542-570; Farebrother 1984, Appl. Stat. 33:332-339, algorithm AS 204, the one pimeta uses).

    With ``beta = min lam`` the sum is ``beta`` times a chi-squared on ``n + 2N`` df, N a sum of independent negative
    binomials ``NB(1/2, beta / lam_j)``: every mixture weight is positive, so the left-out ones bound the error.
    """
    rows, n = lam.shape
    beta = lam.min(axis=1)
    gamma = 1.0 - beta[:, None] / lam
    weights, done = _ruben_weights_recursive(gamma, _RUBEN_RECURSIVE_TERMS)
    cdf = np.empty(rows)
    arg = 0.5 * x / beta
    cdf[done] = np.einsum("ij,ij->i", weights[done],
                          special.gammainc(0.5 * n + np.arange(weights.shape[1])[None, :], arg[done, None]))
    if not np.all(done):
        far = _ruben_weights_fourier(gamma[~done])
        cdf[~done] = np.einsum("ij,ij->i", far,
                               special.gammainc(0.5 * n + np.arange(far.shape[1])[None, :], arg[~done, None]))
    return np.clip(cdf, 0.0, 1.0)


def _imhof_cdf(x: float, lam: np.ndarray) -> float:
    """``P(sum_j lam_j chi2_1 <= x)`` by Imhof's inversion of the characteristic function (Imhof 1961,
    Biometrika 48:419-426): an independent check of Ruben's series in the tests (scipy's adaptive quadrature loses
    accuracy where the integrand oscillates slowly decaying, so the series is what the analysis uses)."""

    def integrand(u: float) -> float:
        theta = 0.5 * float(np.sum(np.arctan(lam * u))) - 0.5 * x * u
        rho = float(np.prod((1.0 + (lam * u) ** 2) ** 0.25))
        return float(np.sin(theta) / (u * rho))

    tail = quad(integrand, 0.0, np.inf, limit=2000, epsabs=1e-12)[0]
    return float(min(1.0, max(0.0, 0.5 - tail / np.pi)))


def weighted_chisq_cdf(x: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """``P(sum_j lambda_j X_j <= x)`` for independent ``X_j ~ chi-squared(1)`` and positive weights ``lambda_j``:
    the exact distribution of Cochran's Q under the random-effects model (Biggerstaff & Jackson 2008, Stat. Med.
    27:6093-6110), which the confidence distribution of tau^2 inverts.

    ``weights`` is one set of weights (``x`` a number or an array) or one row per set (``x`` a number or one per
    row). Ruben's series of
    chi-squared distributions, as Farebrother's algorithm AS 204 (the one pimeta uses), to 1e-13.

    Examples
    --------
    Two weights of two degrees of freedom each, ``2 X_1 + 5 X_2`` with ``X ~ chi-squared(2)``, is a sum of exponential
    variables whose distribution is ``1 - (5 exp(-x/10) - 2 exp(-x/4)) / 3`` (the hypoexponential law); equal weights
    are ``lambda chi-squared(n)`` (scipy):

    >>> x = np.array([1.0, 10.0, 40.0])
    >>> print(" ".join(f"{p:.12f}" for p in weighted_chisq_cdf(x, [2, 2, 5, 5])))
    0.011138158654 0.441590930464 0.969504201805
    >>> print(" ".join(f"{p:.12f}" for p in 1 - (5 * np.exp(-x / 10) - 2 * np.exp(-x / 4)) / 3))
    0.011138158654 0.441590930464 0.969504201805
    >>> print(f"{weighted_chisq_cdf(12.0, [3.0] * 5)[0]:.12f} {sps.chi2.cdf(12.0 / 3.0, 5):.12f}")
    0.450584048647 0.450584048647
    """
    lam = np.atleast_2d(np.asarray(weights, dtype=float))
    if lam.size == 0 or not (np.all(np.isfinite(lam)) and np.all(lam > 0)):
        raise ValueError("weights must be finite and positive")
    xs = np.atleast_1d(np.asarray(x, dtype=float)).ravel()
    if lam.shape[0] == 1 and xs.size > 1:
        lam = np.repeat(lam, xs.size, axis=0)
    if xs.size not in (1, lam.shape[0]):
        raise ValueError(f"x: one value or one per row of weights ({lam.shape[0]}), got {xs.size}")
    xs = np.broadcast_to(xs, (lam.shape[0],)).copy()
    if np.any(xs < 0) or not np.all(np.isfinite(xs)):
        raise ValueError("x must be finite and non-negative")
    return _ruben_cdf(xs, lam)


def _q_weights(v: np.ndarray, tau2: np.ndarray) -> np.ndarray:
    """The k - 1 weights of Cochran's Q (inverse-variance weights ``w = 1/v``) as a weighted sum of chi-squared(1)
    variables when the true between-study variance is each of ``tau2``: the non-zero eigenvalues of
    ``S^(1/2) A S^(1/2)`` with ``A = W - w w' / sum w`` and ``S = diag(v + tau^2)`` (one row per tau^2)."""
    w = 1.0 / v
    sd = np.sqrt(v[None, :] + tau2[:, None])
    sw = sd * w[None, :]
    mats = -sw[:, :, None] * sw[:, None, :] / w.sum()
    idx = np.arange(v.size)
    mats[:, idx, idx] += w[None, :] * sd**2
    # A has one zero eigenvalue (it removes the mean); the others are at least min(1 + tau^2 w_i) >= 1.
    return np.maximum(np.linalg.eigvalsh(mats)[:, 1:], 1e-12)


def _q_cdf(q: float, v: np.ndarray, tau2: np.ndarray) -> np.ndarray:
    """``P(Q <= q)`` when the between-study variance is each of ``tau2``."""
    return weighted_chisq_cdf(q, _q_weights(v, tau2))


def tau2_confidence_distribution(effects: ArrayLike, variances: ArrayLike, tau2: ArrayLike) -> np.ndarray:
    """The confidence distribution of tau^2 at ``tau2``: ``H(tau^2) = P(Q >= q | tau^2)`` with q the observed
    Cochran's Q (inverse-variance weights) and Q's exact distribution at that tau^2 (:func:`weighted_chisq_cdf`).

    H rises from the homogeneity test's p value at tau^2 = 0 (a point mass there) to 1; its quantiles are the
    limits of Q's exact confidence interval of tau^2 (Jackson 2013, Res. Synth. Methods 4:220-229), and drawing
    from it is the first step of Nagashima, Noma & Furukawa's prediction interval (:func:`prediction_interval`).

    Examples
    --------
    With equal within-study variances v, Q is ``(1 + tau^2 / v)`` times a chi-squared on k - 1 df, so H is scipy's
    ``chi2.sf(q / (1 + tau^2 / v), k - 1)``:

    >>> y, v = [0.1, 0.5, -0.2, 0.3, 0.9], [0.04] * 5
    >>> q = cochran_q(y, v).iloc[0]["Q"]
    >>> t = np.array([0.0, 0.05, 0.2])
    >>> print(" ".join(f"{h:.10f}" for h in tau2_confidence_distribution(y, v, t)))
    0.0017674156 0.1055060103 0.5803805477
    >>> print(" ".join(f"{h:.10f}" for h in sps.chi2.sf(q / (1 + t / 0.04), 4)))
    0.0017674156 0.1055060103 0.5803805477
    """
    y, v = _arrays(effects, variances)
    t = np.atleast_1d(np.asarray(tau2, dtype=float))
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise ValueError("tau2 must be finite and non-negative")
    q = _generalised_q(y, v, 0.0, _design(None, y.size))
    return 1.0 - _q_cdf(q, v, t)


def _tau2_cd_quantile(y: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The confidence distribution's quantiles at ``u`` (0 where u is at most its point mass at 0, the homogeneity
    test's p value), from its values on a log grid of tau^2 inverted by monotone cubic interpolation of log tau^2
    against log P(Q <= q)."""
    k = y.size
    x = _design(None, k)
    q = _generalised_q(y, v, 0.0, x)
    out = np.zeros_like(u, dtype=float)
    below0 = float(sps.chi2.cdf(q, k - 1))  # P(Q <= q | tau^2 = 0) = 1 - H(0)
    target = 1.0 - u
    pos = target < below0
    if not np.any(pos):
        return out
    scale = max(_tau2(y, v, x, "dl"), float(np.mean(v)))
    decades = scale * 10.0 ** np.arange(_CD_DECADES + 1)
    under = np.flatnonzero(_q_cdf(q, v, decades) < _CD_TAIL)
    grid = np.geomspace(_CD_LOW * scale, decades[under[0]] if under.size else decades[-1], _CD_GRID)
    below = _q_cdf(q, v, grid)
    # Keep the strictly falling part above the tail cut: the interpolation needs increasing abscissae.
    keep = np.r_[True, below[1:] < np.minimum.accumulate(below)[:-1]] & (below > _CD_TAIL)
    if not keep[0]:  # the homogeneity test's p value is above 1 - _CD_TAIL: tau^2 is 0 but for a 1e-12 chance
        return out
    grid, below = grid[keep], below[keep]
    t = target[pos]
    res = np.empty_like(t)
    near0 = t >= below[0]  # between tau^2 = 0 and the grid's first point: linear
    res[near0] = grid[0] * (below0 - t[near0]) / max(below0 - below[0], 1e-300)
    rest = ~near0
    if grid.size >= 2:
        inv = PchipInterpolator(-np.log(below), np.log(grid), extrapolate=False)
        res[rest] = np.exp(inv(-np.log(np.maximum(t[rest], below[-1]))))
    else:
        res[rest] = grid[-1]
    out[pos] = np.minimum(res, grid[-1])
    return out


def prediction_interval(effects: ArrayLike, variances: ArrayLike, *, method: str = "boot", confidence: float = 0.95,
                        draws: int = PI_DRAWS, seed: int = PI_SEED, tau2_method: str | None = None) -> pd.DataFrame:
    """The prediction interval for the effect of a new study (a new configuration) drawn from the random-effects
    distribution, ``theta_new ~ N(mu, tau^2)``.

    * ``method="boot"`` (the default): Nagashima, Noma & Furukawa's parametric bootstrap (2019, Stat. Methods Med.
      Res. 28:1689-1702; R ``pimeta::pima(method = "boot")``). Each of ``draws`` draws takes tau^2_b from the
      confidence distribution of tau^2 (:func:`tau2_confidence_distribution`: the exact distribution of Cochran's Q,
      so the uncertainty of tau^2 is carried, not plugged in), then ``theta_b = mu(tau^2_b) + z_b tau_b -
      t_b se_HK(tau^2_b)`` with ``z_b ~ N(0, 1)``, ``t_b ~ t_{k-1}``, ``mu`` the weighted mean with weights
      ``1/(v_i + tau^2_b)`` and ``se_HK`` Hartung's standard error of it; the interval is the draws'
      ``(1 -+ confidence)/2`` quantiles. No point estimate of tau^2 enters it. It covers at its level with few studies
      where the plug-in intervals do not (docs/pooling.md); with I^2 near 0 it is conservative. Seeded: the same
      ``seed`` gives the same interval; each end's Monte-Carlo standard error is about 1 / sqrt(draws) of its width.
    * ``method="hts"``: Higgins, Thompson & Spiegelhalter (2009), ``mu +- t_{k-2} sqrt(tau^2 + se^2)`` with the
      estimated tau^2 put in place of the true one (``tau2_method``, default DerSimonian-Laird, as pimeta) and
      ``se^2 = 1 / sum w``.
    * ``method="hk"``: Partlett & Riley (2017, Stat. Med. 36:301-317), the same with REML tau^2 and Hartung-Knapp's
      ``se``.

    All need k >= 3 (NaN otherwise). Returns one row: ``method, k, pi_low, pi_high, tau2_method, draws, seed``
    (``draws`` and ``seed`` 0 for the plug-in methods).

    Examples
    --------
    pimeta's vignette: 13 trials of cisapride (Hartung & Knapp 2001, log odds ratios with 0.5 added to every cell,
    ``convert_bin``); ``pima(dat$y, dat$se, seed = 2236067)`` (25,000 draws) prints the 95 % prediction interval
    of the odds ratio [0.533, 33.692]. Here, 25,000 draws of numpy's generator (each end's Monte-Carlo standard
    error is about 2.5 % of the odds ratio, in pimeta's run as here; tests/test_meta.py averages several seeds):

    >>> m1, n1 = [15, 12, 29, 42, 14, 44, 14, 29, 10, 17, 38, 19, 21], [16, 16, 34, 56, 22, 54, 17, 58, 14, 26, 44, 29, 38]
    >>> m2, n2 = [9, 1, 18, 31, 6, 17, 7, 23, 3, 6, 12, 22, 19], [16, 16, 34, 56, 22, 55, 15, 58, 15, 27, 45, 30, 38]
    >>> y = [np.log((a + .5) * (d - c + .5) / ((b - a + .5) * (c + .5))) for a, b, c, d in zip(m1, n1, m2, n2)]
    >>> v = [1 / (a + .5) + 1 / (b - a + .5) + 1 / (c + .5) + 1 / (d - c + .5) for a, b, c, d in zip(m1, n1, m2, n2)]
    >>> r = prediction_interval(y, v, draws=25000).iloc[0]
    >>> print(f"OR [{np.exp(r['pi_low']):.3f}, {np.exp(r['pi_high']):.3f}]")
    OR [0.549, 35.036]
    """
    if method not in PI_METHODS:
        raise ValueError(f"method must be one of {PI_METHODS}, got {method!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if method == "boot" and (int(draws) != draws or draws < 100):
        raise ValueError(f"draws must be an integer of at least 100, got {draws}")
    y, v = _arrays(effects, variances)
    k = y.size
    x = _design(None, k)
    tmethod = "" if method == "boot" else tau2_method or ("dl" if method == "hts" else "reml")
    row = {"method": method, "k": k, "pi_low": np.nan, "pi_high": np.nan, "tau2_method": tmethod,
           "draws": int(draws) if method == "boot" else 0, "seed": int(seed) if method == "boot" else 0}
    if k < 3:
        return pd.DataFrame([row])
    alpha = 1.0 - confidence
    if method == "boot":
        rng = np.random.default_rng(seed)
        u, t, z = rng.random(int(draws)), rng.standard_t(k - 1, int(draws)), rng.standard_normal(int(draws))
        tau2_b = _tau2_cd_quantile(y, v, u)
        w = 1.0 / (v[None, :] + tau2_b[:, None])
        sw = w.sum(axis=1)
        mu = (w * y).sum(axis=1) / sw
        var_hk = (w * (y[None, :] - mu[:, None]) ** 2).sum(axis=1) / ((k - 1) * sw)
        new = mu + z * np.sqrt(tau2_b) - t * np.sqrt(var_hk)
        # numpy's default quantile interpolates as R's type 7, as pimeta does.
        row["pi_low"], row["pi_high"] = (float(e) for e in np.quantile(new, [alpha / 2, 1 - alpha / 2]))
        return pd.DataFrame([row])
    tau2 = _tau2(y, v, x, tmethod)
    b, cov, q_star, _ = _wls(y, v, tau2, x)
    var_mu = float(cov[0, 0]) * (q_star / (k - 1) if method == "hk" else 1.0)
    half = float(sps.t.ppf(1 - alpha / 2, k - 2)) * np.sqrt(tau2 + var_mu)
    row["pi_low"], row["pi_high"] = float(b[0]) - half, float(b[0]) + half
    return pd.DataFrame([row])


@dataclass(frozen=True)
class MetaRegression:
    """A mixed-effects meta-regression: coefficients with Knapp-Hartung t tests, and what the moderators explain."""

    coefficients: pd.DataFrame  # term, estimate, se, statistic, df, p_val, ci_low, ci_high
    method: str
    k: int
    tau2: float  # residual between-study variance
    tau2_without: float  # tau^2 of the model without moderators (same method)
    r2: float  # share of tau^2 the moderators account for, max(0, 1 - tau2 / tau2_without)
    qe: float  # test of residual heterogeneity: sum (y - X b_FE)^2 / v, chi-squared on k - p df
    qe_df: int
    qe_p: float
    f: float  # omnibus test of the moderators (Knapp-Hartung F)
    f_df1: int
    f_df2: int
    f_p: float


def meta_regression(effects: ArrayLike, variances: ArrayLike, moderators: ArrayLike,
                    names: list[str] | None = None, *, method: str = "reml",
                    confidence: float = 0.95) -> MetaRegression:
    """Mixed-effects meta-regression ``y_i = x_i' b + u_i + e_i`` with residual tau^2 by ``method``.

    Coefficients are weighted least squares with weights ``1/(v_i + tau^2)``; their covariance is scaled by
    ``sum w_i r_i^2 / (k - p)`` and tested with t on k - p df (Knapp & Hartung 2003, Stat. Med. 22:2693-2710), the
    moderators together by F on (p - 1, k - p) df. ``R2`` compares tau^2 with and without the moderators
    (Raudenbush 2009). With few studies a meta-regression is exploratory: it describes, it does not establish.

    Examples
    --------
    metafor's README, ``rma(yi, vi, mods = ~ ablat, data=dat, test="knha")`` on the BCG trials: intercept 0.2515
    (se 0.2839), ablat -0.0291 (se 0.0082, p 0.0046), tau^2 0.0764, QE(df = 11) = 30.7331, F = 12.5905, R^2 75.62 %
    (metafor stops REML when tau^2 moves less than 1e-5, so its tau^2, F and R^2 differ from the converged
    0.07635 in the fourth digit):

    >>> bcg = [(4, 119, 11, 128), (6, 300, 29, 274), (3, 228, 11, 209), (62, 13536, 248, 12619),
    ...        (33, 5036, 47, 5761), (180, 1361, 372, 1079), (8, 2537, 10, 619), (505, 87886, 499, 87892),
    ...        (29, 7470, 45, 7232), (17, 1699, 65, 1600), (186, 50448, 141, 27197), (5, 2493, 3, 2338),
    ...        (27, 16886, 29, 17825)]
    >>> ablat = [44, 55, 42, 52, 13, 44, 19, 13, 27, 42, 18, 33, 33]
    >>> y = [np.log(a / (a + b) / (c / (c + d))) for a, b, c, d in bcg]
    >>> v = [1 / a - 1 / (a + b) + 1 / c - 1 / (c + d) for a, b, c, d in bcg]
    >>> m = meta_regression(y, v, ablat, ["ablat"])
    >>> print(m.coefficients[["term", "estimate", "se"]].round(4).to_string(index=False))
         term  estimate     se
    intercept    0.2515 0.2839
        ablat   -0.0291 0.0082
    >>> print(f"tau2 {m.tau2:.3f}, QE {m.qe:.4f}, F {m.f:.2f} p {m.f_p:.4f}, R2 {m.r2:.3f}")
    tau2 0.076, QE 30.7331, F 12.59 p 0.0046, R2 0.756
    """
    y, v = _arrays(effects, variances)
    k = y.size
    x = _design(moderators, k)
    p = x.shape[1]
    names = list(names) if names is not None else [f"x{i}" for i in range(1, p)]
    if len(names) != p - 1:
        raise ValueError(f"names: {p - 1} moderator columns, {len(names)} names")
    if k - p < 1:
        raise ValueError(f"a meta-regression with {p} coefficients needs more than {p} effects, got {k}")
    if np.linalg.matrix_rank(x) < p:
        raise ValueError("moderators are collinear (a column is constant or repeats another)")
    tau2 = _tau2(y, v, x, method)
    b, cov, q_star, _ = _wls(y, v, tau2, x)
    df = k - p
    cov_hk = cov * q_star / df
    se = np.sqrt(np.diag(cov_hk))
    t = b / se
    quant = float(sps.t.ppf((1 + confidence) / 2, df))
    coefficients = pd.DataFrame({"term": ["intercept", *names], "estimate": b, "se": se, "statistic": t,
                                 "df": df, "p_val": 2 * sps.t.sf(np.abs(t), df), "ci_low": b - quant * se,
                                 "ci_high": b + quant * se})
    mods = b[1:]
    f = float(mods @ np.linalg.solve(cov_hk[1:, 1:], mods)) / (p - 1)
    qe = _generalised_q(y, v, 0.0, x)
    tau2_0 = _tau2(y, v, _design(None, k), method)
    return MetaRegression(coefficients, method, k, tau2, tau2_0,
                          max(0.0, 1 - tau2 / tau2_0) if tau2_0 > 0 else 0.0, qe, df, float(sps.chi2.sf(qe, df)),
                          f, p - 1, df, float(sps.f.sf(f, p - 1, df)))
