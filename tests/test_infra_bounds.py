"""Infrastructure failures as bounds: the affected trials imputed both ways, the planned test rerun by the engine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis_lib import stats
from analysis_lib.inference.beside_itt import bounds as IB
from analysis_lib.inference.comparisons import compare
from analysis_lib.simulate.imperfect import Imperfections, simulate_imperfect
from analysis_lib.study import plan as P


def _plan(metrics: list[dict] | None = None) -> P.AnalysisPlan:
    d = P.load_plan().model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = 200
    if metrics is not None:
        d["tiers"]["primary"]["metrics"] = metrics
    return P.parse_plan(d)


def _study(outcomes: dict[str, tuple[list, list]]) -> pd.DataFrame:
    """One repetition per task; ``None`` is an infrastructure error."""
    rows = []
    for task, (a, b) in outcomes.items():
        for prof, v in (("A", a), ("B", b)):
            rows.append({"profile": prof, "task_id": task, "repetition": 1, "success": v, "infra_error": v is None,
                         "exception": "DaytonaError: sandbox lost" if v is None else None,
                         "total_tokens": 1000.0, "total_cost_usd": 0.01})
    return pd.DataFrame(rows)


def test_pass_fail_bounds_by_hand():
    # 10 tasks: 4 pass in both, 2 fail in both, 2 pass only in B, 1 only in A; one task lost in B.
    spec = {f"t{i}": (True, True) for i in range(4)} | {f"f{i}": (False, False) for i in range(2)}
    spec |= {"b1": (False, True), "b2": (False, True), "a1": (True, False), "lost": (True, None)}
    m = _study(spec)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    comp = compare(m, plan, [("A", "B")])
    b = IB.infra_bounds(m, comp, plan).iloc[0]
    # Planned: 9 paired tasks, B wins 2, A wins 1 -> +1/9. Lower: the lost B trial fails (A passed) -> (2 - 2)/10 = 0.
    # Upper: it passes -> (2 - 1)/10 = +0.1.
    assert b["estimate"] == pytest.approx(1 / 9) and b["n_pairs"] == 9
    assert b["bound_low"] == pytest.approx(0.0) and b["bound_high"] == pytest.approx(0.1)
    assert b["n_pairs_imputed"] == 10 and (b["n_affected_a"], b["n_affected_b"]) == (0, 1)
    assert b["reasons_b"] == "infrastructure error: DaytonaError ×1" and b["worst_case"] == "low"
    # Each bound carries the engine's own interval (Tango) for the imputed data.
    tango = stats.tango_interval(2, 2, 10).iloc[0]
    assert (b["bound_low_ci_low"], b["bound_low_ci_high"]) == pytest.approx((tango["ci_low"], tango["ci_high"]))


def test_a_note_when_the_bounds_include_zero_while_the_planned_interval_excludes_it():
    spec = {f"w{i}": (False, True) for i in range(12)} | {f"s{i}": (True, True) for i in range(4)}
    spec |= {f"x{i}": (True, None) for i in range(12)}  # twelve B trials lost, all on tasks A passed
    m = _study(spec)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    assert b["ci_low"] > 0 and b["bound_low"] <= 0 <= b["bound_high"]
    assert "depends on the trials lost" in b["note"]


def test_continuous_bounds_impute_each_arms_observed_extremes():
    rng = np.random.default_rng(4)
    m = _study({f"t{i}": (True, True) for i in range(12)})
    m["total_tokens"] = np.exp(rng.normal(11, 0.3, len(m)))
    lost = m.index[(m["profile"] == "B") & (m["task_id"] == "t3")]
    m.loc[lost, ["infra_error", "exception"]] = [True, "RuntimeError: container died"]
    m.loc[lost, "total_tokens"] = np.nan
    plan = _plan([{"id": "total_tokens", "test": "wilcoxon_signed_rank"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    observed_b = m.loc[(m["profile"] == "B") & ~m["infra_error"], "total_tokens"]
    for side, value in (("bound_low", observed_b.min()), ("bound_high", observed_b.max())):
        imputed = m.copy()
        imputed.loc[lost, ["total_tokens", "infra_error"]] = [value, False]
        assert b[side] == pytest.approx(compare(imputed, plan, [("A", "B")]).iloc[0]["estimate"])
    assert b["bound_low"] <= b["estimate"] <= b["bound_high"] and b["worst_case"] == "high"


def test_the_bounds_contain_the_full_data_estimate_whatever_the_lost_trials_were():
    # Failures concentrated in B and on failing trials: the planned estimate moves, the bounds hold it.
    imp = Imperfections(compliance=1.0, infra_rate_a=0.03, infra_rate_b=0.15, infra_selection=1.5)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}, {"id": "total_tokens", "test": "wilcoxon_signed_rank"}])
    for seed in range(6):
        m = simulate_imperfect(seed, 16, 3, imp)
        b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).set_index("metric")
        full = m.assign(success=m["success_full"], total_tokens=m["total_tokens_full"], infra_error=False)
        truth = compare(full, plan, [("A", "B")]).set_index("metric")["estimate"]
        for metric in ("success", "total_tokens"):
            assert b.loc[metric, "bound_low"] - 1e-9 <= truth[metric] <= b.loc[metric, "bound_high"] + 1e-9


def test_trials_that_never_reached_the_model_are_bounded_too():
    spec = {f"t{i}": (True, True) for i in range(5)} | {"rl": (False, False)}
    m = _study(spec)
    m["never_reached_model"] = np.where(m["task_id"] == "rl", "the agent never reached the model: rate limit", None)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    assert b["estimate"] == 0 and (b["bound_low"], b["bound_high"]) == pytest.approx((-1 / 6, 1 / 6))
    assert b["reasons_a"] == b["reasons_b"] == "never reached the model ×1"


def test_no_affected_trial_gives_the_planned_estimate_as_both_bounds():
    m = _study({f"t{i}": (i % 2 == 0, True) for i in range(6)})
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan)
    assert list(b.columns) == IB.COLUMNS
    assert b.iloc[0]["bound_low"] == b.iloc[0]["bound_high"] == b.iloc[0]["estimate"]
    assert b.iloc[0]["note"] == "no trial lost to an infrastructure failure"
