"""Rules of the Layer 1 metrics beyond one value per metric (tests/test_metric_definitions.py holds one case per id):
sources of tokens and cost, thresholds, timing, the exploratory metrics' edge cases, the metrics table."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from builders import agent_step, trajectory

from analysis_lib.core.trial import Timing, Trial
from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.metrics.trial_metrics import MetricsConfig, trial_metrics


def _trial(traj_doc=None, *, reward=1.0, tests=None, timing=None, exception=None, metadata=None, carried=None):
    return Trial(
        profile="p", task_id="t", repetition=1, run_id="r", trial_path="x", source_format="run_layout",
        trajectory=parse_trajectory(traj_doc) if traj_doc else None, tests=tests, reward=reward,
        timing=timing or Timing(), exception=exception, metadata=metadata or {}, carried_metrics=carried or {},
    )


# A hand-traced session: read a.py, grep, edit a.py, edit a.py again (backtrack), run tests twice
# (the second identical: one loop), read b.py, an MCP call that errors.
CALLS = [
    ("Read", {"file_path": "src/a.py"}),
    ("Grep", {"pattern": "foo", "path": "src"}),
    ("Edit", {"file_path": "src/a.py", "old_string": "x", "new_string": "y"}),
    ("Edit", {"file_path": "./src/a.py", "old_string": "y", "new_string": "z"}),
    ("Bash", {"command": "pytest -q"}),
    ("Bash", {"command": "pytest -q"}),
    ("Bash", {"command": "cat src/b.py"}),
    ("mcp__codegraph__get_dependencies", {"symbol": "a"}),
]
RESULTS = [{"content": "ok"}] * 7 + [{"content": "Error: not initialised", "extra": {"is_error": True}}]


def _session(**kw):
    steps = [agent_step(1, CALLS[:4], prompt=1000, completion=100, cached=500, cost=0.01, results=RESULTS[:4],
                        timestamp="2026-01-01T00:00:00Z"),
             agent_step(2, CALLS[4:], prompt=3000, completion=200, cached=2000, cost=0.02, results=RESULTS[4:],
                        timestamp="2026-01-01T00:02:00Z")]
    return trajectory(steps, **kw)


def test_estimated_cost_prices_cache_writes_at_their_rate():
    """No cost in the trajectory: tokens priced from the price map, the cache writes (known from a Claude
    Code conversion's final_metrics.extra) at the cache-write rate, not as plain input."""
    fm = {
        "total_prompt_tokens": 1000,
        "total_completion_tokens": 10,
        "total_cached_tokens": 500,
        "extra": {"total_cache_creation_input_tokens": 400},
    }
    steps = [agent_step(1, prompt=1000, completion=10, cached=500)]
    m = trial_metrics(_trial(trajectory(steps, final_metrics=fm, model="claude-sonnet-4-5-20250929")))
    assert m["cost_estimated"] is True
    # Sonnet 4.5 per million: $3 input, $0.30 cache read, $3.75 cache write, $15 output
    assert m["total_cost_usd"] == pytest.approx(100 * 3e-6 + 500 * 0.3e-6 + 400 * 3.75e-6 + 10 * 15e-6)
    del fm["extra"]
    m = trial_metrics(_trial(trajectory(steps, final_metrics=fm, model="claude-sonnet-4-5-20250929")))
    assert m["total_cost_usd"] == pytest.approx(500 * 3e-6 + 500 * 0.3e-6 + 10 * 15e-6)  # writes unknown: plain input


def test_mcp_exposure_comes_from_the_runner_and_is_empty_elsewhere():
    m = trial_metrics(_trial(_session(), carried={"mcp_exposed": True, "mcp_used": False}))
    assert m["mcp_exposed"] is True and m["mcp_used"] is False
    m = trial_metrics(_trial(_session()))
    assert m["mcp_exposed"] is None and m["mcp_used"] is None


def test_final_metrics_win_over_step_sums():
    fm = {"total_prompt_tokens": 5000, "total_completion_tokens": 400, "total_cached_tokens": 2600, "total_cost_usd": 0.05}
    m = trial_metrics(_trial(_session(final_metrics=fm)))
    assert (m["total_input_tokens"], m["total_output_tokens"], m["total_cost_usd"]) == (5000, 400, 0.05)


def test_cost_estimated_from_offline_price_map_when_absent():
    doc = trajectory([agent_step(1, prompt=1_000_000, completion=100_000, cached=0)], model="claude-sonnet-4-5")
    m = trial_metrics(_trial(doc))
    # litellm's map: claude-sonnet-4-5 at $3/M input and $15/M output -> 3 + 1.5
    assert m["cost_estimated"] is True and m["total_cost_usd"] == pytest.approx(4.5)
    unknown = trial_metrics(_trial(trajectory([agent_step(1)], model="no-such-model-x")))
    assert unknown["total_cost_usd"] is None and unknown["cost_estimated"] is False


def test_success_is_reward_exactly_one():
    partial = trial_metrics(_trial(_session(), reward=0.75))
    assert partial["success"] is False and partial["reward"] == 0.75
    assert trial_metrics(_trial(_session(), reward=1.0))["success"] is True


def test_exception_with_reward_is_failure_without_reward_is_infra_error():
    failed = trial_metrics(_trial(_session(), reward=0.0, exception="NonZeroAgentExitCodeError: x"))
    assert failed["success"] is False and failed["infra_error"] is False
    infra = trial_metrics(_trial(None, reward=None, exception="RuntimeError: docker build failed"))
    assert infra["success"] is None and infra["infra_error"] is True
    assert infra["budget_exhaustion"] is False


def test_elapsed_prefers_agent_execution_then_trial_then_steps():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    agent = Timing(
        started_at=t0, finished_at=t0.replace(minute=10), agent_started_at=t0.replace(minute=1), agent_finished_at=t0.replace(minute=4)
    )
    assert trial_metrics(_trial(_session(), timing=agent))["elapsed_sec"] == 180
    trial_only = Timing(started_at=t0, finished_at=t0.replace(minute=10))
    assert trial_metrics(_trial(_session(), timing=trial_only))["elapsed_sec"] == 600
    m = trial_metrics(_trial(_session()))
    assert m["elapsed_sec"] == 120  # first to last step timestamp
    assert m["steps_per_minute"] == pytest.approx(3 / 2)


def test_failure_flags_thresholds():
    cfg = MetricsConfig()
    # tool_misuse: > 30 % errored. 4 calls, 2 errors = 50 %.
    calls = [("Bash", {"command": f"c{i}"}) for i in range(4)]
    res = [{"content": "Error: x"}, {"content": "Error: y"}, {"content": "ok"}, {"content": "ok"}]
    m = trial_metrics(_trial(trajectory([agent_step(1, calls, results=res)]), reward=0.0), cfg)
    assert m["tool_misuse"] is True and m["premature_stop"] is True  # failed with 2 < 10 steps
    # infinite_loop: a streak of more than 5 identical consecutive calls (6 in a row: yes; 5: no).
    six = trial_metrics(_trial(trajectory([agent_step(1, [("Bash", {"command": "ls"})] * 6)])))
    five = trial_metrics(_trial(trajectory([agent_step(1, [("Bash", {"command": "ls"})] * 5)])))
    assert six["infinite_loop"] is True and five["infinite_loop"] is False
    assert six["loop_count"] == 5
    # budget_exhaustion: failed with > 80k tokens.
    big = trial_metrics(_trial(trajectory([agent_step(1, prompt=80_001, completion=0)]), reward=0.0))
    ok = trial_metrics(_trial(trajectory([agent_step(1, prompt=80_001, completion=0)]), reward=1.0))
    assert big["budget_exhaustion"] is True and ok["budget_exhaustion"] is False
    assert big["context_omission"] is None  # reserved


def test_mcp_names_are_configurable():
    doc = trajectory([agent_step(1, [("my_graph_tool", {}), ("Read", {"file_path": "a"})])])
    assert trial_metrics(_trial(doc))["mcp_tool_calls"] == 0
    cfg = MetricsConfig(mcp_tools=frozenset({"my_graph_tool"}))
    assert trial_metrics(_trial(doc), cfg)["mcp_tool_calls"] == 1


def test_tool_misuse_of_carried_metrics_uses_the_configured_threshold():
    """TB1, Inspect and mcpbr trials carry call and error counts: the flag follows MetricsConfig, as for trajectories."""
    trial = _trial(None, reward=0.0, carried={"tool_calls_count": 10, "tool_error_count": 2})  # 20 % errored
    assert trial_metrics(trial)["tool_misuse"] is False  # default threshold: > 30 %
    assert trial_metrics(trial, MetricsConfig(tool_misuse_error_rate=0.10))["tool_misuse"] is True
    assert trial_metrics(trial, MetricsConfig(tool_misuse_error_rate=0.20))["tool_misuse"] is False  # strictly above


# Exploratory metrics (params/analysis_plan.yaml): a hand-traced session.
#   step 1 (user, 00:00:00)
#   step 2 (00:00:10): Read a.py, Read b.py                      -> first reads
#   step 3 (00:00:30): Read a.py, cat b.py, search_code          -> 2 duplicate reads
#   step 4 (00:01:40): Edit a.py, search_code, canvas            -> first edit: 100 s, step 4
#   step 5 (00:02:00): Read a.py, Read b.py, sed -n 1,5p a.py     -> Read a.py follows its edit: not a
#                                                                    duplicate; b.py and the sed re-read are
EXPLORE = [
    ([("Read", {"file_path": "a.py"}), ("Read", {"file_path": "b.py"})], "2026-01-01T00:00:10Z"),
    (
        [("Read", {"file_path": "./a.py"}), ("Bash", {"command": "cat b.py"}), ("mcp__codegraph__search_code", {"query": "x"})],
        "2026-01-01T00:00:30Z",
    ),
    (
        [
            ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}),
            ("mcp__codegraph__search_code", {"query": "y"}),
            ("mcp__codecanvas__canvas", {"action": "read"}),
        ],
        "2026-01-01T00:01:40Z",
    ),
    ([("Read", {"file_path": "a.py"}), ("Read", {"file_path": "b.py"}), ("Bash", {"command": "sed -n 1,5p a.py"})], "2026-01-01T00:02:00Z"),
]


def _explore_doc(steps=EXPLORE):
    doc = trajectory([agent_step(i, calls, timestamp=ts) for i, (calls, ts) in enumerate(steps, start=1)])
    doc["steps"][0]["timestamp"] = "2026-01-01T00:00:00Z"
    return doc


def test_exploratory_metrics_hand_checked():
    m = trial_metrics(_trial(_explore_doc()))
    assert json.loads(m["mcp_calls_by_tool"]) == {"mcp__codecanvas__canvas": 1, "mcp__codegraph__search_code": 2}
    assert m["time_to_first_edit_sec"] == 100.0
    assert m["steps_to_first_edit"] == 4  # user step 1, agent steps 2-4
    # a.py and b.py (cat) in step 3: 2; step 5: Read a.py is the first read since its edit (not one), Read b.py
    # is (3), and sed -n re-reads a.py with no edit since that Read (4).
    assert m["duplicate_reads"] == 4
    assert m["mcp_tool_calls"] == 3


def test_first_edit_and_duplicate_reads_edge_cases():
    # No edit at all: both first-edit metrics empty; without any MCP call the JSON object is empty.
    no_edit = _explore_doc([([("Read", {"file_path": "a.py"}), ("Read", {"file_path": "a.py"})], "2026-01-01T00:00:05Z")])
    m = trial_metrics(_trial(no_edit))
    assert m["time_to_first_edit_sec"] is None and m["steps_to_first_edit"] is None
    assert m["duplicate_reads"] == 1 and m["mcp_calls_by_tool"] == "{}"
    # A shell edit counts as the first edit; without a timestamp on the first step the time is empty.
    shell = trajectory([agent_step(1, [("Bash", {"command": "echo x > out.txt"})], timestamp="2026-01-01T00:00:05Z")])
    m = trial_metrics(_trial(shell))
    assert m["steps_to_first_edit"] == 2 and m["time_to_first_edit_sec"] is None
    # Formats without a trajectory leave every exploratory metric empty.
    m = trial_metrics(_trial(None, reward=1.0, carried={"tool_calls_count": 3}))
    assert all(m[k] is None for k in ("mcp_calls_by_tool", "time_to_first_edit_sec", "steps_to_first_edit", "duplicate_reads"))


def test_mcp_tool_columns_are_zero_for_trials_that_did_not_call_them():
    from analysis_lib.metrics.trial_metrics import mcp_column, metrics_frame

    assert mcp_column("mcp__code-graph__Search.Code") == "mcp_calls__code_graph__search_code"
    with_mcp = trial_metrics(_trial(_explore_doc()))
    without = trial_metrics(_trial(trajectory([agent_step(1, [("Read", {"file_path": "a.py"})])])))
    without["task_id"] = "u"
    carried = trial_metrics(_trial(None, reward=1.0, carried={"tool_calls_count": 3}))
    carried["task_id"] = "v"
    df = metrics_frame([with_mcp, without, carried]).set_index("task_id")
    assert df.loc["t", "mcp_calls__codegraph__search_code"] == 2
    assert df.loc["u", "mcp_calls__codegraph__search_code"] == 0  # a trajectory without that tool: 0 calls
    assert math.isnan(df.loc["v", "mcp_calls__codegraph__search_code"])  # no trajectory: unknown


def test_missing_token_counts_stay_empty_never_zero():
    """Steps that record prompt tokens only: output, cached and total are unknown, not 0 (README: empty = unknown)."""
    steps = [agent_step(1), agent_step(2)]
    steps[0]["metrics"], steps[1]["metrics"] = {"prompt_tokens": 400}, {"prompt_tokens": 500}
    m = trial_metrics(_trial(trajectory(steps)))
    assert m["total_input_tokens"] == 900
    assert m["total_output_tokens"] is None and m["total_cached_tokens"] is None and m["total_tokens"] is None
    assert m["token_efficiency"] is None and m["budget_exhaustion"] is False  # unknown tokens exhaust no budget
    none = [agent_step(1)]
    del none[0]["metrics"]
    m = trial_metrics(_trial(trajectory(none)))
    assert (m["total_input_tokens"], m["total_output_tokens"], m["total_cost_usd"], m["cost_estimated"]) == (None, None, None, False)


def _call_names(doc):
    from analysis_lib.metrics.trial_metrics import call_order

    return [(c.name, pos) for c, pos, _ in call_order(parse_trajectory(doc))]


def _with_subagent(root_stamps, sub_stamps, *, ref_call=True):
    """Root: Task (starts the subagent), Read r1, Read r2; subagent: Grep s1, Grep s2 (times as given, None = none)."""
    task = agent_step(1, [("Task", {"prompt": "go"})])
    ref = {"trajectory_id": "sub"}
    task["observation"]["results"][0]["subagent_trajectory_ref"] = [ref]
    if not ref_call:
        del task["observation"]["results"][0]["source_call_id"]
        task["observation"]["results"][0]["content"] = "started"
        task["tool_calls"].append({"tool_call_id": "other", "function_name": "Other", "arguments": {}})
    root = trajectory([task, agent_step(2, [("Read", {"file_path": "r1"})]), agent_step(3, [("Read", {"file_path": "r2"})])],
                      version="ATIF-v1.7")
    sub = trajectory([agent_step(1, [("Grep", {"pattern": "s1"})]), agent_step(2, [("Grep", {"pattern": "s2"})])], version="ATIF-v1.7")
    sub["trajectory_id"] = "sub"
    for doc, stamps in ((root, root_stamps), (sub, sub_stamps)):
        for step, ts in zip(doc["steps"], stamps, strict=True):
            if ts is not None:
                step["timestamp"] = f"2026-01-01T00:00:{ts:02d}Z"
    root["subagent_trajectories"] = [sub]
    return root


def test_call_order_places_a_subagent_by_time_never_before_the_call_that_started_it():
    # A background subagent: its calls (t=15, 40) interleave with the root's later calls (t=20, 30).
    doc = _with_subagent([0, 10, 20, 30], [10, 15, 40])
    assert _call_names(doc) == [("Task", 2), ("Grep", 2), ("Read", 3), ("Read", 4), ("Grep", 2)]
    # Times that would put it before its Task call are overruled by the Task call.
    doc = _with_subagent([0, 10, 20, 30], [1, 2, 3])
    assert _call_names(doc) == [("Task", 2), ("Grep", 2), ("Grep", 2), ("Read", 3), ("Read", 4)]


def test_call_order_without_times_puts_a_subagent_right_after_its_call():
    doc = _with_subagent([None] * 4, [None] * 3)
    assert _call_names(doc) == [("Task", 2), ("Grep", 2), ("Grep", 2), ("Read", 3), ("Read", 4)]
    # A reference on the step's result without a call id: after the calls of that step.
    doc = _with_subagent([None] * 4, [None] * 3, ref_call=False)
    assert _call_names(doc) == [("Task", 2), ("Other", 2), ("Grep", 2), ("Grep", 2), ("Read", 3), ("Read", 4)]
    # No result refers to it: last, at no root step.
    del doc["steps"][1]["observation"]["results"][0]["subagent_trajectory_ref"]
    assert _call_names(doc)[-2:] == [("Grep", None), ("Grep", None)]
