"""The metric registry: each entry is the metric (its definition and its function), the README's reference is generated from it."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from analysis_lib.core import registry
from analysis_lib.core.trial import Trial
from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.metrics.trial_metrics import metrics_frame, trial_metrics

ROOT = Path(__file__).resolve().parents[1]


def test_every_entry_defines_and_computes_its_metric():
    assert not set(registry.DERIVED) & set(registry.METRICS)  # derived quantities are named apart
    for m in list(registry.METRICS.values()) + list(registry.DERIVED.values()):
        assert m.label and m.definition, m.id
        assert m.scale in ("ratio", "difference", "rate", "none")
    for m in registry.METRICS.values():
        # A column is computed from the trial, or carried from a named source field; only a reserved one is neither.
        assert m.compute is not None or m.carried or m.definition.startswith("reserved"), m.id
    assert registry.metric("mcp_calls__codegraph__search_code").exploratory_only
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        registry.metric("nope")


def test_the_metrics_table_is_the_registry_in_order_typed_as_it_says():
    df = metrics_frame([])
    metric_columns = [c for c in df.columns if c in registry.METRICS]
    assert metric_columns == list(registry.METRICS)
    for m in registry.METRICS.values():
        assert str(df[m.id].dtype) == {"boolean": "boolean", "float64": "float64", "object": "object"}[m.dtype], m.id


def _trial(doc) -> Trial:
    return Trial("p", "t", 1, "r", "x", "run_layout", trajectory=parse_trajectory(doc), reward=0.0)


def _step(i, calls, prompt):
    return {"step_id": i, "source": "agent", "message": "", "timestamp": f"2026-01-01T00:00:{i:02d}Z",
            "metrics": {"prompt_tokens": prompt, "completion_tokens": 10, "cached_tokens": 0},
            "tool_calls": [{"tool_call_id": f"c{i}{k}", "function_name": n, "arguments": a} for k, (n, a) in enumerate(calls)],
            "observation": {"results": [{"source_call_id": f"c{i}{k}", "content": "ok"} for k in range(len(calls))]}}


def test_every_metric_that_subagents_change_says_whether_they_count():
    """One rule for subagents: a metric whose value moves when a subagent's work is added states how it counts it."""
    root = {"schema_version": "ATIF-v1.7", "agent": {"name": "claude-code", "version": "2", "model_name": "claude-sonnet-4-5"},
            "steps": [{"step_id": 1, "source": "user", "message": "go", "timestamp": "2026-01-01T00:00:00Z"},
                      _step(2, [("Task", {"prompt": "look"})], 100), _step(30, [("Edit", {"file_path": "a.py"})], 200)]}
    with_sub = copy.deepcopy(root)
    with_sub["steps"][1]["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": "s"}]
    with_sub["subagent_trajectories"] = [{
        "schema_version": "ATIF-v1.7", "trajectory_id": "s", "agent": {"name": "claude-code", "version": "2"},
        "steps": [_step(3, [("Grep", {"pattern": "x"}), ("Read", {"file_path": "a.py"}), ("Read", {"file_path": "a.py"})], 50),
                  _step(4, [("Edit", {"file_path": "b.py"}), ("mcp__x__y", {}), ("mcp__x__y", {})] + [("Bash", {"command": "ls"})] * 6, 60)]}]
    alone, both = trial_metrics(_trial(root)), trial_metrics(_trial(with_sub))
    moved = {k for k in registry.METRICS if alone[k] != both[k]}
    assert moved >= {"tool_calls_count", "grep_before_edit", "duplicate_reads", "total_input_tokens", "steps_to_first_edit"}
    silent = sorted(k for k in moved if not registry.METRICS[k].subagents)
    assert not silent, f"these metrics change with a subagent's work but do not say how they count it: {silent}"
    assert both["total_steps"] == alone["total_steps"] == 3  # steps are the root's, as total_steps says


def test_pass_rate_and_resolve_rate_are_different_quantities_with_different_labels():
    assert registry.DERIVED["pass_rate"].label != registry.DERIVED["resolve_rate"].label
    assert "trial" in registry.DERIVED["pass_rate"].label and "majority" in registry.DERIVED["resolve_rate"].label


def test_readme_metric_reference_is_the_registry_table():
    sys.path.insert(0, str(ROOT / "tools"))
    from metric_reference import rendered

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert rendered(readme) == readme, "README.md is stale: run `python tools/metric_reference.py`"
