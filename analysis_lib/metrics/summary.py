"""Per-profile summaries of a trials table: counts, pass rate, means and medians (``metrics_summary.csv``) and the
aggregates with full tool distributions (``aggregate_metrics.json``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pandas as pd

from ..core.registry import CATEGORY_IDS

__all__ = ["SUMMARY_METRICS", "FLAG_COLUMNS", "SIMULATED_NOTE", "summary_frame", "aggregate_metrics"]

SUMMARY_METRICS = [
    "total_tokens", "total_input_tokens", "total_output_tokens", "total_cost_usd", "elapsed_sec", "total_steps",
    "tool_calls_count", "tool_success_rate", "mcp_tool_calls", "exploration_breadth", "files_edited", "loop_count",
    "backtrack_count", "tests_passed_ratio",
]
FLAG_COLUMNS = ["tool_misuse", "infinite_loop", "budget_exhaustion", "premature_stop"]
SIMULATED_NOTE = "SIMULATED sample runs (analysis_lib.simulate): illustrative only, not findings."


def summary_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per profile: counts, pass rate (registry ``pass_rate``: infra errors excluded), means and medians."""
    if df.empty:
        return pd.DataFrame(columns=["profile", "n_trials", "n_tasks", "n_infra_errors", "n_scored", "successes", "pass_rate"])
    g = df.groupby("profile", sort=True)
    success = df["success"].astype("Float64")
    out = pd.DataFrame({
        "n_trials": g.size(),
        "n_tasks": g["task_id"].nunique(),
        "n_infra_errors": g["infra_error"].sum().astype(int),
        "n_scored": success.notna().groupby(df["profile"]).sum().astype(int),
        "successes": success.fillna(0).groupby(df["profile"]).sum().astype(int),
        "pass_rate": success.groupby(df["profile"]).mean().astype(float),
    })
    values = df[SUMMARY_METRICS].replace([np.inf, -np.inf], np.nan).groupby(df["profile"])
    means, medians = values.mean(), values.median()
    for m in SUMMARY_METRICS:
        out[f"{m}_mean"] = means[m]
        out[f"{m}_median"] = medians[m]
    flags = df[FLAG_COLUMNS].fillna(False).astype(int).groupby(df["profile"]).sum()
    for f in FLAG_COLUMNS:
        out[f"{f}_count"] = flags[f]
    return out.reset_index()


def aggregate_metrics(df: pd.DataFrame, *, simulated: bool = False, seed: int = 0,
                      summary: pd.DataFrame | None = None) -> dict[str, Any]:
    """Per-profile aggregates with full tool distributions (for aggregate_metrics.json)."""
    if summary is None:
        summary = summary_frame(df)
    summary = summary.set_index("profile") if len(df) else pd.DataFrame()
    cats = df[["profile", *CATEGORY_IDS]].groupby("profile").sum(min_count=1) if len(df) else pd.DataFrame()
    profiles: dict[str, Any] = {}
    for profile, dists in df.groupby("profile", sort=True)["tool_distribution"]:
        dist: dict[str, int] = {}
        for s in dists.dropna():
            for k, v in orjson.loads(s).items():
                dist[k] = dist.get(k, 0) + int(v)
        row = summary.loc[profile]
        profiles[profile] = {
            "n_trials": int(row["n_trials"]),
            "n_tasks": int(row["n_tasks"]),
            "n_scored": int(row["n_scored"]),
            "pass_rate": _num(row["pass_rate"]),
            "means": {m: _num(row[f"{m}_mean"]) for m in SUMMARY_METRICS},
            "medians": {m: _num(row[f"{m}_median"]) for m in SUMMARY_METRICS},
            "tool_distribution": dict(sorted(dist.items(), key=lambda kv: (-kv[1], kv[0]))),
            "tool_category_calls": {c.removeprefix("calls_"): _num(cats.loc[profile, c]) for c in CATEGORY_IDS},
            "flags": {f: int(row[f"{f}_count"]) for f in FLAG_COLUMNS},
        }
    return {
        "simulated": simulated,
        "note": SIMULATED_NOTE if simulated else None,
        "seed": seed,
        "n_trials": int(len(df)),
        "profiles": profiles,
    }


def _num(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


