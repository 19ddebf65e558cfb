"""One test per metric id of the registry, each against values computed by hand on small trials.

The tests are generated from ``analysis_lib.core.registry.METRICS``: a metric without a hand-computed
case in :data:`EXPECTED` fails, so adding a metric is one registry entry and its case here. The
trials (built below, each traced in its comment) cover a plain session, subagents (ordered by
time, and without times), errors, MCP tools (used, discovered, refused), a shell-only agent, a
source without a trajectory and an infrastructure error.

Prices of estimated costs are litellm's offline map (``litellm.cost_per_token``): Claude Sonnet 4.5
$3 / $15 per million input / output tokens, Claude Haiku 4.5 $1 / $5.
"""

from __future__ import annotations

import functools
import json
import math

import pytest
from builders import agent_step, trajectory

from analysis_lib.core import registry
from analysis_lib.core.trial import TestResult, Trial
from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.ingest.read import never_reached_model
from analysis_lib.metrics.trial_metrics import trial_metrics

SONNET, HAIKU = "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"


def _trial(doc=None, *, reward=1.0, tests=None, exception=None, carried=None) -> Trial:
    return Trial(profile="p", task_id="t", repetition=1, run_id="r", trial_path="x", source_format="run_layout",
                 trajectory=parse_trajectory(doc) if doc else None, tests=tests, reward=reward, exception=exception,
                 carried_metrics=carried or {})


def _at(doc: dict, *stamps: str) -> dict:
    """Timestamps ``00:MM:SS`` on the document's steps, in order."""
    for step, stamp in zip(doc["steps"], stamps, strict=True):
        step["timestamp"] = f"2026-01-01T00:{stamp}Z"
    return doc


# session: a Claude Code session, costs recorded, no subagent.
#   step 1 user                                             00:00:00
#   step 2 Read src/a.py, Grep foo                          00:00:10  1000 in (500 cached) / 100 out, $0.01
#   step 3 Edit src/a.py, Edit ./src/a.py (a re-edit)       00:01:00  3000 in (2000 cached) / 200 out, $0.02
#   step 4 pytest, pytest (a loop), cat src/b.py, an MCP    00:02:00  2000 in (1500 cached) / 50 out, $0.01
#          call that errors, Read src/b.py (b read twice with no edit: a duplicate read), Read src/a.py
#          (the first read of a since its edit: not a duplicate)
#   tests: 2 passed, 1 failed, 1 skipped; reward 1.
def session() -> Trial:
    results4 = [{"content": "ok"}] * 3 + [{"content": "Error: not initialised", "extra": {"is_error": True}}] + [{"content": "ok"}] * 2
    doc = trajectory([
        agent_step(1, [("Read", {"file_path": "src/a.py"}), ("Grep", {"pattern": "foo", "path": "src"})],
                   prompt=1000, completion=100, cached=500, cost=0.01),
        agent_step(2, [("Edit", {"file_path": "src/a.py", "old_string": "x", "new_string": "y"}),
                       ("Edit", {"file_path": "./src/a.py", "old_string": "y", "new_string": "z"})],
                   prompt=3000, completion=200, cached=2000, cost=0.02),
        agent_step(3, [("Bash", {"command": "pytest -q"}), ("Bash", {"command": "pytest -q"}), ("Bash", {"command": "cat src/b.py"}),
                       ("mcp__codegraph__get_dependencies", {"symbol": "a"}), ("Read", {"file_path": "src/b.py"}),
                       ("Read", {"file_path": "src/a.py"})],
                   prompt=2000, completion=50, cached=1500, cost=0.01, results=results4),
    ], model=SONNET)
    tests = [TestResult("a", "passed"), TestResult("b", "failed"), TestResult("c", "passed"), TestResult("d", "skipped")]
    return _trial(_at(doc, "00:00", "00:10", "01:00", "02:00"), tests=tests)


# flaky: a failed run that loops and errors, past the token budget, in few steps; no cost recorded.
#   step 2: `ls` six times in a row (a streak of 6 > 5: a loop; 5 repeated calls)   50,000 in / 5 out
#   step 3: python t0..t3.py, each a traceback (4 of 10 calls errored: 40 % > 30 %)  40,001 in / 5 out
#   90,011 tokens > 80,000, failed, 3 steps < 10; estimated cost 90,001 × $3/M + 10 × $15/M = $0.270153.
def flaky() -> Trial:
    doc = trajectory([
        agent_step(1, [("Bash", {"command": "ls"})] * 6, prompt=50_000, completion=5),
        agent_step(2, [("Bash", {"command": f"python t{i}.py"}) for i in range(4)], prompt=40_001, completion=5,
                   results=[{"content": "Traceback (most recent call last):\n  ..."}] * 4),
    ], model=SONNET)
    return _trial(doc, reward=0.0)


def _subagent_doc(root_steps: list[dict], sub_steps: list[dict], sub_id: str) -> dict:
    root = trajectory(root_steps, version="ATIF-v1.7", model=SONNET)
    sub = trajectory(sub_steps, version="ATIF-v1.7", model=HAIKU)
    sub["trajectory_id"] = sub_id
    root["subagent_trajectories"] = [sub]
    return root


def _delegate(step_id: int, sub_id: str, **kw) -> dict:
    step = agent_step(step_id, [("Task", {"prompt": "look into it", "subagent_type": "Explore"})], **kw)
    step["observation"]["results"][0]["subagent_trajectory_ref"] = [{"trajectory_id": sub_id}]
    return step


# subagent: the root starts an Explore subagent, then edits; the subagent searched and read before that edit.
#   root  step 1 user 00:00:00 | step 2 Task 00:00:05 (1000/50) | step 3 Edit src/a.py 00:01:00 (2000/100)
#         | step 4 Read src/a.py 00:01:30 (3000/20)
#   sub   step 1 user 00:00:05 | step 2 Grep 00:00:10 (500/10) | step 3 Read src/a.py 00:00:20 (600/10)
#         | step 4 Read src/a.py 00:00:30 (700/30)
#   call order (by time): Task, Grep, Read a, Read a (a duplicate read, and a repeated call), Edit a, Read a
#   (the first read since the edit). Steps and elapsed time are the root's (4 steps, 90 s); tools per step
#   counts both: 6 calls / (3 + 3) agent steps. Tokens: 7,800 in / 220 out, none cached. Estimated cost:
#   root at Sonnet 6,000 × 3 + 170 × 15 = $0.02055, subagent at Haiku 1,800 × 1 + 50 × 5 = $0.00205 (per M).
def subagent() -> Trial:
    root_steps = [_delegate(1, "explore-1", prompt=1000, completion=50),
                  agent_step(2, [("Edit", {"file_path": "src/a.py", "old_string": "x", "new_string": "y"})], prompt=2000, completion=100),
                  agent_step(3, [("Read", {"file_path": "src/a.py"})], prompt=3000, completion=20)]
    sub_steps = [agent_step(1, [("Grep", {"pattern": "foo"})], prompt=500, completion=10),
                 agent_step(2, [("Read", {"file_path": "src/a.py"})], prompt=600, completion=10),
                 agent_step(3, [("Read", {"file_path": "src/a.py"})], prompt=700, completion=30)]
    doc = _subagent_doc(root_steps, sub_steps, "explore-1")
    _at(doc, "00:00", "00:05", "01:00", "01:30")
    _at(doc["subagent_trajectories"][0], "00:05", "00:10", "00:20", "00:30")
    return _trial(doc)


# subagent_edits: no timestamps anywhere; the subagent the root starts makes the first edit.
#   root  step 2 Task | step 3 Read src/b.py | step 4 Edit src/b.py
#   sub   step 2 Grep | step 3 Edit src/a.py | step 4 Edit src/a.py (a re-edit)
#   call order (no times: right after the Task call): Task, Grep, Edit a, Edit a, Read b, Edit b. The first
#   edit is the subagent's: it counts at the root step of the Task call (step 2), and has no time.
def subagent_edits() -> Trial:
    root_steps = [_delegate(1, "fixer-1"), agent_step(2, [("Read", {"file_path": "src/b.py"})]),
                  agent_step(3, [("Edit", {"file_path": "src/b.py", "old_string": "1", "new_string": "2"})])]
    sub_steps = [agent_step(1, [("Grep", {"pattern": "bug"})]),
                 agent_step(2, [("Edit", {"file_path": "src/a.py", "old_string": "a", "new_string": "b"})]),
                 agent_step(3, [("Edit", {"file_path": "src/a.py", "old_string": "b", "new_string": "c"})])]
    return _trial(_subagent_doc(root_steps, sub_steps, "fixer-1"))


# shell: a bash-only agent (mini-swe-agent's tool name), all calls `execute` in the taxonomy.
#   00:00:10 cat src/app.py (read) | 00:00:20 grep -n main src/app.py (a search) | 00:00:40 sed -i ... src/app.py
#   (the first edit: step 4, 40 s) | 00:00:50 python -m pytest (exit code 1: an error) | 00:01:00 echo done >
#   notes.txt (an edit) | 00:01:10 cat src/app.py (first read since the edit). 6 calls, 1 error; 1 file read,
#   2 edited.
def shell() -> Trial:
    cmds = ["cat src/app.py", "grep -n main src/app.py", "sed -i s/1/2/ src/app.py", "python -m pytest", "echo done > notes.txt",
            "cat src/app.py"]
    steps = [agent_step(i, [("bash", {"command": c})], prompt=100, completion=10,
                        results=[{"content": f"<returncode>{int('pytest' in c)}</returncode>\n<output></output>",
                                  # as the mini-swe-agent reader marks a result by its return code
                                  "extra": {"exit_code": int("pytest" in c), "is_error": "pytest" in c}}])
             for i, c in enumerate(cmds, start=1)]
    doc = trajectory(steps, agent="mini-swe-agent", model=SONNET)
    return _trial(_at(doc, "00:00", "00:10", "00:20", "00:40", "00:50", "01:00", "01:10"))


# discovery: Claude Code 2.1.3xx finds its MCP tool behind ToolSearch; one MCP call and one edit are refused.
#   ToolSearch select:mcp__codemap__lookup (discovers MCP), ToolSearch notebook (does not), lookup refused for
#   lack of permission (never ran), lookup, Read a.py, Edit a.py refused (changed nothing). 6 calls, 2 errored;
#   native = 6 − 1 MCP − 2 discovery − 1 refused MCP = 2.
def discovery() -> Trial:
    calls = [("ToolSearch", {"query": "select:mcp__codemap__lookup", "max_results": 5}), ("ToolSearch", {"query": "notebook"}),
             ("mcp__codemap__lookup", {"symbol": "main"}), ("mcp__codemap__lookup", {"symbol": "other"}),
             ("Read", {"file_path": "a.py"}), ("Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"})]
    denied = "Claude requested permissions to {}, but you haven't granted it yet."
    results = [{"content": "loaded"}, {"content": "none"},
               {"content": denied.format("use mcp__codemap__lookup"), "extra": {"is_error": True}},
               {"content": "main is defined in src/app.py"}, {"content": "x"},
               {"content": denied.format("write to /w/a.py"), "extra": {"is_error": True}}]
    return _trial(trajectory([agent_step(1, calls, prompt=10, completion=1, results=results)], model=SONNET))


# carried: an mcpbr run (no trajectory): the values its results file states.
#   3 of 7 calls errored (43 % > 30 %: tool misuse); 12 steps in 60 s: 12 steps per minute.
CARRIED = {"success": True, "reward": 1.0, "tests_passed": 3, "tests_failed": 1, "tests_total": 4, "total_input_tokens": 1000,
           "total_output_tokens": 50, "total_cost_usd": 0.2, "elapsed_sec": 60.0, "total_steps": 12, "tool_calls_count": 7,
           "tool_distribution": {"bash": 5, "edit": 2}, "tool_error_count": 3}


def carried() -> Trial:
    return _trial(None, reward=None, carried=CARRIED)


# study: a Harbor trial whose trajectory was not kept, with the study's own per-trial metrics (CodeScaleBench's
#   task_metrics.json): 32 calls, 27 of them MCP (12 keyword searches, 12 file reads, 2 commit searches, 1 file
#   list), 1 file modified. The per-tool MCP counts are those of its tool distribution.
STUDY = {"tool_calls_count": 32, "mcp_tool_calls": 27, "files_edited": 1, "mcp_tools_used": 4,
         "tool_distribution": {"mcp__sourcegraph__sg_list_files": 1, "mcp__sourcegraph__sg_keyword_search": 12,
                               "mcp__sourcegraph__sg_read_file": 12, "mcp__sourcegraph__sg_commit_search": 2, "Bash": 3,
                               "Write": 1, "Read": 1}}


def study() -> Trial:
    return _trial(None, reward=0.7, carried=STUDY)


# never: the agent never reached a model (Claude Code answered a rate limit itself, model <synthetic>, 0 tokens);
#   the verifier still scored it 0. No agent attempted the task: what it did is unknown, not none.
def never() -> Trial:
    step = agent_step(1, [], prompt=0, completion=0)
    step["model_name"], step["message"] = "<synthetic>", "You've hit your limit · resets 7pm (UTC)"
    t = _trial(trajectory([step], model="<synthetic>"), reward=0.0)
    t.metadata["never_reached_model"] = never_reached_model(t.trajectory)  # as the trial-folder reader marks it
    assert t.metadata["never_reached_model"] == "the agent never reached the model: You've hit your limit · resets 7pm (UTC)"
    t.carried_metrics = {"mcp_used": False}  # even a recorded "not used" says nothing of an agent that never ran
    return t


# infra: the harness raised before any verdict (no reward, no trajectory): an infrastructure error.
def infra() -> Trial:
    return _trial(None, reward=None, exception="RuntimeError: docker build failed")


# unrecorded: a Harbor trial scored 0 whose agent recorded nothing (no trajectory, every token field null):
#   a failure whose tokens, steps and calls are unknown, so no failure flag that tests them is known either.
def unrecorded() -> Trial:
    return _trial(None, reward=0.0)


# table: a row of a results table (a failed trial; the table gives total tokens per trial, 90,000 > 80,000).
def table() -> Trial:
    return _trial(None, reward=None, carried={"success": False, "total_tokens": 90_000.0})


# runner: the benchmark runner's treatment trial: MCP tools reached the model, none was used.
def runner() -> Trial:
    t = session()
    t.carried_metrics = {"mcp_exposed": True, "mcp_used": False}
    return t


TRIALS = {f.__name__: f for f in (session, flaky, subagent, subagent_edits, shell, discovery, carried, study, never, infra,
                                   unrecorded, table, runner)}
NA = None  # unknown / not applicable: an empty cell

# metric id -> [(trial, value computed by hand)]; floats compare to 1e-9, JSON objects as objects.
EXPECTED: dict[str, list[tuple[str, object]]] = {
    "success": [("session", True), ("flaky", False), ("carried", True), ("infra", NA)],
    "reward": [("session", 1.0), ("flaky", 0.0), ("carried", 1.0), ("infra", NA)],
    "tests_passed": [("session", 2), ("carried", 3), ("flaky", NA)],
    "tests_failed": [("session", 1), ("carried", 1), ("flaky", NA)],
    "tests_total": [("session", 4), ("carried", 4), ("flaky", NA)],
    "tests_passed_ratio": [("session", 0.5), ("carried", 0.75), ("flaky", NA)],
    "total_input_tokens": [("session", 6000), ("subagent", 7800), ("carried", 1000), ("infra", NA)],
    "total_output_tokens": [("session", 350), ("subagent", 220), ("carried", 50), ("infra", NA)],
    "total_cached_tokens": [("session", 4000), ("subagent", 0), ("carried", NA)],  # mcpbr states no cache split
    "total_tokens": [("session", 6350), ("subagent", 8020), ("flaky", 90_011), ("carried", 1050), ("never", 0), ("infra", NA),
                     ("unrecorded", NA), ("table", 90_000)],
    "total_cost_usd": [("session", 0.04), ("flaky", 0.270153), ("subagent", 0.0226), ("carried", 0.2), ("infra", NA)],
    "cost_estimated": [("session", False), ("flaky", True), ("subagent", True), ("carried", False), ("infra", False)],
    "token_efficiency": [("session", 1e6 / 6350), ("flaky", 0.0), ("carried", 1e6 / 1050), ("infra", NA)],
    "total_steps": [("session", 4), ("subagent", 4), ("flaky", 3), ("carried", 12), ("never", NA), ("infra", NA)],
    "agent_steps": [("session", 3), ("subagent", 3), ("carried", NA), ("never", NA)],
    "tool_calls_count": [("session", 10), ("subagent", 6), ("shell", 6), ("carried", 7), ("study", 32), ("never", NA),
                         ("infra", NA)],
    "unique_tools": [("session", 5), ("subagent", 4), ("shell", 1), ("carried", 2), ("infra", NA)],
    "tools_per_step": [("session", 10 / 3), ("subagent", 1.0), ("carried", NA)],
    "steps_per_minute": [("session", 2.0), ("subagent", 4 / 1.5), ("carried", 12.0), ("flaky", NA)],
    "elapsed_sec": [("session", 120.0), ("subagent", 90.0), ("carried", 60.0), ("flaky", NA)],
    "tool_distribution": [("session", {"Bash": 3, "Edit": 2, "Grep": 1, "Read": 3, "mcp__codegraph__get_dependencies": 1}),
                          ("subagent", {"Edit": 1, "Grep": 1, "Read": 3, "Task": 1}), ("carried", {"bash": 5, "edit": 2}),
                          ("infra", NA)],
    "tool_success_rate": [("session", 0.9), ("flaky", 0.6), ("carried", 4 / 7), ("infra", NA)],
    "tool_error_count": [("session", 1), ("flaky", 4), ("shell", 1), ("discovery", 2), ("carried", 3)],
    "mcp_tools_used": [("session", 1), ("discovery", 1), ("shell", 0), ("carried", NA)],
    "mcp_tool_calls": [("session", 1), ("discovery", 1), ("shell", 0), ("carried", NA), ("study", 27), ("never", NA)],
    "native_tool_calls": [("session", 9), ("discovery", 2), ("subagent", 6), ("carried", NA)],
    "mcp_discovery_calls": [("discovery", 1), ("session", 0), ("carried", NA)],
    "mcp_exposed": [("runner", True), ("session", NA)],
    "mcp_used": [("runner", False), ("session", NA), ("never", NA)],
    "loop_count": [("session", 1), ("flaky", 5), ("subagent", 1), ("carried", NA)],
    "backtrack_count": [("session", 1), ("subagent_edits", 1), ("shell", 0), ("carried", NA)],
    "exploration_breadth": [("session", 2), ("shell", 2), ("subagent_edits", 2), ("carried", NA)],
    "files_read": [("session", 2), ("shell", 1), ("discovery", 1), ("subagent", 1), ("carried", NA)],
    "files_edited": [("session", 1), ("shell", 2), ("discovery", 0), ("subagent_edits", 2), ("carried", NA), ("study", 1),
                     ("never", NA)],
    # The Explore subagent searched before the root's first edit (a walk of the root's calls first said False).
    "grep_before_edit": [("session", True), ("subagent", True), ("subagent_edits", True), ("shell", True),
                         ("flaky", NA), ("carried", NA)],
    "mcp_calls_by_tool": [("session", {"mcp__codegraph__get_dependencies": 1}), ("discovery", {"mcp__codemap__lookup": 1}),
                          ("shell", {}), ("carried", NA), ("never", NA),
                          ("study", {"mcp__sourcegraph__sg_list_files": 1, "mcp__sourcegraph__sg_keyword_search": 12,
                                     "mcp__sourcegraph__sg_read_file": 12, "mcp__sourcegraph__sg_commit_search": 2})],
    "time_to_first_edit_sec": [("session", 60.0), ("subagent", 60.0), ("shell", 40.0), ("subagent_edits", NA), ("flaky", NA)],
    "steps_to_first_edit": [("session", 3), ("subagent", 3), ("subagent_edits", 2), ("shell", 4), ("flaky", NA)],
    "duplicate_reads": [("session", 1), ("subagent", 1), ("shell", 0), ("carried", NA)],
    "tool_misuse": [("session", False), ("flaky", True), ("carried", True), ("infra", NA), ("unrecorded", NA)],
    "infinite_loop": [("session", False), ("flaky", True), ("carried", NA)],
    "budget_exhaustion": [("flaky", True), ("session", False), ("infra", False), ("unrecorded", NA), ("table", True)],
    "premature_stop": [("flaky", True), ("session", False), ("infra", False), ("unrecorded", NA), ("never", NA)],
    "context_omission": [("session", NA)],
    "calls_read": [("session", 3), ("subagent", 3), ("shell", 0), ("carried", NA)],
    "calls_search": [("session", 1), ("subagent", 1), ("carried", NA)],
    "calls_edit": [("session", 2), ("subagent_edits", 3), ("discovery", 1), ("carried", NA)],
    "calls_execute": [("session", 3), ("shell", 6), ("flaky", 10), ("carried", NA)],
    "calls_mcp": [("session", 1), ("discovery", 1), ("carried", NA)],
    "calls_other": [("subagent", 1), ("session", 0), ("carried", NA)],
}


@functools.cache
def _row(trial: str) -> dict:
    return trial_metrics(TRIALS[trial]())


def _same(got, expected) -> bool:
    if expected is None:
        return got is None
    if isinstance(expected, dict):
        return isinstance(got, str) and json.loads(got) == expected
    if isinstance(expected, bool) or isinstance(got, bool):
        return got is expected
    return got is not None and math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("metric_id", list(registry.METRICS))
def test_metric_definition(metric_id):
    cases = EXPECTED.get(metric_id)
    assert cases, f"{metric_id}: no hand-computed case in tests/test_metric_definitions.py (a metric is its entry and its test)"
    for trial, expected in cases:
        got = _row(trial)[metric_id]
        assert _same(got, expected), f"{metric_id} on the {trial!r} trial: {got!r}, computed by hand: {expected!r}"


def test_every_case_names_a_metric_of_the_registry():
    assert set(EXPECTED) <= set(registry.METRICS), sorted(set(EXPECTED) - set(registry.METRICS))
