"""Calibration of the planned tests and intervals in simulation (prints figures measured in this one run).

1. Type-I error: null (A/A) studies from the seeded simulator (``Effects.null()``: no effect on any
   metric) at the sample's size (24 tasks x 3 repetitions); the share of studies in which each
   primary test of the two shipped plans rejects at alpha = 0.05, with its Monte-Carlo standard
   error. Target: within 1 percentage point of alpha.
2. Coverage: studies with the sample's effects (``Effects()``); the share of 95 % intervals that
   contain the true value of their own estimand, with its Monte-Carlo standard error. Target:
   95 +/- 1.5 %. True values: pass@1 and resolve-rate differences from one very large simulated
   study (their own Monte-Carlo error is printed), the token change exactly from the simulator.
3. Power at the sample's effects, for the same tests (what using every repetition buys).

Run from the repository root: ``python benchmarks/calibration.py [--studies 1000]``.
SIMULATED DATA: every figure describes the simulator's agents, by design.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib import comparisons, stats  # noqa: E402
from analysis_lib import plan as plan_mod  # noqa: E402
from analysis_lib.simulate import Effects, simulate_metrics, true_effects  # noqa: E402

A, B = "text", "codegraph"
PLANS = {"majority (default plan)": ROOT / "params" / "analysis_plan.yaml",
         "all repetitions": ROOT / "params" / "analysis_plan_all_repetitions.yaml"}


def primary_only(path: Path) -> plan_mod.AnalysisPlan:
    """The plan with its primary tier only: the tests a claim rests on (the sign-flip test is exact by
    construction; the rest is not calibrated here)."""
    d = plan_mod.load_plan(path).model_dump(mode="json")
    d["tiers"]["sensitivity"] = None
    d["hypotheses"] = []
    d["tiers"]["secondary"] = {"correction": "none", "metrics": [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]}
    d["tiers"]["exploratory"] = {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]}
    return plan_mod.parse_plan(d, str(path))


def run(plan: plan_mod.AnalysisPlan, effects: Effects, studies: int, seed0: int, label: str) -> pd.DataFrame:
    rows = []
    for i in tqdm(range(studies), desc=label, unit="study", leave=False):
        m = simulate_metrics(seed0 + i, 24, 3, (A, B), effects)
        t = comparisons.compare(m, plan, [(A, B)])
        t = t[t["tier"] == "primary"]
        rows.append(t.assign(study=i)[["study", "tier", "metric", "scale", "test", "estimate", "ci_low", "ci_high",
                                        "p_value"]])
    return pd.concat(rows, ignore_index=True)


def true_values(effects: Effects) -> dict[str, tuple[float, float]]:
    """Estimand -> (true value, its Monte-Carlo error), per comparison scale."""
    big = simulate_metrics(7, 20_000, 3, (A, B), effects)
    out = {}
    for how, scale in (("mean", "pass_rate"), ("majority", "rate")):
        p = stats.pair_tasks(big, "success", A, B, binary=True, how=how)
        d = p["b"] - p["a"]
        out[scale] = (float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))))
    tok = true_effects(effects, (A, B), A)[B]["token_ratio"]
    out["ratio"] = (100.0 * (tok - 1.0), 0.0)
    return out


def share(x: pd.Series) -> tuple[float, float]:
    p = float(x.mean())
    return p, math.sqrt(p * (1 - p) / max(len(x), 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=1000, help="simulated studies per plan and scenario (default 1000)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    truth = true_values(Effects())
    print(f"SIMULATED DATA. {args.studies} studies per plan and scenario, 24 tasks x 3 repetitions, {B} vs {A}.")
    print("true values: " + "; ".join(f"{k} {v:+.4f} (MC error {e:.4f})" for k, (v, e) in truth.items()))
    print(f"\n{'plan':26} {'tier':12} {'test':38} {'type-I error':>16} {'coverage':>16} {'power':>8}")
    for name, path in PLANS.items():
        plan = primary_only(path)
        null = run(plan, Effects.null(), args.studies, 1_000_000, f"{name}: null")
        alt = run(plan, Effects(), args.studies, 2_000_000, f"{name}: effects")
        for (tier, metric, scale, test), g in null.groupby(["tier", "metric", "scale", "test"], sort=False):
            a = alt[(alt["tier"] == tier) & (alt["metric"] == metric) & (alt["test"] == test)]
            fpr, fpr_se = share(g["p_value"] < 0.05)
            pw, _ = share(a["p_value"] < 0.05)
            cov = "–"
            if scale in truth:
                true = truth[scale][0]
                cv, cv_se = share((a["ci_low"] <= true) & (true <= a["ci_high"]))
                cov = f"{100 * cv:5.1f} ± {100 * cv_se:.1f} %"
            print(f"{name:26} {tier:12} {metric + ': ' + test:38} {100 * fpr:6.2f} ± {100 * fpr_se:.2f} % "
                  f"{cov:>16} {100 * pw:7.1f}%")
    print(f"\n(± is one Monte-Carlo standard error; {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
