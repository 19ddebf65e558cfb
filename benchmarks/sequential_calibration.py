"""Calibration of the sequential design in simulation (prints figures measured in this one run).

Each primary test monitored alone at four O'Brien-Fleming-type looks, on the number of tasks a planner
gives the fixed design for 80 % power at the sample's success effect: type-I error across all looks
(target: within 1 point of alpha), power beside the fixed design's on the same studies (target: within
2 points), and the expected spend under the sample's effects as a share of the fixed design's (target: at
least 30 % lower for tokens). ``--boundary-check N`` also checks the paired t's boundaries alone.

Run from the repository root: ``python benchmarks/sequential_calibration.py [--studies 1000]``.
SIMULATED DATA: every figure describes the simulator's agents, by design.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib import stats  # noqa: E402
from analysis_lib.inference import comparisons  # noqa: E402
from analysis_lib.simulate.model import Effects, simulate_metrics  # noqa: E402
from analysis_lib.study import plan as plan_mod  # noqa: E402

A, B = "text", "codegraph"
PLANS = {"majority (default plan)": ROOT / "params" / "analysis_plan.yaml",
         "all repetitions": ROOT / "params" / "analysis_plan_all_repetitions.yaml"}


def share(x: pd.Series) -> tuple[float, float]:
    """A proportion and its Monte-Carlo standard error."""
    p = float(np.mean(x))
    return p, math.sqrt(p * (1 - p) / max(len(x), 1))

SEQ_REPS = 3
# The approximate tests first (the boundary is a nominal p for their own p): simulation is their only check.
SEQ_TESTS = (("success", "paired_t", "all"), ("total_tokens", "wilcoxon_signed_rank", "all"),
             ("success", "sign_flip", "all"), ("success", "mcnemar_exact", "majority"))


def planned_tasks(target: float = 0.8, alpha: float = 0.05) -> tuple[int, float, float]:
    """The fixed design's size: tasks for power ``target`` with the paired t on pass@1 at the sample's success effect.

    The planner's own answer (:func:`analysis_lib.inference.power.paired_t_power`) with the population's effect and
    spread of per-task pass-rate differences, read from one very large simulated study: the study the
    calibration runs is the one a planner would size for the success endpoint, the hardest one.
    """
    from analysis_lib.inference import power as power_mod

    big = simulate_metrics(7, 20_000, SEQ_REPS, (A, B), Effects())
    p = stats.pair_tasks(big, "success", A, B, binary=True, how="mean")
    d = (p["b"] - p["a"]).to_numpy(float)
    delta, sd = float(d.mean()), float(d.std(ddof=1))
    n = power_mod.tasks_for_power(lambda k: power_mod.paired_t_power(k, delta, sd, alpha), target, rising=True)
    assert n is not None
    return n, delta, sd


@cache
def sequential_plan(metric: str, test: str, repetitions: str, efficacy: str = "obrien_fleming") -> plan_mod.AnalysisPlan:
    """One primary test monitored alone at four equally spaced looks (Lan-DeMets spending, no futility)."""
    d = plan_mod.load_plan(PLANS["all repetitions"]).model_dump(mode="json")
    d.update(hypotheses=[], claim_family="primary", pairing={"unit": "task", "repetitions": repetitions, "exclude_infra_errors": True, "baseline": A},
             sequential={"looks": 4, "efficacy": efficacy, "stop": "all"})
    d["bootstrap"]["n_resamples"] = 100  # only the totals' interval uses it, never a p-value
    d["tiers"] = {"primary": {"correction": "holm", "metrics": [{"id": metric, "test": test}]},
                  "secondary": {"correction": "none", "metrics": [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]},
                  "exploratory": {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]}}
    return plan_mod.parse_plan(d, "calibration")


def _sequential_study(job: tuple) -> dict:
    """One simulated study under the design: the look it stopped at, its decision, its spend, and the fixed test."""
    from analysis_lib.inference import sequential

    seed, n_tasks, metric, test, reps, null = job
    plan = sequential_plan(metric, test, reps)
    m = simulate_metrics(seed, n_tasks, SEQ_REPS, (A, B), Effects.null() if null else Effects())
    order = list(dict.fromkeys(m["task_id"].astype(str)))  # the simulator's tasks are exchangeable: any order is random
    sizes = sequential.look_sizes(plan.sequential, len(order))
    mon = sequential.monitor(m, plan, [(A, B)], order, sizes, len(order), final=True)
    cost = m.groupby("task_id")["total_cost_usd"].sum()
    used = float(cost.loc[order[: sizes[mon.stop_look - 1]]].sum())
    if mon.stop_look == len(sizes) and test != "sign_flip":
        # The last look is the fixed analysis of every task by the same engine (the sign-flip row there holds the
        # exact p of the enumerated walk, the fixed analysis its Monte-Carlo p: that one is computed below).
        p_fixed = float(mon.table.loc[mon.table["look"] == mon.stop_look, "p_value"].iloc[0])
    else:
        fixed = comparisons.compare(m, plan, [(A, B)])
        p_fixed = float(fixed.loc[fixed["tier"] == "primary", "p_value"].iloc[0])
    return {"rejected": bool((mon.table["status"] == "rejected").any()), "look": mon.stop_look,
            "spend": used / float(cost.sum()), "fixed_rejected": p_fixed < 0.05}


def sequential_calibration(studies: int, effect_studies: int | None = None, tests: list[str] | None = None,
                           seed0: int = 3_000_000, workers: int = 2) -> None:
    """Type-I error across the looks, power against the fixed design, expected spend, with Monte-Carlo SEs.

    Each primary test is monitored alone at alpha = 0.05 with four O'Brien-Fleming-type looks, on the number
    of tasks the planner gives the fixed paired t for 80 % power at the sample's success effect
    (:func:`planned_tasks`), x 3 repetitions: under the null (``Effects.null()``) and under the sample's
    effects (``Effects()``: about +8 points of success, the planned effect of the success tests, and -20 %
    tokens, the planner's token effect), beside the same studies analysed once at full size. The power
    loss is paired (the same studies), so its standard error is that of a paired difference.
    """
    from multiprocessing import Pool

    from analysis_lib.stats import group_sequential as gs

    t0 = time.perf_counter()
    effect_studies = studies if effect_studies is None else effect_studies
    n_tasks, delta, sd = planned_tasks()
    d = gs.design([0.25, 0.5, 0.75, 1.0], 0.05, "obrien_fleming")
    fixed_drift = float(sps.norm.isf(0.025) + sps.norm.isf(0.2))
    theory = gs.stopping(d, fixed_drift)
    print(f"\nSEQUENTIAL DESIGN: 4 looks (O'Brien-Fleming-type Lan-DeMets spending), {n_tasks} tasks x {SEQ_REPS} "
          f"repetitions (the fixed paired t's size for 80 % power at the sample's pass@1 effect {delta:+.4f}, "
          f"sd of per-task differences {sd:.4f}), {studies} null studies and {effect_studies} under the effects per test. "
          "SIMULATED DATA.")
    print(f"normal theory: maximum size {d.inflation:.4f} x the fixed design's for the same power; at the fixed design's "
          f"80 % drift the sequential power is {100 * theory['power']:.2f} % (loss {80 - 100 * theory['power']:.2f} points), "
          f"expected size {100 * theory['expected_fraction']:.1f} % of the maximum; under the null "
          f"{100 * gs.stopping(d, 0.0)['expected_fraction']:.1f} %.")
    print(f"{'test':36} {'type-I (all looks)':>18} {'power seq':>13} {'power fixed':>13} {'loss (paired)':>14} "
          f"{'E[spend] null':>14} {'E[spend] effect':>16} {'E[stop look] effect':>20}")
    with Pool(workers) as pool:
        for j, (metric, test, reps) in enumerate(SEQ_TESTS):
            if tests is not None and test not in tests:
                continue
            rows = {}
            for null in (True, False):
                n = studies if null else effect_studies
                jobs = [(seed0 + 10_000 * j + 5_000 * null + i, n_tasks, metric, test, reps, null) for i in range(n)]
                rows[null] = pd.DataFrame(list(tqdm(pool.imap(_sequential_study, jobs, chunksize=4), total=n,
                                                    desc=f"{test} {'null' if null else 'effects'}", leave=False)))
            t1, t1_se = share(rows[True]["rejected"])
            pw, pw_se = share(rows[False]["rejected"])
            pf, pf_se = share(rows[False]["fixed_rejected"])
            loss = rows[False]["fixed_rejected"].astype(float) - rows[False]["rejected"].astype(float)
            sp0, sp1 = rows[True]["spend"], rows[False]["spend"]
            print(f"{metric + ': ' + test:36} {100 * t1:8.2f} ± {100 * t1_se:.2f} % {100 * pw:6.1f} ± {100 * pw_se:.1f} "
                  f"{100 * pf:6.1f} ± {100 * pf_se:.1f} {100 * loss.mean():7.2f} ± {100 * loss.std() / math.sqrt(len(loss)):.2f} "
                  f"{100 * sp0.mean():8.1f} ± {100 * sp0.std() / math.sqrt(len(sp0)):.1f} % "
                  f"{100 * sp1.mean():9.1f} ± {100 * sp1.std() / math.sqrt(len(sp1)):.1f} % "
                  f"{rows[False]['look'].mean():12.2f}", flush=True)
    print("(spend: share of the fixed design's spend, the same studies run to full size; ± one Monte-Carlo SE; power seq "
          f"and fixed come from the same simulated studies; {time.perf_counter() - t0:.0f} s)")


def _paired_t_p(d: np.ndarray) -> np.ndarray:
    """Two-sided paired t p-values of each row of per-task differences (a row without spread: 1, or 0 off zero)."""
    n = d.shape[1]
    m, s = d.mean(axis=1), d.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = m / (s / math.sqrt(n))
        p = 2 * sps.t.sf(np.abs(t), n - 1)
    return np.where(s > 0, p, np.where(m == 0, 1.0, 0.0))


def paired_t_boundaries(studies: int, seed0: int = 7_000_000) -> None:
    """The paired t's boundaries alone, many studies: type-I across looks, the power loss, the expected size.

    The same studies as the engine's (the simulator's success draws, the planner's size, 3 repetitions, per-task
    pass-rate differences), tested with scipy's paired t at each look against the nominal p of the normal
    recursion's boundary, vectorised instead of through the comparison engine: a precise figure for the part the
    engine's table measures with fewer studies. Designs: the calibrated one and three others.
    """
    from analysis_lib.inference.sequential import look_sizes
    from analysis_lib.simulate.model import _draw
    from analysis_lib.stats import group_sequential as gs
    from analysis_lib.study.plan import Sequential

    t0 = time.perf_counter()
    n_tasks = planned_tasks()[0]
    diffs = {}
    for null in (True, False):
        eff = Effects.null() if null else Effects()
        rows = []
        for i in tqdm(range(studies), desc=f"paired t boundaries: {'null' if null else 'effects'}", leave=False):
            x = _draw(seed0 + 100_000 * (not null) + i, n_tasks, SEQ_REPS, (A, B), eff)["success"].mean(axis=2)
            rows.append(x[1] - x[0])
        diffs[null] = np.array(rows)
    print(f"\nPAIRED T BOUNDARIES ALONE: {studies} studies per scenario, {n_tasks} tasks x {SEQ_REPS} repetitions, "
          "scipy's paired t at each look. SIMULATED DATA.")
    print(f"{'design':38} {'type-I seq':>14} {'type-I fixed':>13} {'power seq':>10} {'power fixed':>12} {'loss (paired)':>14} "
          f"{'E[n] null':>10} {'E[n] effect':>12}")
    se = lambda x: 100 * float(np.std(x)) / math.sqrt(len(x))  # noqa: E731
    for label, looks, kind in (("O'Brien-Fleming, 4 looks (calibrated)", 4, "obrien_fleming"),
                               ("O'Brien-Fleming, 3 looks", 3, "obrien_fleming"),
                               ("O'Brien-Fleming, looks at 0.5, 1", [0.5, 1.0], "obrien_fleming"),
                               ("Pocock, 4 looks", 4, "pocock")):
        sizes = look_sizes(Sequential(looks=looks, efficacy=kind), n_tasks)
        nominal = 2 * sps.norm.sf(gs.efficacy_bounds(np.asarray(sizes) / n_tasks, 0.05, kind))
        res = {}
        for null, d in diffs.items():
            p = np.stack([_paired_t_p(d[:, :n]) for n in sizes], axis=1)
            hit = p <= nominal * (1 + 1e-12)
            look = np.where(hit.any(axis=1), np.argmax(hit, axis=1), len(sizes) - 1)
            res[null] = (hit.any(axis=1).astype(float), (p[:, -1] < 0.05).astype(float), np.asarray(sizes)[look] / n_tasks)
        (r0, f0, n0), (r1, f1, n1) = res[True], res[False]
        print(f"{label:38} {100 * r0.mean():6.2f} ± {100 * math.sqrt(r0.mean() * (1 - r0.mean()) / studies):.2f} "
              f"{100 * f0.mean():12.2f} {100 * r1.mean():10.1f} {100 * f1.mean():12.1f} "
              f"{100 * (f1 - r1).mean():7.2f} ± {se(f1 - r1):.2f} {100 * n0.mean():9.1f}% {100 * n1.mean():11.1f}%")
    print(f"(E[n]: share of the maximum; ± one Monte-Carlo SE; {time.perf_counter() - t0:.0f} s)")



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=1000,
                    help="simulated null studies per test (default 1000: a type-I SE of 0.7 points; 0 skips them)")
    ap.add_argument("--effect-studies", type=int, default=None,
                    help="simulated studies per test under the sample's effects (default: as --studies; the power "
                         "loss is paired, so 500 give it an SE under 1 point)")
    ap.add_argument("--tests", nargs="+", choices=[t for _, t, _ in SEQ_TESTS], default=None,
                    help="only these tests (default: all, in the order listed)")
    ap.add_argument("--boundary-check", type=int, default=0, metavar="N",
                    help="also check the paired t's boundaries alone, without the engine, on N simulated studies per "
                         "scenario and design (vectorised: 20000 take minutes; default 0 skips it)")
    args = ap.parse_args(argv)
    if args.studies:
        sequential_calibration(args.studies, args.effect_studies, args.tests)
    if args.boundary_check:
        paired_t_boundaries(args.boundary_check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
