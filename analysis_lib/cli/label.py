"""``python -m analysis_lib label RUNS_DIR --rater NAME``: label a blinded sample of trials in the terminal.

The sample, the blinding and the agreement report are :mod:`analysis_lib.judge.labelling`;
``notebooks/label.ipynb`` is the same labelling with widgets.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.trial import InputError
from ..judge.labelling import LABEL_CLASSES, draw_sample, label_items, labelling_report, make_items, study_rows
from ..study.study import study_of_trials
from ..study.study_file import DesignError


def build_parser() -> argparse.ArgumentParser:
    """The ``label`` command's arguments, each with its help text."""
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib label",
        description=(
            "Label a stratified (profile x outcome), seeded, arm-blinded sample of trials in the terminal; "
            "with --report, print inter-human and judge-vs-human agreement instead."
        ),
    )
    p.add_argument("runs_dir", metavar="RUNS_DIR",
                   help="folder of runs to draw the sample from (any ingested format; read only, nothing written there); "
                        "not used with --report")
    p.add_argument("--study", metavar="FILE", help="study file (YAML) declaring the arms and the success rule that "
                   "stratifies the sample (docs/studies.md); without it each reader's default profiles, reward == 1")
    p.add_argument("--rater", help="your name or initials, recorded with every label (required unless --report)")
    p.add_argument("--labels", default="human_labels.csv",
                   help="label CSV to append to, and the one --report reads (default human_labels.csv)")
    p.add_argument("--per-stratum", type=int, default=2, help="trials per profile x outcome (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0): two raters must use the same")
    p.add_argument("--analyses", nargs="+", default=["strategy", "failure", "mcp"], choices=list(LABEL_CLASSES),
                   metavar="ANALYSIS",
                   help="what to label for each trial, one or more of: strategy (the agent's approach), failure "
                        "(root cause of a failed trial), mcp (when MCP tools were first used); default: all three")
    p.add_argument("--max-chars", type=int, default=6000, help="condensed trajectory size shown (default 6000)")
    p.add_argument("--report", action="store_true", help="print the agreement report of the label CSV and exit")
    p.add_argument("--judge-dir", help="Layer 2 output folder whose judge labels --report compares with")
    return p


def cli(argv: list[str] | None = None) -> int:
    """``python -m analysis_lib label RUNS_DIR --rater NAME --labels labels.csv``: label a blinded sample in the terminal."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.report:
        try:
            print(labelling_report(args.labels, args.judge_dir, seed=args.seed))
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.rater:
        p.error("--rater is required when labelling")
    if not Path(args.runs_dir).is_dir():
        print(f"error: {args.runs_dir}: no such folder", file=sys.stderr)
        return 2
    try:
        study, trials = study_of_trials(args.runs_dir, args.study)
    except DesignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for e in study.errors.itertuples(index=False):
        print(f"skipped {e.path}: {e.message}", file=sys.stderr)
    if not trials:
        print(f"error: {args.runs_dir}: no trial found", file=sys.stderr)
        return 2
    rows = study_rows(study.metrics)  # outcomes as the study's success rule scored them
    sample = draw_sample(trials, rows, args.per_stratum, args.seed)
    items = make_items(sample, rows, trials, args.max_chars)
    print(f"{len(items)} trials drawn ({args.per_stratum} per profile x outcome, seed {args.seed}); arm names are hidden.")
    try:
        n = label_items(items, args.rater, args.labels, args.analyses, seed=args.seed)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"\n{n} labels recorded in {args.labels}")
    return 0

