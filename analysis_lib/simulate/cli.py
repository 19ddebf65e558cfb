"""``python -m analysis_lib simulate``: write seeded sample runs."""

from __future__ import annotations

import argparse
import sys

from .full_run import write_full_run
from .model import DEFAULT_PROFILES, Effects
from .runs import simulate_runs

__all__ = ["cli"]


def cli(argv: list[str] | None = None) -> int:
    """``python -m analysis_lib simulate --seed S --out DIR [--tasks N] [--repetitions R] [--null-effects] [--force]``."""
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib simulate", description="Write seeded SIMULATED agent runs (run layout) with known injected effects."
    )
    p.add_argument("--seed", type=int, required=True, help="seed of every random draw (recorded in index.json)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (must be empty unless --force)")
    p.add_argument("--tasks", type=int, default=24, metavar="N", help="number of tasks (default 24)")
    p.add_argument("--repetitions", type=int, default=3, metavar="R", help="repetitions per profile and task (default 3)")
    p.add_argument("--null-effects", action="store_true", help="no profile effect at all (exchangeable profiles)")
    p.add_argument("--force", action="store_true", help="replace an earlier simulator output in DIR")
    p.add_argument(
        "--infra-errors", type=int, metavar="N", help="trials with an infrastructure error (default 1; 0 gives every trial a verdict)"
    )
    p.add_argument(
        "--full-run",
        metavar="JSON",
        help="also write a benchmark runner's full_run.json for these runs (input of `python -m analysis_lib results`)",
    )
    args = p.parse_args(argv)
    try:
        eff = Effects.null() if args.null_effects else None
        if args.infra_errors is not None:
            if args.infra_errors < 0:
                raise ValueError(f"--infra-errors must be >= 0, got {args.infra_errors}")
            eff = eff or Effects()
            eff.n_infra_errors = args.infra_errors
        out = simulate_runs(args.out, args.seed, args.tasks, args.repetitions, eff, force=args.force)
    except (FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.full_run:
        print(f"wrote {write_full_run(out, args.full_run)} (simulated benchmark run)")
    n = args.tasks * args.repetitions * len(DEFAULT_PROFILES)
    print(
        f"wrote {n} simulated trials ({len(DEFAULT_PROFILES)} profiles x {args.tasks} tasks x {args.repetitions} repetitions, "
        f"seed {args.seed}) to {out}"
    )
    return 0
