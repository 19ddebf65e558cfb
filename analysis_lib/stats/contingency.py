"""Paired binary outcomes: McNemar's test (exact and asymptotic, mid-p), Tango's score interval of the
difference and the exact conditional odds-ratio interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sps
from scipy.optimize import brentq

__all__ = ["mcnemar_table", "mcnemar_from_table", "mcnemar", "mcnemar_midp", "conditional_odds_ratio", "tango_interval"]


def mcnemar_table(a: ArrayLike, b: ArrayLike) -> pd.DataFrame:
    """The 2x2 table of paired outcomes: rows A pass/fail, columns B pass/fail (counts).    Examples
    --------
    >>> mcnemar_table([1, 1, 1, 0, 0, 0, 0, 1], [1, 0, 1, 1, 1, 1, 0, 1]).values.tolist()
    [[3, 1], [3, 1]]
    """
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    t = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    return pd.DataFrame(t, index=pd.Index(["A pass", "A fail"], name="A"), columns=pd.Index(["B pass", "B fail"], name="B"))


def mcnemar_from_table(table, *, exact: bool = True, correction: bool = True) -> pd.DataFrame:
    """McNemar's test of marginal homogeneity on a 2x2 table of paired outcomes.

    Only the discordant cells count: ``n10 = table[0][1]`` (A pass, B fail) and
    ``n01 = table[1][0]`` (A fail, B pass). Under H0 each discordant pair is equally likely to go
    either way, so with ``exact=True`` (default) the two-sided p-value is the binomial one,
    ``p = min(1, 2 * P(Bin(n10 + n01, 1/2) <= min(n10, n01)))`` and the statistic is
    ``min(n10, n01)`` (as statsmodels reports it). With ``exact=False`` the statistic is
    ``(|n10 - n01| - c)^2 / (n10 + n01)`` with ``c = 1`` (continuity correction, R's default) or
    0, compared to chi-squared with 1 df. With no discordant pair the p-value is 1.

    References: McNemar (1947), Psychometrika 12:153-157; Agresti (2013), Categorical Data
    Analysis, 3rd ed., sec. 11.1; statsmodels ``mcnemar``; R ``mcnemar.test``.

    Returns one row: ``n_pairs, n_both, n_a_only, n_b_only, n_neither, statistic, p_val, method``.

    Examples
    --------
    R's ``?mcnemar.test`` example (Agresti 1990, p. 350, presidential approval):
    ``mcnemar.test(Performance)`` gives McNemar's chi-squared = 16.818, df = 1, p-value = 4.115e-05:

    >>> performance = [[794, 150], [86, 570]]
    >>> r = mcnemar_from_table(performance, exact=False).iloc[0]
    >>> print(f"chi-squared = {r['statistic']:.3f}, p-value = {r['p_val']:.3e}")
    chi-squared = 16.818, p-value = 4.115e-05
    """
    t = np.asarray(table, dtype=float)
    if t.shape != (2, 2) or np.any(t < 0):
        raise ValueError(f"table must be a 2x2 table of non-negative counts, got shape {t.shape}")
    n10, n01 = t[0, 1], t[1, 0]
    n_disc = n10 + n01
    if exact:
        stat = min(n10, n01)
        p = 1.0 if n_disc == 0 else float(min(1.0, 2.0 * sps.binom.cdf(stat, n_disc, 0.5)))
        method = "exact (binomial, two-sided)"
    else:
        c = 1.0 if correction else 0.0
        if n_disc == 0:
            stat, p = 0.0, 1.0
        else:
            stat = max(abs(n10 - n01) - c, 0.0) ** 2 / n_disc
            p = float(sps.chi2.sf(stat, 1))
        method = "chi-squared" + (" with continuity correction" if correction else "")
    return pd.DataFrame(
        {
            "n_pairs": [int(t.sum())],
            "n_both": [int(t[0, 0])],
            "n_a_only": [int(n10)],
            "n_b_only": [int(n01)],
            "n_neither": [int(t[1, 1])],
            "statistic": [float(stat)],
            "p_val": [p],
            "method": [method],
        },
        index=["McNemar"],
    )


def mcnemar(a: ArrayLike, b: ArrayLike, *, exact: bool = True, correction: bool = True) -> pd.DataFrame:
    """McNemar's test on paired pass/fail outcomes ``a`` (baseline) and ``b``; see :func:`mcnemar_from_table`.    Examples
    --------
    One task passes only under A, three only under B; statsmodels' ``mcnemar([[3, 1], [3, 1]],
    exact=True).pvalue`` is 0.625 (the binomial tail 2 P(X <= 1), X ~ Bin(4, 1/2)):

    >>> r = mcnemar([1, 1, 1, 0, 0, 0, 0, 1], [1, 0, 1, 1, 1, 1, 0, 1]).iloc[0]
    >>> print(r["n_a_only"], r["n_b_only"], r["p_val"])
    1 3 0.625
    """
    return mcnemar_from_table(mcnemar_table(a, b).to_numpy(), exact=exact, correction=correction)


def mcnemar_midp(n10: int, n01: int) -> float:
    """Mid-p McNemar test: twice the smaller binomial tail with half the observed probability.

    ``p = 2 * (P(X < k) + P(X = k) / 2)``, ``X ~ Bin(n10 + n01, 1/2)``, ``k = min(n10, n01)``,
    capped at 1; 1 without discordant pairs. Reference: Fagerland, Lydersen & Laake (2013), BMC
    Med Res Methodol 13:91 (recommended over the exact conditional test for its size).

    Examples
    --------
    Fagerland, Lydersen & Laake (2013), the airway hyper-responsiveness example (1 and 7 discordant
    pairs): exact conditional p = 0.070, mid-p = 0.039 (= 10/256):

    >>> print(f"{mcnemar_midp(1, 7):.3f}")
    0.039
    """
    m = int(n10) + int(n01)
    if m == 0:
        return 1.0
    k = min(int(n10), int(n01))
    return float(min(1.0, 2.0 * (sps.binom.cdf(k - 1, m, 0.5) + 0.5 * sps.binom.pmf(k, m, 0.5))))


def conditional_odds_ratio(n10: int, n01: int, *, confidence: float = 0.95) -> pd.DataFrame:
    """Discordant-pair odds ratio ``n01 / n10`` (B pass & A fail over A pass & B fail) with its exact interval.

    Conditional on the ``m = n10 + n01`` discordant pairs, ``n01 ~ Bin(m, pi)`` with
    ``OR = pi / (1 - pi)``; the Clopper-Pearson interval for ``pi`` mapped to the OR scale is the
    interval that inverts McNemar's exact test, so it excludes 1 exactly when that test has
    p < 1 - confidence. Reference: Agresti (2013), Categorical Data Analysis, sec. 11.1.4;
    Breslow & Day (1980), sec. 5.2.

    Returns one row: ``n10, n01, odds_ratio, ci_low, ci_high``.

    Examples
    --------
    7 of 8 discordant pairs favour B: statsmodels' Clopper-Pearson ``proportion_confint(7, 8,
    method="beta")`` = (0.47349, 0.99684), i.e. odds (0.8993, 315.48); the interval holds 1 as the
    exact test (p = 0.070) does not reject:

    >>> r = conditional_odds_ratio(1, 7).iloc[0]
    >>> print(f"{r['odds_ratio']:.1f} [{r['ci_low']:.4f}, {r['ci_high']:.2f}]")
    7.0 [0.8993, 315.48]
    """
    n10, n01 = int(n10), int(n01)
    m = n10 + n01
    a = (1 - confidence) / 2
    if m == 0:
        est, lo, hi = np.nan, 0.0, np.inf
    else:
        p_lo = 0.0 if n01 == 0 else float(sps.beta.ppf(a, n01, m - n01 + 1))
        p_hi = 1.0 if n01 == m else float(sps.beta.ppf(1 - a, n01 + 1, m - n01))
        with np.errstate(divide="ignore"):
            est = np.inf if n10 == 0 else n01 / n10
            lo = p_lo / (1 - p_lo)
            hi = np.inf if p_hi >= 1 else p_hi / (1 - p_hi)
    return pd.DataFrame([{"n10": n10, "n01": n01, "odds_ratio": float(est), "ci_low": float(lo), "ci_high": float(hi)}])


def _tango_statistic(delta: float, n10: int, n01: int, n: int) -> float:
    """Tango's score statistic for H0: p_B - p_A = delta (restricted MLE in closed form)."""
    a_ = 2.0 * n
    b_ = -n01 - n10 + (2.0 * n - n01 + n10) * delta
    c_ = -n10 * delta * (1.0 - delta)
    p_tilde = (np.sqrt(max(b_ * b_ - 4.0 * a_ * c_, 0.0)) - b_) / (2.0 * a_)
    num = n01 - n10 - n * delta
    var = n * (2.0 * p_tilde + delta * (1.0 - delta))
    if var <= 0:
        return 0.0 if num == 0 else np.copysign(np.inf, num)
    return float(num / np.sqrt(var))


def tango_interval(n10: int, n01: int, n: int, *, confidence: float = 0.95) -> pd.DataFrame:
    """Tango's score interval for the paired difference of proportions ``p_B - p_A = (n01 - n10) / n``.

    ``n10``: A pass, B fail; ``n01``: A fail, B pass; ``n``: all pairs. The interval holds the
    differences whose score statistic (restricted maximum likelihood under the difference) lies
    within the normal quantile; at 0 the statistic is McNemar's uncorrected z, so the interval
    agrees with that asymptotic test. Recommended with the mid-p McNemar test by Fagerland,
    Lydersen & Laake (2014), "Recommended tests and confidence intervals for paired binomial
    proportions", Stat Med 33:2850-2875. Reference: Tango (1998), Stat Med 17:891-908 (erratum 18:1999).

    Returns one row: ``n_pairs, difference, ci_low, ci_high, z``.

    Examples
    --------
    At 0 Tango's statistic is McNemar's uncorrected z: R's ``mcnemar.test(Performance, correct = FALSE)``
    gives chi-squared = 17.356, and sqrt(17.356) = 4.166 (B is the second survey, which lost approval):

    >>> r = tango_interval(150, 86, 1600).iloc[0]
    >>> print(f"z = {r['z']:.3f}, difference {r['difference']:.3f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]")
    z = -4.166, difference -0.040 [-0.0590, -0.0214]
    """
    n10, n01, n = int(n10), int(n01), int(n)
    if n == 0:
        return pd.DataFrame([{"n_pairs": 0, "difference": np.nan, "ci_low": np.nan, "ci_high": np.nan, "z": np.nan}])
    z = float(sps.norm.ppf((1 + confidence) / 2))
    est = (n01 - n10) / n
    tol = 1e-10
    f = lambda d, q: _tango_statistic(d, n10, n01, n) - q  # noqa: E731 (decreasing in d)
    lo = -1.0 if est <= -1 + tol else brentq(f, -1 + tol, est if est > -1 + tol else -1 + tol, args=(z,), xtol=1e-12) \
        if f(est, z) <= 0 else est
    hi = 1.0 if est >= 1 - tol else brentq(f, est, 1 - tol, args=(-z,), xtol=1e-12) if f(est, -z) >= 0 else est
    return pd.DataFrame([{"n_pairs": n, "difference": est, "ci_low": float(lo), "ci_high": float(hi),
                          "z": _tango_statistic(0.0, n10, n01, n)}])
