"""Harbor trial folders, CTRF reports and rewards, on real files written by others."""

from __future__ import annotations

import json

import pytest

from analysis_lib.core.trial import InputError
from analysis_lib.ingest.ctrf import parse_ctrf, read_ctrf
from analysis_lib.ingest.discover import discover
from analysis_lib.ingest.harbor import read_reward_json, reward_from_mapping
from analysis_lib.ingest.load import load_trials
from analysis_lib.ingest.read import read_source
from analysis_lib.metrics.trial_metrics import trial_metrics


def _one(path):
    sources, errors = discover(path.parent)
    src = next(s for s in sources if s.path == str(path))
    trials, errs = read_source(src)
    assert len(trials) == 1, errs
    return trials[0], errs


def test_gemini_failed_trial(real_fixtures):
    d = next(real_fixtures.glob("skillsbench-trajectories/shenghan/**/3d-scan-calc__35QwY5n"))
    trial, errs = _one(d)
    assert not [e for e in errs if e.severity == "error"]
    m = trial_metrics(trial)
    res = json.loads((d / "result.json").read_text())
    assert trial.profile == "gemini-cli@gemini-3-flash-preview" and trial.task_id == "3d-scan-calc"
    assert m["success"] is False and m["reward"] == 0.0
    assert (m["tests_passed"], m["tests_failed"]) == (1, 1)
    assert m["total_input_tokens"] == res["agent_result"]["n_input_tokens"] == 222272
    # agent_execution phase: 21:37:58.644196 -> 21:39:02.512007
    assert m["elapsed_sec"] == pytest.approx(63.867811)
    assert m["cost_estimated"] is True and m["total_cost_usd"] > 0  # no cost recorded; priced offline


def test_errored_before_agent_is_infra_error(real_fixtures):
    d = next(real_fixtures.glob("skillsbench-trajectories/**/azure-bgp-oscillation-route-leak__ST67pMM"))
    trial, _ = _one(d)
    m = trial_metrics(trial)
    assert m["infra_error"] is True and m["success"] is None and trial.exception.startswith("RuntimeError")


def test_agent_error_with_reward_counts_as_failure(real_fixtures):
    d = next(real_fixtures.glob("harbor-jobs-saud008/jobs/*/check-brickmake-rule-semantics-r__xwL2kAp"))
    trial, _ = _one(d)
    m = trial_metrics(trial)
    assert trial.exception.startswith("NonZeroAgentExitCodeError")
    assert len(trial.exception) <= 500  # the 16 KB message is cut
    assert m["success"] is False and m["infra_error"] is False
    assert trial.trajectory.schema_version == "ATIF-v1.7"


def test_passed_custom_agent_with_huge_cache(real_fixtures):
    d = next(real_fixtures.glob("harbor-jobs-codecontextbench/**/ccx-dep-trace-002_1"))
    trial, _ = _one(d)
    m = trial_metrics(trial)
    res = json.loads((d / "result.json").read_text())
    assert m["success"] is True
    assert m["total_input_tokens"] == res["agent_result"]["n_input_tokens"]
    assert trial.profile.startswith("claude-code") or "BaselineClaudeCodeAgent" in trial.profile


def test_nested_reward_json(real_fixtures):
    p = next(real_fixtures.glob("harbor-jobs-codecontextbench/**/reward.json"))
    doc = json.loads(p.read_text())
    fs = doc["final_score"]
    assert read_reward_json(p) == pytest.approx(fs["result"] / fs["total"])
    assert reward_from_mapping({"reward": 1}) == 1.0 and reward_from_mapping({"accuracy": 0.5}) == 0.5


def test_harbor_ctrf_float_seconds_and_spec_ms(real_fixtures):
    harbor = read_ctrf(next(real_fixtures.glob("skillsbench-trajectories/shenghan/**/verifier/ctrf.json")))
    assert [t.status for t in harbor].count("failed") == 1
    assert all(t.duration_sec is None or t.duration_sec < 600 for t in harbor)
    assert all(t.file_path and t.file_path.endswith(".py") for t in harbor)
    spec = json.loads((real_fixtures / "ctrf-spec-examples/comprehensive.json").read_text())
    tests = parse_ctrf(spec)
    raw = spec["results"]["tests"][0]["duration"]
    assert tests[0].duration_sec == pytest.approx(raw / 1000)  # the spec's integer milliseconds
    for name in ("minimal.json", "with-retries.json", "with-insights.json", "with-diagnostics.json"):
        assert read_ctrf(real_fixtures / "ctrf-spec-examples" / name)
    with pytest.raises(InputError, match="not a CTRF report"):
        parse_ctrf({"tests": []}, "x.json")


def test_every_real_run_fixture_ingests_without_error(real_fixtures):
    trials, errors = load_trials(real_fixtures)
    hard = [e for e in errors if e.severity == "error"]
    assert not hard, "\n".join(e.line() for e in hard)
    kinds = {t.source_format for t in trials}
    assert {"harbor", "atif"} <= kinds
    for t in trials:
        m = trial_metrics(t)
        assert m["profile"] and m["task_id"]
        assert m["total_tokens"] is None or m["total_tokens"] >= 0


LOST = {"id": "0b7d", "task_name": "task-lost", "started_at": "2026-01-02T10:00:00Z", "finished_at": "2026-01-02T10:00:04Z",
        "exception_info": {"exception_type": "DaytonaError", "exception_message": "sandbox never started",
                           "exception_traceback": "...", "occurred_at": "2026-01-02T10:00:04"}}


def test_a_folder_with_only_a_result_json_is_its_arms_infrastructure_error(tmp_path, run_cli):
    """What Harbor leaves when the sandbox never started (a result.json with exception_info, nothing else) is a
    trial of its arm lost to an infrastructure error, in the run layout and in a Harbor job folder alike; a
    result.json that is neither a trial's nor a job's is a warning row naming it."""
    from builders import agent_step, harbor_trial, small_runs, trajectory, write_trial

    runs = small_runs(tmp_path / "runs", 3)
    write_trial(runs, "2026-01-01__10-00-00__base", "task-lost", traj=trajectory([agent_step(1)]))
    lost = runs / "2026-01-02__10-00-00__mcp" / "task-lost"
    lost.mkdir()
    (lost / "result.json").write_text(json.dumps(LOST))
    odd = runs / "2026-01-02__10-00-00__mcp" / "task-odd"
    odd.mkdir()
    (odd / "result.json").write_text(json.dumps({"note": "written by some other tool"}))
    trials, errors = load_trials(runs)
    got = {(t.profile, t.task_id): t for t in trials}
    assert len(trials) == 8 and ("mcp", "task-lost") in got
    m = trial_metrics(got[("mcp", "task-lost")])
    assert m["infra_error"] is True and m["success"] is None
    assert got[("mcp", "task-lost")].exception == "DaytonaError: sandbox never started"
    warned = [e for e in errors if e.path == str(odd / "result.json")]
    assert len(warned) == 1 and warned[0].severity == "warning" and "neither a trial's result" in warned[0].message
    # The command line's summary counts the trial and the warning; the design audit counts the lost trial in its arm.
    res = run_cli(runs, "--no-llm", "-o", tmp_path / "out", "-q")
    assert "analysed 8 trials (2 profiles, 4 tasks)" in res.stderr and "1 warnings" in res.stderr
    audit = (tmp_path / "out" / "design_audit.csv").read_text()
    assert "infra" in audit

    # A Harbor job folder: the same trial, beside two complete ones.
    job = tmp_path / "jobs"
    for i in range(2):
        harbor_trial(job, "2026-03-01__10-00-00", f"t{i}__abc{i}", f"t{i}")
    (job / "2026-03-01__10-00-00" / "result.json").write_text(json.dumps({"id": "job", "n_total_trials": 3, "stats": {}}))
    lost = job / "2026-03-01__10-00-00" / "t2__abc2"
    lost.mkdir()
    (lost / "result.json").write_text(json.dumps({**LOST, "task_name": "t2", "config": {
        "agent": {"name": "claude-code", "model_name": "anthropic/claude-sonnet-4-5"}}}))
    trials, errors = load_trials(job)
    got = {t.task_id: t for t in trials}
    assert sorted(got) == ["t0", "t1", "t2"] and not [e for e in errors if e.severity == "error"]
    assert got["t2"].profile == got["t0"].profile and trial_metrics(got["t2"])["infra_error"] is True
