"""Calibration of the sequential design in simulation (prints figures measured in this one run).

Each primary test monitored alone at four O'Brien-Fleming-type looks, on the number of tasks a planner
gives the fixed design for 80 % power at the sample's success effect: type-I error across all looks
(target: within 1 point of alpha), power beside the fixed design's on the same studies (target: within
2 points), and the expected spend under the sample's effects as a share of the fixed design's (target: at
least 30 % lower for tokens). Then the estimates adjusted for the stop, on the design that ran: P(estimate <=
truth) of the median-unbiased estimate beside the fixed-sample one (target 0.45-0.55), coverage of the repeated
and the stage-wise intervals beside the fixed-sample interval (target 95 +/- 2 %), and whether each look's
repeated interval agrees with its decision (excludes the null exactly when the look rejects), on every look of
every study; the same for the shipped two-hypothesis plan (Holm-shared, recycled); and type-I of final looks
forced early by the budget, at the fraction they reached. ``--boundary-check N`` also checks the paired t's
boundaries alone.

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
SHIPPED = ROOT / "params" / "analysis_plan_sequential.yaml"


def share(x: pd.Series) -> tuple[float, float]:
    """A proportion and its Monte-Carlo standard error."""
    x = pd.Series(x).dropna().astype(float)
    p = float(np.mean(x)) if len(x) else math.nan
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
def truths(null: bool) -> dict[str, dict[str, float]]:
    """Each row's estimand in the simulator's population, on the engine's scale.

    ``estimate``: the row's estimand (pass@1 and resolve-rate differences as proportions, the token change in %);
    ``rci``: what the repeated interval estimates (McNemar's: the discordant-pair odds ratio of the task-majority
    verdicts; the others: the estimand). Under the null every one is 0 (odds ratio 1): the profiles are
    exchangeable. Under the effects, pass@1 and the token change are the simulator's exact population values
    (:func:`analysis_lib.simulate.model.true_effects`: per-task log ratios are symmetric about log 0.8, so their
    pseudo-median is too); the majority verdicts' difference and odds ratio come from one study of 200,000 tasks.
    """
    from analysis_lib.simulate.model import true_effects

    if null:
        return {"paired_t": {"estimate": 0.0, "rci": 0.0}, "sign_flip": {"estimate": 0.0, "rci": 0.0},
                "wilcoxon_signed_rank": {"estimate": 0.0, "rci": 0.0}, "mcnemar_exact": {"estimate": 0.0, "rci": 1.0}}
    te = true_effects(Effects(), (A, B), A)[B]
    pass1 = te["pass_rate_diff_points"] / 100
    tokens = 100 * (te["token_ratio"] - 1)
    big = simulate_metrics(9, 200_000, SEQ_REPS, (A, B), Effects())
    p_maj = stats.pair_tasks(comparisons.usable_trials(big), "success", A, B, binary=True, how="majority")
    a_only, b_only = float(((p_maj["a"] > 0.5) & (p_maj["b"] < 0.5)).mean()), float(((p_maj["a"] < 0.5) & (p_maj["b"] > 0.5)).mean())
    return {"paired_t": {"estimate": pass1, "rci": pass1}, "sign_flip": {"estimate": pass1, "rci": pass1},
            "wilcoxon_signed_rank": {"estimate": tokens, "rci": tokens},
            "mcnemar_exact": {"estimate": b_only - a_only, "rci": b_only / a_only}}


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


@cache
def shipped_plan() -> plan_mod.AnalysisPlan:
    """The shipped sequential plan (two primary hypotheses, Holm-shared and recycled), bootstrap resamples cut."""
    d = plan_mod.load_plan(SHIPPED).model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = 100
    d["pairing"]["baseline"] = A
    d["tiers"]["secondary"] = {"correction": "none", "metrics": [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]}
    d["tiers"]["exploratory"] = {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]}
    return plan_mod.parse_plan(d, "calibration")


def _below(x: float, truth: float) -> float:
    """1 below the truth, 1/2 on it (a discrete estimate ties it), 0 above; NaN when there is no estimate."""
    if x is None or not np.isfinite(x):
        return math.nan
    # Within the root search's tolerance (1e-10) of the truth is a tie; lattice estimates differ by far more.
    return 1.0 if x < truth - 1e-9 else (0.5 if abs(x - truth) <= 1e-9 else 0.0)


def _covers(lo: float, hi: float, opened, truth: float) -> float:
    from analysis_lib.inference.sequential import interval_excludes

    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return math.nan
    return 0.0 if interval_excludes(float(lo), float(hi), opened if isinstance(opened, str) else None, truth) else 1.0


def _adjusted_rows(m: pd.DataFrame, plan: plan_mod.AnalysisPlan, null: bool) -> tuple[object, list[dict], int, int]:
    """Monitor one study with each look's repeated interval, adjust its estimates, and score them against the truth."""
    from analysis_lib.inference import sequential

    order = list(dict.fromkeys(m["task_id"].astype(str)))  # the simulator's tasks are exchangeable: any order is random
    sizes = sequential.look_sizes(plan.sequential, len(order))
    mon = sequential.monitor(m, plan, [(A, B)], order, sizes, len(order), final=True, intervals=True)
    adj = sequential.adjusted_estimates(m, plan, [(A, B)], order, sizes, len(order), mon)
    table = mon.table
    agree = [bool(r.crossed) == sequential.rci_excludes_null(r) for r in table.itertuples()]
    truth = truths(null)
    rows = []
    for r in adj.itertuples():
        test = sequential.plan_test(plan, r.metric)
        tv = truth[test]
        first = table[(table["metric"] == r.metric) & (table["status"] == "rejected")]["look"]
        rows.append({"metric": r.metric, "test": test, "rejected": r.decision.startswith("rejected"),
                     "mue_look": r.mue_look, "rejected_look": int(first.min()) if len(first) else None,
                     "level": r.level, "mue_below": _below(r.mue, tv["estimate"]),
                     "naive_below": _below(r.naive_estimate, tv["estimate"]),
                     "mue_covers": _covers(r.mue_ci_low, r.mue_ci_high, None, tv["estimate"]),
                     "rci_covers": _covers(r.rci_low, r.rci_high, r.rci_open, tv["rci"]),
                     "naive_covers": _covers(r.naive_ci_low, r.naive_ci_high, r.naive_ci_open, tv["estimate"])})
    return mon, rows, int(len(agree) - sum(agree)), len(agree)


def _sequential_study(job: tuple) -> dict:
    """One simulated study under the design: the look it stopped at, its decision, its spend, the fixed test, and
    the adjusted estimates scored against the truth."""
    seed, n_tasks, metric, test, reps, null = job
    plan = sequential_plan(metric, test, reps)
    m = simulate_metrics(seed, n_tasks, SEQ_REPS, (A, B), Effects.null() if null else Effects())
    mon, rows, disagree, looks = _adjusted_rows(m, plan, null)
    order = list(dict.fromkeys(m["task_id"].astype(str)))
    sizes = [lk["tasks"] for lk in mon.looks]
    cost = m.groupby("task_id")["total_cost_usd"].sum()
    used = float(cost.loc[order[: sizes[mon.stop_look - 1]]].sum())
    if mon.stop_look == 4 and test != "sign_flip":
        # The last look is the fixed analysis of every task by the same engine (the sign-flip row there holds the
        # exact p of the enumerated walk, the fixed analysis its Monte-Carlo p: that one is computed below).
        p_fixed = float(mon.table.loc[mon.table["look"] == mon.stop_look, "p_value"].iloc[0])
    else:
        fixed = comparisons.compare(m, plan, [(A, B)])
        p_fixed = float(fixed.loc[fixed["tier"] == "primary", "p_value"].iloc[0])
    return {**rows[0], "look": mon.stop_look, "spend": used / float(cost.sum()), "fixed_rejected": p_fixed < 0.05,
            "disagree": disagree, "looks": looks}


def _shipped_study(job: tuple) -> list[dict]:
    seed, n_tasks, null = job
    m = simulate_metrics(seed, n_tasks, SEQ_REPS, (A, B), Effects.null() if null else Effects())
    mon, rows, disagree, looks = _adjusted_rows(m, shipped_plan(), null)
    return [{**r, "any_rejected": any(x["rejected"] for x in rows), "disagree": disagree, "looks": looks} for r in rows]


def _pm(x: pd.Series, scale: float = 100.0, digits: int = 1) -> str:
    p, se = share(x)
    return f"{scale * p:.{digits}f} ± {scale * se:.{digits}f}" if np.isfinite(p) else "–"


def estimates_table(label: str, rows: dict[bool, pd.DataFrame]) -> list[str]:
    """The adjusted-estimate lines of one cell, null then effects."""
    out = []
    for null in (True, False):
        g = rows[null]
        out.append(f"{label + (' null' if null else ' effects'):44} {_pm(g['mue_below'], 1, 3):>15} {_pm(g['naive_below'], 1, 3):>15} "
                   f"{_pm(g['rci_covers']):>12} % {_pm(g['mue_covers']):>12} % {_pm(g['naive_covers']):>12} % "
                   f"{int(g['disagree'].sum()):>6} / {int(g['looks'].sum()):<6} "
                   f"{100 * float(g['mue_below'].isna().mean()):5.1f} %")
    return out


def sequential_calibration(studies: int, effect_studies: int | None = None, tests: list[str] | None = None,
                           seed0: int = 3_000_000, workers: int = 2, shipped: bool = True) -> None:
    """Type-I error across the looks, power against the fixed design, expected spend, and the adjusted estimates,
    with Monte-Carlo SEs.

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
    truth = {null: truths(null) for null in (True, False)}
    print("truths: " + "; ".join(
        f"{test} {'null' if null else 'effects'} {v['estimate']:+.4g}" + (f" (odds ratio {v['rci']:.3g})" if test == "mcnemar_exact" else "")
        for null in (True, False) for test, v in truth[null].items()))
    header = (f"{'test':36} {'type-I (all looks)':>18} {'power seq':>13} {'power fixed':>13} {'loss (paired)':>14} "
              f"{'E[spend] null':>14} {'E[spend] effect':>16} {'E[stop look] effect':>20}")
    est_header = (f"{'cell':44} {'P(MUE<=truth)':>15} {'P(naive<=truth)':>15} {'RCI covers':>14} {'MUE CI covers':>14} "
                  f"{'naive CI covers':>14} {'RCI disagrees / looks':>22} {'no MUE':>7}")
    est_lines: list[str] = []
    print(header)
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
            est_lines += estimates_table(f"{metric}: {test}", rows)
        print("(spend: share of the fixed design's spend, the same studies run to full size; ± one Monte-Carlo SE; power seq "
              "and fixed come from the same simulated studies)")
        print("\nESTIMATES AFTER THE STOP (the same studies): median-unbiased estimate (MUE, stage-wise ordering on the design "
              "that ran) and fixed-sample ('naive') estimate at the stop, P(estimate <= truth) with a tie counted 1/2 "
              "(target 0.45-0.55); coverage of the truth by the repeated interval (RCI, at the row's decision look; McNemar: "
              "of the discordant-pair odds ratio), the stage-wise interval and the fixed-sample interval (target 95 ± 2 %); "
              "looks whose repeated interval disagrees with the look's decision (excludes the null iff the look rejects); "
              "share of studies without an MUE.")
        print(est_header)
        for line in est_lines:
            print(line, flush=True)
        if shipped:
            plan = shipped_plan()
            rows = {}
            for null in (True, False):
                n = studies if null else effect_studies
                jobs = [(seed0 + 90_000 + 5_000 * null + i, n_tasks, null) for i in range(n)]
                got = list(tqdm(pool.imap(_shipped_study, jobs, chunksize=4), total=n,
                                desc=f"shipped plan {'null' if null else 'effects'}", leave=False))
                rows[null] = pd.DataFrame([r for study in got for r in study])
            print(f"\nSHIPPED PLAN ({SHIPPED.relative_to(ROOT)}: {', '.join(f'{s.id} ({s.test})' for s in plan.tiers.primary.metrics)}, "
                  f"Holm-shared alpha {plan.alpha}, recycled; {plan.sequential.looks} looks), {n_tasks} tasks, the same "
                  "scenarios. Family-wise type-I: "
                  f"{_pm(rows[True].groupby(rows[True].index // 2)['any_rejected'].first(), 100, 2)} %.")
            print(f"{'row':44} {'rejected':>14} {'level at stop':>14} {'MUE look = crossing':>20}")
            for null in (True, False):
                for metric, g in rows[null].groupby("metric", sort=False):
                    rej = g[g["rejected"]]
                    same = (rej["mue_look"] == rej["rejected_look"]).sum()
                    print(f"{metric + (' null' if null else ' effects'):44} {_pm(g['rejected']):>12} % "
                          f"{g['level'].mean():14.4f} {int(same):>10} / {len(rej):<8}")
            print(est_header)
            for metric in rows[True]["metric"].unique():
                for line in estimates_table(f"{metric} (shipped plan)", {n_: r[r["metric"] == metric] for n_, r in rows.items()}):
                    print(line, flush=True)
            print("(a row's intervals are at its own level, 1 - the alpha it was tested at: 97.5 % while the other row is "
                  "open, 95 % once it is rejected; 'MUE look = crossing': rejected rows whose adjusted estimate stops at "
                  "the look its rejection was found, the rest crossing earlier at a level raised later by recycling)")
    print(f"({time.perf_counter() - t0:.0f} s)")


def _exact_error(job: tuple) -> dict:
    """One null study's exact type-I error given its data, for the exact tests: the chance that the four-look design
    rejects over the sign patterns (sign-flip) or discordant directions (McNemar) the null leaves random, and the
    same for the fixed test at full size (the walk's own accounting: no Monte-Carlo error within the study)."""
    from analysis_lib.inference.comparisons import usable_trials
    from analysis_lib.stats import group_sequential as gs

    seed, n_tasks, test = job
    m = usable_trials(simulate_metrics(seed, n_tasks, SEQ_REPS, (A, B), Effects.null()))
    order = list(dict.fromkeys(m["task_id"].astype(str)))
    sizes = [math.ceil(f * n_tasks - 1e-9) for f in (0.25, 0.5, 0.75, 1.0)]
    t = np.asarray(sizes, dtype=float) / n_tasks
    if test == "sign_flip":
        p = stats.pair_tasks(m, "success", A, B, binary=True, how="mean").set_index("task_id")
        d = (p["b"] - p["a"]).reindex(order).dropna()
        inc = [np.abs(d.iloc[a:b].to_numpy(float)) for a, b in zip([0, *sizes[:-1]], sizes, strict=True)]
        seq = gs.sign_flip_bounds(inc, t, 0.05, "obrien_fleming", final=True)
        fixed = gs.sign_flip_bounds([np.abs(d.to_numpy(float))], [1.0], 0.05, "obrien_fleming", final=True)
    else:
        p = stats.pair_tasks(m, "success", A, B, binary=True, how="majority").set_index("task_id").reindex(order).dropna()
        disc = np.cumsum(((p["a"] > 0.5) != (p["b"] > 0.5)).to_numpy())
        counts = [int(disc[min(s_, len(disc)) - 1]) for s_ in sizes]
        seq = gs.mcnemar_bounds(counts, t, 0.05, "obrien_fleming", final=True)
        fixed = gs.mcnemar_bounds(counts[-1:], [1.0], 0.05, "obrien_fleming", final=True)
    return {"test": test, "sequential": seq[-1]["spent"] if seq else math.nan,
            "fixed": fixed[-1]["spent"] if fixed else math.nan}


def exact_type_one(studies: int, n_tasks: int | None = None, seed0: int = 3_000_000, workers: int = 2) -> None:
    """The exact tests' type-I error given each null study's data, averaged over studies (the same null studies as
    the table above): a precise figure for what counting rejections measures with a Monte-Carlo error of a
    point, beside the fixed exact test's own size on the same data."""
    from multiprocessing import Pool

    n_tasks = n_tasks or planned_tasks()[0]
    index = {test: j for j, (_, test, _) in enumerate(SEQ_TESTS)}
    jobs = [(seed0 + 10_000 * index[test] + 5_000 + i, n_tasks, test) for test in ("sign_flip", "mcnemar_exact")
            for i in range(studies)]
    with Pool(workers) as pool:
        got = pd.DataFrame(list(tqdm(pool.imap(_exact_error, jobs, chunksize=8), total=len(jobs), desc="exact type-I",
                                     leave=False)))
    print(f"\nEXACT TESTS, TYPE-I GIVEN THE DATA: the chance each null study's design rejects over what the null leaves "
          f"random (sign patterns; directions of the discordant tasks), averaged over {studies} null studies "
          f"({n_tasks} tasks x {SEQ_REPS}), four O'Brien-Fleming-type looks, alpha 0.05; beside it the fixed exact "
          "test at full size on the same data. SIMULATED DATA.")
    print(f"{'test':22} {'sequential (4 looks)':>22} {'fixed, full size':>18}")
    for test, g in got.groupby("test", sort=False):
        s_, f_ = g["sequential"], g["fixed"]
        print(f"{test:22} {100 * s_.mean():14.2f} ± {100 * s_.std() / math.sqrt(len(s_)):.2f} % "
              f"{100 * f_.mean():10.2f} ± {100 * f_.std() / math.sqrt(len(f_)):.2f} %")
    print("(± one Monte-Carlo SE over studies; the exact tests never exceed alpha given the data, and their discreteness "
          "(few discordant tasks for McNemar's) keeps them below it, sequential or not)")


def forced_stops(studies: int, engine_studies: int, seed0: int = 8_000_000, workers: int = 2) -> None:
    """Type-I of a final look the budget forces before the planned end: boundaries at the fraction reached against
    the old rule (the forced look taken as fraction 1), normal theory and simulated paired t; the engine's own tests
    under the new rule."""
    from multiprocessing import Pool

    from analysis_lib.stats import group_sequential as gs

    t0 = time.perf_counter()
    reached = np.array([0.25, 0.5, 0.625])  # of a 4-look plan at 0.25, 0.5, 0.75, 1
    print(f"\nFINAL LOOKS FORCED BY THE BUDGET: 40 tasks planned (looks after 10, 20, 30, 40), the budget ends the study "
          f"at 25 tasks after the looks at 10 and 20 (information fraction {reached[-1]}). Type-I across the looks "
          "(alpha 0.05). SIMULATED DATA.")
    print(f"{'design':22} {'rule':38} {'normal theory':>14} {'paired t, ' + str(studies) + ' studies':>26}")
    diffs = np.random.default_rng(seed0).standard_normal((studies, 25))  # normal data: the paired t is exact
    for kind in ("obrien_fleming", "pocock"):
        new = gs.efficacy_bounds(reached, 0.05, kind, final=True)
        old = gs.efficacy_bounds(np.r_[reached[:-1], 1.0], 0.05, kind, final=True)
        for label, c in (("fraction reached, spends the rest", new), ("taken as fraction 1 (before)", old)):
            th = gs.crossing_probabilities(c, -c, reached)
            nominal = 2 * sps.norm.sf(c)
            p = np.stack([_paired_t_p(diffs[:, :n]) for n in (10, 20, 25)], axis=1)
            rej = (p <= nominal * (1 + 1e-12)).any(axis=1)
            print(f"{kind:22} {label:38} {100 * (th[0].sum() + th[1].sum()):12.2f} % {_pm(pd.Series(rej), 100, 2):>22} %")
    jobs = [(seed0 + i, test) for test in ("paired_t", "sign_flip", "mcnemar_exact") for i in range(engine_studies)]
    with Pool(workers) as pool:
        got = pd.DataFrame(list(tqdm(pool.imap(_forced_study, jobs, chunksize=4), total=len(jobs), desc="forced stops",
                                     leave=False)))
    for test, g in got.groupby("test", sort=False):
        print(f"{'engine: ' + test:22} {'fraction reached, spends the rest':38} {'':>14} "
              f"{_pm(g['rejected'], 100, 2):>22} %  ({len(g)} studies, simulator's null)")
    print(f"({time.perf_counter() - t0:.0f} s)")


def _forced_study(job: tuple) -> dict:
    from analysis_lib.inference import sequential

    seed, test = job
    metric, reps = ("success", "majority") if test == "mcnemar_exact" else ("success", "all")
    plan = sequential_plan(metric, test, reps)
    m = simulate_metrics(seed, 25, SEQ_REPS, (A, B), Effects.null())
    order = list(dict.fromkeys(m["task_id"].astype(str)))
    mon = sequential.monitor(m, plan, [(A, B)], order, [10, 20, 25], 40, final=True, ended_by="budget")
    return {"test": test, "rejected": bool((mon.table["status"] == "rejected").any())}


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
    ap.add_argument("--no-shipped", action="store_true", help="skip the shipped two-hypothesis plan")
    ap.add_argument("--forced", type=int, default=20_000, metavar="N",
                    help="null studies of the budget-forced final look, vectorised paired t (default 20000; 0 skips "
                         "it); the engine's tests get N / 50 each")
    ap.add_argument("--exact", type=int, default=None, metavar="N",
                    help="null studies for the exact tests' type-I given the data (default: as --studies; 0 skips it)")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--boundary-check", type=int, default=0, metavar="N",
                    help="also check the paired t's boundaries alone, without the engine, on N simulated studies per "
                         "scenario and design (vectorised: 20000 take minutes; default 0 skips it)")
    args = ap.parse_args(argv)
    if args.studies:
        sequential_calibration(args.studies, args.effect_studies, args.tests, workers=args.workers,
                               shipped=not args.no_shipped)
    exact = args.studies if args.exact is None else args.exact
    if exact:
        exact_type_one(exact, workers=args.workers)
    if args.forced:
        forced_stops(args.forced, max(args.forced // 50, 1), workers=args.workers)
    if args.boundary_check:
        paired_t_boundaries(args.boundary_check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
