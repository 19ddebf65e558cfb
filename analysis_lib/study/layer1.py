"""The Layer 1 job: runs folder in, ``metrics_detail.csv`` and friends out.

``analyse`` is the library entry point (notebooks call it); :mod:`analysis_lib.cli.analyse` is
what ``python -m analysis_lib RUNS_DIR`` runs, the comparisons and LLM analyses included.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from ..codecanvas.outputs import write_codecanvas_outputs
from ..core.fileio import atomic_write_csv, atomic_write_json
from ..core.registry import CATEGORY_IDS
from ..metrics.trial_metrics import DEFAULT_CONFIG, MetricsConfig
from ..metrics.trials_table import relative_to_runs, trials_table
from .audit import DesignAudit, design_audit
from .baseline import Baseline, resolve_baseline
from .placement import RERUN_COLUMNS, placement
from .plan import PlanError, check_plan, display_path, load_plan, write_sidecar
from .study_file import StudyDesign, load_design

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
    # The analysis plan checked against its record (analysis_lib.study.plan.PlanCheck), None without a plan.
    plan_check: Any = None
    # The study design that formed the arms (None: the readers' default profiles), and where it was read.
    design: StudyDesign | None = None
    design_path: str | None = None
    reruns: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RERUN_COLUMNS))
    baseline: Baseline = field(default_factory=lambda: Baseline(None, "not resolved"))
    # Why no baseline could be chosen (a declared baseline that is not a profile), else None.
    baseline_error: str | None = None
    audit: DesignAudit | None = None


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
    design: StudyDesign | str | os.PathLike | None = None,
    plan: str | os.PathLike | None = None,
    baseline: str | None = None,
) -> Layer1Result:
    """Ingest every trial under ``runs_dir``, compute Layer 1 metrics, audit the design, write the outputs to ``out_dir``.

    ``outcome`` is ``"succeeded"``, ``"failed"`` or None; ``limit`` draws a seeded random sample
    of that many trials. Nothing is written when ``out_dir`` is None. The per-trial cache lives in
    ``cache_dir`` (default ``out_dir/.cache``; none with ``cache=False``). ``design``: a study file
    (path or :class:`~analysis_lib.study.study_file.StudyDesign`) that forms the arms; ``plan``: the analysis
    plan file (default ``params/analysis_plan.yaml``); ``baseline``: the baseline chosen explicitly
    (else :func:`analysis_lib.study.baseline.resolve_baseline`). Raises :class:`~analysis_lib.study.study_file.DesignError`
    for a study file that cannot be used.
    """
    design_path = None
    if design is not None and not isinstance(design, StudyDesign):
        design_path = display_path(design)
        design = load_design(design)
    if design is not None:
        config = replace(config, success_rule=design.success)
    if cache and cache_dir is None and out_dir is not None:
        cache_dir = os.path.join(os.fspath(out_dir), ".cache")
    table = trials_table(runs_dir, tasks=tasks, profiles=profiles, outcome=outcome, limit=limit, seed=seed, config=config,
                         cache_dir=cache_dir if cache else None, workers=workers, progress=progress,
                         place=placement(design) if design is not None else None)
    df = table.frame
    simulated = table.simulated or bool(design is not None and design.simulated)
    df["simulated"] = simulated
    reruns = pd.DataFrame(table.reruns, columns=RERUN_COLUMNS)
    errors = pd.DataFrame(
        [(_error_path(e.path, runs_dir), e.stage, e.severity, e.message) for e in table.errors], columns=ERROR_COLUMNS
    )
    summary = summary_frame(df)
    summary["simulated"] = simulated
    aggregate = aggregate_metrics(df, simulated=simulated, seed=seed, summary=summary)
    result = Layer1Result(df, errors, summary, aggregate, simulated, table.n_sources, table.cache_hits,
                          design=design, design_path=design_path, reruns=reruns)
    result.plan_check = plan_check(runs_dir, out_dir, plan)
    if result.plan_check is not None and "started_at" in df:
        result.plan_check.note_first_trial(df["started_at"].dropna().tolist())
    try:
        result.baseline = resolve_baseline(df["profile"].dropna().astype(str) if len(df) else [], explicit=baseline,
                                           plan=result.plan_check.plan if result.plan_check else None, design=design,
                                           runs_dir=runs_dir)
    except ValueError as exc:
        result.baseline_error = str(exc)
    result.audit = design_audit(df, baseline=result.baseline.name, design=design, reruns=reruns, errors=errors)
    if out_dir is not None:
        result.files = write_outputs(result, out_dir)
    return result


def _error_path(path: str, runs_dir: str | os.PathLike) -> str:
    """Where an error was met, relative to the runs folder; the runs folder itself as the user named it."""
    rel = relative_to_runs(path, runs_dir)
    if rel not in (".", ""):
        return rel
    given = os.fspath(runs_dir)
    # "." says nothing in a report read elsewhere, an absolute path is this machine's: the folder's own name then.
    return os.path.basename(os.path.abspath(given)) if os.path.isabs(given) or given.rstrip("/") in (".", "") else given


def plan_check(runs_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, plan: str | os.PathLike | None = None):
    """The analysis plan (``plan``, default ``params/analysis_plan.yaml``) checked against its record (recorded
    in ``out_dir`` when there is none); None with one warning line when the plan cannot be read, so that Layer 1 still runs."""
    try:
        source = display_path(plan) if plan is not None else None
        loaded = load_plan(plan)
        if source is None:
            return check_plan(runs_dir, loaded, out_dir=out_dir, record=out_dir is not None)
        return check_plan(runs_dir, loaded, source, out_dir=out_dir, record=out_dir is not None)
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
    files += write_design_outputs(result, out)
    if "informed_editing_score" in result.metrics and result.metrics["informed_editing_score"].notna().any():
        written = write_codecanvas_outputs([], result.metrics, out, simulated=result.simulated)
        files.extend(written.values())
    return files


AUDIT_FINDING_COLUMNS = ["severity", "check", "message"]


def write_design_outputs(result: Layer1Result, out_dir: str | os.PathLike) -> list[Path]:
    """``design_audit.csv`` (one row per arm), ``design_findings.csv`` (one row per finding) and, under a
    study file, ``study_design.json`` (the design as used, its hash and source)."""
    out = Path(out_dir)
    audit = result.audit
    findings = pd.DataFrame([(f.severity, f.check, f.message) for f in audit.findings] if audit else [],
                            columns=AUDIT_FINDING_COLUMNS)
    arms = audit.arms.copy() if audit else pd.DataFrame()
    if len(arms):
        arms.insert(1, "baseline", arms["arm"] == result.baseline.name)
    files = [atomic_write_csv(out / "design_audit.csv", arms), atomic_write_csv(out / "design_findings.csv", findings)]
    if result.design is not None:
        files.append(atomic_write_json(out / "study_design.json", {
            "study_file": result.design_path, "sha256": result.design.sha256(),
            "baseline": result.baseline.name, "baseline_source": result.baseline.source,
            "design": result.design.model_dump(mode="json"),
        }))
    else:
        (out / "study_design.json").unlink(missing_ok=True)  # a stale design must not outlive a run without one
    return files
