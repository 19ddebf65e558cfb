"""Estimated costs: cache writes at the cache-write rate, each call at its own model's price."""

from __future__ import annotations

import pytest

from analysis_lib.bench.adapters import _estimate_cost
from analysis_lib.core.trial import Trial
from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.metrics.pricing import estimate_cost
from analysis_lib.metrics.trial_metrics import trial_metrics

SONNET, HAIKU = "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"


def test_cache_writes_are_priced_at_the_cache_write_rate():
    # 1000 prompt tokens (ATIF: cache included) = 100 plain + 500 cache reads + 400 cache writes; 10 out.
    # Sonnet 4.5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
    assert estimate_cost(SONNET, 1000, 10, 500, 400) == pytest.approx(100 * 3e-6 + 500 * 0.3e-6 + 400 * 3.75e-6 + 10 * 15e-6)
    # without the cache-write split the writes are priced as plain input (14 % less here)
    assert estimate_cost(SONNET, 1000, 10, 500) == pytest.approx(500 * 3e-6 + 500 * 0.3e-6 + 10 * 15e-6)
    assert estimate_cost("no-such-model", 1000, 10) is None


def _step(model, prompt, out, cached, written):
    return {"source": "agent", "model_name": model, "message": "",
            "metrics": {"prompt_tokens": prompt, "completion_tokens": out, "cached_tokens": cached,
                        "extra": {"cache_creation_input_tokens": written}}}


def test_a_subagent_call_is_priced_at_its_own_model():
    atif = {"schema_version": "ATIF-v1.7", "agent": {"name": "claude-code", "version": "2", "model_name": SONNET},
            "steps": [{"source": "user", "message": "x"}, _step(SONNET, 1000, 10, 500, 400)],
            "subagent_trajectories": [{"schema_version": "ATIF-v1.7", "trajectory_id": "s", "agent": {"model_name": HAIKU},
                                       "steps": [_step(HAIKU, 2000, 100, 1000, 800)]}]}
    main = 100 * 3e-6 + 500 * 0.3e-6 + 400 * 3.75e-6 + 10 * 15e-6
    sub = 200 * 1e-6 + 1000 * 0.1e-6 + 800 * 1.25e-6 + 100 * 5e-6  # Haiku 4.5: $1 / $5 / $0.10 / $1.25
    assert _estimate_cost(atif) == pytest.approx(main + sub)
    atif["subagent_trajectories"][0]["steps"][0]["model_name"] = "unpriced-model"
    assert _estimate_cost(atif) is None  # unknown, never a wrong number


def test_the_runner_and_the_analysis_price_a_trial_alike():
    """One pricing rule: the runner's estimate of a trajectory is the cost the analysis reports for it."""
    atif = {"schema_version": "ATIF-v1.7", "agent": {"name": "claude-code", "version": "2", "model_name": SONNET},
            "steps": [{"source": "user", "message": "x"}, _step(SONNET, 1000, 10, 500, 400), _step(HAIKU, 3000, 30, 0, 0)],
            "final_metrics": {"total_prompt_tokens": 5000, "total_completion_tokens": 60}}
    row = trial_metrics(Trial("p", "t", 1, "r", "x", "run_layout", trajectory=parse_trajectory(atif)))
    # Calls at their own model; the 1,000 input and 20 output tokens the totals record beyond the calls at Sonnet.
    expected = (100 * 3e-6 + 500 * 0.3e-6 + 400 * 3.75e-6 + 10 * 15e-6) + (3000 * 1e-6 + 30 * 5e-6) + (1000 * 3e-6 + 20 * 15e-6)
    assert row["cost_estimated"] and row["total_cost_usd"] == pytest.approx(expected)
    assert _estimate_cost(atif) == pytest.approx(row["total_cost_usd"])


def test_the_runner_prices_cached_and_cache_write_tokens_exactly_as_the_analysis():
    """Same tokens, same number to the last digit: cache reads and writes known only as the trajectory's totals,
    and a trajectory that names no model (the runner knows the manifest's, as the analysis knows the trial's)."""
    atif = {"schema_version": "ATIF-v1.7", "agent": {"name": "claude-code", "version": "2"},
            "steps": [{"source": "user", "message": "x"},
                      {"source": "agent", "message": "", "metrics": {"prompt_tokens": 123_457, "completion_tokens": 3_211}}],
            "final_metrics": {"total_prompt_tokens": 123_457, "total_completion_tokens": 3_211,
                              "total_cached_tokens": 98_765, "extra": {"total_cache_creation_input_tokens": 12_347}}}
    traj = parse_trajectory(atif)
    row = trial_metrics(Trial("p", "t", 1, "r", "x", "run_layout", trajectory=traj, metadata={"model_name": SONNET}))
    # 123,457 prompt tokens = 12,345 plain + 98,765 cache reads + 12,347 cache writes, all at Sonnet 4.5's rates
    expected = 12_345 * 3e-6 + 98_765 * 0.3e-6 + 12_347 * 3.75e-6 + 3_211 * 15e-6
    assert row["cost_estimated"] and row["total_cost_usd"] == pytest.approx(expected, rel=1e-12)
    assert _estimate_cost(atif, SONNET) == row["total_cost_usd"]  # exact: one path, no rounding of its own
    assert _estimate_cost(atif) is None  # no model anywhere: unknown, never a wrong number
