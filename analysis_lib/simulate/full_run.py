"""The benchmark runner's record (``full_run.json``) of a simulated run, for RESULTS.md and its tests.

SIMULATED DATA, not findings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..bench.schedule import build_schedule, trial_key
from ..core import outputs as files
from ..core.fileio import atomic_write_json
from .model import SIMULATOR, round_floats
from .runs import AGENT_VERSION, MODEL, NOTE, _package

__all__ = ["full_run_json", "write_full_run"]


def full_run_json(runs_dir: str | os.PathLike, phase_budget_usd: float = 100.0, missing: int = 0) -> dict[str, Any]:
    """A benchmark runner's ``full_run.json`` (``bench/runner.py``'s shape) for simulated runs, marked simulated.

    The schedule is the runner's blocked, randomised, paired one (:func:`analysis_lib.bench.schedule.build_schedule`
    with the simulation's seed); each trial's verdict is its ``verifier/reward.txt`` (an evaluation
    error where there is none, as for the infrastructure-error trial) and its cost the Harbor
    ``agent_result.cost_usd``. ``missing`` drops the verdicts of that many trials (the last ones of the
    schedule) to ``not_evaluated``, to exercise the completeness check. Spend and budget follow the
    runner's guardrail state. Deterministic: the times are the simulated ones.
    """
    root = Path(runs_dir)
    index = json.loads((root / files.RUN_INDEX).read_text("utf-8"))
    if index.get("simulated") is not True:
        raise ValueError(f'{root}: not a simulator output (index.json has no "simulated": true)')
    run_of = {(r["profile"], int(r["repetition"])): r["run_id"] for r in index["runs"]}
    schedule = build_schedule(index["tasks"], index["profiles"], int(index["repetitions"]), int(index["seed"]))
    rows, spent = [], 0.0
    for i, e in enumerate(schedule):
        rel = f"{run_of[(e['condition'], e['run'])]}/{e['task_id']}"
        reward_file = root / rel / "verifier" / "reward.txt"
        result = json.loads((root / rel / "result.json").read_text("utf-8"))
        cost = (result.get("agent_result") or {}).get("cost_usd")
        if i >= len(schedule) - missing:
            outcome, evaluation = "not_evaluated", None
        elif reward_file.is_file():
            passed = float(reward_file.read_text().strip()) == 1.0
            outcome, evaluation = ("passed" if passed else "failed"), {"status": "ok", "passed": passed}
        else:
            outcome, evaluation = "evaluation_error", {"status": "error", "passed": None, "error": "no verifier result"}
        status = "agent_error" if result.get("exception_info") and cost is None else "completed"
        spent += cost or 0.0
        rows.append(
            {
                **e,
                "key": trial_key(e),
                "status": status,
                "outcome": outcome,
                "evaluation": evaluation,
                "cost_usd": cost,
                "trial_dir": rel,
                "environment": {
                    "model": MODEL,
                    "model_pinned": MODEL,
                    "tool_commit": "simulated",
                    "target_repo_commit": "simulated",
                    "adapter": "simulated",
                    "adapter_version": AGENT_VERSION,
                },
                "started_at": result.get("started_at"),
                "finished_at": result.get("finished_at"),
            }
        )
    n = len(rows)
    count = lambda f: sum(1 for r in rows if f(r))  # noqa: E731
    per_trial = spent / n if n else 0.0
    return {
        "generator": SIMULATOR,
        "simulated": True,
        "note": NOTE,
        "kind": "bench_full_run",
        "dry_run": False,
        "status": "complete",
        # The manifest names each task's repository, as a real one does (the simulator's package of the task).
        "manifest": {
            "name": "simulated-ab",
            "source": None,
            "sha256": None,
            "content": {"name": "simulated-ab", "tasks": [{"id": t, "repo": f"simulated/{_package(t)}"} for t in index["tasks"]]},
        },
        "manifest_sha256": None,
        "seed": int(index["seed"]),
        "runs_per_condition": int(index["repetitions"]),
        "conditions": list(index["profiles"]),
        "tasks": list(index["tasks"]),
        "schedule": schedule,
        "projection": {
            "projected_total_usd": round(per_trial * n, 6),
            "cost_per_trial_usd": round(per_trial, 6),
            "basis": "simulated",
            "phase_budget_usd": phase_budget_usd,
            "limit_usd": 0.9 * phase_budget_usd,
            "pairs": n // len(index["profiles"]),
            "fits": per_trial * n <= 0.9 * phase_budget_usd,
        },
        "started_at": index["runs"][0]["started_at"],
        "updated_at": rows[-1]["finished_at"] if rows else None,
        "environment": {"pinned": {"model": MODEL, "tool_commit": "simulated"}, "tool_commit": "simulated", "warnings": []},
        "environment_warnings": [],
        "budget": {
            "phase_budget_usd": phase_budget_usd,
            "stop_fraction": 0.9,
            "limit_usd": round(0.9 * phase_budget_usd, 6),
            "spent_usd": round(spent, 6),
            "measured_trials": count(lambda r: r["cost_usd"] is not None),
            "estimated_trials": 0,
            "cost_per_trial_usd": round(per_trial, 6),
            "stopped": False,
            "stop_reason": None,
            "stopped_before_pair": None,
        },
        "trials": rows,
        "summary": {
            "trials": n,
            "finished": n,
            "pending": 0,
            "skipped_budget": 0,
            "passed": count(lambda r: r["outcome"] == "passed"),
            "failed": count(lambda r: r["outcome"] == "failed"),
            "evaluation_errors": count(lambda r: r["outcome"] == "evaluation_error"),
            "agent_errors": count(lambda r: r["status"] == "agent_error"),
        },
    }


def write_full_run(runs_dir: str | os.PathLike, output: str | os.PathLike | None = None, **kwargs: Any) -> Path:
    """Write :func:`full_run_json` to ``output`` (default ``<runs_dir>/full_run.json``), atomically."""
    out = Path(output) if output is not None else Path(runs_dir) / files.FULL_RUN
    obj = full_run_json(runs_dir, **kwargs)
    # Where the runs are, relative to this file, so that `results` finds them from anywhere.
    obj["runs_dir"] = Path(os.path.relpath(Path(runs_dir).resolve(), out.parent.resolve())).as_posix()
    return atomic_write_json(out, round_floats(obj))
