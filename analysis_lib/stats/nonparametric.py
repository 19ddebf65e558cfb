"""Rank and permutation procedures on paired differences: Wilcoxon signed-rank (R's rules for the exact and
normal cases), the rank-biserial correlation, the Hodges-Lehmann estimate with the interval that inverts the test,
and the sign-flip permutation test with its inverted interval.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sps

__all__ = [
    "EXACT_BELOW", "wilcoxon", "rank_biserial", "HL_FULL_SCAN", "hodges_lehmann", "EXACT_SIGN_FLIPS", "sign_flip",
]


# R's wilcox.test: exact p-values when fewer than 50 non-zero differences (and no ties or zeros).
EXACT_BELOW = 50


@lru_cache(maxsize=256)
def _signrank_pmf(n: int) -> np.ndarray:
    """Exact null distribution of the signed-rank statistic T+ for n untied non-zero differences.

    Counts of subsets of {1..n} by sum (each rank positive or negative with probability 1/2),
    built by the usual recursion c_k(t) = c_{k-1}(t) + c_{k-1}(t - k), divided by 2^n.
    """
    top = n * (n + 1) // 2
    counts = np.zeros(top + 1)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    return counts / 2.0**n


def _signed_ranks(d: np.ndarray, zero_method: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Ranks of |d| of the non-zero differences and their signs, and the number of zeros."""
    zeros = d == 0
    n_zero = int(zeros.sum())
    if zero_method == "wilcox":
        nz = d[~zeros]
        return sps.rankdata(np.abs(nz)), np.sign(nz), n_zero
    # Pratt (1959): rank all |d| including zeros, then drop the zeros' ranks.
    r = sps.rankdata(np.abs(d))
    return r[~zeros], np.sign(d[~zeros]), n_zero


def wilcoxon(
    x: ArrayLike,
    y: ArrayLike | None = None,
    *,
    zero_method: str = "wilcox",
    correction: bool = True,
    method: str = "auto",
    decimals: int | None = None,
) -> pd.DataFrame:
    """Wilcoxon signed-rank test of the paired differences ``d = x - y`` (two-sided).

    Statistic ``V = T+``, the sum of the ranks of |d| over the positive differences (R's ``V``).
    Zeros: ``"wilcox"`` drops them before ranking (R, scipy default); ``"pratt"`` ranks them and
    then drops their ranks (Pratt 1959), with mean and variance adjusted accordingly.
    ``method="auto"`` uses the exact null distribution when there are fewer than 50 non-zero
    differences (as R does) and no ties and no zeros, and otherwise the normal approximation
    ``z = (T+ - n(n+1)/4 - c) / sigma`` with the tie-corrected
    ``sigma^2 = n(n+1)(2n+1)/24 - sum(t^3 - t)/48`` and continuity correction
    ``c = 0.5 * sign(T+ - n(n+1)/4)`` when ``correction`` (R's default). Two-sided exact p is
    ``min(1, 2 * min(P(T+ <= V), P(T+ >= V)))``. When every difference is zero there is no
    evidence of a difference: V = 0, p = 1, RBC = 0. With no pair at all there is no test:
    p and RBC are NaN and ``method`` says why. ``decimals`` rounds d first: ties and zeros are then
    detected on values at the data's precision, not on floating-point noise (``log(6/4)`` and
    ``log(3/2)`` differ in their last bit; R would call them untied and run the exact test on tied data).

    Effect size: the matched-pairs rank-biserial correlation ``RBC = (T+ - T-) / (T+ + T-)``
    (Kerby 2014), in [-1, 1], positive when x tends to exceed y; it equals pingouin's ``RBC``.

    References: Wilcoxon (1945), Biometrics Bulletin 1:80-83; Pratt (1959), JASA 54:655-667;
    Hollander & Wolfe (1973), Nonparametric Statistical Methods, pp. 27-33 (R's example data);
    Kerby (2014), Comprehensive Psychology 3:11.IT.3.1.

    Returns one row: ``n, n_zero, V, T_minus, z, p_val, method, zero_method, RBC``.

    Examples
    --------
    R's ``?wilcox.test`` example (Hollander & Wolfe 1973, p. 29): ``wilcox.test(x, y, paired = TRUE)``
    gives V = 40, p-value = 0.03906 (exact); with ``exact = FALSE, correct = FALSE`` p-value = 0.03815:

    >>> x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
    >>> y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
    >>> r = wilcoxon(x, y).iloc[0]
    >>> print(f"V = {r['V']:g}, p-value = {r['p_val']:.5f} ({r['method']})")
    V = 40, p-value = 0.03906 (exact)
    >>> print(f"{wilcoxon(x, y, method='approx', correction=False)['p_val'].iloc[0]:.5f}")
    0.03815
    """
    if zero_method not in ("wilcox", "pratt"):
        raise ValueError(f"zero_method must be 'wilcox' or 'pratt', got {zero_method!r}")
    if method not in ("auto", "exact", "approx"):
        raise ValueError(f"method must be 'auto', 'exact' or 'approx', got {method!r}")
    x = np.asarray(x, dtype=float)
    d = x if y is None else x - np.asarray(y, dtype=float)
    if d.ndim != 1:
        raise ValueError("x and y must be one-dimensional and of equal length")
    d = d[~np.isnan(d)]
    row = _wilcoxon_core(d if decimals is None else np.round(d, decimals), zero_method, correction, method)
    cols = ["n", "n_zero", "V", "T_minus", "z", "p_val", "method", "zero_method", "RBC"]
    return pd.DataFrame({k: [row[k]] for k in cols}, index=["Wilcoxon"])


def _wilcoxon_core(d: np.ndarray, zero_method: str = "wilcox", correction: bool = True, method: str = "auto") -> dict:
    ranks, signs, n_zero = _signed_ranks(d, zero_method)
    n = ranks.size
    t_plus = float(ranks[signs > 0].sum())
    t_minus = float(ranks[signs < 0].sum())
    row: dict[str, float | str] = {"n": n, "n_zero": n_zero, "V": t_plus, "T_minus": t_minus, "z": np.nan}
    if n == 0 and n_zero == 0:
        row.update(p_val=np.nan, method="no pairs: not tested", RBC=np.nan)
    elif n == 0:
        row.update(p_val=1.0, method="all differences zero", RBC=0.0)
    else:
        has_ties = np.unique(ranks).size < n
        use_exact = method == "exact" or (method == "auto" and n < EXACT_BELOW and not has_ties and n_zero == 0)
        if use_exact:
            if has_ties or (n_zero and zero_method == "pratt"):
                raise ValueError("method='exact' needs untied non-zero differences (ranks must be 1..n)")
            pmf = _signrank_pmf(n)
            v = int(round(t_plus))
            p = min(1.0, 2.0 * min(pmf[: v + 1].sum(), pmf[v:].sum()))
            label = "exact"
        else:
            if zero_method == "pratt":
                n_all = n + n_zero
                mean = (n_all * (n_all + 1) - n_zero * (n_zero + 1)) / 4.0
                var = (n_all * (n_all + 1) * (2 * n_all + 1) - n_zero * (n_zero + 1) * (2 * n_zero + 1)) / 24.0
            else:
                mean = n * (n + 1) / 4.0
                var = n * (n + 1) * (2 * n + 1) / 24.0
            _, tie_counts = np.unique(ranks, return_counts=True)
            var -= float(np.sum(tie_counts**3 - tie_counts)) / 48.0
            diff = t_plus - mean
            cc = 0.5 * np.sign(diff) if correction else 0.0
            z = (diff - cc) / np.sqrt(var) if var > 0 else 0.0
            p = float(min(1.0, 2.0 * sps.norm.sf(abs(z))))
            row["z"] = float(z)
            label = "normal approximation" + (" with continuity correction" if correction else "")
        total = t_plus + t_minus
        row.update(p_val=float(p), method=label, RBC=(t_plus - t_minus) / total)
    row["zero_method"] = zero_method
    return row


def rank_biserial(x: ArrayLike, y: ArrayLike | None = None, *, zero_method: str = "wilcox") -> float:
    """Matched-pairs rank-biserial correlation ``(T+ - T-) / (T+ + T-)`` of ``d = x - y`` (Kerby 2014).    Examples
    --------
    R's ``effectsize::rank_biserial(x, y, paired = TRUE)`` on the ``?wilcox.test`` data gives r = 0.78:

    >>> x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
    >>> y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
    >>> print(f"{rank_biserial(x, y):.2f}")
    0.78
    """
    return float(wilcoxon(x, y, zero_method=zero_method)["RBC"].iloc[0])


def _snap(v: np.ndarray, scale: float) -> np.ndarray:
    """Values rounded to 12 significant digits of ``scale``: ties and zeros that floating-point sums miss are restored."""
    return np.round(np.asarray(v, dtype=float), 12 - int(np.ceil(np.log10(scale))))


def _signrank_rows(d: np.ndarray, zero_method: str = "pratt") -> tuple[np.ndarray, ...]:
    """Per row of differences: ``T+``, non-zero count, zero count, and T+'s null mean and tie-corrected variance.

    Vectorised :func:`_wilcoxon_core` (same conventions): average ranks of |d|; ``wilcox`` drops zeros
    (the smallest |d|, so the other ranks shift down by their count), ``pratt`` ranks them and then
    drops their ranks, with mean and variance adjusted (Pratt 1959; scipy's and Cureton's formulas).
    """
    d = np.atleast_2d(np.asarray(d, dtype=float))
    absd = np.abs(d)
    zero = d == 0
    n_zero = zero.sum(axis=1)
    n_all = d.shape[1]
    n = n_all - n_zero
    r_min = sps.rankdata(absd, method="min", axis=1)
    r_max = sps.rankdata(absd, method="max", axis=1)
    rank = (r_min + r_max) / 2.0
    if zero_method == "wilcox":
        rank = rank - n_zero[:, None]
        mean = n * (n + 1) / 4.0
        var = n * (n + 1) * (2 * n + 1) / 24.0
    else:
        mean = (n_all * (n_all + 1) - n_zero * (n_zero + 1)) / 4.0
        var = (n_all * (n_all + 1) * (2 * n_all + 1) - n_zero * (n_zero + 1) * (2 * n_zero + 1)) / 24.0
    t_plus = np.where(d > 0, rank, 0.0).sum(axis=1)
    group = r_max - r_min + 1  # size of each element's tie group
    var = var - np.where(zero, 0.0, group**2 - 1).sum(axis=1) / 48.0  # = sum over groups of t^3 - t
    return t_plus, n, n_zero, mean, var


def _normal_p(t_plus: np.ndarray, mean: np.ndarray, var: np.ndarray, correction: bool) -> np.ndarray:
    """Two-sided p of the normal approximation, continuity-corrected towards the mean when ``correction``."""
    diff = t_plus - mean
    cc = 0.5 * np.sign(diff) if correction else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, (diff - cc) / np.sqrt(np.where(var > 0, var, 1.0)), 0.0)
    return np.minimum(1.0, 2.0 * sps.norm.sf(np.abs(z)))


def _exact_p(t_plus: np.ndarray, n: int) -> np.ndarray:
    """Two-sided exact p of integer ``T+`` values of n untied non-zero differences."""
    pmf = _signrank_pmf(n)
    cdf, sf = np.cumsum(pmf), np.cumsum(pmf[::-1])[::-1]
    v = np.rint(t_plus).astype(int)
    return np.minimum(1.0, 2.0 * np.minimum(cdf[v], sf[v]))


# Up to this many differences the inverted interval evaluates the test at every Walsh average and
# between every two; above, it bisects on each side of the estimate (the test's |z| grows monotonically
# away from it under Pratt's treatment of zeros).
HL_FULL_SCAN = 100


def hodges_lehmann(x: ArrayLike, y: ArrayLike | None = None, *, confidence: float = 0.95, correction: bool = True,
                   zero_method: str = "pratt", decimals: int | None = None) -> pd.DataFrame:
    """Hodges-Lehmann estimate of the shift of ``d = x - y`` with the interval that inverts the Wilcoxon test.

    The estimate is the median of the Walsh averages ``(d_i + d_j) / 2, i <= j`` (the pseudo-median
    R's ``wilcox.test(conf.int = TRUE)`` reports). The test is :func:`wilcoxon` with the same
    ``zero_method`` and ``correction``, exact or normal as R decides from the data (exact below 50
    non-zero differences without ties or zeros); the interval is every shift ``delta`` at which that
    same test of ``d - delta`` does not reject (p >= 1 - confidence). The p-value can only change at a
    Walsh average, so the test is evaluated at every Walsh average and between every two (bisection
    on each side above :data:`HL_FULL_SCAN` differences), and the interval's ends are Walsh averages
    read exactly, not approached by a search.

    * Exact test: the ends are closed, as in R (Hollander & Wolfe 1973, sec. 3.2; Bauer 1972, JASA
      67:687-690); 0 is never a Walsh average here (that would be a zero or a tie), so the interval
      excludes 0 exactly when the test rejects.
    * Normal approximation (ties or zeros, or 50 and more differences): the test is run at the
      Walsh averages themselves too, where shifted differences tie or vanish. An end is closed when the
      test accepts at that Walsh average and open otherwise (``low_closed``, ``high_closed``), so the
      interval holds 0 exactly when the test at 0 accepts, ends included. Zeros must be treated the
      same way at every shift: Pratt's ranking (``zero_method="pratt"``, the default) keeps the
      accepted shifts one interval; dropping zeros (R's ``wilcox.test``) can reject at a shift
      between two accepted ones (``contiguous`` False: the interval is then their hull).

    ``decimals`` rounds d first, so that ties and zeros hidden by floating-point noise count as
    ties and zeros (the comparisons pass the metric's precision). With too few pairs for any
    rejection the ends are infinite.

    Returns one row: ``n, n_zero, estimate, ci_low, ci_high, low_closed, high_closed, contiguous,
    V, RBC, p_val, method, zero_method, confidence``.

    Examples
    --------
    R's ``?wilcox.test`` example (Hollander & Wolfe 1973, p. 29): ``wilcox.test(x, y, paired = TRUE,
    conf.int = TRUE)`` gives V = 40, p-value = 0.03906, 95 percent confidence interval 0.010 0.786 and
    (pseudo)median 0.46 (the interval is the 6th and the 40th of the 45 sorted Walsh averages,
    ``qsignrank(0.025, 9) = 6``):

    >>> x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
    >>> y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
    >>> r = hodges_lehmann(x, y).iloc[0]
    >>> print(f"V = {r['V']:g}, p-value = {r['p_val']:.5f}, CI {r['ci_low']:.3f} {r['ci_high']:.3f}, "
    ...       f"(pseudo)median {r['estimate']:.2f}")
    V = 40, p-value = 0.03906, CI 0.010 0.786, (pseudo)median 0.46
    """
    if zero_method not in ("wilcox", "pratt"):
        raise ValueError(f"zero_method must be 'wilcox' or 'pratt', got {zero_method!r}")
    d = np.asarray(x, dtype=float) if y is None else np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    d = d[~np.isnan(d)]
    if d.size:  # ties and zeros at the data's precision, else at 12 significant digits (floating-point noise)
        d = np.round(d, decimals) if decimals is not None else _snap(d, float(np.max(np.abs(d))) or 1.0)
    row: dict[str, Any] = {"n": int(d.size), "n_zero": int(np.sum(d == 0)), "estimate": np.nan, "ci_low": np.nan,
                           "ci_high": np.nan, "low_closed": True, "high_closed": True, "contiguous": True, "V": np.nan,
                           "RBC": np.nan, "p_val": np.nan, "method": "no pairs: not estimated",
                           "zero_method": zero_method, "confidence": confidence}
    if not d.size:
        return pd.DataFrame([row], index=["Hodges-Lehmann"])
    test = _wilcoxon_core(d, zero_method, correction)
    row.update(V=test["V"], RBC=test["RBC"], p_val=test["p_val"], method=f"Walsh averages; Wilcoxon {test['method']}")
    scale = 2.0 * float(np.max(np.abs(d))) or 1.0
    i, j = np.triu_indices(d.size)
    sums = _snap(d[i] + d[j], scale)  # twice the Walsh averages
    row["estimate"] = float(np.median(sums)) / 2.0
    walsh = np.unique(sums)
    k = walsh.size
    # The shifts to test, in twice their value: gap 0, Walsh average 0, gap 1, ..., Walsh average k-1, gap k.
    gaps = np.concatenate([[walsh[0] - scale], (walsh[:-1] + walsh[1:]) / 2.0, [walsh[-1] + scale]])
    probes = np.empty(2 * k + 1)
    probes[0::2], probes[1::2] = gaps, walsh
    alpha = 1.0 - confidence
    exact = test["method"] == "exact"

    def accepted(idx: np.ndarray) -> np.ndarray:
        shifted = _snap(2.0 * d[None, :] - probes[idx, None], scale)
        t_plus, _, _, mean, var = _signrank_rows(shifted, zero_method)
        if exact:  # only gaps are tested; a Walsh average is accepted with an accepted gap beside it (closed ends)
            return _exact_p(t_plus, d.size) >= alpha
        return _normal_p(t_plus, mean, var, correction) >= alpha

    centre = 2 * int(np.searchsorted(walsh, row["estimate"] * 2.0, side="left")) + 1
    if centre >= probes.size or walsh[(centre - 1) // 2] != _snap(row["estimate"] * 2.0, scale):
        centre -= 1  # the estimate lies in a gap, not on a Walsh average
    if exact:
        ok_gap = accepted(np.arange(0, 2 * k + 1, 2))
        ok = np.zeros(2 * k + 1, dtype=bool)
        ok[0::2] = ok_gap
        ok[1::2] = ok_gap[:-1] | ok_gap[1:]
    elif d.size <= HL_FULL_SCAN:
        ok = accepted(np.arange(2 * k + 1))
    else:
        ok = np.zeros(2 * k + 1, dtype=bool)
        ok[centre] = bool(accepted(np.array([centre]))[0])
        if ok[centre]:
            lo, hi = 0, centre  # smallest accepted index on the left: bisect
            while lo < hi:
                m = (lo + hi) // 2
                lo, hi = (lo, m) if accepted(np.array([m]))[0] else (m + 1, hi)
            first = lo
            lo, hi = centre, 2 * k
            while lo < hi:
                m = (lo + hi + 1) // 2
                lo, hi = (m, hi) if accepted(np.array([m]))[0] else (lo, m - 1)
            ok[first: lo + 1] = True
    if not ok.any():  # too few pairs for a level this close to 1: no shift is accepted
        row.update(ci_low=np.nan, ci_high=np.nan)
        return pd.DataFrame([row], index=["Hodges-Lehmann"])
    first, last = int(np.argmax(ok)), int(ok.size - 1 - np.argmax(ok[::-1]))
    # An end on a Walsh average (odd index) is that average, closed; an end in a gap is open at its edge.
    row["ci_low"] = -np.inf if first == 0 else float(walsh[(first - 1) // 2 if first % 2 else first // 2 - 1]) / 2.0
    row["ci_high"] = np.inf if last == 2 * k else float(walsh[(last - 1) // 2 if last % 2 else last // 2]) / 2.0
    row.update(low_closed=bool(first % 2 or first == 0), high_closed=bool(last % 2 or last == 2 * k),
               contiguous=bool(ok[first: last + 1].all()))
    return pd.DataFrame([row], index=["Hodges-Lehmann"])


EXACT_SIGN_FLIPS = 16  # up to 2^16 sign patterns are enumerated; above, a seeded Monte-Carlo sample


def _sign_matrix(n: int, n_resamples: int, seed: int) -> tuple[np.ndarray, bool]:
    if n <= EXACT_SIGN_FLIPS:
        codes = np.arange(2 ** n, dtype=np.int64)[:, None] >> np.arange(n)
        return 1.0 - 2.0 * (codes & 1), True
    rng = np.random.default_rng(seed)
    return rng.choice([-1.0, 1.0], size=(n_resamples, n)), False


def _flip_hit_sets(x: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sign pattern s, the closed set [lo, hi] of shifts delta at which s is as extreme as the data.

    Pattern s counts towards the p-value of the test of ``x - delta`` when
    ``|sum s (x - delta)| >= |sum (x - delta)|``. With F the flipped positions this is a concave
    quadratic in delta, so the set is the closed interval between its roots, the mean of x over F and
    the mean over the rest; both straddle the mean of x, so every set holds the estimate. The identity
    pattern and the full flip hold every delta. A root within 1e-10 of the data's scale of 0 is set
    to 0, so that a tie at 0 the arithmetic misses by a rounding error (the mean of 1/3, 2/3 and -1)
    still counts; the other roots stay as computed, the nearest floats to the true ends.
    """
    n = x.size
    flipped = signs < 0
    k = flipped.sum(axis=1)
    sum_f = flipped.astype(float) @ x
    trivial = (k == 0) | (k == n)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_f = sum_f / k
        mean_rest = (x.sum() - sum_f) / (n - k)
    tol = 1e-10 * (float(np.max(np.abs(x))) or 1.0)
    lo, hi = np.minimum(mean_f, mean_rest), np.maximum(mean_f, mean_rest)
    lo, hi = np.where(np.abs(lo) <= tol, 0.0, lo), np.where(np.abs(hi) <= tol, 0.0, hi)
    return np.where(trivial, -np.inf, lo), np.where(trivial, np.inf, hi)


def _flip_p_of_hits(hits: int, n_patterns: int, exact: bool) -> float:
    return hits / n_patterns if exact else (hits + 1) / (n_patterns + 1)


def sign_flip(d: ArrayLike, *, confidence: float = 0.95, n_resamples: int = 20_000, seed: int = 0) -> pd.DataFrame:
    """Sign-flip randomisation test of the mean per-task difference, with the interval that inverts it.

    Under the blocked, randomised schedule (both arms of a task run back to back in random order)
    the sign of each task's difference is exchangeable under the null of no effect, so the test
    needs no distributional assumption (Fisher 1935; Good 2005, ch. 3). Exact over all 2^n sign
    patterns for n <= 16, else ``n_resamples`` seeded patterns with p = (hits + 1)/(B + 1) and its
    Monte-Carlo standard error; a pattern as extreme as the data (a tie) counts as a hit.

    The interval is {delta : the test of d - delta does not reject}, i.e. p >= alpha, computed in
    closed form rather than by search: each pattern is a hit on a closed interval of shifts that
    holds the estimate (:func:`_flip_hit_sets`), so the p-value falls monotonically on either side
    of the estimate and the interval's ends are order statistics of those intervals' ends. Its ends
    are the last accepted shifts themselves (closed at the jumps of the p-value), and the test at 0
    is read from the same hit sets, so the interval excludes 0 exactly when p < alpha.

    Returns one row: ``n, estimate, p_val, mc_se, exact, ci_low, ci_high``.

    Examples
    --------
    Darwin's 15 pairs of crossed and self-fertilised plants (height differences in eighths of an
    inch), Fisher's (1935) randomisation test: 1,726 of the 32,768 sign patterns are at least as
    extreme, two-sided p = 0.0527 (scipy: ``permutation_test((d,), np.mean,
    permutation_type="samples", n_resamples=np.inf)`` gives 0.052673...):

    >>> darwin = [49, -67, 8, 16, 6, 23, 28, 41, 14, 29, 56, 24, 75, 60, -48]
    >>> r = sign_flip(darwin).iloc[0]
    >>> print(f"mean {r['estimate']:.3f}, exact: {r['exact']}, p = {r['p_val'] * 2**15:.0f}/32768 = {r['p_val']:.4f}")
    mean 20.933, exact: True, p = 1726/32768 = 0.0527
    """
    x = np.asarray(d, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    row = {"n": n, "estimate": float(x.mean()) if n else np.nan, "p_val": np.nan, "mc_se": np.nan,
           "exact": n <= EXACT_SIGN_FLIPS, "ci_low": np.nan, "ci_high": np.nan}
    if n == 0:
        return pd.DataFrame([row])
    signs, exact = _sign_matrix(n, n_resamples, seed)
    lo, hi = _flip_hit_sets(x, signs)
    n_pat = len(signs)
    p = _flip_p_of_hits(int(np.sum((lo <= 0) & (0 <= hi))), n_pat, exact)
    row.update(p_val=p, mc_se=0.0 if exact else float(np.sqrt(p * (1 - p) / n_pat)))
    alpha = 1 - confidence
    # Fewest hits the test accepts with (p >= alpha), then the shifts that keep that many.
    need = max(int(np.floor(alpha * n_pat)) - 2, 0)
    while _flip_p_of_hits(need, n_pat, exact) < alpha:
        need += 1
    always = int(np.sum(np.isinf(lo)))
    k = need - always  # hits needed from patterns that are not hits everywhere
    bounded_lo, bounded_hi = np.sort(lo[np.isfinite(lo)]), np.sort(hi[np.isfinite(hi)])[::-1]
    if k <= 0:
        row.update(ci_low=-np.inf, ci_high=np.inf)
    else:
        row.update(ci_low=float(bounded_lo[k - 1]), ci_high=float(bounded_hi[k - 1]))
    return pd.DataFrame([row])
