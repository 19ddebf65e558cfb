"""The blocked paired schedule and the spend projection; ``--dry-run`` as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from analysis_lib.bench.budget import BudgetGuard, project_spend
from analysis_lib.bench.runner import plan
from analysis_lib.bench.schedule import build_schedule, pairs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "params" / "example_manifest.json"
TASKS = [f"t{i:02d}" for i in range(12)]


def test_schedule_is_blocked_paired_and_seeded():
    s = build_schedule(TASKS, ["text", "codegraph"], 3, seed=11)
    assert len(s) == 12 * 2 * 3
    assert s == build_schedule(TASKS, ["text", "codegraph"], 3, seed=11)
    assert s != build_schedule(TASKS, ["text", "codegraph"], 3, seed=12)
    assert all(set(e) == {"pair", "task_id", "run", "condition", "position"} for e in s)
    groups = pairs(s)
    assert [g[0]["pair"] for g in groups] == list(range(36))
    for g in groups:
        # the two conditions of a pair run back to back, one at each position
        assert len(g) == 2 and {e["condition"] for e in g} == {"text", "codegraph"}
        assert [e["position"] for e in g] == [0, 1]
        assert len({(e["task_id"], e["run"]) for e in g}) == 1
    # every (task, run) exactly once; runs in blocks (all run 1 pairs before run 2)
    assert Counter((g[0]["task_id"], g[0]["run"]) for g in groups) == Counter({(t, r): 1 for t in TASKS for r in (1, 2, 3)})
    assert [g[0]["run"] for g in groups] == sorted(g[0]["run"] for g in groups)
    # randomised: both orders occur, and the task order differs between runs
    firsts = Counter(g[0]["condition"] for g in groups)
    assert firsts["text"] > 0 and firsts["codegraph"] > 0
    assert [g[0]["task_id"] for g in groups[:12]] != [g[0]["task_id"] for g in groups[12:24]]


def test_schedule_order_balance_over_many_pairs():
    s = build_schedule([f"t{i}" for i in range(200)], ["a", "b"], 1, seed=3)
    first_a = sum(1 for g in pairs(s) if g[0]["condition"] == "a")
    # Binomial(200, 0.5): 70..130 holds with probability > 0.9999
    assert 70 <= first_a <= 130


@pytest.mark.parametrize(
    "args, match",
    [
        ((TASKS, ["a", "b"], 0, 1), "runs_per_condition"),
        ((TASKS, ["a"], 1, 1), "conditions"),
        ((TASKS, ["a", "a"], 1, 1), "conditions"),
        ((["x", "x"], ["a", "b"], 1, 1), "task_ids"),
        ((TASKS, ["a", "b"], 1, "1"), "seed"),
    ],
)
def test_schedule_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        build_schedule(*args)


def test_plan_projection_and_dataframe():
    p = plan(EXAMPLE, 3, seed=5, phase_budget_usd=20.0)
    df = p.schedule
    assert list(df.columns) == ["pair", "task_id", "run", "condition", "position"]
    assert len(df) == 18 and df["pair"].nunique() == 9
    proj = p.projection
    # 18 trials x $1.50 prior = $27; guardrail 0.9 x 20 = 18 -> 6 pairs of $3 fit
    assert proj["projected_total_usd"] == pytest.approx(27.0)
    assert proj["limit_usd"] == pytest.approx(18.0)
    assert proj["pairs_within_limit"] == 6 and proj["fits"] is False
    assert "only 6 of 9 pairs fit" in p.describe()


def test_project_spend_and_guard_units():
    assert project_spend(10, 2, 0.0, 5.0)["fits"] is True
    g = BudgetGuard(10.0, prior_cost_per_trial_usd=1.0)
    assert g.check_pair(0, 2)  # 0 + 2 <= 9
    assert g.record(3.0) == 3.0 and g.record(None) == 3.0  # unknown cost is charged the running mean
    assert g.spent_usd == 6.0 and g.estimated_trials == 1
    assert not g.check_pair(1, 2)  # 6 + 2 x 3 = 12 > 9
    assert g.stopped and g.stopped_before_pair == 1 and "would pass 90%" in g.stop_reason
    with pytest.raises(ValueError, match="phase_budget_usd"):
        BudgetGuard(0, 1.0)


def _dry_run(tmp_path: Path, seed: int, name: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "PATH": str(tmp_path / "nobin")}  # no claude anywhere: nothing may run
    cmd = [sys.executable, "-m", "analysis_lib", "bench", "full", "--manifest", str(EXAMPLE), "--runs-per-condition", "3",
           "--phase-budget-usd", "1200", "--seed", str(seed), "--output", str(out), "--dry-run", "--runs-dir", str(tmp_path / "runs")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return proc, json.loads(out.read_text())


@pytest.mark.slow  # three `python -m analysis_lib bench full --dry-run` subprocesses (~12 s of CPU)
def test_dry_run_is_deterministic_and_runs_nothing(tmp_path):
    p1, a = _dry_run(tmp_path, 42, "a")
    p2, b = _dry_run(tmp_path, 42, "b")
    _, c = _dry_run(tmp_path, 43, "c")
    assert p1.returncode == 0, p1.stderr
    assert a["seed"] == 42 and a["dry_run"] is True and a["status"] == "planned"
    assert a == b and p1.stdout.splitlines()[:-1] == p2.stdout.splitlines()[:-1]
    assert a["schedule"] != c["schedule"]
    assert len(a["schedule"]) == 18
    assert "projected spend: $27.00" in p1.stdout and "nothing ran" in p1.stdout
    assert not (tmp_path / "runs").exists()


def test_plan_attributes_are_tables_and_short_facts():
    """00_run_benchmark lists a plan's public non-callable attributes: tables and short facts only."""
    import pandas as pd

    p = plan(EXAMPLE, 2, seed=5, phase_budget_usd=100.0)
    public = {k: getattr(p, k) for k in dir(p) if not k.startswith("_") and not callable(getattr(p, k))}
    frames = {k for k, v in public.items() if isinstance(v, pd.DataFrame)}
    assert frames == {"schedule", "spend"}
    assert all(len(repr(v)) < 400 for k, v in public.items() if k not in frames)
    assert repr(p.manifest) == "Manifest(name='example-ab', model='claude-sonnet-4-5-20250929', conditions=['text', 'codegraph'], tasks=3)"
    spend = p.spend.set_index("condition")
    assert spend.loc["total", "trials"] == 12 and spend.loc["text", "trials"] == 6
    assert spend.loc["total", "projected_usd"] == pytest.approx(18.0)
    assert p.entries() == p.schedule.to_dict("records")
