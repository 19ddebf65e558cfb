"""Proportions: Wilson intervals, Cohen's h, a task-clustered proportion, and pass@k."""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps

from .pairing import aggregate_repetitions

__all__ = ["wilson_ci", "cohens_h", "pass_at_k", "pass_at_k_per_task", "clustered_proportion"]


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
    # The interval holds p: at 0 or n successes an end equals p exactly, which rounding (1e-17) must not move past it.
    lo, hi = np.minimum(np.clip(lo, 0, 1), p), np.maximum(np.clip(hi, 0, 1), p)
    return pd.DataFrame({"successes": k, "n": m, "proportion": p, "ci_low": lo, "ci_high": hi})


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


def clustered_proportion(successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95) -> pd.DataFrame:
    """A rate over trials clustered in tasks, with a Wilson interval at the design-effective sample size.

    ``successes[g]`` of ``trials[g]`` trials of task g. The rate is ``sum(successes) / sum(trials)``;
    its cluster-robust (CR1) variance ``G/(G-1) * sum_g (s_g - p t_g)^2 / N^2`` is statsmodels'
    clustered variance of an intercept-only model. Repetitions of one task share its difficulty, so
    the design effect ``deff = var_cluster / (p (1-p) / N)`` is usually above 1; the interval is
    Wilson's at ``n_eff = N / max(deff, 1)`` (Kish 1965; Korn & Graubard 1998, Survey Methodology
    24:193-201), which stays inside [0, 1] and widens with the clustering. With one trial per task nothing
    is clustered: the design effect is 1 and the interval is Wilson's over the trials.

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
    # One trial per task is no clustering: the design effect is 1, not the CR1 factor G / (G - 1) that the formula
    # would leave, so that the rate over trials and the rate over tasks of the same count get the same interval.
    if g >= 2 and 0 < p < 1 and t.max() > 1:
        var_cluster = g / (g - 1) * float(np.sum((s - p * t) ** 2)) / n**2
        deff = var_cluster / (p * (1 - p) / n)
    n_eff = n / max(deff, 1.0)
    w = wilson_ci(p * n_eff, n_eff, confidence=confidence).iloc[0]
    row.update(proportion=p, ci_low=float(w["ci_low"]), ci_high=float(w["ci_high"]), design_effect=float(deff),
               n_effective=float(n_eff))
    return pd.DataFrame([row])
