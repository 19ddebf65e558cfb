"""Fixed-sequence claims: each decision reads the engine's own interval, and the gate closes after a failure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis_lib.inference import comparisons, hypotheses
from analysis_lib.study import plan as P

ROOT = Path(__file__).resolve().parents[1]
ALL_REPS = ROOT / "params" / "analysis_plan_all_repetitions.yaml"


def _plan(hyps: list[dict], path: Path = ALL_REPS) -> P.AnalysisPlan:
    d = yaml.safe_load(path.read_text())
    d["hypotheses"] = hyps
    return P.parse_plan(d, "plan.yaml")


def _trials(n_tasks: int = 30, b_rate: float = 0.7, b_cost: float = 0.8, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        base = rng.uniform(0.2, 0.8)
        for prof, rate, cost in (("a", base, 1.0), ("b", min(base + b_rate - 0.5, 1.0), b_cost)):
            for rep in range(3):
                rows.append({"profile": prof, "task_id": f"t{t}", "repetition": rep + 1, "infra_error": False,
                             "success": bool(rng.random() < rate), "total_cost_usd": cost * np.exp(rng.normal(0, 0.2)),
                             "elapsed_sec": 100 * np.exp(rng.normal(0, 0.2))})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("bad,message", [
    ({"id": "success", "claim": "noninferior"}, "needs a margin"),
    ({"id": "total_cost_usd", "claim": "superior", "margin": 0.1}, "has no margin"),
    ({"id": "mcp_calls__*", "claim": "superior"}, "single tested metric"),
])
def test_the_plan_refuses_claims_that_cannot_be_tested(bad, message):
    with pytest.raises(P.PlanError, match=message):
        _plan([bad])


def test_each_decision_is_the_engines_interval_read_against_the_margin():
    trials = _trials()
    plan = _plan([{"id": "success", "claim": "noninferior", "margin": 0.05},
                  {"id": "total_cost_usd", "claim": "superior"},
                  {"id": "elapsed_sec", "claim": "equivalent", "margin": 0.25}])
    out = hypotheses.test_sequence(trials, plan, [("a", "b")]).set_index("metric")
    ni, sup, eq = out.loc["success"], out.loc["total_cost_usd"], out.loc["elapsed_sec"]
    ref = comparisons.estimate(trials, "success", "a", "b", plan, confidence=0.95)
    assert ni["ci_low"] == pytest.approx(100 * ref["ci_low"]) and ni["margin"] == 5.0
    assert (ni["result"] == "holds") == (ni["ci_low"] > -5.0)
    assert sup["result"] == "holds" and sup["ci_high"] < 0  # 20 % cheaper, 30 tasks: shown
    ref90 = comparisons.estimate(trials, "elapsed_sec", "a", "b", plan, confidence=0.90)
    assert eq["confidence"] == pytest.approx(0.90) and eq["ci_low"] == pytest.approx(ref90["ci_low"])
    assert (eq["result"] == "holds") == (-25 < eq["ci_low"] and eq["ci_high"] < 25)


def test_the_gate_closes_after_a_step_that_does_not_hold_and_pairs_share_alpha():
    trials = _trials(n_tasks=12, b_rate=0.3)  # B loses 20 points: non-inferiority within 5 cannot be shown
    more = _trials(n_tasks=12, b_rate=0.3).query("profile == 'b'").assign(profile="c")
    plan = _plan([{"id": "success", "claim": "noninferior", "margin": 0.05}, {"id": "total_cost_usd", "claim": "superior"}])
    out = hypotheses.test_sequence(pd.concat([trials, more]), plan, [("a", "b"), ("a", "c")])
    for _, seq in out.groupby("profile_b"):
        assert list(seq["result"]) == ["not shown", "not tested"]
        assert seq["reason"].iloc[1] == "an earlier step did not hold"
        assert np.isfinite(seq["ci_high"].iloc[1])  # the interval is still shown, the claim is not tested
    assert np.allclose(out["confidence"], 1 - 0.05 / 2)  # Bonferroni over the two pairs


def test_ratio_margins_are_symmetric_on_the_log_scale():
    h = P.Hypothesis(id="total_cost_usd", claim="equivalent", margin=0.10)
    lower, upper = hypotheses._bounds(h, "ratio")
    assert (lower, upper) == pytest.approx((100 * (1 / 1.1 - 1), 10.0))  # B/A in (1/1.1, 1.1): -9.09 % to +10 %
    assert hypotheses._decide(h, {"ci_low": -9.5, "ci_high": 5.0}, (lower, upper))[0] is False
    assert hypotheses._decide(h, {"ci_low": -9.0, "ci_high": 9.9}, (lower, upper))[0] is True
    # A against B is B against A: a ratio within the margins stays within them inverted
    inv = lambda pct: 100 * (1 / (1 + pct / 100) - 1)  # noqa: E731
    assert inv(upper) == pytest.approx(lower) and inv(lower) == pytest.approx(upper)
    assert hypotheses._bounds(P.Hypothesis(id="success", claim="noninferior", margin=0.05), "pass_rate") == (-0.05, 0.05)


def test_an_open_end_of_the_engines_interval_prints_open_in_the_sequence_table():
    """The step carries the ends its comparison's interval leaves out (a Hodges-Lehmann end in a gap of the Walsh
    averages), and the report prints them with a parenthesis, as the comparisons table does."""
    from analysis_lib.report.comparison_report import hypotheses_table

    trials = _trials()
    plan = _plan([{"id": "total_cost_usd", "claim": "superior"}])
    out = hypotheses.test_sequence(trials, plan, [("a", "b")])
    ref = comparisons.estimate(trials, "total_cost_usd", "a", "b", plan, confidence=0.95)
    want = ref.get("ci_open") if isinstance(ref.get("ci_open"), str) else None
    assert out["ci_open"].iloc[0] == want or (want is None and pd.isna(out["ci_open"].iloc[0]))
    opened = out.assign(ci_open="low", ci_low=-30.0, ci_high=-10.0)
    closed = out.assign(ci_open=None, ci_low=-30.0, ci_high=-10.0)
    assert "(−30.0, −10.0]" in hypotheses_table(opened) and "[−30.0, −10.0]" in hypotheses_table(closed)
