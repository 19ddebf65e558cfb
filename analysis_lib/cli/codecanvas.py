"""``python -m analysis_lib codecanvas RUNS_DIR``: metrics, comparison and (optionally) vision."""

from __future__ import annotations

import argparse
import os
import sys

from ..codecanvas.metrics import codecanvas_table
from ..codecanvas.outputs import _scrub, write_codecanvas_outputs
from ..core.trial import IngestError
from ..ingest.load import load_trials
from ..ingest.provenance import is_simulated
from ..judge import DEFAULT_MODEL
from ..judge.cache import ResponseCache, default_cache_dir
from ..judge.client import JudgeClient, Ledger
from ..judge.run import load_env_file, missing_key_reason
from ..judge.vision import run_vision


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib codecanvas",
        description="CodeCanvas metrics per trial, their comparison by profile and (with --vision) the "
        "vision analysis of the CodeCanvas images; writes codecanvas_comparison.md and "
        "codecanvas_analysis.json into the output folder.",
    )
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="run layout or Harbor jobs folder")
    p.add_argument("-o", "--output", default="results/analytics", help="output folder (default results/analytics/)")
    v = p.add_argument_group("vision (Layer 2, through the judge client)")
    v.add_argument("--vision", action="store_true", help="also ask a vision model about the PNGs")
    v.add_argument("--model", default=None, help="vision-capable litellm model (default: the judge's default)")
    v.add_argument("--api-base", metavar="URL", help="OpenAI-compatible server")
    v.add_argument("--budget-usd", type=float, metavar="USD",
                   help="a cap on spend: each call reserves its worst-case cost before it is sent, and is not sent when that would pass USD")
    v.add_argument("--concurrency", type=int, default=4, help="parallel calls (default 4)")
    v.add_argument("--refresh", action="store_true", help="bypass the LLM response cache")
    v.add_argument("--llm-cache-dir", help="LLM response cache (default: the judge's shared cache, see docs/judge.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="only the summary line")
    return p


def _vision_client(args):
    """The judge client for --vision, or a one-line reason why the calls are skipped."""
    model = args.model or DEFAULT_MODEL
    load_env_file()
    reason = missing_key_reason(model)
    api_key = None
    if args.api_base:
        api_key = None if reason is None else "no-key"  # local servers ignore it; the client wants one
    elif reason is not None:
        return None, f"vision skipped: {reason}"
    cache = ResponseCache(args.llm_cache_dir or default_cache_dir())
    try:
        return JudgeClient(model, api_base=args.api_base, api_key=api_key, cache=cache,
                           ledger=Ledger(budget_usd=args.budget_usd), concurrency=args.concurrency,
                           refresh=args.refresh), None
    except ValueError as exc:  # a budget the model's missing price cannot keep
        return None, f"vision skipped: {exc}"


def cli(argv: list[str] | None = None) -> int:
    """``python -m analysis_lib codecanvas RUNS_DIR [-o OUT] [--vision ...]``; exit 0 unless nothing was read."""
    args = build_parser().parse_args(argv)
    if not os.path.isdir(args.runs_dir):
        print(f"error: {args.runs_dir}: not a folder", file=sys.stderr)
        return 2
    trials, ingest_errors = load_trials(args.runs_dir)
    errors: list[IngestError] = []
    table = codecanvas_table(trials, errors)
    vision = None
    note = ""
    if args.vision:
        client, reason = _vision_client(args)
        if client is None:
            note = f"; {reason}"
        else:
            vision = run_vision(trials, client)
            led = client.ledger.summary()
            note = f"; vision: {led['requests']} requests, {led['cache_hits']} cache hits, spent {led['spent_usd']} USD"
    paths = write_codecanvas_outputs(trials, table, args.output, simulated=is_simulated(args.runs_dir),
                                     vision=vision, errors=errors, runs_dir=args.runs_dir)
    if not args.quiet:
        for e in errors:
            print(_scrub(e.line(), args.runs_dir), file=sys.stderr)
    with_state = int(table["evidence_count"].notna().sum())
    print(f"codecanvas: {len(trials)} trials, {with_state} with CodeCanvas state, {len(errors)} unreadable states, "
          f"{len(ingest_errors)} ingest errors{note}; wrote {', '.join(sorted(paths))}", file=sys.stderr)
    return 0 if trials else 1
