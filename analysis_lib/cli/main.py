"""Command line: ``python -m analysis_lib RUNS_DIR [options]`` and its subcommands.

Each subcommand is an application module exposing ``cli(argv) -> int``, loaded only when it is asked for
(the main command's is :mod:`analysis_lib.cli.analyse`):

    simulate   seeded sample runs (analysis_lib.simulate.cli)
    convert    Claude Code transcripts / stream-json -> ATIF (analysis_lib.cli.convert)
    paper      the papermill pipeline (analysis_lib.cli.pipeline)
    bench      benchmark runner (analysis_lib.bench.cli)
    codecanvas CodeCanvas metrics, comparison and vision analysis (analysis_lib.cli.codecanvas)
    results    pre-registered RESULTS.md of a benchmark run's full_run.json (analysis_lib.cli.results)
    label      human labels of a blinded trial sample, and their agreement (analysis_lib.cli.label)
    meta       one metric's effect pooled across analysed studies (analysis_lib.cli.meta)
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "simulate": "analysis_lib.simulate.cli",
    "convert": "analysis_lib.cli.convert",
    "paper": "analysis_lib.cli.pipeline",
    "bench": "analysis_lib.bench.cli",
    "codecanvas": "analysis_lib.cli.codecanvas",
    "results": "analysis_lib.cli.results",
    "label": "analysis_lib.cli.label",
    "meta": "analysis_lib.cli.meta",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib",
        description=(
            "Analyse agent runs: ingest every trial under RUNS_DIR, compute the Layer 1 metrics, "
            "compare profiles and (optionally) run the LLM analyses. "
            "Subcommands: " + ", ".join(SUBCOMMANDS) + " (use SUBCOMMAND --help)."
        ),
    )
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="run layout, Harbor jobs folder, TB1 runs, Inspect logs or mcpbr results")
    sel = p.add_argument_group("selection")
    sel.add_argument("--tasks", nargs="+", metavar="ID", help="only these task ids")
    sel.add_argument("--profiles", nargs="+", metavar="NAME", help="only these profiles")
    out = sel.add_mutually_exclusive_group()
    out.add_argument("--succeeded", action="store_true", help="only trials that succeeded")
    out.add_argument("--failed", action="store_true", help="only trials that failed")
    sel.add_argument("--limit", type=int, metavar="N", help="a seeded random sample of N trials")
    sel.add_argument("--seed", type=int, default=0, help="seed for sampling trials (default 0); the bootstrap seed is the analysis plan's")
    des = p.add_argument_group("design and plan")
    des.add_argument("--study", metavar="FILE", help="study file (YAML) declaring the arms, task ids, reruns and success rule "
                     "(docs/studies.md); without it each reader's default profiles are the arms")
    des.add_argument("--plan", metavar="FILE", help="analysis plan (default params/analysis_plan.yaml)")
    des.add_argument("--baseline", metavar="PROFILE", help="baseline profile (default: the plan's, else the study file's, "
                     "else index.json's, else the first in sort order)")
    lay = p.add_argument_group("layers")
    mode = lay.add_mutually_exclusive_group()
    mode.add_argument("--no-llm", action="store_true", help="deterministic metrics and statistics only")
    mode.add_argument("--llm-only", action="store_true", help="only the LLM analyses (Layer 2)")
    lay.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare profile B against profile A")
    lay.add_argument("--plan-next", action="store_true",
                     help="add the power analysis for the next study to comparison_report.md (these runs as the pilot; slower)")
    lay.add_argument("--model", help="LLM judge model (litellm name)")
    lay.add_argument("--estimate-cost", action="store_true", help="print the projected LLM spend and exit")
    llm = p.add_argument_group("LLM analyses (Layer 2)")
    llm.add_argument("--api-base", metavar="URL", help="OpenAI-compatible server (Ollama, vLLM, llama.cpp)")
    llm.add_argument("--budget-usd", type=float, metavar="USD",
                     help="a cap on LLM spend: each call reserves its worst-case cost (prompt + the answer limit) before "
                          "it is sent, and is not sent when that would pass USD")
    llm.add_argument("--judge-deadline", type=float, metavar="SEC",
                     help="seconds one LLM request may take in all, answered or not (default 300)")
    llm.add_argument("--concurrency", type=int, default=4, help="parallel LLM calls (default 4)")
    llm.add_argument("--refresh", action="store_true", help="bypass the LLM response cache")
    llm.add_argument("--judge-samples", type=int, default=1, metavar="K", help="repeat each judgement K times; the label is their majority")
    llm.add_argument("--judge-temperature", type=float, default=0.0, metavar="T", help="temperature of every sample (default 0)")
    llm.add_argument("--no-blind", action="store_true", help="show the judge profile and MCP server/tool names (blinded by default)")
    llm.add_argument("--unblind-mcp", action="store_true", help="let the MCP-utilisation analysis see the real tool names")
    llm.add_argument("--no-shuffle-classes", action="store_true", help="list classes in a fixed order (shuffled per judgement by default)")
    llm.add_argument("--judge-model-b", metavar="MODEL", help="second judge model to compare agreement with")
    llm.add_argument("--human-labels", metavar="CSV", help="human labels (trial id, label) for judge agreement")
    p.add_argument("--list", action="store_true", help="list discovered trials and exit")
    p.add_argument("-o", "--output", default="results/analytics", help="output folder (default results/analytics/)")
    p.add_argument("--cache-dir", help="cache of per-trial metric rows (default <output>/.cache)")
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the metrics cache")
    p.add_argument("--workers", type=int, default=None, help="processes reading trials (default: all cores; 1: no pool)")
    p.add_argument("--mcp-tools", nargs="+", metavar="NAME", help="extra MCP tool base names")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, only the summary line")
    return p


def _dispatch_subcommand(name: str, argv: list[str]) -> int:
    # Imported on demand: each subcommand's module (runner, judge, simulator) is heavy to load.
    module = importlib.import_module(SUBCOMMANDS[name])
    return int(module.cli(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; Ctrl-C ends any of them with exit code 130 and one line (the commands that
    write output sets say what the folder still holds; the others, caught here, just that they were interrupted)."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    if argv and argv[0] in SUBCOMMANDS:
        return _dispatch_subcommand(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.no_llm and args.estimate_cost:
        parser.error("--estimate-cost estimates the LLM analyses; it cannot be combined with --no-llm")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be a positive number of trials")
    from .analyse import run_cli  # pandas, scipy and the plan: not for subcommands or --help

    return run_cli(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
