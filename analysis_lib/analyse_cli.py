"""``python -m analysis_lib RUNS_DIR``: Layer 1, then the analysis plan's comparisons, then the LLM analyses.

The parser is :func:`analysis_lib.cli.build_parser`; this module runs what it parsed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .bench.environment import runs_dir_warnings
from .ingest.load import load_trials
from .ingest.provenance import declared_baseline
from .layer1 import Layer1Result, analyse
from .metrics import MetricsConfig
from .plan import PlanError
from .report.comparison_report import write_comparisons
from .tools import DEFAULT_MCP_TOOLS
from .trials_table import relative_to_runs


def config_from_args(args: argparse.Namespace) -> MetricsConfig:
    """The metrics configuration of the command line: the default MCP tools and those named by ``--mcp-tools``."""
    mcp = DEFAULT_MCP_TOOLS | frozenset(args.mcp_tools or [])
    return MetricsConfig(mcp_tools=mcp)


def print_trial_list(df: pd.DataFrame) -> None:
    """The ``--list`` table: profile, task, repetition, outcome, path."""
    outcome = np.where(df["infra_error"].fillna(False), "infra-error",
                       np.where(df["success"].isna(), "unknown", np.where(df["success"].fillna(False), "pass", "fail")))
    table = pd.DataFrame({
        "profile": df["profile"], "task": df["task_id"], "rep": df["repetition"], "outcome": outcome,
        "path": df["trial_path"],
    })
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 80):
        print(table.to_string(index=False) if len(table) else "(no trials)")


def run_cli(args: argparse.Namespace) -> int:
    """``python -m analysis_lib RUNS_DIR``: Layer 1, then the comparisons (two profiles or more) and the LLM analyses
    (unless ``--no-llm``); exit 0 when trials were analysed, 1 when none, 2 on a usage error."""
    outcome = "succeeded" if args.succeeded else "failed" if args.failed else None
    out_dir = None if args.list else args.output
    progress = not args.quiet and sys.stderr.isatty()
    result = analyse(
        args.runs_dir, out_dir, tasks=args.tasks, profiles=args.profiles, outcome=outcome, limit=args.limit,
        seed=args.seed, config=config_from_args(args), cache=not args.no_cache,
        cache_dir=args.cache_dir or os.path.join(args.output, ".cache"), workers=args.workers, progress=progress,
    )
    for e in result.errors.itertuples(index=False):
        print(f"{e.severity}: {e.path}: {e.stage}: {e.message}", file=sys.stderr)
    if result.plan_check is not None and not args.list:
        for w in result.plan_check.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if result.plan_check.changed:
            print(f"warning: plan changed after the plan record: the analysis plan differs from the one recorded in the "
                  f"{result.plan_check.record_where}; reports open with the diff", file=sys.stderr)
        if result.plan_check.fixed_before_data is False:
            print(f"warning: {result.plan_check.timing_line()}", file=sys.stderr)
    if args.list:
        print_trial_list(result.metrics)
        return 0 if len(result.metrics) else 1
    n = len(result.metrics)
    status = 0 if n else 1
    for line in runs_dir_warnings(args.runs_dir):  # pairs whose two sides ran in different environments
        print(f"warning: {line}", file=sys.stderr)
    if n and not args.llm_only:
        status = max(status, _run_comparisons(args, result))
    if n and not args.no_llm:
        status = max(status, _run_layer2(args, result))
    prefix = "SIMULATED sample runs: " if result.simulated else ""
    n_err = int((result.errors["severity"] == "error").sum())
    n_warn = len(result.errors) - n_err
    print(
        f"{prefix}analysed {n} trials ({result.metrics['profile'].nunique()} profiles, "
        f"{result.metrics['task_id'].nunique()} tasks); {n_err} inputs skipped or partly unreadable, "
        f"{n_warn} warnings{' (see errors.csv)' if len(result.errors) else ''}; "
        f"{result.cache_hits} trials from cache; outputs in {args.output}",
        file=sys.stderr if args.quiet else sys.stdout,
    )
    return status


def _run_comparisons(args: argparse.Namespace, result: Layer1Result) -> int:
    profiles = sorted(result.metrics["profile"].unique())
    if args.compare:
        missing = [p for p in args.compare if p not in profiles]
        if missing:
            print(f"error: --compare: unknown profile(s) {missing}; profiles present: {profiles}", file=sys.stderr)
            return 2
    elif len(profiles) < 2:
        return 0
    baseline = args.baseline or declared_baseline(args.runs_dir)
    if baseline is not None and baseline not in profiles:
        print(f"error: --baseline {baseline!r} is not a profile here; profiles present: {profiles}", file=sys.stderr)
        return 2
    try:
        write_comparisons(result.metrics, args.output, plan_check=result.plan_check,
                          compare_pair=tuple(args.compare) if args.compare else None, baseline=baseline,
                          simulated=result.simulated, plan_next=args.plan_next)
    except PlanError as exc:
        print(f"error: {exc}; no comparisons written", file=sys.stderr)
        return 2
    return 0


def _run_layer2(args: argparse.Namespace, result: Layer1Result) -> int:
    from .judge.run import run_layer2  # litellm takes seconds to import: only when the LLM analyses run

    trials, _ = load_trials(args.runs_dir)
    keep = set(result.metrics["trial_path"])
    trials = [t for t in trials if relative_to_runs(t.trial_path, args.runs_dir) in keep]
    args.simulated = result.simulated
    run_layer2(trials, result.metrics, Path(args.output), args)
    return 0
