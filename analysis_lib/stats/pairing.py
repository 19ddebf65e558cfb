"""Pairing trials of two profiles by task: outcomes read leniently, repetitions aggregated, tasks paired.

The task is the unit of analysis (tests and bootstraps resample tasks, never trials); direction is always B - A.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

__all__ = ["as_outcome", "AGGREGATES", "aggregate_repetitions", "pair_tasks", "pair_trials"]


_TRUE = {"true", "1", "1.0", "yes", "pass", "passed"}


_FALSE = {"false", "0", "0.0", "no", "fail", "failed"}


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
