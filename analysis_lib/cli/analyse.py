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
from ..core import output_set
from ..core import outputs as files
from ..core.lock import BUSY_EXIT_CODE, FolderBusy
from ..core.tools import DEFAULT_MCP_TOOLS
from ..metrics.trial_metrics import MetricsConfig
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
    (unless ``--no-llm``); exit 0 when trials were analysed, 1 when none (or the runs changed under the analysis), 2 on
    a usage error or an output folder that cannot be used, 3 when LLM judgements failed, 75 when another process
    writes the output folder, 130 when interrupted.

    Everything is written into the output folder's staging folder and replaces the set it holds in one commit
    (:mod:`analysis_lib.core.output_set`) once the analysis got through; a run that stops before (an error, Ctrl-C,
    kill -9) leaves the previous set as it was."""
    if args.list or args.estimate_cost:  # they only print: nothing is written but the estimate itself
        status, _ = _analysis(args, None)
        return status
    home, label = Path(args.output), args.output
    kept = lambda: output_set.holds(home, label)  # noqa: E731  (read when the run ends, after any commit)
    try:
        with output_set.locked([(home, label)], f"analysis of {args.runs_dir}"):
            previous = output_set.read_manifest(home, label)
            output_set.check_space(home, label, previous)
            staging = output_set.prepare(home, label=label, command="analysis", keep=[home / files.PLAN_RECORD],
                                         warn=_note)
            try:
                return _analyse_and_commit(args, staging, previous, kept)
            finally:
                staging.discard()  # a run that did not commit leaves nothing
    except FolderBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BUSY_EXIT_CODE
    except output_set.OutputSetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: {kept()}", file=sys.stderr)
        return 130
    except OSError as exc:  # a disk that filled up, a folder made read-only while the analysis ran
        print(f"error: output folder {label} cannot be written ({output_set.os_reason(exc)}): nothing was committed; "
              f"{kept()}", file=sys.stderr)
        return 1


def _analyse_and_commit(args: argparse.Namespace, staging: output_set.Staging, previous: output_set.Manifest | None,
                        kept) -> int:
    """The analysis into ``staging``, committed when it got through and its runs did not change meanwhile; the steps
    it did not run (the comparisons under ``--llm-only``, the LLM analyses under ``--no-llm``) are kept from the
    previous set when that set was made from the same inputs."""
    status, result = _analysis(args, staging)
    if result is None or status == 2:
        return status  # a usage error, said in its line: the folder's set stays as it was
    if not len(result.metrics) and previous is not None:
        # An analysis of nothing (a mistyped runs folder) never replaces one of something; errors.csv is then not
        # written, and the lines above say what was met.
        print(f"note: no trial was analysed: nothing was committed; {kept()}", file=sys.stderr)
        return status
    changed = result.inputs_changed()
    if changed is not None:
        print(f"error: {changed}: nothing was committed; {kept()}", file=sys.stderr)
        return 1
    steps, inputs = _steps_run(args), analysis_inputs(result, args)
    carried = _carry(staging, previous, steps, inputs)
    manifest = staging.commit(steps=[s for s in STEPS if s in steps or s in carried], inputs=inputs, carried=carried)
    n = len(result.metrics)
    prefix = "SIMULATED sample runs: " if result.simulated else ""
    n_err = int((result.errors["severity"] == "error").sum())
    n_warn = len(result.errors) - n_err
    print(
        f"{prefix}analysed {n} trials ({result.metrics['profile'].nunique()} profiles, "
        f"{result.metrics['task_id'].nunique()} tasks); {n_err} inputs skipped or partly unreadable, "
        f"{n_warn} warnings{' (see errors.csv)' if len(result.errors) else ''}; "
        f"{result.cache_hits} trials from cache; outputs in {args.output} (run {manifest.run_id})",
        file=sys.stderr if args.quiet else sys.stdout,
    )
    return status


# The steps of an analysis, in order: what the manifest says wrote each file.
STEPS = ("layer1", "comparisons", "llm")


def _steps_run(args: argparse.Namespace) -> set[str]:
    steps = {"layer1"}
    if not args.llm_only and not (args.succeeded or args.failed):
        steps.add("comparisons")
    if not args.no_llm:
        steps.add("llm")
    return steps


def _carry(staging: output_set.Staging, previous: output_set.Manifest | None, steps: set[str], inputs: dict
           ) -> dict[str, str]:
    """Keep the previous set's steps this run did not run, when that set was made from the same inputs."""
    other = [s for s in previous.steps if s not in steps] if previous is not None else []
    if previous is None or not other:
        return {}
    if previous.inputs != inputs:
        print(f"note: the {' and '.join(other)} outputs of {previous.line()} were made from other inputs (runs, study "
              "file, plan or selection): not kept", file=sys.stderr)
        return {}
    try:
        output_set.check_set(staging.home, label=staging.label)
        return staging.carry(previous, replaced=steps)
    except output_set.OutputSetError as exc:
        print(f"note: the {' and '.join(other)} outputs of the previous set not kept: {exc}", file=sys.stderr)
        return {}


def analysis_inputs(study: Study, args: argparse.Namespace | None = None) -> dict:
    """What an output set was made from, for its manifest: the runs (as named, and their fingerprint's hash), the
    study file, the plan and the baseline, and the command line's selection."""
    check = study.plan_check
    inputs = {
        "runs_dir": study.runs_dir, "runs_sha256": study.inputs_sha256, "study_file": study.design_path,
        "design_sha256": study.design.sha256() if study.design is not None else None,
        "plan_sha256": check.sha256 if check is not None else None, "baseline": study.baseline.name,
        "simulated": study.simulated,
    }
    if args is not None:
        inputs["selection"] = {k: getattr(args, k) for k in ("tasks", "profiles", "succeeded", "failed", "limit", "seed",
                                                             "compare", "mcp_tools")}
    return inputs


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _analysis(args: argparse.Namespace, staging: output_set.Staging | None) -> tuple[int, Study | None]:
    """Layer 1, the comparisons and the LLM analyses, written into ``staging`` (nothing with None); the exit status
    and the study (None when the study file could not be used)."""
    outcome = "succeeded" if args.succeeded else "failed" if args.failed else None
    out_dir = staging.root if staging is not None else None
    progress = not args.quiet and sys.stderr.isatty()
    if staging is not None:
        staging.begin("layer1")
    try:
        result = analyse(
            args.runs_dir, out_dir, tasks=args.tasks, profiles=args.profiles, outcome=outcome, limit=args.limit,
            seed=args.seed, config=config_from_args(args), cache=not args.no_cache,
            cache_dir=args.cache_dir or os.path.join(args.output, ".cache"), workers=args.workers, progress=progress,
            design=args.study, plan=args.plan, baseline=args.baseline,
        )
    except DesignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, None
    for e in result.errors.itertuples(index=False):
        print(f"{e.severity}: {e.path}: {e.stage}: {e.message}", file=sys.stderr)
    if result.baseline_error and not args.compare:
        print(f"error: {result.baseline_error}", file=sys.stderr)
        return 2, result
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
        return (0 if len(result.metrics) else 1), result
    n = len(result.metrics)
    status = 0 if n else 1
    for line in runs_dir_warnings(args.runs_dir):  # pairs whose two sides ran in different environments
        print(f"warning: {line}", file=sys.stderr)
    if args.estimate_cost:
        return (_run_layer2(args, result, Path(args.output)) if n else status), result
    assert staging is not None
    if n and not args.llm_only and outcome is not None:
        # Trials chosen by their outcome make any comparison of outcomes (and of what goes with them) biased.
        print(f"note: no comparisons on trials selected by outcome (--{outcome})", file=sys.stderr)
    elif n and not args.llm_only:
        staging.begin("comparisons")
        status = max(status, _run_comparisons(args, result, staging.root))
    if n and not args.no_llm and status != 2:
        staging.begin("llm")
        status = max(status, _run_layer2(args, result, staging.root))
    return status, result


def _run_comparisons(args: argparse.Namespace, result: Study, out_dir: Path) -> int:
    profiles = sorted(result.metrics["profile"].unique())
    if args.compare:
        missing = [p for p in args.compare if p not in profiles]
        if missing:
            print(f"error: --compare: unknown profile(s) {missing}; profiles present: {profiles}", file=sys.stderr)
            return 2
    elif len(profiles) < 2:
        return 0
    untestable = None if args.compare else result.untestable()
    if untestable:
        # No arm pair the plan could test: one line, no table of NaN.
        print(f"error: the design cannot support the planned comparisons: {untestable} "
              f"(see design_audit.csv); no comparisons written", file=sys.stderr)
        return 1
    # scipy's statistics take a second to import: only when there is something to compare (not for --list, one
    # profile or --estimate-cost).
    from .comparisons import write_comparisons

    try:
        analysis = write_comparisons(result, out_dir, compare_pair=tuple(args.compare) if args.compare else None,
                                     plan_next=args.plan_next)
    except (PlanError, StudyError) as exc:
        print(f"error: {exc}; no comparisons written", file=sys.stderr)
        return 2
    from ..report.configurations import pooled_line  # scipy's stats: only where comparisons ran

    for pooled in analysis.pooling.pooled if analysis.pooling is not None else []:
        print(("SIMULATED: " if result.simulated else "") + pooled_line(pooled), file=sys.stderr if args.quiet else sys.stdout)
    return 0


def _run_layer2(args: argparse.Namespace, result: Study, out_dir: Path) -> int:
    """The LLM analyses; 0, 3 when judgements failed (judge.run.JUDGEMENTS_FAILED_EXIT), 2 when a budget cannot be kept."""
    from ..judge.run import layer2_exit_code, run_layer2  # litellm takes seconds to import: only when the LLM analyses run

    # Only the trials of the table (a --limit sample, a selection) are read again, named as the table names
    # them (its arm, task and repetition); the judge is told the study's baseline, as the comparisons are.
    trials, _ = result.load_trials()
    args.simulated = result.simulated
    args.baseline = args.compare[0] if args.compare else result.require_baseline() if result.arms else None
    args.pairs = result.pairs(tuple(args.compare) if args.compare else None) if len(result.arms) > 1 else None
    try:
        summary = run_layer2(trials, result.metrics, out_dir, args)
    except ValueError as exc:  # e.g. --budget-usd with a judge model that has no price
        print(f"error: {exc}; no LLM analyses", file=sys.stderr)
        return 2
    return layer2_exit_code(summary)
