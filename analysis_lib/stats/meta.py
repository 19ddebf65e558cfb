"""Random-effects pooling of per-study (per-configuration) effects: the between-study variance tau^2 by REML,
Paule-Mandel or DerSimonian-Laird, the Hartung-Knapp-Sidik-Jonkman interval, Cochran's Q with I^2 and its
interval, the Q-profile interval of tau^2, the prediction interval for a new study, and a meta-regression.

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
from scipy import stats as sps
from scipy.optimize import brentq

__all__ = ["TAU2_METHODS", "cochran_q", "tau2_estimate", "tau2_interval", "random_effects", "MetaRegression",
           "meta_regression"]

TAU2_METHODS = ("reml", "pm", "dl")
# REML's Fisher scoring stops when tau^2 moves less than this (metafor's default threshold is 1e-5).
_REML_TOL = 1e-10
_REML_MAX_ITER = 1000


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
    """The random-effects pooled effect mu with its interval, tau^2 and the prediction interval for a new study.

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

    The prediction interval for the effect of a new study, ``mu +- t_{k-2} sqrt(tau^2 + se^2)`` (Higgins, Thompson &
    Spiegelhalter 2009, J. R. Stat. Soc. A 172:137-159), needs k >= 3.

    Returns one row: ``method, interval, k, estimate, se, ci_low, ci_high, df, statistic, p_val, tau2, tau,
    pi_low, pi_high`` (``df`` NaN for the z interval; ``se`` is the interval's own standard error).

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
                          "p_val": p, "tau2": tau2, "tau": float(np.sqrt(tau2)), "pi_low": pi_low,
                          "pi_high": pi_high}])


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
