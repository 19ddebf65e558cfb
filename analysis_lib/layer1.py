"""The Layer 1 job: runs folder in, ``metrics_detail.csv`` and friends out.

``analyse`` is the library entry point (notebooks call it); :mod:`analysis_lib.analyse_cli` is
what ``python -m analysis_lib RUNS_DIR`` runs, the comparisons and LLM analyses included.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .codecanvas.outputs import write_codecanvas_outputs
from .fileio import atomic_write_csv, atomic_write_json
from .metrics import DEFAULT_CONFIG, MetricsConfig
from .plan import PlanError, check_plan, load_plan, write_sidecar
from .registry import CATEGORY_IDS
from .trials_table import relative_to_runs, trials_table

SUMMARY_METRICS = [
    "total_tokens", "total_input_tokens", "total_output_tokens", "total_cost_usd", "elapsed_sec", "total_steps",
    "tool_calls_count", "tool_success_rate", "mcp_tool_calls", "exploration_breadth", "files_edited", "loop_count",
    "backtrack_count", "tests_passed_ratio",
]
FLAG_COLUMNS = ["tool_misuse", "infinite_loop", "budget_exhaustion", "premature_stop"]
ERROR_COLUMNS = ["path", "stage", "severity", "message"]
SIMULATED_NOTE = "SIMULATED sample runs (analysis_lib.simulate): illustrative only, not findings."


@dataclass
class Layer1Result:
    """The Layer 1 tables of one analysis."""

    metrics: pd.DataFrame
    errors: pd.DataFrame
    summary: pd.DataFrame
    aggregate: dict[str, Any]
    simulated: bool = False
    n_sources: int = 0
    cache_hits: int = 0
    files: list[Path] = field(default_factory=list)
    # The analysis plan checked against its record (analysis_lib.plan.PlanCheck), None without a plan.
    plan_check: Any = None


def analyse(
    runs_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    tasks: list[str] | None = None,
    profiles: list[str] | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    config: MetricsConfig = DEFAULT_CONFIG,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = False,
) -> Layer1Result:
    """Ingest every trial under ``runs_dir``, compute Layer 1 metrics, write the outputs to ``out_dir``.

    ``outcome`` is ``"succeeded"``, ``"failed"`` or None; ``limit`` draws a seeded random sample
    of that many trials. Nothing is written when ``out_dir`` is None. The per-trial cache lives in
    ``cache_dir`` (default ``out_dir/.cache``; none with ``cache=False``).
    """
    if cache and cache_dir is None and out_dir is not None:
        cache_dir = os.path.join(os.fspath(out_dir), ".cache")
    table = trials_table(runs_dir, tasks=tasks, profiles=profiles, outcome=outcome, limit=limit, seed=seed, config=config,
                         cache_dir=cache_dir if cache else None, workers=workers, progress=progress)
    df = table.frame
    errors = pd.DataFrame(
        [(relative_to_runs(e.path, runs_dir), e.stage, e.severity, e.message) for e in table.errors], columns=ERROR_COLUMNS
    )
    summary = summary_frame(df)
    summary["simulated"] = table.simulated
    aggregate = aggregate_metrics(df, simulated=table.simulated, seed=seed, summary=summary)
    result = Layer1Result(df, errors, summary, aggregate, table.simulated, table.n_sources, table.cache_hits)
    result.plan_check = plan_check(runs_dir, out_dir)
    if result.plan_check is not None and "started_at" in df:
        result.plan_check.note_first_trial(df["started_at"].dropna().tolist())
    if out_dir is not None:
        result.files = write_outputs(result, out_dir)
    return result


def plan_check(runs_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None):
    """The default analysis plan checked against its record (recorded in ``out_dir`` when there is none);
    None with one warning line when the plan cannot be read, so that Layer 1 still runs."""
    try:
        return check_plan(runs_dir, load_plan(), out_dir=out_dir, record=out_dir is not None)
    except PlanError as exc:
        print(f"warning: {exc}; outputs carry no plan hash", file=sys.stderr)
        return None


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


def write_outputs(result: Layer1Result, out_dir: str | os.PathLike) -> list[Path]:
    """The four Layer 1 files, each written atomically, and the plan sidecar ``analysis_plan.json``.

    The plan hash is inside the JSON (``analysis_plan_sha256``); the CSVs carry it through the sidecar
    written beside them (docs/analysis-plan.md).
    """
    out = Path(out_dir)
    check = result.plan_check
    aggregate = result.aggregate
    if check is not None:
        aggregate = {**aggregate, "analysis_plan_sha256": check.sha256, "analysis_plan_changed": check.changed}
    files = [
        atomic_write_csv(out / "metrics_detail.csv", result.metrics),
        atomic_write_csv(out / "metrics_summary.csv", result.summary),
        atomic_write_json(out / "aggregate_metrics.json", aggregate),
        atomic_write_csv(out / "errors.csv", result.errors),
    ]
    if check is not None:
        files.append(write_sidecar(out, check))
    if "informed_editing_score" in result.metrics and result.metrics["informed_editing_score"].notna().any():
        written = write_codecanvas_outputs([], result.metrics, out, simulated=result.simulated)
        files.extend(written.values())
    return files
