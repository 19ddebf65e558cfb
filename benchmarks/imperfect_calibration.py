"""Calibration of the estimands beside intention to treat in simulation (prints figures measured in this one run).

Imperfect studies (``analysis_lib.simulate.imperfect.simulate_imperfect``: known non-compliance and known
infrastructure-failure mechanisms). CACE: the share of 95 % intervals of the effect among trials that use
MCP (:mod:`analysis_lib.inference.beside_itt.compliance`) that contain the true effect among compliers, for pass/fail and
tokens, at high and low compliance (delta method and Fieller's interval), beside the naive
users-vs-baseline interval. Target: 95 +/- 2 %. Bounds: infrastructure failures concentrated in the MCP
arm and on failing trials (not at random), tokens capped by the runner's per-trial budget; how often the planned
interval, the bounds (:mod:`analysis_lib.inference.beside_itt.bounds`) and their outer interval contain the true
effect, and how often the bounds contain the study's own full-data estimate: 100 % for pass/fail and for a
continuous metric whose declared support holds every lost value (the budget cap), an assumption's success rate for
a support stated as a multiple of the task's largest observed value, and no bound at all without a support.

Run from the repository root: ``python benchmarks/imperfect_calibration.py [--studies 1000]``.
SIMULATED DATA: every figure describes the simulator's agents, by design.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib import stats  # noqa: E402
from analysis_lib.inference import comparisons  # noqa: E402
from analysis_lib.inference.beside_itt import bounds as infra_bounds  # noqa: E402
from analysis_lib.inference.beside_itt import compliance  # noqa: E402
from analysis_lib.simulate.imperfect import Imperfections, imperfect_truth, simulate_imperfect  # noqa: E402
from analysis_lib.study import plan as plan_mod  # noqa: E402

PLANS = {"majority (default plan)": ROOT / "params" / "analysis_plan.yaml"}


def share(x: pd.Series) -> tuple[float, float]:
    """A proportion and its Monte-Carlo standard error."""
    p = float(np.mean(x))
    return p, math.sqrt(p * (1 - p) / max(len(x), 1))


CACE_SCENARIOS = {"high compliance (0.85)": Imperfections(compliance=0.85),
                  "low compliance (0.35)": Imperfections(compliance=0.35)}
BOUNDS_SCENARIO = Imperfections(compliance=1.0, infra_rate_a=0.03, infra_rate_b=0.12, infra_selection=1.5,
                                token_cap=600_000)
# The supports a plan can declare for total_tokens: the runner's per-trial budget (every value lies in it), a
# multiple of the task's largest observed value (an assumption), and none (the bound is unbounded).
SUPPORTS = {"budget cap [0, 600,000]": {"high": 600_000}, "[0, 1.5 x task max]": {"high_times_task_max": 1.5},
            "none declared": None}


def cace_coverage(studies: int, seed0: int = 3_000_000) -> None:
    """Coverage of the CACE interval (and of the naive interval) of the true effect among compliers."""
    print(f"\nCACE: {studies} studies per scenario, 24 tasks x 3 repetitions, B offered MCP; compliance depends on "
          "the trial's latent difficulty (users are the harder trials), the effect acts on users only.")
    print(f"{'scenario':24} {'metric':13} {'true CACE':>10} {'CACE coverage':>16} {'Fieller used':>13} "
          f"{'naive coverage':>16} {'mean share used':>16}")
    for name, imp in CACE_SCENARIOS.items():
        truth = imperfect_truth(imp)
        true = {"success": truth["cace_success"][0], "total_tokens": 100 * math.expm1(truth["cace_log_tokens"][0])}
        rows = []
        for i in tqdm(range(studies), desc=f"CACE, {name}", unit="study", leave=False):
            m = simulate_imperfect(seed0 + i, 24, 3, imp)
            rows.append(compliance.compliance_table(m, [("A", "B")], list(true), {"A": False, "B": True}).assign(study=i))
        t = pd.concat(rows, ignore_index=True)
        share_mean = t.loc[(t["estimand"] == "share_used") & (t["metric"] == "success"), "estimate"].mean()
        for metric, value in true.items():
            c = t[(t["metric"] == metric) & (t["estimand"] == "cace")]
            n = t[(t["metric"] == metric) & (t["estimand"] == "naive_users")]
            cv, cv_se = share((c["ci_low"] <= value) & (value <= c["ci_high"]))
            nv, nv_se = share((n["ci_low"] <= value) & (value <= n["ci_high"]))
            fieller = c["interval"].fillna("").str.startswith("Fieller").mean()
            shown = f"{100 * value:+.2f} pp" if metric == "success" else f"{value:+.2f} %"
            print(f"{name:24} {metric:13} {shown:>10} {100 * cv:9.1f} ± {100 * cv_se:.1f} % {100 * fieller:11.1f} % "
                  f"{100 * nv:9.1f} ± {100 * nv_se:.1f} % {share_mean:16.3f}")
        err = truth["cace_success"][1]
        print(f"{'':24} (true CACE of success by {4_000_000:,} simulated trials, Monte-Carlo error {100 * err:.2f} pp)")


def bounds_plan(support: dict | None = None) -> plan_mod.AnalysisPlan:
    """The shipped plan's primary tier for pass/fail and tokens (200 resamples: the bootstrap only serves the
    total-change view, which the bounds do not read), with ``support`` declared for total_tokens."""
    d = plan_mod.load_plan(PLANS["majority (default plan)"]).model_dump(mode="json")
    d["tiers"]["primary"]["metrics"] = [{"id": "success", "test": "mcnemar_exact"},
                                        {"id": "total_tokens", "test": "wilcoxon_signed_rank"}]
    d["tiers"]["secondary"] = {"correction": "none", "metrics": [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]}
    d["tiers"]["exploratory"] = {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]}
    d["tiers"]["sensitivity"], d["hypotheses"], d["bootstrap"]["n_resamples"] = None, [], 200
    if support is not None:
        d["beside_itt"] = {"support": {"total_tokens": support}}
    return plan_mod.parse_plan(d, "bounds calibration plan")


def full_data(m: pd.DataFrame) -> pd.DataFrame:
    """The study as it would have been without infrastructure failures."""
    return m.assign(success=m["success_full"], total_tokens=m["total_tokens_full"], infra_error=False)


def bounds_truth(imp: Imperfections) -> dict[str, float]:
    """The planned estimands without failures, from one study of 20,000 tasks (its own estimates: the resolve-rate
    difference, and the Hodges-Lehmann token change from a million random Walsh averages of per-task log ratios;
    the cap makes the change a little smaller than the uncapped ratio's)."""
    big = full_data(simulate_imperfect(11, 20_000, 3, imp))
    p = stats.pair_tasks(big, "success", "A", "B", binary=True, how="majority")
    t = stats.pair_tasks(big, "total_tokens", "A", "B", binary=False, how="median")
    d = np.log(t["b"].to_numpy(float) / t["a"].to_numpy(float))
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, d.size, 1_000_000), rng.integers(0, d.size, 1_000_000)
    return {"success": float((p["b"] - p["a"]).mean()), "total_tokens": 100 * math.expm1(float(np.median((d[i] + d[j]) / 2)))}


def _bounds_study(seed: int) -> list[dict]:
    imp = BOUNDS_SCENARIO
    m = simulate_imperfect(seed, 24, 3, imp)
    lost = m.groupby("profile")["infra_error"].mean()
    rows = []
    for label, support in SUPPORTS.items():
        plan = bounds_plan(support)
        planned = comparisons.compare(m, plan, [("A", "B")])
        b = infra_bounds.infra_bounds(m, planned, plan).set_index("metric")
        full = comparisons.compare(full_data(m), plan, [("A", "B")]).set_index("metric")
        for metric in ("success", "total_tokens"):
            if metric == "success" and label != next(iter(SUPPORTS)):
                continue  # pass/fail needs no support: one row is enough
            rows.append({"metric": metric, "support": "pass/fail: fail and pass" if metric == "success" else label,
                         "lost_a": lost["A"], "lost_b": lost["B"],
                         "unbounded": bool(infra_bounds.is_unbounded(b.loc[metric])),
                         **b.loc[metric, ["estimate", "ci_low", "ci_high", "bound_low", "bound_high", "bounds_ci_low",
                                          "bounds_ci_high", "n_affected_a", "n_affected_b"]].to_dict(),
                         "full": full.loc[metric, "estimate"]})
    return rows


def bounds_coverage(studies: int, seed0: int = 4_000_000, workers: int = 2) -> None:
    """How often the planned interval, the bounds and their outer interval contain the true effect, and the bounds
    the study's own full-data estimate, per declared support."""
    from multiprocessing import Pool

    imp = BOUNDS_SCENARIO
    truth = bounds_truth(imp)
    with Pool(workers) as pool:
        got = list(tqdm(pool.imap(_bounds_study, [seed0 + i for i in range(studies)], chunksize=4), total=studies,
                        desc="bounds", unit="study", leave=False))
    t = pd.DataFrame([r for study in got for r in study])
    print(f"\nBounds: {studies} studies, 24 tasks x 3 repetitions; infrastructure failures at "
          f"{100 * t['lost_a'].mean():.1f} % of A's and {100 * t['lost_b'].mean():.1f} % of B's trials, failing trials "
          f"{math.exp(imp.infra_selection):.1f}x as likely to be lost (odds); tokens capped at {imp.token_cap:,.0f} per "
          "trial (the runner's budget).")
    print(f"{'metric':13} {'support':26} {'truth':>9} {'planned CI covers':>18} {'bounds contain':>15} "
          f"{'outer CI covers':>16} {'bounds contain own full-data estimate':>38} {'unbounded':>10}")
    for (metric, support), g in t.groupby(["metric", "support"], sort=False):
        value = truth[metric]
        shown = f"{100 * value:+.2f} pp" if metric == "success" else f"{value:+.1f} %"
        pc, pc_se = share((g["ci_low"] <= value) & (value <= g["ci_high"]))
        hit = g[(g["n_affected_a"] + g["n_affected_b"]) > 0]  # studies that lost a trial
        given = hit[~hit["unbounded"]]
        if len(given):
            bc, bc_se = share((given["bound_low"] <= value) & (value <= given["bound_high"]))
            oc, oc_se = share((given["bounds_ci_low"] <= value) & (value <= given["bounds_ci_high"]))
            own, own_se = share((given["bound_low"] <= given["full"] + 1e-9) & (given["full"] - 1e-9 <= given["bound_high"]))
            cells = (f"{100 * bc:8.1f} ± {100 * bc_se:.1f} % {100 * oc:9.1f} ± {100 * oc_se:.1f} % "
                     f"{100 * own:30.1f} ± {100 * own_se:.1f} %")
        else:
            cells = f"{'no bound':>15} {'no bound':>16} {'no bound (no support declared)':>38}"
        print(f"{metric:13} {support:26} {shown:>9} {100 * pc:11.1f} ± {100 * pc_se:.1f} % {cells} "
              f"{100 * hit['unbounded'].mean():8.1f} %")
    first = t[t["metric"] == "success"]
    print(f"(bounds columns: the {int(((first['n_affected_a'] + first['n_affected_b']) > 0).sum())} of {studies} studies "
          "that lost a trial; a study that lost none has the planned estimate as both bounds)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=1000,
                    help="simulated studies: twice as many for the CACE, half as many for the bounds (default 1000)")
    ap.add_argument("--workers", type=int, default=2, help="processes for the bounds (default 2)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print("SIMULATED DATA: every figure below describes the simulator's agents, by design.")
    cace_coverage(2 * args.studies)  # cheap: twice the studies, for a smaller Monte-Carlo error
    bounds_coverage(max(args.studies // 2, 1), workers=args.workers)  # each study reruns the planned tests ~20 times
    print(f"\n(± is one Monte-Carlo standard error; {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
