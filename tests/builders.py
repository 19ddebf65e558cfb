"""Small builders for hand-made trajectories and trial folders used across tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def agent_step(step_id: int, calls: list[tuple[str, dict]] = (), *, prompt=100, completion=10, cached=0, cost=None,
               results: list[dict] | None = None, timestamp: str | None = None, **extra: Any) -> dict:
    """An ATIF agent step with tool calls ``[(name, args), ...]`` and matching results."""
    tool_calls = [{"tool_call_id": f"c{step_id}_{i}", "function_name": n, "arguments": a} for i, (n, a) in enumerate(calls)]
    step: dict[str, Any] = {"step_id": step_id, "source": "agent", "message": f"step {step_id}",
                            "metrics": {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached}}
    if cost is not None:
        step["metrics"]["cost_usd"] = cost
    if timestamp:
        step["timestamp"] = timestamp
    if tool_calls:
        step["tool_calls"] = tool_calls
        res = results if results is not None else [{"content": "ok"} for _ in tool_calls]
        step["observation"] = {"results": [dict(r, source_call_id=tc["tool_call_id"]) for r, tc in zip(res, tool_calls, strict=True)]}
    step.update(extra)
    return step


def trajectory(steps: list[dict], *, version: str = "ATIF-v1.6", final_metrics: dict | None = None,
               agent: str = "claude-code", model: str = "claude-sonnet-4-5") -> dict:
    steps = [{"step_id": 1, "source": "user", "message": "Fix the bug."}] + steps
    for i, s in enumerate(steps, start=1):
        s["step_id"] = i
    doc: dict[str, Any] = {"schema_version": version, "session_id": "s1",
                           "agent": {"name": agent, "version": "1.0", "model_name": model}, "steps": steps}
    if final_metrics is not None:
        doc["final_metrics"] = final_metrics
    return doc


def write_trial(root: Path, run_dir: str, task: str, *, traj: dict | None = None, reward: str | None = "1\n",
                ctrf: dict | None = None, result: dict | None = None, raw_trajectory: bytes | None = None) -> Path:
    """A run-layout trial folder ``root/run_dir/task`` with the given files."""
    d = root / run_dir / task
    (d / "agent").mkdir(parents=True, exist_ok=True)
    (d / "verifier").mkdir(parents=True, exist_ok=True)
    if raw_trajectory is not None:
        (d / "agent" / "trajectory.json").write_bytes(raw_trajectory)
    elif traj is not None:
        (d / "agent" / "trajectory.json").write_text(json.dumps(traj))
    if reward is not None:
        (d / "verifier" / "reward.txt").write_text(reward)
    if ctrf is not None:
        (d / "verifier" / "ctrf.json").write_text(json.dumps(ctrf))
    if result is not None:
        (d / "result.json").write_text(json.dumps(result))
    return d


def small_runs(root: Path, n_tasks: int = 3) -> Path:
    """Two profiles x n tasks x 1 repetition of valid trials, for CLI tests."""
    for p_i, profile in enumerate(["base", "mcp"]):
        for t in range(n_tasks):
            calls = [("Read", {"file_path": f"src/m{t}.py"}), ("Edit", {"file_path": f"src/m{t}.py", "old_string": "a", "new_string": "b"})]
            if profile == "mcp":
                calls.insert(0, ("mcp__codegraph__search_code", {"query": "x"}))
            traj = trajectory([agent_step(1, calls, prompt=1000 * (t + 1), completion=100)])
            write_trial(root, f"2026-01-0{p_i + 1}__10-00-00__{profile}", f"task-{t}", traj=traj,
                        reward="1\n" if (t + p_i) % 2 == 0 else "0\n")
    return root


def harbor_trial(root: Path, job: str, trial: str, task: str, *, reward: float | None = 1.0, agent: str = "claude-code",
                 model: str = "anthropic/claude-sonnet-4-5", kwargs: dict | None = None, started: str = "2026-03-01T10:00:00Z",
                 exception: str | None = None, traj: dict | None = None, source: str | None = None,
                 extra_config: dict | None = None) -> Path:
    """A Harbor trial folder ``root/job/trial`` with a TrialResult ``result.json`` as Harbor writes it."""
    d = root / job / trial
    (d / "agent").mkdir(parents=True, exist_ok=True)
    config = {"task": {"path": f"/tmp/{task}"}, "trial_name": trial, "trials_dir": f"jobs/{job}",
              "agent": {"name": agent, "model_name": model, "kwargs": kwargs or {}, "env": {}},
              "environment": {"type": "docker"}, "job_id": f"id-{job}", **(extra_config or {})}
    result = {"task_name": task, "trial_name": trial, "source": source, "config": config,
              "agent_info": {"name": agent, "version": "2.1.0"},
              "agent_result": {"n_input_tokens": 1000, "n_cache_tokens": 0, "n_output_tokens": 100},
              "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
              "exception_info": None if exception is None else {"exception_type": exception, "exception_message": "boom"},
              "started_at": started, "finished_at": started.replace("10:00", "10:05")}
    (d / "result.json").write_text(json.dumps(result))
    if traj is not None:
        (d / "agent" / "trajectory.json").write_text(json.dumps(traj))
    return d
