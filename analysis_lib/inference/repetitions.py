"""What the repetitions of a task say: variance components, and pass@k / pass^k with intervals.

A study chooses how many tasks and how many repetitions per task. The variance of a task's mean
over r repetitions is ``between + within / r``: once the within-task part is small against the
between-task part, more repetitions buy little and more tasks buy much. :func:`variance_components`
gives both parts per profile and metric (one-way random-effects ANOVA, the method-of-moments
estimator for unbalanced groups; Searle, Casella & McCulloch 1992, ch. 3), and
:func:`pass_at_k_table` gives pass@k (at least one of k repetitions passes) and pass^k (all k
pass) with task-bootstrap intervals, per profile and as paired differences.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .. import stats
from .comparisons import usable_trials

__all__ = ["usual_repetitions", "variance_components", "pass_at_k_table"]


def usual_repetitions(metrics: pd.DataFrame, default: int = 3) -> int:
    """The usual number of repetitions of a task: the most common count of a (profile, task)'s trials with an
    agent attempt (infrastructure errors left out), the larger count on a tie; ``default`` without trials.

    The mode, because it is the design's count: a few reruns or backfills (which a maximum would take) and a few
    lost trials (which pull a median down, or halfway between two counts) leave it where the schedule put it.
    pass@k's largest k, the planned spend and the paper's repetition count all read it.
    """
    trials = usable_trials(metrics)
    if trials.empty:
        return default
    counts = trials.groupby(["profile", "task_id"]).size()
    return int(counts.mode().max())


def _one_way(values: np.ndarray, groups: np.ndarray) -> tuple[float, float, int, int]:
    """Between- and within-group variance by ANOVA moments (between truncated at 0); groups and values."""
    codes, _ = pd.factorize(groups)
    g = codes.max() + 1 if codes.size else 0
    n_i = np.bincount(codes, minlength=g).astype(float)
    n = float(n_i.sum())
    if g < 2 or n <= g:
        return np.nan, np.nan, int(g), int(n)
    means = np.bincount(codes, weights=values, minlength=g) / n_i
    grand = values.mean()
    ssb = float(np.sum(n_i * (means - grand) ** 2))
    ssw = float(np.sum((values - means[codes]) ** 2))
    msb, msw = ssb / (g - 1), ssw / (n - g)
    n0 = (n - np.sum(n_i ** 2) / n) / (g - 1)  # the average group size of unbalanced ANOVA
    return max((msb - msw) / n0, 0.0), msw, int(g), int(n)


def variance_components(metrics: pd.DataFrame, columns: Sequence[str] = ("success", "total_tokens")) -> pd.DataFrame:
    """Per profile and metric: between-task and within-task variance, ICC, and what r repetitions give.

    Pass/fail on the 0/1 scale; positive continuous metrics on the log scale (so the parts are
    comparable across tasks of different size). ``icc_inflation_3`` = 1 + 2 ICC, the model's variance
    inflation of counting 3 repetitions of a task as independent (the rates table's design effect is
    the empirical one, from the cluster-robust variance, and differs from it); ``within_share_r`` = the share of
    a task mean's variance that comes from the repetitions, at r = 1, 3, 5.
    """
    trials = usable_trials(metrics)
    rows = []
    for col in columns:
        if col not in trials.columns:
            continue
        binary = col == "success"
        for profile, grp in trials.groupby("profile", sort=True):
            v = stats.as_outcome(grp[col].to_numpy()) if binary else pd.to_numeric(grp[col], errors="coerce")
            v = np.asarray(v, dtype=float)
            ok = np.isfinite(v) & (True if binary else v > 0)
            if not binary:
                v = np.log(np.where(ok, v, 1.0))
            between, within, g, n = _one_way(v[ok], grp["task_id"].astype(str).to_numpy()[ok])
            icc = between / (between + within) if np.isfinite(between) and between + within > 0 else np.nan
            row = {"profile": profile, "metric": col, "scale": "0/1" if binary else "log", "n_tasks": g, "n_trials": n,
                   "between_task": between, "within_task": within, "icc": icc, "icc_inflation_3": 1 + 2 * icc}
            for r in (1, 3, 5):
                total = between + within / r
                row[f"within_share_{r}"] = (within / r) / total if total and np.isfinite(total) else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def pass_at_k_table(metrics: pd.DataFrame, pairs: list[tuple[str, str]], *, n_boot: int = 10_000, seed: int = 0,
                    confidence: float = 0.95) -> pd.DataFrame:
    """pass@k and pass^k for k = 2 .. the usual number of repetitions, per profile and as B − A, with intervals.

    k = 1 is left out: pass@1 = pass^1 is the pass rate, reported with its own interval in the rates
    table and, as a comparison, by the plan (one quantity, one interval).

    Each task uses its own number n of repetitions in the unbiased estimators (Chen et al. 2021;
    Yao et al. 2024); a task with fewer than k repetitions is left out of that k and counted. The
    intervals are percentile bootstraps over tasks (paired tasks resampled together for B − A).
    Returns ``k, profile, vs, n_tasks, n_tasks_short, measure, estimate, ci_low, ci_high``.
    """
    trials = usable_trials(metrics)
    if trials.empty:
        return pd.DataFrame()
    k_max = usual_repetitions(trials)
    rng = np.random.default_rng(seed)
    q = ((1 - confidence) / 2, (1 + confidence) / 2)
    rows = []
    for k in range(2, k_max + 1):
        per = stats.pass_at_k_per_task(trials, k).dropna(subset=["at_k"])
        short = trials.groupby("profile")["task_id"].nunique() - per.groupby("profile").size()
        for profile, grp in per.groupby("profile", sort=True):
            idx = rng.integers(0, len(grp), size=(n_boot, len(grp)))
            for measure, col in (("pass@k", "at_k"), ("pass^k", "hat_k")):
                x = grp[col].to_numpy()
                lo, hi = np.quantile(x[idx].mean(1), q)
                rows.append({"k": k, "profile": profile, "vs": "", "n_tasks": len(grp),
                             "n_tasks_short": int(short.get(profile, 0)), "measure": measure,
                             "estimate": float(x.mean()), "ci_low": float(lo), "ci_high": float(hi)})
        tasks_of = trials.groupby("profile")["task_id"].agg(lambda s: set(s.astype(str)))
        for a, b in pairs:
            both = per[per["profile"] == a].merge(per[per["profile"] == b], on="task_id", suffixes=("_a", "_b"))
            if both.empty:
                continue
            # Tasks both profiles ran that lack k repetitions under either: left out of this k, and counted.
            pair_short = len(tasks_of.get(a, set()) & tasks_of.get(b, set())) - len(both)
            idx = rng.integers(0, len(both), size=(n_boot, len(both)))
            for measure, col in (("pass@k", "at_k"), ("pass^k", "hat_k")):
                d = both[f"{col}_b"].to_numpy() - both[f"{col}_a"].to_numpy()
                lo, hi = np.quantile(d[idx].mean(1), q)
                rows.append({"k": k, "profile": b, "vs": a, "n_tasks": len(both), "n_tasks_short": pair_short, "measure": measure,
                             "estimate": float(d.mean()), "ci_low": float(lo), "ci_high": float(hi)})
    return pd.DataFrame(rows)
