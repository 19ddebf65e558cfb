"""``python -m analysis_lib bench {full,spike,replay,import-mcpbr}``: the benchmark runner's command line.

Exit codes: 0 done (including a budget stop, which is recorded, not an error), 1 trials ran but
the run could not finish (a full disk: ``full_run.json`` says ``failed``) or every trial of a condition failed for agent
or evaluator reasons, 2 bad arguments or manifest, or a resume that does not match the started run, 75 the runs folder
is in use by another runner (nothing was done), 130 interrupted (re-run to resume).
"""

from __future__ import annotations

import argparse
import signal
import sys

from ..core.fileio import atomic_write_json
from ..core.lock import BUSY_EXIT_CODE, FolderBusy
from ..study.plan import default_plan_path, load_plan
from . import runner
from .adapters import import_mcpbr
from .journal import PlanMismatchError
from .manifest import ManifestError
from .process import STOP_REQUESTED


def _sigterm_to_interrupt(signum, frame):  # pragma: no cover - exercised through a subprocess test
    STOP_REQUESTED.set()  # checked between trials too: a raise inside a finalizer is dropped by Python
    raise KeyboardInterrupt(f"signal {signum}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib bench", description="Run blocked, randomized, paired A/B benchmarks of coding agents."
    )
    sub = p.add_subparsers(dest="command", required=True)

    f = sub.add_parser("full", help="the whole manifest: tasks x conditions x runs, resumable")
    f.add_argument("--manifest", required=True, metavar="FILE", help="benchmark manifest (manifest_version 2)")
    f.add_argument("--runs-per-condition", type=int, default=3, metavar="N", help="repetitions of each task per condition (default 3)")
    f.add_argument(
        "--phase-budget-usd", type=float, required=True, metavar="USD", help="no pair starts whose projected cost passes 90%% of this"
    )
    f.add_argument("--seed", type=int, required=True, help="seed of the schedule (recorded in the output)")
    f.add_argument("--output", default="results/full_run.json", metavar="FILE", help="plan/results JSON (default results/full_run.json)")
    f.add_argument("--runs-dir", metavar="DIR", help="run layout to write (default runs/bench-<manifest name>)")
    f.add_argument("--dry-run", action="store_true", help="print the schedule and spend projection, write the plan, run nothing")
    f.add_argument(
        "--analysis-plan",
        metavar="YAML",
        help="analysis plan recorded in the runs folder before the first trial, the pre-registration (default params/analysis_plan.yaml)",
    )
    f.add_argument("--force", action="store_true",
                   help="resume even though --analysis-plan differs from the plan pre-registered in the runs folder "
                        "(the pre-registration is kept; the reports show the change)")
    f.add_argument("-q", "--quiet", action="store_true", help="no per-trial progress lines")

    s = sub.add_parser("spike", help="one task under every condition once (smoke test)")
    s.add_argument("--task-id", required=True, metavar="ID")
    s.add_argument("--repo-path", required=True, metavar="PATH", help="git checkout of the target repository (its HEAD is used)")
    s.add_argument("--manifest", metavar="FILE", help="take the task and conditions from this manifest")
    s.add_argument("--instruction", help="task instruction (required without --manifest)")
    s.add_argument("--mcp-config", metavar="FILE", help="MCP config of the treatment (required without --manifest)")
    s.add_argument("--model", help="exact model id (default: the manifest's, else a pinned Sonnet id)")
    s.add_argument("--claude-bin", default="claude", help="Claude Code executable (default: claude on PATH)")
    s.add_argument(
        "--permission-mode",
        default="bypassPermissions",
        choices=["bypassPermissions", "acceptEdits", "auto", "default", "dontAsk", "plan"],
        help="Claude Code permission mode without --manifest (default bypassPermissions; IS_SANDBOX=1 is set under root)",
    )
    s.add_argument(
        "--allowed-tools", nargs="+", default=[], metavar="TOOL", help="tools allowed without asking (--allowedTools), without --manifest"
    )
    s.add_argument("--runs-dir", metavar="DIR", help="default runs/spike-<task id>")
    s.add_argument("--output", metavar="FILE", help="also write the spike's full_run.json here")
    s.add_argument("--phase-budget-usd", type=float, default=50.0, metavar="USD")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-q", "--quiet", action="store_true")

    r = sub.add_parser("replay", help="apply the analysis plan's sequential design to a finished run: where it would "
                                      "have stopped, the spend saved, whether the decisions match the full run",
                       description="Replay a finished run under the plan's sequential design, as if it had run task by "
                                   "task. Nothing is written into RUNS_DIR.")
    r.add_argument("runs_dir", metavar="RUNS_DIR", help="a finished run (the runner's runs folder, or any runs the analysis reads)")
    r.add_argument("--analysis-plan", required=True, metavar="YAML",
                   help="analysis plan with a sequential section (e.g. params/analysis_plan_sequential.yaml)")
    r.add_argument("--order", choices=["auto", "schedule", "time"], default="auto",
                   help="task order: the runner's schedule in RUNS_DIR/full_run.json (schedule), the start of each "
                        "task's first trial (time), or the schedule when there is one, else time (auto, the default)")
    r.add_argument("--baseline", metavar="PROFILE",
                   help="baseline profile (default: the plan's, else the one index.json declares, else the first in sort order)")
    r.add_argument("--output", metavar="FILE", help="also write the replay as JSON here (never inside RUNS_DIR)")
    r.add_argument("--workers", type=int, metavar="N", help="processes reading trials (default: all cores; 1: no pool)")

    i = sub.add_parser("import-mcpbr", help="read an mcpbr results.json as trials and list them")
    i.add_argument("results", metavar="RESULTS_JSON")
    return p


def _replay(args: argparse.Namespace) -> int:
    """``bench replay``: print the replay (and write it with ``--output``); exit 0, or 2 on bad input."""
    from pathlib import Path

    from .replay import describe_replay, replay_json, replay_runs

    runs = Path(args.runs_dir)
    if not runs.is_dir():
        raise ValueError(f"{args.runs_dir}: not a folder")
    if args.output and Path(args.output).resolve().is_relative_to(runs.resolve()):
        raise ValueError(f"--output {args.output}: inside the runs folder, which the analysis only reads")
    a_plan = load_plan(args.analysis_plan)
    rep = replay_runs(runs, a_plan, baseline=args.baseline, order=args.order, workers=args.workers)
    print("\n".join(describe_replay(rep, a_plan)))
    if args.output:
        atomic_write_json(args.output, replay_json(rep))
        print(f"replay written to {args.output}")
    return 0


def cli(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    STOP_REQUESTED.clear()
    # SIGTERM (kill, a job scheduler) and SIGHUP (the terminal closed) end the run like Ctrl-C: the agent's process
    # group is stopped, its scratch folder removed and the run recorded as interrupted.
    previous = {sig: signal.signal(sig, _sigterm_to_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if args.command == "full":
            if args.dry_run:
                a_plan = load_plan(args.analysis_plan if args.analysis_plan else default_plan_path())
                p = runner.plan(args.manifest, args.runs_per_condition, args.seed, args.phase_budget_usd, a_plan)
                print(p.describe())
                obj = runner.dry_run_json(p)
                for line in obj["preflight"]:
                    print(f"preflight: {line}")
                atomic_write_json(args.output, obj)
                print(f"plan written to {args.output} (nothing ran)")
                return 0
            res = runner.run_full(
                args.manifest,
                args.runs_per_condition,
                args.seed,
                args.phase_budget_usd,
                args.output,
                args.runs_dir,
                quiet=args.quiet,
                analysis_plan=args.analysis_plan,
                force=args.force,
            )
        elif args.command == "replay":
            return _replay(args)
        elif args.command == "spike":
            m = runner.spike_manifest(
                args.task_id,
                args.repo_path,
                args.manifest,
                args.instruction,
                args.model,
                args.mcp_config,
                args.claude_bin,
                permission_mode=args.permission_mode,
                allowed_tools=args.allowed_tools,
            )
            res = runner.run_spike(m, args.manifest, args.runs_dir, args.output, args.seed, args.phase_budget_usd, args.quiet)
        else:
            trials, errors = import_mcpbr(args.results)
            for e in errors:
                print(e.line(), file=sys.stderr)
            for t in trials:
                print(f"{t.profile}\t{t.task_id}\t{t.repetition}")
            print(f"imported {len(trials)} trials, {len(errors)} errors", file=sys.stderr)
            return 0 if trials else 1
    except FolderBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BUSY_EXIT_CODE
    except (ManifestError, PlanMismatchError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished trials are journaled; re-run the same command to resume", file=sys.stderr)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    s = res["summary"]
    print(
        f"{res['status']}: {s['finished']}/{s['trials']} trials finished ({s['passed']} passed, {s['failed']} failed, "
        f"{s['evaluation_errors']} evaluation errors, {s['agent_errors']} agent errors), spent ${res['budget']['spent_usd']:.2f}"
        + (f"; {res['budget']['stop_reason']}" if res["budget"]["stopped"] else "")
        + (f"; sequential stop: {res['sequential']['reason']}" if (res.get("sequential") or {}).get("stopped") else "")
    )
    for status, n in (s.get("by_status") or {}).items():
        print(f"  {status}: {n}")
    failed = s.get("failed_conditions") or []
    if failed:
        print(
            f"error: every trial of condition(s) {', '.join(failed)} failed (agent, setup or evaluation error): "
            "nothing was measured; see the trials' warnings and agent.stderr_tail in full_run.json",
            file=sys.stderr,
        )
        return 1
    return 0
