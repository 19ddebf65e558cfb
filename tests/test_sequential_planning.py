"""The planner's sequential rows: maximum and expected tasks and spend beside the fixed design, checked against
normal theory from statsmodels and against simulation of the look-by-look statistic."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.power import normal_power

from analysis_lib.inference import sequential
from analysis_lib.stats import group_sequential as gs
from analysis_lib.study.plan import Sequential

ROOT = Path(__file__).resolve().parents[1]


def _simulated_stop(d: gs.Design, sizes: list[int], drift_per_task: float, n: int = 200_000, seed: int = 3):
    """Brownian motion observed after each look's tasks: the tasks at the stop and whether it rejected upwards."""
    rng = np.random.default_rng(seed)
    inc = np.diff(np.r_[0, sizes]).astype(float)
    s = np.cumsum(rng.standard_normal((n, len(sizes))) * np.sqrt(inc) + drift_per_task * inc, axis=1)
    z = s / np.sqrt(np.asarray(sizes, dtype=float))
    stop = (np.abs(z) >= d.efficacy) | (z < d.lower())
    stop[:, -1] = True
    look = np.argmax(stop, axis=1)
    up = z[np.arange(n), look] >= d.efficacy[look]
    return np.asarray(sizes)[look], up


@pytest.mark.parametrize("futility", ["none", "pocock"])
def test_sequential_rows_from_a_fixed_design_agree_with_simulation(futility):
    seq = Sequential(looks=4, futility=futility)
    rows = sequential.planning(seq, 0.05, n_fixed=143, fixed_power=0.8, cost_per_task=6.0, cost_per_task_p90=11.0)
    fixed, sq = rows.iloc[0], rows.iloc[1]
    assert (fixed["design"], fixed["n_max"], fixed["expected_n_effect"], fixed["power"]) == ("fixed", 143, 143, 0.8)
    # the fixed design's drift: statsmodels' normal power at 143 tasks is 0.8 there
    drift = sequential._fixed_drift(0.8, 0.05)
    assert normal_power(drift / math.sqrt(143), 143, 0.05) == pytest.approx(0.8, abs=1e-9)
    # the fewest tasks that give the sequential design the fixed design's power at the same effect per task
    n = int(sq["n_max"])
    assert sq["looks"] == sequential.look_sizes(seq, n) and sq["power"] >= 0.8
    smaller = gs.design(np.asarray(sequential.look_sizes(seq, n - 1), float) / (n - 1), 0.05, "obrien_fleming",
                        None if futility == "none" else futility, beta=0.2)
    assert gs.stopping(smaller, drift * math.sqrt((n - 1) / 143))["power"] < 0.8
    if futility == "none":
        assert 143 < n <= math.ceil(143 * 1.03)  # O'Brien-Fleming-type, 4 looks: an inflation near 1.02
    # expected tasks under the null and under the planned effect, and the power: simulation of the looks
    d = gs.design(np.asarray(sq["looks"], float) / n, 0.05, "obrien_fleming", None if futility == "none" else futility,
                  beta=0.2)
    for per_task, key in ((0.0, "expected_n_null"), (drift / math.sqrt(143), "expected_n_effect")):
        tasks, up = _simulated_stop(d, sq["looks"], per_task)
        assert sq[key] == pytest.approx(tasks.mean(), abs=4 * tasks.std() / math.sqrt(len(tasks)))
        if per_task:
            assert sq["power"] == pytest.approx(up.mean(), abs=4 * math.sqrt(0.16 / len(up)))
    assert sq["spend_max_median"] == 6.0 * n and sq["spend_max_p90"] == 11.0 * n
    assert sq["expected_spend_effect"] == pytest.approx(6.0 * sq["expected_n_effect"])
    if futility == "pocock":  # a futility bound stops most null studies early
        assert sq["expected_n_null"] < 0.8 * n


def test_sequential_rows_from_a_schedule():
    seq = Sequential(looks=[0.25, 0.5, 0.75, 1.0], efficacy="pocock")
    rows = sequential.planning(seq, 0.025, n_max=40, cost_per_task=9.0)
    fixed, sq = rows.iloc[0], rows.iloc[1]
    assert sq["looks"] == [10, 20, 30, 40] and sq["n_max"] == fixed["n_max"] == 40
    d = gs.design([0.25, 0.5, 0.75, 1.0], 0.025, "pocock", beta=0.2)
    assert sq["power"] == pytest.approx(0.8, abs=1e-6)  # the planned effect is the design's own drift
    # the fixed design runs every task: its power at that effect, by statsmodels' normal power
    assert fixed["power"] == pytest.approx(normal_power(d.drift / math.sqrt(40), 40, 0.025), abs=1e-9)
    assert fixed["expected_spend_null"] == 360.0 and math.isnan(fixed["spend_max_p90"])
    assert sq["expected_n_effect"] == pytest.approx(40 * gs.stopping(d, d.drift)["expected_fraction"])
    assert sq["expected_n_effect"] < 0.75 * 40 < sq["expected_n_null"]  # Pocock: early stops under the effect
    with pytest.raises(ValueError, match="either n_fixed"):
        sequential.planning(seq, 0.05, n_fixed=10, n_max=10)


@pytest.fixture(scope="module")
def pilot_study():
    """A simulated pilot (SIMULATED: 24 tasks x 3 repetitions) and the shipped sequential plan, bootstrap kept small."""
    import yaml

    from analysis_lib.inference.comparisons import usable_trials
    from analysis_lib.simulate.model import simulate_metrics
    from analysis_lib.study.plan import parse_plan

    d = yaml.safe_load((ROOT / "params" / "analysis_plan_sequential.yaml").read_text())
    d["bootstrap"]["n_resamples"] = 200
    metrics = simulate_metrics(20261121, 24, 3)
    return metrics, usable_trials(metrics), parse_plan(d)


@pytest.mark.slow  # the planner's exact McNemar search, its token simulation and two group-sequential designs per row: ~6 s
def test_comparison_report_plans_the_sequential_design_from_the_pilot(pilot_study):
    from analysis_lib import Study, analyse_comparisons, stats
    from analysis_lib.inference import power
    from analysis_lib.report.comparison_report import comparison_report, sequential_planning
    from analysis_lib.study.plan import PlanCheck, plan_hash

    metrics, trials, plan = pilot_study
    pairs = [("text", "codegraph")]
    rows, skipped = sequential_planning(trials, pairs, plan)
    alpha = 0.05 / 2  # two primary metrics, one pair: Holm's first level
    assert skipped == [] and list(rows["design"]) == ["fixed", "sequential"] * 2 and (rows["alpha"] == alpha).all()
    succ, tok = rows[rows["analysis"].str.startswith("success")], rows[rows["analysis"].str.startswith("total_tokens")]
    # the fixed designs are the planner's own answers at that level
    sens = power.sensitivity(power.pilot_of(trials, "text", "codegraph"), 0.10, alpha=alpha)
    ref = sens[(sens["analysis"] == "all repetitions: paired t") & sens["nuisance"].str.endswith("(pilot)")].iloc[0]
    assert succ.iloc[0]["n_max"] == ref["n_tasks"] and succ.iloc[0]["power"] == ref["power_at_n"]
    sim = stats.plan_sample_size(stats.pair_tasks(trials, "total_tokens", "text", "codegraph"), effect=0.20,
                                 kind="continuous", n_sim=400, alpha=alpha, seed=plan.bootstrap.seed)
    assert tok.iloc[0]["n_max"] == sim["n_required"].iloc[0]
    # the sequential rows: sequential.planning from those, spend at the pilot's cost per run of both profiles
    spend = stats.project_spend(trials, n_tasks=1, repetitions=3, metrics=["total_cost_usd"]).set_index("profile")
    cost = 3 * (spend.loc["text", "per_run_median"] + spend.loc["codegraph", "per_run_median"])
    want = sequential.planning(plan.sequential, alpha, n_fixed=int(ref["n_tasks"]), fixed_power=float(ref["power_at_n"]),
                               cost_per_task=cost)
    got = succ.iloc[1]
    assert got["n_max"] == want.iloc[1]["n_max"] and got["expected_n_effect"] == pytest.approx(want.iloc[1]["expected_n_effect"])
    assert got["spend_max_median"] == pytest.approx(cost * got["n_max"])
    assert got["expected_spend_effect"] < got["spend_max_median"] and got["power"] >= ref["power_at_n"]
    # the report shows the section only for a sequential plan
    texts = {}
    for p in (plan, plan.model_copy(update={"sequential": None})):
        st = Study.from_table(metrics, baseline="text", plan=PlanCheck(p, plan_hash(p), "plan.yaml"), simulated=True)
        texts[p.sequential is not None] = comparison_report(st, analyse_comparisons(st, compare_pair=("text", "codegraph")))
    assert "## Planning the sequential design" not in texts[False]
    section = texts[True].split("## Planning the sequential design")[1]
    row = f"| codegraph vs text | success: sign_flip (power of the paired t) | sequential | {', '.join(map(str, got['looks']))} "
    assert row in section and f"| {got['n_max']} |" in section
