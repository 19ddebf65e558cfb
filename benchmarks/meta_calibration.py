"""Calibration of the pooling across configurations in simulation (prints figures measured in this one run).

Simulated multi-configuration studies (``analysis_lib.simulate.configurations``: k configurations x 87 tasks x 3
trials per arm, each configuration with its own true effect on the pass probability, mean mu = 0.15 and
standard deviation tau across configurations). Each configuration's effect is estimated as the all-repetitions
plan does (mean per-task pass-rate difference, paired t standard error), then pooled
(:mod:`analysis_lib.stats.meta`). Printed per k and tau: the mean I^2; how often the 95 % interval of each method
contains mu; and how often each 95 % prediction interval contains the effect of a new configuration drawn from the
same distribution: Nagashima, Noma & Furukawa's parametric bootstrap (the reported one), Higgins-Thompson-
Spiegelhalter's plug-in (DL tau^2, t on k - 2 df) and Partlett-Riley's (REML tau^2, Hartung-Knapp se), with the
mean width of the bootstrap and HTS intervals. Target: 95 %. The within-configuration standard error is about
0.04 here, so tau = 0.045 is SkillsBench's level of heterogeneity (I^2 about 0.5).

Run from the repository root: ``python benchmarks/meta_calibration.py [--replications 2000] [--draws 5000]``
(about 15 minutes on 2 cores with the defaults). SIMULATED DATA: every figure describes the simulator, by design.
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
from analysis_lib.stats.meta import PI_DRAWS, cochran_q, prediction_interval, random_effects  # noqa: E402

METHODS = (("reml", "hksj"), ("pm", "hksj"), ("dl", "z"), ("reml", "z"))
PIS = ("boot", "hts", "hk")
KS = (3, 6, 10, 18, 30)
TAUS = (0.0, 0.02, 0.045, 0.1)


def coverage(study: ConfigurationStudy, replications: int, seed: int, draws: int = PI_DRAWS) -> dict[str, float]:
    """Over ``replications`` simulated studies: the mean I^2, each method's coverage of mu (``ci_<method>``) and each
    prediction interval's coverage of a new configuration's effect (``pi_<method>``) and mean width (``width_*``)."""
    rng = np.random.default_rng(seed)
    _, a, b = simulate_pass_counts(study, rng, replications)
    y, v = configuration_estimates(a, b, study.trials)
    new = study.mu + study.tau * rng.standard_normal(replications)
    hits = {f"ci_{m}_{i}": 0.0 for m, i in METHODS} | {f"pi_{m}": 0.0 for m in PIS} | {f"width_{m}": 0.0 for m in PIS}
    i2 = 0.0
    for r in range(replications):
        i2 += cochran_q(y[r], v[r]).iloc[0]["I2"]
        for method, interval in METHODS:
            row = random_effects(y[r], v[r], method=method, interval=interval).iloc[0]
            hits[f"ci_{method}_{interval}"] += row["ci_low"] <= study.mu <= row["ci_high"]
        for m in PIS:
            p = prediction_interval(y[r], v[r], method=m, draws=draws, seed=seed + r).iloc[0]
            hits[f"pi_{m}"] += p["pi_low"] <= new[r] <= p["pi_high"]
            hits[f"width_{m}"] += p["pi_high"] - p["pi_low"]
    return {name: value / replications for name, value in hits.items()} | {"I2": i2 / replications}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replications", type=int, default=2000, help="simulated studies per cell (default 2000)")
    p.add_argument("--draws", type=int, default=PI_DRAWS, help=f"bootstrap draws per interval (default {PI_DRAWS})")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--ks", type=int, nargs="+", default=list(KS), help="numbers of configurations")
    args = p.parse_args(argv)
    mc = math.sqrt(0.95 * 0.05 / args.replications)
    print(f"SIMULATED DATA. {args.replications} studies per cell; Monte-Carlo standard error of a 95 % coverage "
          f"{100 * mc:.1f} points. mu = 0.15; 87 tasks x 3 trials per arm and configuration; {args.draws} bootstrap "
          "draws per prediction interval.")
    print(f"{'':>13} {'covers mu':^39} {'PI covers a new configuration':^31} {'mean PI width':^15}")
    print(f"{'k':>3} {'tau':>5} {'I2':>4} {'REML+HKSJ':>9} {'PM+HKSJ':>9} {'DL, z':>9} {'REML, z':>9} "
          f"{'boot':>9} {'HTS':>9} {'HK':>9} {'boot':>7} {'HTS':>7}")
    start = time.perf_counter()
    for k in args.ks:
        for i, tau in enumerate(TAUS):
            r = coverage(ConfigurationStudy(n_configs=k, tau=tau), args.replications, args.seed + 100 * k + i,
                         args.draws)
            cells = [r[f"ci_{m}_{iv}"] for m, iv in METHODS] + [r[f"pi_{m}"] for m in PIS]
            print(f"{k:>3} {tau:>5.3f} {r['I2']:>4.2f} " + " ".join(f"{100 * c:>7.1f} %" for c in cells)
                  + f" {r['width_boot']:>7.3f} {r['width_hts']:>7.3f}", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
