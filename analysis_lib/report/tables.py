"""Tidy summary frames for the paper, computed from ``metrics_detail.csv`` (one row per trial).

Every function takes the metrics frame as the analysis writes it and returns a tidy frame with
stable snake_case columns; rounding happens only when a table is displayed or exported.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

__all__ = ["outcome_trials", "resolve_rates", "paired_differences", "tool_mix", "tool_calls_from_metrics",
           "tool_calls_from_distribution", "profile_summary"]


def _as_bool(series: pd.Series) -> pd.Series:
    """Read a CSV ``success`` column (True/False/1/0/empty) as a nullable boolean."""
    mapping = {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}
    out = series.map(lambda v: v if isinstance(v, bool) else mapping.get(str(v).strip().lower()))
    return out.astype("boolean")


def outcome_trials(metrics: pd.DataFrame) -> pd.DataFrame:
    """Trials with a known outcome: infrastructure errors (empty ``success``) are excluded."""
    df = metrics.copy()
    df["success"] = _as_bool(df["success"])
    return df[df["success"].notna()].reset_index(drop=True)


def resolve_rates(metrics: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Resolve rate per profile with a Wilson score interval.

    resolve_rate = successes / trials with a known outcome (infra errors excluded); the interval is
    Wilson's score interval (Wilson 1927), via ``statsmodels.stats.proportion.proportion_confint``.
    Columns: profile, n_trials, successes, resolve_rate, ci_low, ci_high, infra_errors.
    """
    known = outcome_trials(metrics)
    rows = []
    for profile in sorted(metrics["profile"].unique()):
        sub = known[known["profile"] == profile]
        n = int(len(sub))
        k = int(sub["success"].sum())
        lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson") if n else (np.nan, np.nan)
        infra = int((metrics["profile"] == profile).sum()) - n
        rows.append({"profile": profile, "n_trials": n, "successes": k, "resolve_rate": k / n if n else np.nan,
                     "ci_low": float(lo), "ci_high": float(hi), "infra_errors": infra})
    return pd.DataFrame(rows, columns=["profile", "n_trials", "successes", "resolve_rate", "ci_low", "ci_high", "infra_errors"])


def paired_differences(metrics: pd.DataFrame, metric: str, baseline: str) -> pd.DataFrame:
    """Per task, a profile's mean ``metric`` over repetitions minus the baseline's (B - A).

    Only tasks that both profiles ran are kept (paired design). Columns: task_id, profile,
    baseline_value, value, difference, relative_change_pct (100 * (B - A) / A, NaN when A is 0).
    """
    if baseline not in set(metrics["profile"]):
        raise ValueError(f"baseline={baseline!r} is not a profile; allowed: {sorted(metrics['profile'].unique())}")
    vals = pd.to_numeric(metrics[metric], errors="coerce")
    per_task = (metrics.assign(_v=vals).dropna(subset=["_v"])
                .groupby(["profile", "task_id"], as_index=False)["_v"].mean())
    base = per_task[per_task["profile"] == baseline][["task_id", "_v"]].rename(columns={"_v": "baseline_value"})
    other = per_task[per_task["profile"] != baseline].rename(columns={"_v": "value"})
    out = other.merge(base, on="task_id", how="inner")
    out["difference"] = out["value"] - out["baseline_value"]
    denom = out["baseline_value"].where(out["baseline_value"] != 0)
    out["relative_change_pct"] = 100.0 * out["difference"] / denom
    out.insert(0, "metric", metric)
    return (out[["metric", "task_id", "profile", "baseline_value", "value", "difference", "relative_change_pct"]]
            .sort_values(["profile", "task_id"]).reset_index(drop=True))


def tool_mix(calls: pd.DataFrame) -> pd.DataFrame:
    """Share of tool calls per category within each profile.

    ``calls`` has columns profile, category and optionally ``calls`` (counts; one row per call when
    absent). share = calls in category / all calls of the profile. Columns: profile, category, calls, share.
    """
    df = calls.copy()
    if "calls" not in df:
        df["calls"] = 1
    out = df.groupby(["profile", "category"], as_index=False)["calls"].sum()
    total = out.groupby("profile")["calls"].transform("sum")
    # A profile without any tool call has no mix: NaN shares, not a division by zero.
    out["share"] = out["calls"] / total.where(total > 0)
    return out.sort_values(["profile", "category"]).reset_index(drop=True)


def tool_calls_from_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """(profile, category, calls) from the ``calls_<category>`` columns of metrics_detail.csv."""
    cols = [c for c in metrics.columns if c.startswith("calls_")]
    long = metrics.melt(id_vars=["profile"], value_vars=cols, var_name="category", value_name="calls")
    long["category"] = long["category"].str.removeprefix("calls_")
    long["calls"] = pd.to_numeric(long["calls"], errors="coerce").fillna(0)
    return long.groupby(["profile", "category"], as_index=False)["calls"].sum()


def tool_calls_from_distribution(metrics: pd.DataFrame, categorize) -> pd.DataFrame:
    """(profile, category, calls) from the ``tool_distribution`` JSON column, each tool name categorised.

    ``categorize(name, arguments)`` is the project's tool taxonomy; arguments are not in the
    distribution, so shell commands count as ``execute`` here.
    """
    rows = []
    for profile, dist in zip(metrics["profile"], metrics["tool_distribution"], strict=True):
        if not isinstance(dist, str) or not dist.strip():
            continue
        for name, count in json.loads(dist).items():
            rows.append({"profile": profile, "category": categorize(name, {}), "calls": int(count)})
    return pd.DataFrame(rows, columns=["profile", "category", "calls"])


def profile_summary(metrics: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean and median of numeric ``columns`` per profile (tidy: profile, metric, mean, median, n)."""
    rows = []
    for col in columns:
        if col not in metrics:
            continue
        vals = pd.to_numeric(metrics[col], errors="coerce")
        for profile, sub in metrics.assign(_v=vals).groupby("profile"):
            v = sub["_v"].dropna()
            rows.append({"profile": profile, "metric": col, "mean": float(v.mean()) if len(v) else np.nan,
                         "median": float(v.median()) if len(v) else np.nan, "n": int(len(v))})
    return pd.DataFrame(rows, columns=["profile", "metric", "mean", "median", "n"])
