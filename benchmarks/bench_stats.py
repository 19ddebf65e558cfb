"""Benchmark of the paired statistics (prints figures measured in this one run).

1. 10,000 paired bootstrap resamples of the median difference on 500 pairs: ours
   (:func:`analysis_lib.stats.bootstrap.bootstrap_paired`, one vectorised (n_boot, n) index matrix)
   against ``pingouin.compute_bootci(..., paired=True, method="per")`` on the same data; the
   ratio of times (target >= 10x) and whether the two percentile intervals agree within
   Monte-Carlo error (each endpoint inside the other's +-4 rank-SE band).
2. The whole ``write_comparisons`` (the analysis plan over all profile pairs) on the sample runs'
   metrics: ``results/analytics/metrics_detail.csv`` if it exists, else the metrics of
   ``runs/sample`` if the Layer 1 code is present, else ``simulate_metrics`` output.

Run from the repository root: ``python benchmarks/bench_stats.py``.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib import (  # noqa: E402
    Study,
    stats,  # noqa: E402
    write_comparisons,
)
from analysis_lib.study.plan import load_plan  # noqa: E402

N_PAIRS, N_BOOT, SEED = 500, 10_000, 20261121


def _timed(fn, repeat: int = 1):
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _band(dist: np.ndarray, q: float, n_boot: int) -> tuple[float, float]:
    # An endpoint from n_boot draws is an order statistic with rank SE sqrt(n_boot q (1 - q)).
    w = 4 * math.sqrt(q * (1 - q) / n_boot)
    return float(np.quantile(dist, max(q - w, 0.0))), float(np.quantile(dist, min(q + w, 1.0)))


def bench_bootstrap() -> None:
    import pingouin as pg

    rng = np.random.default_rng(SEED)
    a = rng.lognormal(11.5, 0.5, N_PAIRS)
    b = a * rng.lognormal(-0.2, 0.3, N_PAIRS)
    ours_t, ours = _timed(lambda: stats.bootstrap_paired(a, b, statistics=("median_diff",), n_boot=N_BOOT, seed=SEED).iloc[0], 3)
    ref_t, ref = _timed(lambda: pg.compute_bootci(a, b, func=lambda x, y: np.median(y - x), paired=True,
                                                  method="per", n_boot=N_BOOT, seed=SEED, decimals=12))
    # A third, plain-numpy bootstrap with 4x the resamples as the yardstick: both intervals'
    # endpoints must fall inside its +-4 rank-SE bands (for 10,000 resamples).
    idx = np.random.default_rng(SEED + 1).integers(0, N_PAIRS, size=(4 * N_BOOT, N_PAIRS))
    dist = np.median(b[idx] - a[idx], axis=1)
    bands = (_band(dist, 0.025, N_BOOT), _band(dist, 0.975, N_BOOT))
    agree = all(lo <= v <= hi for (lo, hi), v in zip(bands * 2, (ours["ci_low"], ours["ci_high"], ref[0], ref[1]), strict=True))
    print(f"bootstrap of the median difference, {N_PAIRS} pairs x {N_BOOT:,} resamples (percentile 95 % CI)")
    print(f"  ours      {ours_t * 1e3:8.1f} ms  CI [{ours['ci_low']:.1f}, {ours['ci_high']:.1f}]  (best of 3)")
    print(f"  pingouin  {ref_t * 1e3:8.1f} ms  CI [{ref[0]:.1f}, {ref[1]:.1f}]  (compute_bootci, paired, method='per')")
    print(f"  speed-up  {ref_t / ours_t:8.1f}x   (target >= 10x)")
    print(f"  both CIs within Monte-Carlo error of a 40,000-resample reference "
          f"([{bands[0][0]:.1f}, {bands[0][1]:.1f}] and [{bands[1][0]:.1f}, {bands[1][1]:.1f}]): {'yes' if agree else 'NO'}")


def _sample_metrics() -> tuple[pd.DataFrame, str, bool]:
    detail = ROOT / "results" / "analytics" / "metrics_detail.csv"
    if detail.exists():
        return pd.read_csv(detail), "results/analytics/metrics_detail.csv", True
    runs = ROOT / "runs" / "sample"
    if (runs / "index.json").exists():
        try:
            from analysis_lib.study.layer1 import analyse
        except ImportError:  # Layer 1 not in this checkout: fall through to the simulator
            pass
        else:
            result = analyse(runs, None, cache=False)
            return result.metrics, "runs/sample (ingested by Layer 1)", result.simulated
    from analysis_lib.simulate.model import simulate_metrics

    return simulate_metrics(SEED), f"simulate_metrics(seed={SEED})", True


def bench_compare() -> None:
    metrics, source, simulated = _sample_metrics()
    with tempfile.TemporaryDirectory() as tmp:
        t, study = _timed(lambda: write_comparisons(Study.from_table(metrics, baseline="text", plan=load_plan(), simulated=simulated), tmp))
    out = study.comparisons
    pairs = out[["profile_a", "profile_b"]].drop_duplicates().shape[0]
    print(f"write_comparisons on {source}: {len(metrics)} trials, {pairs} profile pairs x {out['metric'].nunique()} metrics, "
          f"{study.plan.bootstrap.n_resamples:,} resamples: {t:.2f} s (csv + report written)")


if __name__ == "__main__":
    bench_bootstrap()
    bench_compare()
