"""Profile-level rates: pass rate per trial, resolve rate per task, cost per success, with their intervals.

Three quantities, three names (:mod:`analysis_lib.core.registry`):

* ``pass_rate``: successful trials / trials with an outcome. Repetitions of one task share its
  difficulty, so the interval is Wilson's at the design-effective sample size, clustered by task
  (:func:`analysis_lib.stats.proportions.clustered_proportion`);
* ``resolve_rate``: tasks resolved by the majority of their repetitions (a tie counts as fail) /
  tasks with an outcome; tasks are independent, so the interval is Wilson's over tasks. This is
  the rate the paired comparisons test;
* ``cost_per_success``: total cost / total successes, with a percentile bootstrap over tasks.

Beside them, the mean reward per trial (``mean_reward``) with a task-clustered t interval: the outcome a study
that scores partial credit reports (:func:`analysis_lib.inference.comparisons.partial_credit`).

Infrastructure errors are left out of all of them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import stats
from .comparisons import usable_trials

__all__ = ["RATE_COLUMNS", "profile_rates"]

RATE_COLUMNS = [
    "profile", "n_trials", "n_infra_errors", "n_outcome", "successes", "pass_rate", "pass_rate_low", "pass_rate_high",
    "design_effect", "n_tasks", "tasks_resolved", "majority_ties", "resolve_rate", "resolve_rate_low",
    "resolve_rate_high", "total_cost_usd", "cost_per_success", "cost_per_success_low", "cost_per_success_high",
    "n_reward", "mean_reward", "mean_reward_low", "mean_reward_high",
]


def profile_rates(metrics: pd.DataFrame, *, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """One row per profile with the three rates and their intervals (``RATE_COLUMNS``)."""
    trials = usable_trials(metrics)
    rows = []
    for profile in sorted(metrics["profile"].dropna().astype(str).unique()):
        everything = metrics[metrics["profile"].astype(str) == profile]
        use = trials[trials["profile"].astype(str) == profile]
        outcome = stats.as_outcome(use["success"].to_numpy()) if "success" in use else pd.Series(dtype=float)
        known = use.assign(win=outcome.to_numpy())[outcome.notna().to_numpy()]
        per_task = known.groupby("task_id")["win"].agg(["sum", "count"])
        row = {"profile": profile, "n_trials": len(everything), "n_infra_errors": len(everything) - len(use),
               "n_outcome": len(known), "successes": int(known["win"].sum()), "n_tasks": len(per_task)}
        pr = stats.clustered_proportion(per_task["sum"], per_task["count"], confidence=confidence).iloc[0]
        row.update(pass_rate=pr["proportion"], pass_rate_low=pr["ci_low"], pass_rate_high=pr["ci_high"],
                   design_effect=pr["design_effect"])
        resolved = 2 * per_task["sum"] > per_task["count"]
        rr = stats.wilson_ci(int(resolved.sum()), len(per_task), confidence=confidence).iloc[0]
        row.update(tasks_resolved=int(resolved.sum()), majority_ties=int((2 * per_task["sum"] == per_task["count"]).sum()),
                   resolve_rate=rr["proportion"], resolve_rate_low=rr["ci_low"], resolve_rate_high=rr["ci_high"])
        cost = pd.to_numeric(known.get("total_cost_usd", pd.Series(np.nan, index=known.index)), errors="coerce")
        with_cost = known.assign(cost=cost)[cost.notna().to_numpy()]
        if len(with_cost):
            tasks = with_cost.groupby("task_id")[["cost", "win"]].sum()
            r = stats.ratio_of_totals(tasks["cost"], tasks["win"], tasks["cost"], tasks["win"], n_boot=n_boot,
                                      seed=seed, confidence=confidence).iloc[0]
            row.update(total_cost_usd=float(tasks["cost"].sum()), cost_per_success=r["estimate"],
                       cost_per_success_low=r["ci_low"], cost_per_success_high=r["ci_high"])
        row.update(_mean_reward(use, confidence))
        rows.append(row)
    out = pd.DataFrame(rows, columns=RATE_COLUMNS)
    for c in RATE_COLUMNS[1:]:
        out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


def _mean_reward(trials: pd.DataFrame, confidence: float) -> dict:
    """Mean reward over a profile's trials with a reward, and its interval: the task-clustered (CR1) standard error
    with Student's t on tasks − 1 degrees of freedom (:func:`analysis_lib.stats.parametric.clustered_mean_difference`
    against 0), which with one trial per task is the one-sample t interval."""
    reward = pd.to_numeric(trials["reward"], errors="coerce") if "reward" in trials else pd.Series(np.nan, index=trials.index)
    known = trials.assign(b=reward.to_numpy(), a=0.0)[reward.notna().to_numpy()]
    if known.empty:
        return {"n_reward": 0}
    r = stats.clustered_mean_difference(known[["task_id", "a", "b"]], confidence=confidence).iloc[0]
    return {"n_reward": len(known), "mean_reward": r["mean_diff"], "mean_reward_low": r["ci_low"],
            "mean_reward_high": r["ci_high"]}
