"""analysis_lib.report.pair_view: aligned lanes, divergence, files, outcomes and the grid, on the sample
runs and on real formats (Claude Code transcripts, Inspect logs, Harbor jobs, mcpbr without steps)."""

from __future__ import annotations

import re

import pytest

from analysis_lib.core.trial import Step, ToolCall, Trajectory, Trial
from analysis_lib.ingest.load import load_trials
from analysis_lib.report import pair_view as pv
from analysis_lib.study import frames


@pytest.fixture(scope="module")
def sample(sample_runs):
    trials, errors = load_trials(sample_runs)
    assert not errors
    return trials, frames.trials_df(trials)


def _trial(profile: str, steps: list[Step], reward: float = 1.0) -> Trial:
    return Trial(profile=profile, task_id="t", repetition=1, run_id="r", trial_path=f"{profile}/t", source_format="atif",
                 trajectory=Trajectory(schema_version="ATIF-v1.5", steps=steps), reward=reward)


def _agent(i: int, *calls: ToolCall, prompt: int = 10, completion: int = 5, cost: float | None = 0.01,
           key: str | None = None) -> Step:
    return Step(step_id=i, source="agent", prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost,
                tool_calls=list(calls), usage_key=key)


def test_lane_counts_each_api_call_once_and_marks_mcp_and_errors():
    steps = [Step(step_id=1, source="user", message="fix it"),
             _agent(2, ToolCall(2, "Read", {"file_path": "a.py"}, output="x"), key="m1"),
             _agent(3, ToolCall(3, "mcp__codecanvas__canvas", {"action": "init"}), key="m1"),  # same API call
             _agent(4, ToolCall(4, "Bash", {"command": "pytest"}, is_error=True, output="Exit Code: 1"), cost=None)]
    lane = pv.step_lane(_trial("a", steps))
    assert list(lane["category"]) == ["message", "read", "mcp", "execute"]
    assert list(lane["tokens"]) == [0, 15, 0, 15]
    assert list(lane["cum_tokens"]) == [0, 15, 15, 30]
    assert list(lane["mcp_calls"]) == [0, 0, 1, 0] and list(lane["errors"]) == [0, 0, 0, 1]
    assert lane["cum_cost_usd"].iloc[-1] == pytest.approx(0.01)  # step 3 shares step 2's call, step 4 says no cost
    assert str(lane["cum_tokens"].dtype) == "Int64"


def test_divergence_is_the_first_step_with_another_tool_or_argument():
    same = [Step(step_id=1, source="user", message="go"), _agent(2, ToolCall(2, "Read", {"file_path": "a.py"}))]
    a = _trial("a", same + [_agent(3, ToolCall(3, "Read", {"file_path": "b.py"}))])
    b = _trial("b", same + [_agent(3, ToolCall(3, "Read", {"file_path": "c.py"}))])
    assert pv.divergence(pv.step_lane(a), pv.step_lane(b)) == 3
    assert pv.divergence(pv.step_lane(a), pv.step_lane(a)) is None
    shorter = _trial("c", list(same))
    assert pv.divergence(pv.step_lane(a), pv.step_lane(shorter)) == 3


def test_step_detail_trims_the_result_and_rejects_a_bad_position():
    t = _trial("a", [_agent(1, ToolCall(1, "Bash", {"command": "cat big"}, output="y" * 5000, output_chars=5000))])
    d = pv.step_detail(t, 1)
    assert d["calls"][0]["name"] == "Bash" and '"command": "cat big"' in d["calls"][0]["arguments"]
    assert len(d["calls"][0]["result"]) < 700 and d["calls"][0]["result"].endswith("[4400 more characters]")
    with pytest.raises(ValueError, match=r"position=2; allowed: 1\.\.1"):
        pv.step_detail(t, 2)


def test_sample_pair_view(sample):
    trials, metrics = sample
    opts = pv.pair_options(trials, "text", "codecanvas")
    assert len(opts) == 24 * 3
    a, b = pv.find_pair(trials, "text", "codecanvas", "fix-csv-quoting", 1)
    view = pv.pair_view(a, b)
    assert view.lane_a["source"].iloc[0] == "user"
    assert len(view.lane_a) == len([s for s in a.trajectory.steps if not s.is_copied_context])
    # The cumulative tokens of the lane end where the metrics' agent-step total does (no final_metrics override here).
    m = metrics.set_index(["profile", "task_id", "repetition"])
    assert int(view.lane_b["cum_tokens"].iloc[-1]) == int(m.loc[("codecanvas", "fix-csv-quoting", 1), "total_tokens"])
    assert view.lane_b["mcp_calls"].sum() == view.outcomes.at["mcp_tool_calls", "B"] > 0
    assert view.divergence == 2  # both start with the task prompt, then B opens the canvas
    assert "/app/src/tinyhttp/io.py" in view.files["edited_only_by_b"]
    assert view.outcomes.at["outcome", "A"] == "failed" and view.outcomes.at["outcome", "B"] == "succeeded"
    assert len(view.failed_tests["A"]) == view.outcomes.at["tests_failed", "A"] == 3
    page = pv.render_pair_html(view)
    assert page.count("<details") == len(view.lane_a) + len(view.lane_b)
    assert "First divergence: step 2" in page and "[MCP]" in page
    assert "<function" not in page and "62986.0" not in page
    assert "Todos have been modified" in page
    stored = pv.render_pair_html(view, results=False)  # what a recorded notebook keeps: no result texts
    assert "Todos have been modified" not in stored and stored.count("shown when the notebook runs") > 0


def test_outcome_grid_sorts_by_the_per_task_difference(sample):
    _, metrics = sample
    grid = pv.outcome_grid(metrics, "text", "codecanvas")
    assert len(grid) == 24 * 3 * 2 and set(grid["outcome"]) <= set(pv.OUTCOME_COLORS)
    diffs = grid.drop_duplicates("task_id")["difference"].tolist()
    assert diffs == sorted(diffs, reverse=True)
    task = grid["task_id"].iloc[0]
    rows = metrics[(metrics["task_id"] == task)].groupby("profile")["success"].mean()
    assert grid["difference"].iloc[0] == pytest.approx(rows["codecanvas"] - rows["text"], abs=1e-3)
    assert pv.outcome_grid(metrics, "text", "codecanvas", "-difference")["difference"].iloc[0] == min(diffs)
    assert list(pv.outcome_grid(metrics, "text", "codecanvas", "task").drop_duplicates("task_id")["task_id"]) == \
        sorted(metrics["task_id"].unique())
    with pytest.raises(ValueError, match="sort='best'; allowed: difference, -difference, task"):
        pv.outcome_grid(metrics, "text", "codecanvas", "best")
    with pytest.raises(ValueError, match="pick two different profiles"):
        pv.outcome_grid(metrics, "text", "text")
    page = pv.render_grid_html(grid)
    assert page.count("<tr>") == 24 + 1


def test_grid_marks_a_missing_repetition_of_one_arm(sample):
    _, metrics = sample
    cut = metrics[~((metrics["profile"] == "codecanvas") & (metrics["repetition"] == 3))]
    grid = pv.outcome_grid(cut, "text", "codecanvas")
    assert set(grid[(grid["arm"] == "B") & (grid["repetition"] == 3)]["outcome"]) == {"missing"}


@pytest.mark.parametrize("folder", ["claude-code-spotter", "inspect-ai-logs", "skillsbench-trajectories",
                                    "mcpbr-readme-example", "harbor-golden"])
def test_pair_view_on_real_formats(real_fixtures, folder):
    """Any two trials of a real format: lanes for those with steps, outcome-only for those without."""
    trials, _ = load_trials(real_fixtures / folder)
    assert len(trials) >= 2
    with_steps = sorted(trials, key=lambda t: -len(t.trajectory.steps) if t.trajectory else 0)
    a, b = with_steps[0], with_steps[1]
    view = pv.pair_view(a, b)
    for trial, lane in ((a, view.lane_a), (b, view.lane_b)):
        n = len([s for s in trial.trajectory.steps if not s.is_copied_context]) if trial.trajectory else 0
        assert len(lane) == n
        assert lane["cum_tokens"].is_monotonic_increasing
    if a.trajectory is None or b.trajectory is None:
        assert any("no step-level trajectory" in w for w in view.warnings)
    page = pv.render_pair_html(view)
    assert page.count("<details") == len(view.lane_a) + len(view.lane_b)
    assert not re.search(r"<function |\d\.0 tok", page)
    if len(view.lane_a):
        detail = pv.step_detail(a, len(view.lane_a))
        assert detail["position"] == len(view.lane_a)


def test_a_trial_without_trajectory_keeps_its_outcome(sample):
    """The sample's one infrastructure error (no trajectory): an empty lane, a warning and its outcome."""
    trials, _ = sample
    broken = next(t for t in trials if t.trajectory is None)
    other = next(t for t in trials if t.task_id == broken.task_id and t.repetition == broken.repetition
                 and t.profile != broken.profile)
    view = pv.pair_view(other, broken)
    assert len(view.lane_b) == 0 and view.divergence is None
    assert view.outcomes.at["outcome", "B"] == "infra_error"
    assert view.warnings == [f"B: {broken.profile}/{broken.task_id} has no step-level trajectory (run_layout); outcome only"]
    assert pv.render_pair_html(view).count("<details") == len(view.lane_a)
