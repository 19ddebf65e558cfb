"""Calibration of every planned test and interval in simulation (prints figures measured in this one run).

For both shipped plans, studies of 12 and 24 tasks x 3 repetitions from the seeded simulator go through
the comparison engine with the plan's primary, secondary and sensitivity tiers (and cost per success):

1. Type-I error: null (A/A) studies (``Effects.null()``: no effect on any metric); the share of studies
   in which each test rejects at alpha = 0.05, with its Monte-Carlo standard error. Target: within
   1 percentage point of alpha (a conservative exact test may stay below).
2. Coverage: the share of 95 % intervals that hold the true value of their own estimand, under the null
   (true value 0, odds ratio 1) and under the sample's effects (``Effects()``), with MC standard errors.
   Target: 95 +/- 1.5 %. True values under the effects come from one study of 20,000 tasks (their own
   Monte-Carlo error is printed): the mean per-task difference (pass@1, resolve rate), the per-trial
   difference (GEE), the pseudo-median of the per-task log ratio or difference (Hodges-Lehmann), the
   ratio of totals (budget view, cost per success) and the discordant-pair odds ratio.
3. Power at the sample's effects, and how often an interval and its own test disagree (excludes 0 while
   p >= 0.05, or the reverse): 0 for every inverted interval; Tango's score interval beside McNemar's
   exact test can disagree.

Run from the repository root: ``python benchmarks/calibration.py [--studies 500] [--tasks 12 24]
[--workers 2] [--markdown FILE]``. SIMULATED DATA: every figure describes the simulator's agents, by design.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib import stats  # noqa: E402
from analysis_lib.inference import comparisons  # noqa: E402
from analysis_lib.simulate.model import Effects, simulate_metrics  # noqa: E402
from analysis_lib.study import plan as plan_mod  # noqa: E402

A, B = "text", "codegraph"
ALPHA = 0.05
PLANS = {"majority": ROOT / "params" / "analysis_plan.yaml",
         "all repetitions": ROOT / "params" / "analysis_plan_all_repetitions.yaml"}
KEEP = ["tier", "metric", "scale", "test", "interval", "estimate", "ci_low", "ci_high", "ci_open", "p_value",
        "odds_ratio_low", "odds_ratio_high", "total_change_low", "total_change_high"]
BOOT = 1000  # bootstrap resamples of the budget view and cost per success (the plans use 10,000)


def calibrated_plan(path: Path) -> plan_mod.AnalysisPlan:
    """The plan with every test it declares (primary, secondary, sensitivity) and cost per success, the one
    exploratory interval the simulator's metrics allow; fewer bootstrap resamples to keep the run short."""
    d = plan_mod.load_plan(path).model_dump(mode="json")
    d["tiers"]["exploratory"] = {"correction": "none", "metrics": [{"id": "cost_per_success", "test": "descriptive"}]}
    d["bootstrap"]["n_resamples"] = BOOT
    return plan_mod.parse_plan(d, str(path))


def _study(job: tuple) -> pd.DataFrame:
    plan, scenario, n_tasks, seed = job
    effects = Effects.null() if scenario == "null" else Effects()
    m = simulate_metrics(seed, n_tasks, 3, (A, B), effects)
    t = comparisons.compare(m, plan, [(A, B)])
    specs = plan.tier_metrics()  # one row per planned test here: one pair, no per-tool family
    assert len(t) == len(specs)
    return t[KEEP].assign(study=seed, spec_test=[s.test for _, s, _ in specs])


def run(plan: plan_mod.AnalysisPlan, scenario: str, n_tasks: int, studies: int, seed0: int, workers: int,
        label: str) -> pd.DataFrame:
    jobs = [(plan, scenario, n_tasks, seed0 + i) for i in range(studies)]
    with Pool(workers) as pool:
        parts = list(tqdm(pool.imap(_study, jobs, chunksize=4), total=studies, desc=label, unit="study", leave=False))
    return pd.concat(parts, ignore_index=True)


def _pseudo_median(d: np.ndarray, rng: np.random.Generator, draws: int = 2_000_000) -> float:
    """The population pseudo-median (the Hodges-Lehmann estimand): the median of (d_i + d_j) / 2 over pairs."""
    i, j = rng.integers(0, d.size, draws), rng.integers(0, d.size, draws)
    return float(np.median((d[i] + d[j]) / 2.0))


def true_values(plan: plan_mod.AnalysisPlan, effects: Effects, n_big: int = 20_000) -> tuple[dict, dict]:
    """(metric, scale) -> true value of the row's estimand, on the row's scale, and its Monte-Carlo error."""
    big = comparisons.usable_trials(simulate_metrics(7, n_big, 3, (A, B), effects))
    rng = np.random.default_rng(11)
    truth, err = {}, {}
    for tier, spec, _ in plan.tier_metrics():
        r = comparisons.rule(spec.id, spec.test, plan.repetitions_of(spec))
        key = (tier, spec.id, spec.test)
        if r.scale == "cost_per_success":
            per = big.assign(win=stats.as_outcome(big["success"].to_numpy()).to_numpy()).groupby("profile")[
                ["total_cost_usd", "win"]].sum()
            cps = per["total_cost_usd"] / per["win"]
            truth[key], err[key] = 100.0 * (cps[B] / cps[A] - 1.0), np.nan
            continue
        if r.scale in ("rate", "pass_rate"):
            p = stats.pair_tasks(big, spec.id, A, B, binary=True, how=r.how)
            if spec.test == "gee":
                y = stats.as_outcome(big[spec.id].to_numpy()).to_numpy()
                is_b = (big["profile"] == B).to_numpy()
                truth[key], err[key] = float(np.nanmean(y[is_b]) - np.nanmean(y[~is_b])), np.nan
            else:
                d = (p["b"] - p["a"]).to_numpy()
                truth[key], err[key] = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
            if r.scale == "rate":
                n10 = int(np.sum((p["a"] > 0.5) & (p["b"] < 0.5)))
                n01 = int(np.sum((p["a"] < 0.5) & (p["b"] > 0.5)))
                truth[key + ("odds_ratio",)] = n01 / n10
            continue
        p = stats.pair_tasks(big, spec.id, A, B, binary=False, how=r.how).dropna()
        p = p[(p["a"] > 0) & (p["b"] > 0)] if r.scale == "ratio" else p
        d = np.log(p["b"] / p["a"]).to_numpy() if r.scale == "ratio" else (p["b"] - p["a"]).to_numpy()
        hl = _pseudo_median(d, rng)
        halves = [_pseudo_median(d[k::2], rng, 500_000) for k in (0, 1)]  # split-half spread as its MC error
        truth[key] = 100.0 * math.expm1(hl) if r.scale == "ratio" else hl
        err[key] = abs(100.0 * (math.expm1(halves[0]) - math.expm1(halves[1])) if r.scale == "ratio"
                        else halves[0] - halves[1]) / 2.0
        if r.scale == "ratio":
            truth[key + ("total",)] = 100.0 * (p["b"].sum() / p["a"].sum() - 1.0)
    return truth, err


def share(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=bool)
    p = float(x.mean()) if x.size else float("nan")
    return p, math.sqrt(p * (1 - p) / max(x.size, 1))


def _covers(lo, hi, value, open_=None) -> np.ndarray:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    inside = (lo <= value) & (value <= hi)
    if open_ is not None:  # an end the inverted test itself rejects is not part of the interval
        o = pd.Series(open_).fillna("").astype(str).to_numpy()
        inside &= ~((np.char.find(o.astype(str), "low") >= 0) & (lo == value))
        inside &= ~((np.char.find(o.astype(str), "high") >= 0) & (hi == value))
    return inside


def pct(p_se: tuple[float, float]) -> str:
    p, se = p_se
    return "–" if math.isnan(p) else f"{100 * p:5.1f} ± {100 * se:.1f}"


def summarise(name: str, n_tasks: int, plan: plan_mod.AnalysisPlan, null: pd.DataFrame, alt: pd.DataFrame,
              truth: dict) -> list[dict]:
    rows = []
    for (tier, metric, spec_test), g0 in null.groupby(["tier", "metric", "spec_test"], sort=False):
        g1 = alt[(alt["tier"] == tier) & (alt["metric"] == metric) & (alt["spec_test"] == spec_test)]
        key = (tier, metric, spec_test)
        test = comparisons.TEST_LABELS[spec_test]
        tested = g0["p_value"].notna().any()
        both = pd.concat([g0, g1])
        disagree = share([comparisons.excludes_zero(r) != (r["p_value"] < ALPHA) for r in both.to_dict("records")]) \
            if tested else (float("nan"), 0.0)
        rows.append({
            "plan": name, "tasks": n_tasks, "tier": tier, "row": f"{metric}: {test.split(' (')[0]}",
            "interval": g0["interval"].iloc[0],
            "type-I error %": pct(share(g0["p_value"] < ALPHA)) if tested else "–",
            "coverage null %": pct(share(_covers(g0["ci_low"], g0["ci_high"], 0.0, g0["ci_open"]))),
            "coverage effects %": pct(share(_covers(g1["ci_low"], g1["ci_high"], truth[key], g1["ci_open"]))),
            "power %": f"{100 * share(g1['p_value'] < ALPHA)[0]:5.1f}" if tested else "–",
            "interval/test disagree %": pct(disagree) if tested else "–",
        })
        if key + ("odds_ratio",) in truth and test.startswith("McNemar"):
            rows.append({"plan": name, "tasks": n_tasks, "tier": tier, "row": f"{metric}: odds ratio",
                         "interval": "exact (Clopper-Pearson)", "type-I error %": "–",
                         "coverage null %": pct(share(_covers(g0["odds_ratio_low"], g0["odds_ratio_high"], 1.0))),
                         "coverage effects %": pct(share(_covers(g1["odds_ratio_low"], g1["odds_ratio_high"],
                                                                 truth[key + ("odds_ratio",)]))),
                         "power %": "–",
                         "interval/test disagree %": pct(share(
                             (~_covers(both["odds_ratio_low"], both["odds_ratio_high"], 1.0)) != (both["p_value"] < ALPHA)))})
        if key + ("total",) in truth:
            rows.append({"plan": name, "tasks": n_tasks, "tier": tier, "row": f"{metric}: change of the total",
                         "interval": "percentile bootstrap over tasks", "type-I error %": "–",
                         "coverage null %": pct(share(_covers(g0["total_change_low"], g0["total_change_high"], 0.0))),
                         "coverage effects %": pct(share(_covers(g1["total_change_low"], g1["total_change_high"],
                                                                 truth[key + ("total",)]))),
                         "power %": "–", "interval/test disagree %": "–"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=500, help="simulated studies per plan, size and scenario (default 500)")
    ap.add_argument("--tasks", type=int, nargs="+", default=[12, 24], help="tasks per study (default: 12 24)")
    ap.add_argument("--plans", nargs="+", choices=list(PLANS), default=list(PLANS), help="plans to calibrate")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--markdown", type=Path, help="also write the table as Markdown to this file")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(f"SIMULATED DATA. {args.studies} studies per plan, size and scenario; {B} vs {A}; 3 repetitions per task; "
          f"seeds 1,000,000+ (null) and 2,000,000+ (effects); bootstrap {BOOT} resamples.")
    out = []
    for name in args.plans:
        plan = calibrated_plan(PLANS[name])
        truth, err = true_values(plan, Effects())
        print(f"{name}: true values under the effects: " + "; ".join(
            f"{k[1]}/{k[2]}{'/' + k[3] if len(k) > 3 else ''} {v:+.4g}"
            + (f" (MC error {err[k]:.2g})" if k in err and not math.isnan(err[k]) else "") for k, v in truth.items()))
        for n_tasks in args.tasks:
            null = run(plan, "null", n_tasks, args.studies, 1_000_000 + 10_000 * n_tasks, args.workers,
                       f"{name}, {n_tasks} tasks: null")
            alt = run(plan, "effects", n_tasks, args.studies, 2_000_000 + 10_000 * n_tasks, args.workers,
                      f"{name}, {n_tasks} tasks: effects")
            out += summarise(name, n_tasks, plan, null, alt, truth)
    table = pd.DataFrame(out)
    with pd.option_context("display.width", 250, "display.max_colwidth", 60, "display.max_rows", None):
        print(table.to_string(index=False))
    if args.markdown:
        head = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
        args.markdown.write_text(head + "\n".join("| " + " | ".join(map(str, r)) + " |" for r in table.itertuples(index=False))
                                 + "\n", encoding="utf-8")
    print(f"\n(± is one Monte-Carlo standard error; {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
