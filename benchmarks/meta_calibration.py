"""Calibration of the pooling across configurations in simulation (prints figures measured in this one run).

Simulated multi-configuration studies (``analysis_lib.simulate.configurations``: k configurations x 87 tasks x 3
trials per arm, each configuration with its own true effect on the pass probability, mean mu = 0.15 and
standard deviation tau across configurations). Each configuration's effect is estimated as the all-repetitions
plan does (mean per-task pass-rate difference, paired t standard error), then pooled
(:func:`analysis_lib.stats.meta.random_effects`). Printed per k and tau: how often the 95 % interval of each
method contains mu, its mean width, and how often the 95 % prediction interval contains the effect of a new
configuration drawn from the same distribution. Target for the intervals of mu and for the prediction
interval: 95 %. The within-configuration standard error is about 0.04 here, so tau = 0.045 is SkillsBench's
level of heterogeneity (I^2 about 0.5).

Run from the repository root: ``python benchmarks/meta_calibration.py [--replications 2000]``.
SIMULATED DATA: every figure describes the simulator, by design.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib.simulate.configurations import (  # noqa: E402
    ConfigurationStudy,
    configuration_estimates,
    simulate_pass_counts,
)
from analysis_lib.stats.meta import random_effects  # noqa: E402

METHODS = (("reml", "hksj"), ("pm", "hksj"), ("dl", "z"), ("reml", "z"))
KS = (3, 6, 10, 18, 30)
TAUS = (0.0, 0.02, 0.045, 0.1)


def coverage(study: ConfigurationStudy, replications: int, seed: int) -> dict[tuple[str, str], dict[str, float]]:
    """Per method: coverage of mu, mean interval width, and coverage of a new configuration's effect by the
    prediction interval (k >= 3), over ``replications`` simulated studies."""
    rng = np.random.default_rng(seed)
    _, a, b = simulate_pass_counts(study, rng, replications)
    y, v = configuration_estimates(a, b, study.trials)
    new = study.mu + study.tau * rng.standard_normal(replications)
    out = {}
    for method, interval in METHODS:
        hit = width = pi_hit = 0.0
        for r in range(replications):
            row = random_effects(y[r], v[r], method=method, interval=interval).iloc[0]
            hit += row["ci_low"] <= study.mu <= row["ci_high"]
            width += row["ci_high"] - row["ci_low"]
            pi_hit += row["pi_low"] <= new[r] <= row["pi_high"]
        out[(method, interval)] = {"coverage": hit / replications, "width": width / replications,
                                   "pi_coverage": pi_hit / replications if study.n_configs >= 3 else math.nan}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replications", type=int, default=2000, help="simulated studies per cell (default 2000)")
    p.add_argument("--seed", type=int, default=20261201)
    args = p.parse_args(argv)
    mc = math.sqrt(0.95 * 0.05 / args.replications)
    print(f"SIMULATED DATA. {args.replications} studies per cell; Monte-Carlo standard error of a 95 % coverage "
          f"{100 * mc:.1f} points. mu = 0.15; 87 tasks x 3 trials per arm and configuration.")
    print(f"{'k':>3} {'tau':>6} {'method':>12} {'covers mu':>10} {'mean width':>11} {'PI covers new':>14}")
    start = time.perf_counter()
    for k in KS:
        for i, tau in enumerate(TAUS):
            res = coverage(ConfigurationStudy(n_configs=k, tau=tau), args.replications, args.seed + 100 * k + i)
            for (method, interval), r in res.items():
                name = f"{method.upper()}+{interval.upper()}" if interval == "hksj" else f"{method.upper()}, z"
                pi = "–" if math.isnan(r["pi_coverage"]) else f"{100 * r['pi_coverage']:.1f} %"
                print(f"{k:>3} {tau:>6.3f} {name:>12} {100 * r['coverage']:>8.1f} % {r['width']:>11.4f} {pi:>14}")
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
