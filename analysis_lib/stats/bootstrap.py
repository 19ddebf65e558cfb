"""Percentile bootstrap over tasks (pairs kept together): paired statistics and the ratio of totals.

Resamples are one ``(n_boot, n)`` integer matrix drawn from ``np.random.default_rng(seed)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

__all__ = ["BOOT_STATISTICS", "bootstrap_paired", "ratio_of_totals"]


BOOT_STATISTICS = ("median_diff", "mean_diff", "relative_change_pct", "median_ratio_pct")


def _resampled_medians(v: np.ndarray, idx: np.ndarray, presorted: bool = False) -> np.ndarray:
    """Exact median of ``v`` over each row of resample positions ``idx``.

    Row-sorting a small-integer matrix is an order of magnitude faster than partitioning floats:
    the n values are ranked once (ties broken by position; rank -> value is monotone, so order
    statistics carry over), the rank matrix is sorted row-wise and the middle ranks looked up.
    """
    n = v.size
    if presorted:
        vs, r = v, idx
    else:
        order = np.argsort(v, kind="stable")
        vs = v[order]
        rank = np.empty(n, dtype=idx.dtype)
        rank[order] = np.arange(n, dtype=idx.dtype)
        r = rank[idx]
    srt = np.sort(r, axis=1)
    if n % 2:
        return vs[srt[:, n // 2]]
    return (vs[srt[:, n // 2 - 1]] + vs[srt[:, n // 2]]) / 2.0


@overload
def _boot_stat(name: str, a: np.ndarray, b: np.ndarray, idx: None = None) -> float: ...


@overload
def _boot_stat(name: str, a: np.ndarray, b: np.ndarray, idx: np.ndarray) -> np.ndarray: ...


def _boot_stat(name: str, a: np.ndarray, b: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray | float:
    """The statistic on the sample (``idx`` None) or on every resample (rows of ``idx``).

    With ``idx`` given, ``a`` and ``b`` must be ordered by ``b - a`` (positions are then ranks).
    """
    d = b - a
    with np.errstate(divide="ignore", invalid="ignore"):
        if name == "median_diff":
            return np.median(d) if idx is None else _resampled_medians(d, idx, presorted=True)
        if name == "mean_diff":
            return np.mean(d) if idx is None else d[idx].mean(axis=1)
        if name == "relative_change_pct":
            if idx is None:
                return 100.0 * (np.median(b) - np.median(a)) / np.median(a)
            ma, mb = _resampled_medians(a, idx), _resampled_medians(b, idx)
            return 100.0 * (mb - ma) / ma
        if name == "median_ratio_pct":
            if np.any(a <= 0):  # a ratio to zero or a negative baseline has no meaning
                return np.nan if idx is None else np.full(idx.shape[0], np.nan)
            return 100.0 * ((np.median(b / a) if idx is None else _resampled_medians(b / a, idx)) - 1.0)
    raise ValueError(f"statistic must be one of {BOOT_STATISTICS}, got {name!r}")


def bootstrap_paired(
    a: ArrayLike,
    b: ArrayLike,
    *,
    statistics: Sequence[str] = ("median_diff", "relative_change_pct"),
    n_boot: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Paired percentile-bootstrap confidence intervals, resampling pairs (tasks) with replacement.

    Statistics (all B - A): ``median_diff`` = median of the paired differences ``b_i - a_i``;
    ``mean_diff`` = their mean (for 0/1 outcomes: the difference in resolve rate);
    ``relative_change_pct`` = ``100 * (median(b) - median(a)) / median(a)``, the relative change
    of the medians (negative = reduction; resamples with median(a) = 0 are undefined);
    ``median_ratio_pct`` = ``100 * (median(b_i / a_i) - 1)``,
    the relative change of the typical task, which uses the pairing and so gives a much
    narrower interval (the percentile interval of the ratio of medians over-covers: 99 % for a
    nominal 95 % in the simulator's 24-task design, against 93-95 % for this one); it is NaN when
    some a_i <= 0. Pairs are first put in order of ``b - a``; the resample indices are one ``(n_boot, n)`` integer
    matrix from ``np.random.default_rng(seed)`` shared by all statistics; the interval is the
    ``(1 - confidence)/2`` and ``(1 + confidence)/2`` quantiles of the bootstrap distribution
    (percentile method; numpy's linear interpolation). Medians are exact (integer-rank sorting,
    see :func:`_resampled_medians`). Resamples where a statistic is undefined are ignored and
    counted in ``n_undefined``.

    References: Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13;
    Davison & Hinkley (1997), Bootstrap Methods and their Application, sec. 5.2.

    Returns one row per statistic: ``statistic, estimate, ci_low, ci_high, n_pairs, n_boot,
    n_undefined, confidence, seed, method``.

    Examples
    --------
    The estimates are the sample statistics (``np.median(b - a)`` for ``median_diff``); the intervals
    are seeded, so a rerun gives the same numbers:

    >>> a = [10.0, 12.0, 9.0, 14.0, 11.0, 13.0, 8.0, 12.0]
    >>> b = [9.0, 10.0, 9.5, 11.0, 10.0, 12.5, 7.0, 10.0]
    >>> r = bootstrap_paired(a, b, statistics=("median_diff",), n_boot=2000, seed=1).iloc[0]
    >>> print(r["estimate"], float(np.median(np.subtract(b, a))), r["ci_low"] <= r["estimate"] <= r["ci_high"])
    -1.0 -1.0 True
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"a and b must be one-dimensional and of equal length, got {a.shape} and {b.shape}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    n = a.size
    rows = []
    # Pairs in order of their difference, so that resampled positions are ranks of b - a.
    order = np.argsort(b - a, kind="stable")
    a, b = a[order], b[order]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n), dtype=np.int16 if n < 2**15 else np.int64) if n else None
    q = [(1 - confidence) / 2, (1 + confidence) / 2]
    for name in statistics:
        if name not in BOOT_STATISTICS:
            raise ValueError(f"statistic must be one of {BOOT_STATISTICS}, got {name!r}")
        if idx is None:  # no pair
            est, lo, hi, undefined = np.nan, np.nan, np.nan, 0
        else:
            est = float(_boot_stat(name, a, b))
            dist = _boot_stat(name, a, b, idx)
            ok = np.isfinite(dist)
            undefined = int(n_boot - ok.sum())
            lo, hi = (np.quantile(dist[ok], q) if ok.any() else (np.nan, np.nan))
        rows.append(
            {
                "statistic": name,
                "estimate": est if np.isfinite(est) else np.nan,
                "ci_low": float(lo),
                "ci_high": float(hi),
                "n_pairs": n,
                "n_boot": n_boot,
                "n_undefined": undefined,
                "confidence": confidence,
                "seed": seed,
                "method": "percentile",
            }
        )
    return pd.DataFrame(rows)


def ratio_of_totals(num_a: ArrayLike, den_a: ArrayLike, num_b: ArrayLike, den_b: ArrayLike, *, n_boot: int = 10_000,
                    seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per-arm ratios of totals over paired tasks and their ratio B / A, with a task bootstrap.

    Per task g: numerator and denominator totals of each arm (e.g. cost and successes summed over
    the repetitions, or tokens and 1). ``ratio_a = sum(num_a) / sum(den_a)``, likewise B, and
    ``ratio = ratio_b / ratio_a``. Tasks are resampled with replacement (both arms together, so the
    pairing is kept); percentile intervals; resamples where a denominator total is 0 are undefined,
    left out and counted. A total of 0 in the sample makes the estimate undefined (NaN), never
    infinite.

    Returns rows ``arm`` = ``A``, ``B``, ``B/A`` with ``estimate, ci_low, ci_high, n_tasks, n_boot,
    n_undefined``.

    Examples
    --------
    Cost per success of A = 6 / 1, of B = 3 / 2, so B/A = 0.25:

    >>> r = ratio_of_totals([1.0, 2.0, 3.0], [0, 0, 1], [1.0, 1.0, 1.0], [1, 1, 0], n_boot=500, seed=1)
    >>> r.set_index("arm")["estimate"].tolist()
    [6.0, 1.5, 0.25]
    """
    arr = [np.asarray(v, dtype=float) for v in (num_a, den_a, num_b, den_b)]
    n = arr[0].size
    if any(v.shape != (n,) for v in arr):
        raise ValueError("num_a, den_a, num_b and den_b must be one-dimensional and of equal length")

    def ratios(tot):
        with np.errstate(divide="ignore", invalid="ignore"):
            ra = np.where(tot[1] > 0, tot[0] / tot[1], np.nan)
            rb = np.where(tot[3] > 0, tot[2] / tot[3], np.nan)
            return ra, rb, np.where(ra > 0, rb / ra, np.nan)

    point = ratios([np.atleast_1d(v.sum()) for v in arr])
    rows = []
    if n:
        idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
        boot = ratios([v[idx].sum(axis=1) for v in arr])
    q = [(1 - confidence) / 2, (1 + confidence) / 2]
    for name, est, dist in zip(("A", "B", "B/A"), point, boot if n else (None,) * 3, strict=True):
        e = float(est[0]) if n else np.nan
        lo = hi = np.nan
        undefined = 0
        if n and np.isfinite(e):
            ok = np.isfinite(dist)
            undefined = int(n_boot - ok.sum())
            if ok.any():
                lo, hi = (float(v) for v in np.quantile(dist[ok], q))
        rows.append({"arm": name, "estimate": e, "ci_low": lo, "ci_high": hi, "n_tasks": n, "n_boot": n_boot,
                     "n_undefined": undefined})
    return pd.DataFrame(rows)
