"""Hand-built trials and schema-valid scripted answers for the judge tests (no real data needed)."""

from __future__ import annotations

import json

from analysis_lib.core.trial import Step, ToolCall, Trajectory, Trial

PROFILES = ("text", "codegraph")


def make_trial(profile: str, task: str, rep: int, success: bool, n_steps: int = 8, mcp: bool = False, long_output: int = 0) -> Trial:
    """A small trajectory: task prompt, a grep, reads, an edit, a test run; MCP calls when asked."""
    steps = [Step(step_id=1, source="user", message=f"Fix the bug in {task}: the parser drops trailing commas.")]
    for i in range(2, n_steps + 1):
        calls = []
        if mcp and i == 2:
            calls.append(
                ToolCall(
                    step_id=i, name="mcp__codegraph__get_dependencies", arguments={"symbol": "parse"}, output="parse -> tokenize, emit"
                )
            )
        elif i == n_steps:
            ok = "5 passed" if success else "FAILED test_trailing_comma - AssertionError"
            calls.append(ToolCall(step_id=i, name="Bash", arguments={"command": "pytest -q"}, output=ok, is_error=not success))
        elif i % 3 == 0:
            calls.append(
                ToolCall(
                    step_id=i, name="Edit", arguments={"file_path": f"src/{task}.py", "old_string": "a", "new_string": "b"}, output="ok"
                )
            )
        else:
            out = "def parse(tokens):\n    ..." + ("x" * long_output)
            calls.append(ToolCall(step_id=i, name="Read", arguments={"file_path": f"src/{task}.py"}, output=out, output_chars=len(out)))
        steps.append(Step(step_id=i, source="agent", message=f"Step {i}: looking at the parser of {task}.", tool_calls=calls))
    traj = Trajectory(schema_version="ATIF-v1.4", agent_name="claude-code", model_name="claude-x", steps=steps)
    return Trial(
        profile=profile,
        task_id=task,
        repetition=rep,
        run_id=f"run-{profile}",
        trial_path=f"runs/x/{profile}/{task}/{rep}",
        source_format="run_layout",
        trajectory=traj,
        reward=1.0 if success else 0.0,
    )


def make_trials(n_tasks: int = 3, reps: int = 1) -> list[Trial]:
    """Two profiles x n_tasks x reps; codegraph uses MCP; the baseline fails task 0, both fail task 1."""
    trials = []
    for t in range(n_tasks):
        for rep in range(reps):
            task = f"task-{t}"
            trials.append(make_trial("text", task, rep, success=t >= 2))
            trials.append(make_trial("codegraph", task, rep, success=t != 1, mcp=True))
    return trials


STRATEGY = {
    "primary_strategy": "grep_and_fix",
    "strategy_quality": 0.7,
    "adaptation_events": [{"step": 3, "description": "switched to the tests"}],
}
FAILURE = {"root_cause": "premature_termination", "critical_step": 8, "counterfactual": "Run the failing test again after the edit."}
MCP = {
    "utilization_quality": 0.8,
    "init_timing": "early",
    "dependency_leverage": 0.6,
    "search_effectiveness": 0.5,
    "missed_opportunities": ["step 5: could have asked for callers"],
    "effective_uses": ["step 2: dependencies of parse"],
}
SYNTHESIS = {
    "task_difficulty_ranking": ["task-1", "task-0", "task-2"],
    "mcp_benefit_patterns": ["dependency lookups before edits"],
    "mcp_overhead_patterns": ["extra calls on easy tasks"],
    "emergent_findings": ["failures end with an unverified edit"],
    "paper_claims": [{"statement": "codegraph solved more tasks", "evidence": "2/3 vs 1/3", "confidence": "low"}],
    "limitations": ["three tasks"],
    "future_work": ["more tasks"],
}


def schema_of(body: dict) -> tuple[str, dict]:
    rf = body.get("response_format") or {}
    js = rf.get("json_schema") or {}
    return js.get("name", ""), js.get("schema", {})


def comparative_answer(schema: dict) -> dict:
    winners = schema.get("properties", {}).get("winner", {}).get("enum") or ["tie"]
    return {
        "winner": winners[0],
        "key_differentiator": "looked up dependencies before editing",
        "quotes": [{"profile": winners[0], "step": 2, "text": "looking at the parser"}],
        "paragraph": f"{winners[0]} solved the task in fewer steps.",
    }


def answer_for(body: dict) -> str:
    """A schema-valid JSON answer chosen by the response schema's name (a callable for LLMServer)."""
    name, schema = schema_of(body)
    table = {"StrategyAnalysis": STRATEGY, "FailureAnalysis": FAILURE, "MCPUtilization": MCP, "Synthesis": SYNTHESIS}
    if name == "ComparativeNarrative":
        return json.dumps(comparative_answer(schema))
    return json.dumps(table.get(name, {}))
