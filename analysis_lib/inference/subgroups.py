"""Per-subgroup effects (repository, task category) with partial pooling, never tested one by one.

A few tasks per group give noisy group effects; the largest raw one is mostly noise. Each group's
pass@1 difference (mean of per-task pass-rate differences B − A) is shown beside its empirical
Bayes estimate under a normal random-effects model: the between-group variance tau^2 by
DerSimonian-Laird, each group pulled towards the precision-weighted overall effect by
SE^2 / (SE^2 + tau^2) (Efron & Morris 1975; DerSimonian & Laird 1986). The table describes; it
carries no per-group p-values, so it invites no uncorrected subgroup claims.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.meta_analysis import combine_effects

from .. import stats
from .comparisons import usable_trials

__all__ = ["read_task_groups", "subgroup_effects", "subgroup_effects_by_pair"]


def read_task_groups(path) -> pd.Series:
    """``task_id,group`` CSV -> Series task_id -> group; a clear one-line error naming the file."""
    try:
        df = pd.read_csv(path, dtype=str)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: task groups not readable ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not {"task_id", "group"} <= set(df.columns):
        raise ValueError(f"{path}: task groups need the columns task_id and group, found {list(df.columns)}")
    return df.dropna().drop_duplicates("task_id").set_index("task_id")["group"]


def subgroup_effects(metrics: pd.DataFrame, groups: pd.Series, a: str, b: str) -> pd.DataFrame:
    """Raw and partially pooled pass@1 difference per group of tasks for B against A.

    Returns ``group, n_tasks, raw, se, shrunk, shrinkage, tau2, overall`` (differences as fractions);
    a group of one task, or with no spread of its own, takes the pooled within-group variance.
    """
    pairs = stats.pair_tasks(usable_trials(metrics), "success", a, b, binary=True, how="mean")
    pairs["group"] = pairs["task_id"].map(groups)
    pairs = pairs.dropna(subset=["group"])
    pairs["d"] = pairs["b"] - pairs["a"]
    g = pairs.groupby("group", sort=True)["d"].agg(n_tasks="count", raw="mean", var="var").reset_index()
    if g.empty:
        return pd.DataFrame(columns=["group", "n_tasks", "raw", "se", "shrunk", "shrinkage", "tau2", "overall"])
    resid = pairs["d"] - pairs.groupby("group")["d"].transform("mean")
    dof = len(pairs) - len(g)
    pooled = float((resid ** 2).sum() / dof) if dof > 0 else float(pairs["d"].var(ddof=1))
    # A group of one task, or whose tasks all moved alike, borrows the pooled within-group variance.
    g["se"] = np.sqrt(np.where((g["n_tasks"] > 1) & (g["var"] > 1e-12), g["var"], pooled) / g["n_tasks"])
    if not pooled > 1e-12:  # every task of every group moved alike: nothing to pool towards
        return g.assign(shrunk=g["raw"], shrinkage=0.0, tau2=0.0, overall=float(pairs["d"].mean()))[
            ["group", "n_tasks", "raw", "se", "shrunk", "shrinkage", "tau2", "overall"]]
    if len(g) > 1:
        pooled_fit = combine_effects(g["raw"].to_numpy(), g["se"].to_numpy() ** 2, method_re="dl")
        tau2, overall = float(pooled_fit.tau2), float(pooled_fit.mean_effect_re)
    else:
        tau2, overall = 0.0, float(g["raw"].iloc[0])
    g["shrinkage"] = g["se"] ** 2 / (g["se"] ** 2 + tau2) if tau2 > 0 else 1.0
    g["shrunk"] = g["shrinkage"] * overall + (1 - g["shrinkage"]) * g["raw"]
    g["tau2"], g["overall"] = tau2, overall
    return g[["group", "n_tasks", "raw", "se", "shrunk", "shrinkage", "tau2", "overall"]]


def subgroup_effects_by_pair(metrics: pd.DataFrame, groups: pd.Series, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """:func:`subgroup_effects` of every profile pair (B against A) in one frame, with ``profile_a`` and ``profile_b``."""
    return pd.concat([subgroup_effects(metrics, groups, a, b).assign(profile_a=a, profile_b=b) for a, b in pairs],
                     ignore_index=True)
