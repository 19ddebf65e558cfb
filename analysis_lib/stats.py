"""Paired statistics for "does profile B beat profile A on the same tasks?".

Plain functions on pandas/numpy objects, one per procedure, each returning a tidy frame (or an
array where that is the natural result), in the manner of pingouin. Conventions used throughout:

* **Direction.** Every difference is **B - A** (B the treatment, A the baseline), and
  ``relative_change_pct = 100 * (b - a) / a``: negative means B uses less (a reduction).
* **Pairing.** Repetitions of a task are aggregated first (majority vote for pass/fail, ties
  count as fail and are reported; median for continuous metrics); A and B are then paired on the
  tasks both have (:func:`pair_tasks`). The task is the unit of analysis, so tests and bootstrap
  resample tasks, never trials. Trial-level blocked pairs (task + repetition) are available for
  task-clustered standard errors (:func:`pair_trials`, :func:`clustered_mean_difference`).
* **Wilcoxon zeros.** Zero differences are dropped before ranking (``zero_method="wilcox"``, as
  R's ``wilcox.test`` and scipy's default do), so that a reviewer can reproduce every p-value in
  R; Pratt's variant (zeros ranked, then discarded) is available as ``zero_method="pratt"``.
* **Wilcoxon distribution.** Exact null distribution when fewer than 50 non-zero differences
  (R's ``wilcox.test`` rule) and no ties and no zeros; otherwise the normal approximation with tie-corrected variance and a
  continuity correction of 0.5 towards the mean (R's default ``correct = TRUE``; it keeps the
  approximation from being anti-conservative at small n).
* **Bootstrap.** Percentile intervals from ``n_boot`` resamples of tasks (pairs kept together),
  drawn as one ``(n_boot, n)`` integer matrix from ``np.random.default_rng(seed)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, overload

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps
from scipy.optimize import brentq

__all__ = [
    "as_outcome",
    "aggregate_repetitions",
    "pair_tasks",
    "pair_trials",
    "mcnemar_table",
    "mcnemar",
    "mcnemar_from_table",
    "wilcoxon",
    "rank_biserial",
    "bootstrap_paired",
    "wilson_ci",
    "cohens_h",
    "holm",
    "clustered_mean_difference",
    "pass_at_k",
    "pass_at_k_per_task",
    "plan_sample_size",
    "project_spend",
    "hodges_lehmann",
    "mcnemar_midp",
    "conditional_odds_ratio",
    "tango_interval",
    "clustered_proportion",
    "ratio_of_totals",
    "paired_t",
    "sign_flip",
    "gee_difference",
]

_TRUE = {"true", "1", "1.0", "yes", "pass", "passed"}
_FALSE = {"false", "0", "0.0", "no", "fail", "failed"}


# --------------------------------------------------------------------------- pairing


def as_outcome(values: Iterable) -> pd.Series:
    """Coerce pass/fail values (bool, 0/1, "True"/"False" as read from CSV) to 1.0/0.0, else NaN.

    Empty cells (infra errors carry no outcome) become NaN rather than fail, so that callers
    can exclude them instead of counting them against a profile.

    Examples
    --------
    >>> as_outcome(["True", "false", "", None, 1, 0.0, "maybe"]).tolist()
    [1.0, 0.0, nan, nan, 1.0, 0.0, nan]
    """
    s = pd.Series(values)
    if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
        out = pd.Series(s.to_numpy(dtype=float, na_value=np.nan))
        return out.where(out.isin([0.0, 1.0]))

    def one(v):
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            return np.nan
        if isinstance(v, (bool, np.bool_)):
            return float(v)
        if isinstance(v, (int, float, np.integer, np.floating)):
            return float(v) if v in (0, 1) else np.nan
        t = str(v).strip().lower()
        return 1.0 if t in _TRUE else 0.0 if t in _FALSE else np.nan

    return s.map(one).astype(float)


def _values(trials: pd.DataFrame, metric: str, binary: bool) -> pd.Series:
    if metric not in trials.columns:
        raise ValueError(f"metric {metric!r} is not a column of the trials frame")
    if binary:
        return as_outcome(trials[metric].to_numpy())
    return pd.to_numeric(trials[metric], errors="coerce").astype(float).reset_index(drop=True)


AGGREGATES = ("majority", "mean", "median", "geometric_mean")


def aggregate_repetitions(trials: pd.DataFrame, metric: str, *, binary: bool | None = None,
                          how: str | None = None) -> pd.DataFrame:
    """Aggregate the repetitions of each (profile, task_id) into one value.

    ``how`` (default: ``majority`` for pass/fail, ``median`` otherwise): ``majority`` takes the
    majority vote of pass/fail repetitions, a tie (as many passes as fails) counting as a **fail**
    and flagged in ``tie``; ``mean`` the task's pass rate (every repetition counts, no ties);
    ``median`` the median (``mean`` for continuous metrics: the arithmetic mean, which keeps zeros);
    ``geometric_mean`` exp(mean log v), NaN when a repetition is not positive. Missing values (NaN, e.g. the outcome of an infra error) are left out.

    Returns columns ``profile, task_id, value, n_reps, n_pass, tie`` (``n_pass``/``tie`` are
    NaN/False for continuous metrics), sorted by profile and task.

    Examples
    --------
    Two passes of three decide the task; one of two is a tie, counted as a fail and flagged:

    >>> trials = pd.DataFrame({"profile": "A", "task_id": ["t1", "t1", "t1", "t2", "t2"],
    ...                        "success": [True, True, False, True, False], "tokens": [10, 30, 20, 5, 7]})
    >>> print(aggregate_repetitions(trials, "success")[["task_id", "value", "n_pass", "tie"]].to_string(index=False))
    task_id  value  n_pass   tie
         t1    1.0     2.0 False
         t2    0.0     1.0  True
    >>> aggregate_repetitions(trials, "tokens")["value"].tolist()  # numpy.median of each task's repetitions
    [20.0, 6.0]
    """
    binary = (metric == "success") if binary is None else binary
    how = how or ("majority" if binary else "median")
    if how not in AGGREGATES or (binary and how not in ("majority", "mean")):
        raise ValueError(f"cannot aggregate {'pass/fail' if binary else 'continuous'} repetitions by {how!r}")
    g = _repetition_groups(trials, _values(trials, metric, binary).to_numpy())
    n_reps = np.bincount(g.code, minlength=g.size)
    out = pd.DataFrame({"profile": g.profile, "task_id": g.task, "n_reps": n_reps})
    if binary:
        n_pass = np.bincount(g.code, weights=g.v, minlength=g.size)
        out["value"] = n_pass / n_reps if how == "mean" else (2 * n_pass > n_reps).astype(float)
        out["n_pass"] = n_pass
        out["tie"] = (2 * n_pass == n_reps) if how == "majority" else False
        return out[["profile", "task_id", "value", "n_reps", "n_pass", "tie"]]
    if how == "geometric_mean":
        positive = np.bincount(g.code, weights=(g.v > 0).astype(float), minlength=g.size) == n_reps
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.bincount(g.code, weights=np.log(np.where(g.v > 0, g.v, 1.0)), minlength=g.size)
        value = np.where(positive, np.exp(logs / n_reps), np.nan)
    elif how == "mean":
        value = np.bincount(g.code, weights=g.v, minlength=g.size) / n_reps
    else:  # median: the middle of each group's sorted values (groups are contiguous after the sort)
        order = np.lexsort((g.v, g.code))
        v_sorted = g.v[order]
        start = np.concatenate([[0], np.cumsum(n_reps)[:-1]])
        value = (v_sorted[start + (n_reps - 1) // 2] + v_sorted[start + n_reps // 2]) / 2.0
    out["value"] = value
    out["n_pass"] = np.nan
    out["tie"] = False
    return out[["profile", "task_id", "value", "n_reps", "n_pass", "tie"]]


class _Groups:
    """The (profile, task) groups of the trials with a value: one code per value, groups in sorted order."""

    def __init__(self, profile: np.ndarray, task: np.ndarray, code: np.ndarray, v: np.ndarray) -> None:
        self.profile, self.task, self.code, self.v = profile, task, code, v
        self.size = profile.size


def _repetition_groups(trials: pd.DataFrame, values: np.ndarray) -> _Groups:
    """Trials with a value, grouped by (profile, task_id) in sort order (numpy: groupby is slow on string columns)."""
    keep = ~np.isnan(values)
    prof = trials["profile"].astype(str).to_numpy()[keep]
    task = trials["task_id"].astype(str).to_numpy()[keep]
    p_code, p_uniq = pd.factorize(prof, sort=True)
    t_code, t_uniq = pd.factorize(task, sort=True)
    key = p_code.astype(np.int64) * max(len(t_uniq), 1) + t_code
    uniq, code = np.unique(key, return_inverse=True)
    return _Groups(np.asarray(p_uniq, dtype=object)[uniq // max(len(t_uniq), 1)],
                   np.asarray(t_uniq, dtype=object)[uniq % max(len(t_uniq), 1)], code.reshape(-1), values[keep])


def pair_tasks(trials: pd.DataFrame, metric: str, a: str, b: str, *, binary: bool | None = None,
               how: str | None = None) -> pd.DataFrame:
    """Per-task pairs of profile ``a`` (baseline) and ``b`` on the tasks both have.

    Repetitions are aggregated with :func:`aggregate_repetitions` (``how``) first. Returns columns
    ``task_id, a, b, n_a, n_b, tie_a, tie_b`` sorted by task_id.

    Examples
    --------
    >>> trials = pd.DataFrame({"profile": ["A", "A", "B", "B", "B"], "task_id": ["t1", "t2", "t1", "t2", "t9"],
    ...                        "tokens": [10, 20, 8, 15, 1]})
    >>> pair_tasks(trials, "tokens", "A", "B")[["task_id", "a", "b"]].values.tolist()
    [['t1', 10.0, 8.0], ['t2', 20.0, 15.0]]
    """
    agg = aggregate_repetitions(trials, metric, binary=binary, how=how)
    prof = agg["profile"].to_numpy()
    side_a, side_b = agg[prof == a], agg[prof == b]
    tasks, ia, ib = np.intersect1d(side_a["task_id"].to_numpy(dtype=str), side_b["task_id"].to_numpy(dtype=str),
                                   return_indices=True)
    return pd.DataFrame(
        {
            "task_id": tasks.astype(object),
            "a": side_a["value"].to_numpy(float)[ia],
            "b": side_b["value"].to_numpy(float)[ib],
            "n_a": side_a["n_reps"].to_numpy(int)[ia],
            "n_b": side_b["n_reps"].to_numpy(int)[ib],
            "tie_a": side_a["tie"].to_numpy(bool)[ia],
            "tie_b": side_b["tie"].to_numpy(bool)[ib],
        }
    )


def pair_trials(trials: pd.DataFrame, metric: str, a: str, b: str, *, binary: bool | None = None) -> pd.DataFrame:
    """Trial-level blocked pairs: A and B matched on (task_id, repetition).

    Meaningful when the schedule ran A and B of the same task and repetition as a block (same
    environment, same time slot). Returns ``task_id, repetition, a, b``. Raises ValueError when a
    (profile, task_id, repetition) occurs twice, because such trials cannot be matched one to one.

    Examples
    --------
    >>> trials = pd.DataFrame({"profile": ["A", "A", "B", "B"], "task_id": "t1", "repetition": [0, 1, 1, 0],
    ...                        "tokens": [1, 2, 3, 4]})
    >>> pair_trials(trials, "tokens", "A", "B")[["repetition", "a", "b"]].values.tolist()
    [[0.0, 1.0, 4.0], [1.0, 2.0, 3.0]]
    """
    binary = (metric == "success") if binary is None else binary
    if "repetition" not in trials.columns:
        raise ValueError("trial-level pairing needs a 'repetition' column")
    df = pd.DataFrame(
        {
            "profile": trials["profile"].astype(str).to_numpy(),
            "task_id": trials["task_id"].astype(str).to_numpy(),
            "repetition": trials["repetition"].to_numpy(),
            "v": _values(trials, metric, binary).to_numpy(),
        }
    )
    df = df[df["profile"].isin([a, b])]
    dup = df.duplicated(["profile", "task_id", "repetition"])
    if dup.any():
        row = df[dup].iloc[0]
        raise ValueError(
            f"repetition {row['repetition']!r} of task {row['task_id']!r} occurs twice for profile {row['profile']!r}: "
            "trials cannot be paired by (task_id, repetition)"
        )
    df = df.dropna(subset=["v"])
    wide = df.pivot(index=["task_id", "repetition"], columns="profile", values="v")
    if a not in wide.columns or b not in wide.columns:
        return pd.DataFrame({"task_id": [], "repetition": [], "a": [], "b": []})
    wide = wide[[a, b]].dropna().sort_index()
    return pd.DataFrame(
        {
            "task_id": wide.index.get_level_values(0).to_numpy(),
            "repetition": wide.index.get_level_values(1).to_numpy(),
            "a": wide[a].to_numpy(float),
            "b": wide[b].to_numpy(float),
        }
    )


# --------------------------------------------------------------------------- McNemar


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


# --------------------------------------------------------------------------- Wilcoxon


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


# --------------------------------------------------------------------------- bootstrap

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


# --------------------------------------------------------------------------- proportions


def wilson_ci(successes, n, *, confidence: float = 0.95) -> pd.DataFrame:
    """Wilson score interval for a binomial proportion (vectorised over ``successes``, ``n``).

    ``(p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)`` with ``p = successes/n`` and
    ``z`` the ``(1+confidence)/2`` normal quantile. Unlike the Wald interval it stays inside
    [0, 1] and keeps near-nominal coverage for small n and p near 0 or 1.

    References: Wilson (1927), JASA 22:209-212; Brown, Cai & DasGupta (2001), Statistical
    Science 16:101-133; statsmodels ``proportion_confint(method="wilson")``.

    Returns ``successes, n, proportion, ci_low, ci_high`` (NaN where n = 0).

    Examples
    --------
    statsmodels' ``proportion_confint(7, 24, method="wilson")`` gives (0.14915, 0.49168):

    >>> r = wilson_ci(7, 24).iloc[0]
    >>> print(f"{r['proportion']:.4f} [{r['ci_low']:.5f}, {r['ci_high']:.5f}]")
    0.2917 [0.14915, 0.49168]
    """
    k = np.atleast_1d(np.asarray(successes, dtype=float))
    m = np.atleast_1d(np.asarray(n, dtype=float))
    if np.any(k < 0) or np.any(k > m):
        raise ValueError("successes must lie between 0 and n")
    z = sps.norm.ppf((1 + confidence) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / m
        denom = 1 + z**2 / m
        center = (p + z**2 / (2 * m)) / denom
        half = z * np.sqrt(p * (1 - p) / m + z**2 / (4 * m**2)) / denom
    bad = m == 0
    p, lo, hi = (np.where(bad, np.nan, v) for v in (p, center - half, center + half))
    return pd.DataFrame({"successes": k, "n": m, "proportion": p, "ci_low": np.clip(lo, 0, 1), "ci_high": np.clip(hi, 0, 1)})


def cohens_h(p_a, p_b):
    """Cohen's h for two proportions, B - A: ``h = 2 asin(sqrt(p_b)) - 2 asin(sqrt(p_a))``.

    The arcsine transform equalises the variance, so h means the same at p = 0.5 as near 0 or 1;
    |h| = 0.2 / 0.5 / 0.8 are Cohen's small / medium / large. Reference: Cohen (1988),
    Statistical Power Analysis for the Behavioral Sciences, 2nd ed., ch. 6.

    Examples
    --------
    Cohen (1988), Table 6.2.1: phi(0.50) - phi(0.25) = 1.5708 - 1.0472 = 0.52:

    >>> print(f"{cohens_h(0.25, 0.50):.4f}")
    0.5236
    """
    return 2 * np.arcsin(np.sqrt(np.asarray(p_b, dtype=float))) - 2 * np.arcsin(np.sqrt(np.asarray(p_a, dtype=float)))


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control); NaN entries stay NaN.

    With the m non-missing p-values sorted ``p_(1) <= ... <= p_(m)``, the adjusted value is
    ``max_{j <= i} min(1, (m - j + 1) p_(j))``. Reference: Holm (1979), Scandinavian Journal of
    Statistics 6:65-70; statsmodels ``multipletests(method="holm")``.

    Examples
    --------
    statsmodels' ``multipletests([0.01, 0.04, 0.03, 0.20, 0.002], method="holm")[1]`` gives
    [0.04, 0.09, 0.09, 0.2, 0.01]:

    >>> [round(float(p), 10) for p in holm([0.01, 0.04, 0.03, 0.20, 0.002])]
    [0.04, 0.09, 0.09, 0.2, 0.01]
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    pv = p[ok]
    order = np.argsort(pv, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * pv[order]))
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out


# --------------------------------------------------------------------------- clustered SE


def clustered_mean_difference(pairs: pd.DataFrame, *, confidence: float = 0.95) -> pd.DataFrame:
    """Mean trial-level paired difference (B - A) with a task-clustered standard error.

    ``pairs`` has ``task_id, a, b`` (from :func:`pair_trials`). Repetitions of a task share the
    task's difficulty, so they are not independent: the cluster-robust (CR1) variance of the mean
    ``d_bar`` is ``G/(G-1) * sum_g (sum_{i in g} (d_i - d_bar))^2 / N^2`` over G tasks and N
    trials (the intercept-only case of Liang & Zeger 1986, with the small-sample factor that
    statsmodels and Stata use). The interval uses Student's t with G - 1 degrees of freedom
    (Cameron & Miller 2015, J. Human Resources 50:317-372). ``design_effect`` is
    ``(se_cluster / se_naive)^2``.

    Returns one row: ``n_trials, n_clusters, mean_diff, se_cluster, se_naive, design_effect,
    df, ci_low, ci_high``.

    Examples
    --------
    statsmodels' ``OLS(b - a, 1).fit(cov_type="cluster", cov_kwds={"groups": task}, use_t=True)`` on
    these four tasks gives -1.375, SE 0.23936, 95 % interval [-2.13674, -0.61326]:

    >>> pairs = pd.DataFrame({"task_id": ["t1", "t1", "t2", "t2", "t3", "t3", "t4", "t4"],
    ...                       "a": [10, 12, 8, 9, 15, 14, 11, 10], "b": [9, 10, 8, 7, 12, 13, 9, 10]})
    >>> r = clustered_mean_difference(pairs).iloc[0]
    >>> print(f"{r['mean_diff']:.3f}, SE {r['se_cluster']:.5f}, [{r['ci_low']:.5f}, {r['ci_high']:.5f}], df {r['df']:.0f}")
    -1.375, SE 0.23936, [-2.13674, -0.61326], df 3
    """
    d = (pairs["b"].to_numpy(float) - pairs["a"].to_numpy(float))
    g = pairs["task_id"].astype(str).to_numpy()
    keep = ~np.isnan(d)
    d, g = d[keep], g[keep]
    n = d.size
    codes, uniq = pd.factorize(g)
    n_g = uniq.size
    row = {"n_trials": n, "n_clusters": n_g, "mean_diff": np.nan, "se_cluster": np.nan, "se_naive": np.nan,
           "design_effect": np.nan, "df": max(n_g - 1, 0), "ci_low": np.nan, "ci_high": np.nan}
    if n > 0:
        mean = float(d.mean())
        row["mean_diff"] = mean
        if n_g >= 2:
            resid_sums = np.bincount(codes, weights=d - mean, minlength=n_g)
            se = float(np.sqrt(n_g / (n_g - 1) * np.sum(resid_sums**2)) / n)
            se_naive = float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
            t = sps.t.ppf((1 + confidence) / 2, n_g - 1)
            row.update(se_cluster=se, se_naive=se_naive, ci_low=mean - t * se, ci_high=mean + t * se,
                       design_effect=(se / se_naive) ** 2 if se_naive and se_naive > 0 else np.nan)
    return pd.DataFrame([row])


# --------------------------------------------------------------------------- pass@k


def pass_at_k(trials: pd.DataFrame, k: int, *, metric: str = "success") -> pd.DataFrame:
    """pass@k and pass^k per profile, from the repetitions of each task.

    With n repetitions of a task of which c passed: ``pass@k = 1 - C(n-c, k) / C(n, k)``, the
    unbiased probability that at least one of k draws without replacement passes (Chen et al.
    2021, "Evaluating Large Language Models Trained on Code", eq. 1), and
    ``pass^k = C(c, k) / C(n, k)``, the probability that all k pass (Yao et al. 2024,
    "tau-bench"), i.e. reliability. Both are averaged over tasks. Tasks with fewer than k
    non-missing outcomes are left out and counted in ``n_tasks_short``.

    Returns ``profile, k, n_tasks, n_tasks_short, pass_at_k, pass_hat_k``.

    Examples
    --------
    A task passed 2 of 5 times: of the C(5, 2) = 10 pairs of repetitions, the C(3, 2) = 3 pairs of
    failures miss, so pass@2 = 1 - 3/10 = 0.7 (Chen et al. 2021, eq. 1), and pass^2 = C(2, 2)/10 = 0.1:

    >>> trials = pd.DataFrame({"profile": "A", "task_id": "t1", "success": [1, 0, 0, 1, 0]})
    >>> r = pass_at_k(trials, 2).iloc[0]
    >>> print(f"{r['pass_at_k']:.1f} {r['pass_hat_k']:.1f}")
    0.7 0.1
    """
    per = pass_at_k_per_task(trials, k, metric=metric)
    rows = []
    for profile, grp in per.groupby("profile", sort=True):
        ok = grp["at_k"].notna()
        rows.append({"profile": profile, "k": k, "n_tasks": int(ok.sum()), "n_tasks_short": int((~ok).sum()),
                     "pass_at_k": float(grp["at_k"].mean()) if ok.any() else np.nan,
                     "pass_hat_k": float(grp["hat_k"].mean()) if ok.any() else np.nan})
    return pd.DataFrame(rows, columns=["profile", "k", "n_tasks", "n_tasks_short", "pass_at_k", "pass_hat_k"])


def pass_at_k_per_task(trials: pd.DataFrame, k: int, *, metric: str = "success") -> pd.DataFrame:
    """The unbiased pass@k (``at_k``) and pass^k (``hat_k``) of each (profile, task) from its own n repetitions.

    Rows of :func:`aggregate_repetitions` with the two columns added; NaN where the task has fewer
    than k repetitions with an outcome.

    Examples
    --------
    >>> trials = pd.DataFrame({"profile": "A", "task_id": ["t1"] * 5 + ["t2"], "success": [1, 0, 0, 1, 0, 1]})
    >>> r = pass_at_k_per_task(trials, 2)
    >>> r["at_k"].round(2).tolist()  # t2 has one repetition: fewer than k
    [0.7, nan]
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    agg = aggregate_repetitions(trials, metric, binary=True)
    n, c = agg["n_reps"].to_numpy(int), agg["n_pass"].to_numpy(int)
    ok = n >= k
    total = np.where(ok, special.comb(n, k), np.nan)
    agg["at_k"] = np.where(ok, 1.0 - special.comb(n - c, k) / total, np.nan)
    agg["hat_k"] = np.where(ok, special.comb(c, k) / total, np.nan)
    return agg


# --------------------------------------------------------------------------- planning

DEFAULT_PLAN_GRID = (10, 15, 20, 30, 40, 50, 75, 100, 150, 200)


def _wilcoxon_p_rows(d: np.ndarray) -> np.ndarray:
    """Two-sided p-values of :func:`wilcoxon` (defaults) for every row of ``d``, vectorised.

    Rows with ties or zeros (nearly all rows of a resampled pilot) get the tie-corrected,
    continuity-corrected normal approximation computed for all rows at once
    (:func:`_signrank_rows`); rows that qualify for the exact distribution (< 50 non-zero
    differences, no ties, no zeros) get it, so each row's p equals ``wilcoxon(row)``.
    """
    d = np.atleast_2d(np.asarray(d, dtype=float))
    t_plus, n, n_zero, mean, var = _signrank_rows(d, "wilcox")
    p = _normal_p(t_plus, mean, var, True)
    p[n == 0] = 1.0
    untied = var == n * (n + 1) * (2 * n + 1) / 24.0
    exact = (n < EXACT_BELOW) & (n_zero == 0) & untied & (n > 0)
    if exact.any():
        p[exact] = _exact_p(t_plus[exact], d.shape[1])
    return p


def plan_sample_size(
    pairs: pd.DataFrame,
    *,
    effect: float,
    kind: str = "continuous",
    n_tasks: Sequence[int] = DEFAULT_PLAN_GRID,
    power: float = 0.8,
    alpha: float = 0.05,
    n_sim: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Number of tasks needed to detect an effect with the given power, by resampling a pilot.

    ``pairs`` are pilot per-task pairs (``a``, ``b`` from :func:`pair_tasks`). For each n in
    ``n_tasks``, ``n_sim`` studies of n tasks are simulated by drawing pilot tasks with
    replacement and imposing the effect; power is the share of studies whose two-sided test
    (the one the comparison uses) has p < alpha.

    * ``kind="continuous"``: ``effect`` is the relative reduction to detect (0.2 = B uses 20 %
      less). B is rescaled so that the median per-task log-ratio ``log(b/a)`` is 0 (removing
      the pilot's own effect, keeping its task-to-task noise: ``b0 = b / exp(median log(b/a))``);
      each resampled pair is swapped with probability 1/2 (A and B exchangeable under H0, so
      the null differences are symmetric), then B is scaled by ``1 - effect``; test: Wilcoxon
      signed-rank (:func:`wilcoxon`). Pairs with a or b <= 0 are dropped.
    * ``kind="binary"``: ``effect`` is the absolute lift in resolve rate (0.15 = +15 points).
      A's outcomes are resampled from the pilot; a task A solved is lost by B with the pilot's
      rate q- = P(B fail | A pass), and a task A failed is gained with the rate
      q+ = (effect + p_A q-) / (1 - p_A) that gives the lift; test: McNemar exact.

    The power estimate has Monte-Carlo standard error ``sqrt(power (1 - power) / n_sim)``
    (``power_se``). ``n_required`` is the smallest n whose estimated power reaches ``power``
    (NaN if none in the grid). Reference: the simulation approach to power of Arnold et al.
    (2011), BMC Med Res Methodol 11:94.

    Returns ``kind, effect, n_tasks, power, power_se, n_sim, alpha, target_power, n_required,
    n_pilot, seed``.

    Examples
    --------
    For pass/fail the simulation reproduces the exact power of McNemar's exact test
    (:func:`analysis_lib.power.mcnemar_exact_power`, an exact sum) within its Monte-Carlo error:

    >>> from analysis_lib.power import mcnemar_exact_power
    >>> pilot = pd.DataFrame({"a": [1.0] * 10 + [0.0] * 10, "b": [1.0] * 8 + [0.0] * 12})
    >>> sim = plan_sample_size(pilot, effect=0.2, kind="binary", n_tasks=(60,), n_sim=4000, seed=3).iloc[0]
    >>> exact = mcnemar_exact_power(60, 0.5 * 0.2, 0.5 * 0.6)  # p10 = P(A pass) q-, p01 = P(A fail) q+
    >>> bool(abs(sim["power"] - exact) < 4 * sim["power_se"])
    True
    """
    if kind not in ("continuous", "binary"):
        raise ValueError(f"kind must be 'continuous' or 'binary', got {kind!r}")
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("power and alpha must lie in (0, 1)")
    a = pairs["a"].to_numpy(float)
    b = pairs["b"].to_numpy(float)
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    rng = np.random.default_rng(seed)
    grid = sorted(int(n) for n in n_tasks)
    power_list: list[float] = []
    if kind == "continuous":
        if not 0 <= effect < 1:
            raise ValueError(f"effect (relative reduction) must lie in [0, 1), got {effect}")
        pos = (a > 0) & (b > 0)
        a, b = a[pos], b[pos]
        if a.size < 2:
            raise ValueError("the pilot needs at least 2 pairs with positive values of a and b")
        # Remove the pilot's own effect: scale B so that the median log-ratio is 0.
        b_null = b * np.exp(-np.median(np.log(b / a)))
        for n in grid:
            idx = rng.integers(0, a.size, size=(n_sim, n))
            # Under H0, A and B are exchangeable within a task: swapping each resampled pair
            # with probability 1/2 makes the null differences symmetric, as the test assumes.
            swap = rng.random((n_sim, n)) < 0.5
            sim_a = np.where(swap, b_null[idx], a[idx])
            sim_b = np.where(swap, a[idx], b_null[idx]) * (1 - effect)
            # Resampled pairs repeat differences (ties), hence mostly the tie-corrected normal
            # approximation, exactly as the real analysis would run it.
            power_list.append(float(np.mean(_wilcoxon_p_rows(sim_b - sim_a) < alpha)))
    else:
        if not -1 < effect < 1:
            raise ValueError(f"effect (lift in resolve rate) must lie in (-1, 1), got {effect}")
        a_pass = a > 0.5
        b_pass = b > 0.5
        if a.size < 2:
            raise ValueError("the pilot needs at least 2 pairs")
        p_a = float(a_pass.mean())
        q_minus = float((~b_pass[a_pass]).mean()) if a_pass.any() else 0.0
        if p_a >= 1:
            raise ValueError("the pilot baseline solves every task: no room for a lift")
        q_plus = (effect + p_a * q_minus) / (1 - p_a)
        if not 0 <= q_plus <= 1:
            raise ValueError(f"a lift of {effect} is impossible from a baseline resolve rate of {p_a:.3f}")
        for n in grid:
            ap = a_pass[rng.integers(0, a.size, size=(n_sim, n))]
            u = rng.random((n_sim, n))
            lost = ap & (u < q_minus)  # A pass, B fail
            gained = ~ap & (u < q_plus)  # A fail, B pass
            n10, n01 = lost.sum(1), gained.sum(1)
            m = n10 + n01
            p = np.where(m == 0, 1.0, np.minimum(1.0, 2 * sps.binom.cdf(np.minimum(n10, n01), np.maximum(m, 1), 0.5)))
            power_list.append(float(np.mean(p < alpha)))
    powers = np.asarray(power_list)
    reached = [n for n, pw in zip(grid, powers, strict=True) if pw >= power]
    return pd.DataFrame(
        {
            "kind": kind,
            "effect": effect,
            "n_tasks": grid,
            "power": powers,
            "power_se": np.sqrt(powers * (1 - powers) / n_sim),
            "n_sim": n_sim,
            "alpha": alpha,
            "target_power": power,
            "n_required": float(reached[0]) if reached else np.nan,
            "n_pilot": int(a.size),
            "seed": seed,
        }
    )


def project_spend(
    trials: pd.DataFrame,
    *,
    n_tasks: int,
    repetitions: int,
    profiles: Sequence[str] | None = None,
    metrics: Sequence[str] = ("total_cost_usd", "total_tokens", "elapsed_sec"),
) -> pd.DataFrame:
    """Projected spend of a full run from pilot trials: per-run median and p90, times the runs.

    For each profile and metric: ``n_runs = n_tasks * repetitions``;
    ``projected_median = n_runs * median`` (the typical total) and
    ``projected_p90 = n_runs * p90`` (a budget line: a sum of per-run p90s over-states the p90 of
    the total, which is the intended margin against heavy-tailed runs). A final ``(all)`` row per
    metric sums the profiles. Quantiles are numpy's linear interpolation.

    Returns ``profile, metric, n_pilot_runs, per_run_median, per_run_p90, n_runs,
    projected_median, projected_p90``.

    Examples
    --------
    >>> pilot = pd.DataFrame({"profile": ["A"] * 5, "total_cost_usd": [1, 2, 3, 4, 10]})
    >>> r = project_spend(pilot, n_tasks=50, repetitions=3, metrics=("total_cost_usd",)).iloc[0]
    >>> print(r["per_run_median"], r["n_runs"], r["projected_median"], round(r["per_run_p90"], 2))  # numpy quantile
    3.0 150 450.0 7.6
    """
    if n_tasks < 1 or repetitions < 1:
        raise ValueError("n_tasks and repetitions must be >= 1")
    names = sorted(trials["profile"].astype(str).unique()) if profiles is None else list(profiles)
    rows: list[dict[str, Any]] = []  # frame records: text, counts and floats
    n_runs = n_tasks * repetitions
    for metric in metrics:
        if metric not in trials.columns:
            raise ValueError(f"metric {metric!r} is not a column of the pilot frame")
        for profile in names:
            v = pd.to_numeric(trials.loc[trials["profile"].astype(str) == profile, metric], errors="coerce").dropna().to_numpy(float)
            med = float(np.median(v)) if v.size else np.nan
            p90 = float(np.quantile(v, 0.9)) if v.size else np.nan
            rows.append({"profile": profile, "metric": metric, "n_pilot_runs": int(v.size), "per_run_median": med,
                         "per_run_p90": p90, "n_runs": n_runs, "projected_median": n_runs * med, "projected_p90": n_runs * p90})
        part = [r for r in rows if r["metric"] == metric]
        rows.append({"profile": "(all)", "metric": metric, "n_pilot_runs": sum(r["n_pilot_runs"] for r in part),
                     "per_run_median": np.nan, "per_run_p90": np.nan, "n_runs": n_runs * len(part),
                     "projected_median": float(np.sum([r["projected_median"] for r in part])),
                     "projected_p90": float(np.sum([r["projected_p90"] for r in part]))})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- estimates with agreeing intervals


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


def clustered_proportion(successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95) -> pd.DataFrame:
    """A rate over trials clustered in tasks, with a Wilson interval at the design-effective sample size.

    ``successes[g]`` of ``trials[g]`` trials of task g. The rate is ``sum(successes) / sum(trials)``;
    its cluster-robust (CR1) variance ``G/(G-1) * sum_g (s_g - p t_g)^2 / N^2`` is statsmodels'
    clustered variance of an intercept-only model. Repetitions of one task share its difficulty, so
    the design effect ``deff = var_cluster / (p (1-p) / N)`` is usually above 1; the interval is
    Wilson's at ``n_eff = N / max(deff, 1)`` (Kish 1965; Korn & Graubard 1998, Survey Methodology
    24:193-201), which stays inside [0, 1] and widens with the clustering.

    Returns one row: ``successes, n_trials, n_tasks, proportion, ci_low, ci_high, design_effect, n_effective``.

    Examples
    --------
    statsmodels' clustered variance of the intercept (``OLS(y, 1).fit(cov_type="cluster")``) is 0.15909^2
    for these six tasks of three trials; the design effect compares it with p(1-p)/N:

    >>> r = clustered_proportion([3, 2, 0, 1, 3, 2], [3, 3, 3, 3, 3, 3]).iloc[0]
    >>> se = (r["design_effect"] * r["proportion"] * (1 - r["proportion"]) / r["n_trials"]) ** 0.5
    >>> print(f"{r['proportion']:.4f}, clustered SE {se:.5f}, design effect {r['design_effect']:.3f}")
    0.6111, clustered SE 0.15909, design effect 1.917
    """
    s = np.asarray(successes, dtype=float)
    t = np.asarray(trials, dtype=float)
    keep = t > 0
    s, t = s[keep], t[keep]
    n, g = float(t.sum()), int(t.size)
    row = {"successes": int(s.sum()), "n_trials": int(n), "n_tasks": g, "proportion": np.nan, "ci_low": np.nan,
           "ci_high": np.nan, "design_effect": np.nan, "n_effective": np.nan}
    if n == 0:
        return pd.DataFrame([row])
    p = float(s.sum() / n)
    deff = 1.0
    if g >= 2 and 0 < p < 1:
        var_cluster = g / (g - 1) * float(np.sum((s - p * t) ** 2)) / n**2
        deff = var_cluster / (p * (1 - p) / n)
    n_eff = n / max(deff, 1.0)
    w = wilson_ci(p * n_eff, n_eff, confidence=confidence).iloc[0]
    row.update(proportion=p, ci_low=float(w["ci_low"]), ci_high=float(w["ci_high"]), design_effect=float(deff),
               n_effective=float(n_eff))
    return pd.DataFrame([row])


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


# --------------------------------------------------------------------------- every repetition


def paired_t(d: ArrayLike, *, confidence: float = 0.95) -> pd.DataFrame:
    """Mean of per-task differences with Student's t test and interval (df = n - 1).

    With one aggregated difference per task this is the CR2 cluster-robust analysis of the
    trial-level model with Satterthwaite degrees of freedom (Bell & McCaffrey 2002; Pustejovsky &
    Tipton 2018): for an intercept-only model the CR2 variance is s^2/n and the Satterthwaite df is
    n - 1. The interval and the test are the same computation, so they always agree.

    Returns one row: ``n, estimate, se, df, statistic, p_val, ci_low, ci_high``.

    Examples
    --------
    R's ``?t.test`` example, Student's sleep data: ``t.test(extra ~ group, data = sleep, paired = TRUE)``
    gives t = -4.0621, df = 9, p-value = 0.002833, 95 percent confidence interval -2.4598858 -0.7001142,
    mean difference -1.58:

    >>> g1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
    >>> g2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
    >>> r = paired_t(np.subtract(g1, g2)).iloc[0]
    >>> print(f"t = {r['statistic']:.4f}, df = {r['df']:.0f}, p-value = {r['p_val']:.6f}, "
    ...       f"CI {r['ci_low']:.7f} {r['ci_high']:.7f}, mean {r['estimate']:.2f}")
    t = -4.0621, df = 9, p-value = 0.002833, CI -2.4598858 -0.7001142, mean -1.58
    """
    x = np.asarray(d, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    row = {"n": n, "estimate": float(x.mean()) if n else np.nan, "se": np.nan, "df": max(n - 1, 0),
           "statistic": np.nan, "p_val": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    if n >= 2:
        se = float(x.std(ddof=1) / np.sqrt(n))
        q = sps.t.ppf((1 + confidence) / 2, n - 1)
        row.update(se=se, ci_low=row["estimate"] - q * se, ci_high=row["estimate"] + q * se)
        if se > 0:
            t = row["estimate"] / se
            row.update(statistic=t, p_val=float(2 * sps.t.sf(abs(t), n - 1)))
        else:
            row.update(p_val=1.0 if row["estimate"] == 0 else 0.0)
    return pd.DataFrame([row])


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


def gee_difference(y: ArrayLike, arm_b: ArrayLike, cluster: ArrayLike, *, confidence: float = 0.95) -> pd.DataFrame:
    """Marginal difference in a pass rate between arms by GEE, with a small-sample corrected standard error.

    Identity link, exchangeable working correlation within task (Liang & Zeger 1986; statsmodels
    GEE). The plain sandwich standard error is biased down with few clusters (its z test rejected a
    true null in 6.6 % of simulated 24-task studies and 8.8 % at 12 tasks); here it is the bias-reduced
    sandwich of Mancl & DeRouen (2001, Biometrics 57:126-134; statsmodels ``cov_type="bias_reduced"``),
    and test and interval use Student's t with G - 1 degrees of freedom for G tasks (each task holds
    both arms, as a paired t test's units do). Test and interval are the same computation, so they agree.

    A sensitivity analysis for the per-task pass@1 difference: it weighs trials by the working
    correlation instead of weighing every task the same. Returns one row: ``estimate, se, df, t, p_val,
    ci_low, ci_high, n_trials, n_clusters``.

    Examples
    --------
    With the same number of trials per task and arm, the GEE estimate is the plain difference of the
    arms' pass rates (here 10/12 - 5/12); its t test has tasks - 1 degrees of freedom:

    >>> y = [1, 1, 0, 1, 1, 1,  0, 0, 1, 1, 0, 1,  0, 0, 0, 1, 1, 1,  1, 1, 0, 0, 1, 1]
    >>> arm = [0, 0, 0, 1, 1, 1] * 4
    >>> task = [t for t in range(4) for _ in range(6)]
    >>> r = gee_difference(y, arm, task).iloc[0]
    >>> print(f"{r['estimate']:.4f} = {10 / 12 - 5 / 12:.4f}, df {r['df']:.0f}")
    0.4167 = 0.4167, df 3
    """
    import statsmodels.api as sm  # 1.4 s to import; only the GEE sensitivity analysis needs it

    yv = np.asarray(y, dtype=float)
    xv = np.asarray(arm_b, dtype=float)
    gv = np.asarray(cluster)
    ok = np.isfinite(yv)
    yv, xv, gv = yv[ok], xv[ok], gv[ok]
    n_g = int(pd.unique(gv).size)
    row = {"estimate": np.nan, "se": np.nan, "df": max(n_g - 1, 0), "t": np.nan, "p_val": np.nan, "ci_low": np.nan,
           "ci_high": np.nan, "n_trials": int(yv.size), "n_clusters": n_g}
    if n_g < 2 or np.unique(xv).size < 2:
        return pd.DataFrame([row])
    fit = sm.GEE(yv, sm.add_constant(xv), groups=pd.factorize(gv)[0], family=sm.families.Gaussian(),
                 cov_struct=sm.cov_struct.Exchangeable()).fit(cov_type="bias_reduced")
    est, se = float(fit.params[1]), float(fit.bse[1])
    q = sps.t.ppf((1 + confidence) / 2, n_g - 1)
    row.update(estimate=est, se=se, ci_low=est - q * se, ci_high=est + q * se)
    if se > 0:
        row.update(t=est / se, p_val=float(2 * sps.t.sf(abs(est / se), n_g - 1)))
    return pd.DataFrame([row])
