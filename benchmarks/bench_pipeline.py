"""Time per notebook of the paper pipeline (``make paper``) on the sample runs, from warm caches.

Usage: ``python benchmarks/bench_pipeline.py [--params params/default.yaml] [--no-warmup]``.
The first run warms the metrics cache, the kernel and font caches; the second is measured and
printed per notebook, so slow steps are visible. Target: the whole pipeline under 120 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")

from analysis_lib.cli.pipeline import run_pipeline  # noqa: E402

TARGET_SEC = 120.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", default="params/default.yaml")
    p.add_argument("--no-warmup", action="store_true", help="measure the first (cold) run")
    args = p.parse_args(argv)
    if not args.no_warmup:
        print("warm-up run ...", flush=True)
        run_pipeline(args.params, ROOT, quiet=True)
    t0 = time.perf_counter()
    timings = run_pipeline(args.params, ROOT, quiet=True)
    total = time.perf_counter() - t0
    print(f"{'step':<20} {'seconds':>8} {'share':>6}")
    for name, sec in timings.items():
        print(f"{name:<20} {sec:8.1f} {sec / total:6.0%}")
    overhead = total - sum(timings.values())
    print(f"{'(driver overhead)':<20} {overhead:8.1f} {overhead / total:6.0%}")
    print(f"{'total':<20} {total:8.1f}   target < {TARGET_SEC:.0f} s: {'met' if total < TARGET_SEC else 'NOT met'}"
          f" ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
