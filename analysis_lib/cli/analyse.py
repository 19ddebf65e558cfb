"""``python -m analysis_lib RUNS_DIR``: Layer 1, then the analysis plan's comparisons, then the LLM analyses.

The parser is :func:`analysis_lib.cli.main.build_parser`; this module runs what it parsed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..bench.environment import runs_dir_warnings
from ..core.tools import DEFAULT_MCP_TOOLS
from ..metrics.trial_metrics import MetricsConfig
from ..report.configurations import pooled_line
from ..study.layer1 import analyse
from ..study.plan import PlanError
from ..study.study import Study, StudyError
from ..study.study_file import DesignError


def config_from_args(args: argparse.Namespace) -> MetricsConfig:
    """The metrics configuration of the command line: the default MCP tools and those named by ``--mcp-tools``."""
    mcp = DEFAULT_MCP_TOOLS | frozenset(args.mcp_tools or [])
    return MetricsConfig(mcp_tools=mcp)


def print_arms(result: Study) -> None:
    """The arms the ``--list`` table shows, with the rule that formed each and the baseline."""
    audit = result.audit
    if audit is None or audit.arms.empty:
        return
    origin = f"study file {result.design_path}" if result.design_path else "the readers' default profiles"
    print(f"arms ({origin}; {result.baseline.line()}):")
    for r in audit.arms.itertuples():
        print(f"  {r.arm}: {r.n_trials} trials, {r.n_tasks} tasks; {r.rule}")


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
    (unless ``--no-llm``); exit 0 when trials were analysed, 1 when none, 2 on a usage error, 3 when LLM judgements failed."""
    outcome = "succeeded" if args.succeeded else "failed" if args.failed else None
    # --list and --estimate-cost only print: nothing is written but the estimate itself.
    out_dir = None if args.list or args.estimate_cost else args.output
    progress = not args.quiet and sys.stderr.isatty()
    try:
        result = analyse(
            args.runs_dir, out_dir, tasks=args.tasks, profiles=args.profiles, outcome=outcome, limit=args.limit,
            seed=args.seed, config=config_from_args(args), cache=not args.no_cache,
            cache_dir=args.cache_dir or os.path.join(args.output, ".cache"), workers=args.workers, progress=progress,
            design=args.study, plan=args.plan, baseline=args.baseline,
        )
    except DesignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for e in result.errors.itertuples(index=False):
        print(f"{e.severity}: {e.path}: {e.stage}: {e.message}", file=sys.stderr)
    if result.baseline_error and not args.compare:
        print(f"error: {result.baseline_error}", file=sys.stderr)
        return 2
    if result.audit is not None and not args.list:
        for line in result.audit.lines():  # the design audit: what the comparisons rest on
            print(f"design {line}", file=sys.stderr)
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
        print()
        print_arms(result)
        return 0 if len(result.metrics) else 1
    n = len(result.metrics)
    status = 0 if n else 1
    for line in runs_dir_warnings(args.runs_dir):  # pairs whose two sides ran in different environments
        print(f"warning: {line}", file=sys.stderr)
    if args.estimate_cost:
        return _run_layer2(args, result) if n else status
    if n and not args.llm_only and outcome is not None:
        # Trials chosen by their outcome make any comparison of outcomes (and of what goes with them) biased.
        print(f"note: no comparisons on trials selected by outcome (--{outcome})", file=sys.stderr)
    elif n and not args.llm_only:
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


def _run_comparisons(args: argparse.Namespace, result: Study) -> int:
    profiles = sorted(result.metrics["profile"].unique())
    if args.compare:
        missing = [p for p in args.compare if p not in profiles]
        if missing:
            print(f"error: --compare: unknown profile(s) {missing}; profiles present: {profiles}", file=sys.stderr)
            return 2
    elif len(profiles) < 2:
        return 0
    audit = result.audit
    if not args.compare and audit is not None and audit.problems() and len(audit.problems()) >= len(profiles) - 1:
        # No profile pair the plan could test: one line, no table of NaN.
        print(f"error: the design cannot support the planned comparisons: {audit.problems()[0].message} "
              f"(see design_audit.csv); no comparisons written", file=sys.stderr)
        return 1
    # scipy's statistics take a second to import: only when there is something to compare (not for --list, one
    # profile or --estimate-cost).
    from .comparisons import write_comparisons

    try:
        analysis = write_comparisons(result, args.output, compare_pair=tuple(args.compare) if args.compare else None,
                                     plan_next=args.plan_next)
    except (PlanError, StudyError) as exc:
        print(f"error: {exc}; no comparisons written", file=sys.stderr)
        return 2
    for pooled in analysis.pooling.pooled if analysis.pooling is not None else []:
        print(("SIMULATED: " if result.simulated else "") + pooled_line(pooled), file=sys.stderr if args.quiet else sys.stdout)
    return 0


def _run_layer2(args: argparse.Namespace, result: Study) -> int:
    """The LLM analyses; 0, 3 when judgements failed (judge.run.JUDGEMENTS_FAILED_EXIT), 2 when a budget cannot be kept."""
    from ..judge.run import layer2_exit_code, run_layer2  # litellm takes seconds to import: only when the LLM analyses run

    # Only the trials of the table (a --limit sample, a selection) are read again, named as the table names
    # them (its arm, task and repetition); the judge is told the study's baseline, as the comparisons are.
    trials, _ = result.load_trials()
    args.simulated = result.simulated
    args.baseline = args.compare[0] if args.compare else result.require_baseline() if result.arms else None
    try:
        summary = run_layer2(trials, result.metrics, Path(args.output), args)
    except ValueError as exc:  # e.g. --budget-usd with a judge model that has no price
        print(f"error: {exc}; no LLM analyses", file=sys.stderr)
        return 2
    return layer2_exit_code(summary)
