"""Study designs: arms declared by a study file, tasks paired across arms, reruns, and the design audit."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from builders import agent_step, harbor_trial, small_runs, trajectory

from analysis_lib import analyse
from analysis_lib.core.success import reward_succeeds
from analysis_lib.ingest.atif import parse_trajectory
from analysis_lib.metrics.tokens import trajectory_tokens
from analysis_lib.study.baseline import resolve_baseline
from analysis_lib.study.placement import assign
from analysis_lib.study.plan import load_plan
from analysis_lib.study.study_file import DesignError, glob_regex, load_design, parse_design


def _study(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(text)
    return p


TWO_ARMS = """
name: skills vs no skills
baseline: noskills
arms:
  noskills: {fields: {agent.kwargs.skills_dir: null}}
  skills: {fields: {agent.kwargs.skills_dir: /skills}, mcp: false}
"""


# --------------------------------------------------------------------------- the study file


@pytest.mark.parametrize(("text", "message"), [
    ("name: x\n", "arms: Field required"),
    ("name: x\narms: {a: {paths: ['a/**']}}\ncolour: red\n", "colour: unknown key"),
    ("name: x\narms: {a: {}}\n", "arms.a: an arm needs paths (globs) or fields"),
    ("name: x\narms: {a: {paths: ['a']}}\ntask_id: {regex: 'mcp_(.+)'}\n", "needs a named group (?P<task>...)"),
    ("name: x\narms: {a: {paths: ['a']}}\ntask_id: {folder: 1, regex: '(?P<task>.+)'}\n", "exactly one of folder"),
    ("name: x\narms: {a: {paths: ['a']}}\nbaseline: b\n", "baseline 'b' is not an arm; arms are ['a']"),
    ("name: x\narms: {a: {paths: ['a']}}\nsuccess: reward is high\n", "success: success rule 'reward is high'"),
    ("name: x\narms: {a: {paths: ['/abs/**']}}\n", "give a relative path"),
    ("[1, 2]\n", "a study file is a mapping"),
    ("name: [unclosed\n", "not valid YAML"),
])
def test_a_bad_study_file_is_one_line_naming_the_file_and_the_key(tmp_path, text, message):
    p = _study(tmp_path, text)
    with pytest.raises(DesignError) as err:
        load_design(p)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(p)) and message in line


def test_unreadable_study_files_say_so(tmp_path):
    with pytest.raises(DesignError, match="study file not found"):
        load_design(tmp_path / "missing.yaml")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(DesignError, match="not UTF-8"):
        load_design(bad)


def test_globs_stay_within_a_folder_name_unless_they_say_double_star():
    assert glob_regex("*/baseline/**").match("csb/baseline/task/task_1")
    assert not glob_regex("*/baseline/**").match("a/b/baseline/task")  # * is one folder
    assert glob_regex("**/baseline/**").match("a/b/baseline/task")
    assert glob_regex("baseline").match("baseline/task/trial")  # a folder selects everything below it
    assert not glob_regex("baseline").match("baseline-2/task")
    assert glob_regex("jobs/*-mcp-*").match("jobs/2026-mcp-run/trial")
    assert not glob_regex("jobs/*-mcp-*").match("jobs/2026-base-run/trial")


def test_success_rules():
    assert reward_succeeds(1.0) and not reward_succeeds(0.99)
    assert reward_succeeds(0.01, "reward > 0") and not reward_succeeds(0.0, "reward > 0")
    assert reward_succeeds(0.5, "reward >= 0.5") and not reward_succeeds(0.49, "reward >= 0.5")


def test_assignment_reads_task_ids_repetitions_and_versions():
    design = parse_design({"name": "x", "arms": {
        "base": {"paths": ["*/base/**"]},
        "mcp": {"paths": ["*/mcp/**"], "task_id": {"regex": r"^mcp_(?P<task>.+)_[a-z0-9]{6}$"}}},
        "repetition": {"regex": r"_(?P<rep>\d+)$"}, "dataset_version": {"field": "source"}})
    a = assign(design, rel_path="suite/mcp/t1/t1_2", task_id="mcp_t1_abc123", task_name="mcp_t1_abc123",
               trial_name=None, record={"source": "bench@2.1"})
    assert (a.arm, a.task_id, a.repetition, a.dataset_version) == ("mcp", "t1", 2, "bench@2.1")
    b = assign(design, rel_path="suite/base/t1/t1_1", task_id="t1", task_name="t1", trial_name=None, record={})
    assert (b.arm, b.task_id, b.repetition, b.dataset_version) == ("base", "t1", 1, None)
    none = assign(design, rel_path="suite/other/t1/t1_1", task_id="t1", task_name="t1", trial_name=None, record={})
    assert none.arm is None and "matches no arm" in none.problem


# --------------------------------------------------------------------------- arms in a real-shaped study


def _skills_jobs(root: Path, n_tasks: int = 3) -> Path:
    """Two Harbor jobs of one agent and model; the second with a skills folder configured."""
    for t in range(n_tasks):
        harbor_trial(root, "2026-03-01__10-00-00", f"task-{t}__aaa{t}", f"task-{t}", reward=float(t % 2),
                     started=f"2026-03-01T10:0{t}:00Z")
        harbor_trial(root, "2026-03-02__10-00-00", f"task-{t}__bbb{t}", f"task-{t}", reward=1.0,
                     kwargs={"skills_dir": "/skills"}, started=f"2026-03-01T11:0{t}:00Z")
    return root


def test_two_jobs_of_one_agent_and_model_pool_with_a_warning_naming_the_difference(tmp_path):
    runs = _skills_jobs(tmp_path / "runs")
    result = analyse(runs, tmp_path / "out", workers=1, cache=False)
    assert result.metrics["profile"].nunique() == 1 and sorted(result.metrics["repetition"].unique()) == [1, 2]
    pooled = [f for f in result.audit.findings if f.check == "pooled"]
    assert len(pooled) == 1 and "agent.kwargs.skills_dir" in pooled[0].message and "--study" in pooled[0].message
    findings = pd.read_csv(tmp_path / "out" / "design_findings.csv")
    assert (findings["check"] == "pooled").sum() == 1


def test_a_study_file_splits_the_jobs_into_arms_by_configuration_and_pairs_their_tasks(tmp_path, run_cli):
    runs = _skills_jobs(tmp_path / "runs")
    study = _study(tmp_path, TWO_ARMS)
    proc = run_cli(runs, "--study", study, "--no-llm", "-q", "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "pooled" not in proc.stderr
    metrics = pd.read_csv(tmp_path / "out" / "metrics_detail.csv")
    assert metrics.groupby("profile").size().to_dict() == {"noskills": 3, "skills": 3}
    assert set(metrics["repetition"]) == {1}
    comp = pd.read_csv(tmp_path / "out" / "comparisons.csv")
    success = comp[comp["metric"] == "success"].iloc[0]
    assert (success["profile_a"], success["profile_b"], success["n_pairs"]) == ("noskills", "skills", 3)
    audit = pd.read_csv(tmp_path / "out" / "design_audit.csv").set_index("arm")
    assert audit.loc["noskills", "baseline"] and audit.loc["skills", "n_pairs_complete"] == 3
    assert audit.loc["skills", "rule"] == 'study file: agent.kwargs.skills_dir = "/skills"'
    design = json.loads((tmp_path / "out" / "study.json").read_text())
    assert design["baseline"] == "noskills" and design["baseline_source"] == "the study file"
    assert design["design"]["arms"]["skills"]["fields"] == {"agent.kwargs.skills_dir": "/skills"}
    report = (tmp_path / "out" / "comparison_report.md").read_text()
    assert report.index("## Design audit") < report.index("# Profile comparisons")
    listing = run_cli(runs, "--study", study, "--list", "-o", tmp_path / "o2")
    assert "arms (study file " in listing.stdout and "noskills: 3 trials, 3 tasks; study file: agent.kwargs.skills_dir = null" in listing.stdout


def test_renamed_tasks_pair_under_a_regex_rule(tmp_path):
    runs = tmp_path / "runs"
    for t in ("alpha-task", "beta-task"):
        harbor_trial(runs, "base-job", f"{t}__x", t, reward=1.0)
        harbor_trial(runs, "mcp-job", f"mcp_{t}__y", f"mcp_{t}_q1w2e3", reward=0.0)
    plain = analyse(runs, None, workers=1, cache=False)
    assert any("appear under two names" in f.message for f in plain.audit.findings)
    study = _study(tmp_path, """
name: renamed
baseline: base
arms:
  base: {paths: [base-job]}
  mcp: {paths: [mcp-job], mcp: true}
task_id: {regex: '^(?:mcp_)?(?P<task>.+?)(?:_[a-z0-9]{6})?$'}
""")
    result = analyse(runs, None, workers=1, cache=False, design=study)
    assert sorted(result.metrics["task_id"].unique()) == ["alpha-task", "beta-task"]
    assert result.audit.arms.set_index("arm").loc["mcp", "n_pairs_complete"] == 2


@pytest.mark.parametrize(("rule", "kept_reward", "reps"), [("first", 0.0, [1]), ("last", 1.0, [1]), ("all", None, [1, 2])])
def test_reruns_keep_first_last_or_all_and_are_listed(tmp_path, rule, kept_reward, reps):
    runs = tmp_path / "runs"
    harbor_trial(runs, "base", "t__a/t_1", "t", reward=1.0)
    harbor_trial(runs, "mcp", "t__b/t_1", "t", reward=0.0, started="2026-03-01T10:00:00Z")
    harbor_trial(runs, "mcp-backfill", "t__c/t_1", "t", reward=1.0, started="2026-03-02T10:00:00Z")
    study = _study(tmp_path, f"""
name: reruns
baseline: base
arms:
  base: {{paths: [base]}}
  mcp: {{paths: ['mcp*']}}
repetition: {{regex: '_(?P<rep>\\d+)$'}}
reruns: {rule}
""")
    result = analyse(runs, tmp_path / "out", workers=1, cache=False, design=study)
    mcp = result.metrics[result.metrics["profile"] == "mcp"]
    assert sorted(mcp["repetition"]) == reps
    if kept_reward is not None:
        assert mcp["reward"].tolist() == [kept_reward]
    assert len(result.reruns) == 2 and result.reruns["kept"].sum() == (2 if rule == "all" else 1)
    note = next(f for f in result.audit.findings if f.check == "reruns")
    assert f"kept: {rule}" in note.message


def test_a_trial_in_no_arm_is_left_out_with_a_warning_row(tmp_path):
    runs = _skills_jobs(tmp_path / "runs", n_tasks=2)
    study = _study(tmp_path, "name: one arm\narms:\n  noskills: {fields: {agent.kwargs.skills_dir: null}}\n")
    result = analyse(runs, tmp_path / "out", workers=1, cache=False, design=study)
    assert len(result.metrics) == 2
    rows = result.errors[result.errors["stage"] == "design"]
    assert len(rows) == 2 and rows["message"].str.contains("matches no arm of the study design").all()
    assert any(f.check == "design" and "2 trials matched no arm" in f.message for f in result.audit.findings)


def _two_jobs(runs: Path) -> Path:
    for task in ("t1", "t2"):
        harbor_trial(runs, "base", f"{task}__a", task)
        harbor_trial(runs, "mcp", f"{task}__b", task, reward=0.0)
    return runs


def _digest(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` but its lock (a run takes it before anything else)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".lock")}


@pytest.mark.parametrize(("arms", "message"), [
    # An arm whose selector matches nothing: named with its selector.
    ("  base: {paths: [base]}\n  mcp: {paths: [mpc], mcp: true}\n",
     "arms.mcp: its selector (path mpc) matches none of the 4 trials read; every arm's selector must match a trial"),
    # Arms that select the same trials: both named, with a trial they share (the baseline is not blamed).
    ("  base: {paths: ['*']}\n  mcp: {paths: ['*']}\n",
     "arms base and mcp overlap: both select base/t1__a; an arm's selectors must not match another arm's trials"),
    # Arms that share only some trials.
    ("  base: {paths: [base]}\n  mcp: {paths: [mcp, base/t2__a]}\n",
     "arms base and mcp overlap: both select base/t2__a; an arm's selectors must not match another arm's trials"),
])
@pytest.mark.parametrize("out_exists", [False, True])
def test_a_study_file_whose_arms_cannot_work_stops_in_one_line_and_writes_nothing(tmp_path, run_cli, arms, message,
                                                                                 out_exists):
    runs = _two_jobs(tmp_path / "runs")
    study = _study(tmp_path, "name: cannot work\nbaseline: base\narms:\n" + arms)
    out = tmp_path / "out"
    if out_exists:  # an earlier analysis' outputs stay as they were
        out.mkdir()
        (out / "metrics_detail.csv").write_text("earlier\n")
    before = _digest(out) if out_exists else None
    proc = run_cli(runs, "--study", study, "--no-llm", "-q", "-o", out)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: {study}: {message}"]
    assert (_digest(out) == before) if out_exists else not out.exists()


def test_the_paper_pipeline_stops_before_any_notebook_on_arms_that_cannot_work(tmp_path):
    from analysis_lib.cli.pipeline import ParamsError, preflight

    _two_jobs(tmp_path / "runs")
    _study(tmp_path, "name: cannot work\nbaseline: base\narms:\n  base: {paths: [base]}\n  mcp: {paths: [nothing]}\n")
    params = {"runs_dir": "runs", "study_file": "study.yaml"}
    with pytest.raises(ParamsError) as err:
        preflight("p.yaml", params, tmp_path, {"runs_dir": {"default": "runs"}})
    assert str(err.value) == ("p.yaml: study_file: study.yaml: arms.mcp: its selector (path nothing) matches none of the 4 "
                              "trials read; every arm's selector must match a trial; nothing was run or written")


def test_the_audit_flags_configuration_beyond_the_treatment_but_not_the_treatment_itself(tmp_path):
    """Arms declared by a field (the skills folder) and offered MCP or not: the field and the MCP server are the
    treatment; a CPU limit set in one arm only is not, and is flagged, as are jobs run apart and longer instructions."""
    runs = tmp_path / "runs"
    for t in range(3):
        harbor_trial(runs, "job-a", f"t{t}__a", f"t{t}", traj=trajectory([agent_step(1)]))
        harbor_trial(runs, "job-b", f"t{t}__b", f"t{t}", kwargs={"skills_dir": "/skills"},
                     extra_config={"environment": {"type": "docker", "override_cpus": 4},
                                   "agent": {"name": "claude-code", "model_name": "anthropic/claude-sonnet-4-5",
                                             "kwargs": {"skills_dir": "/skills"}, "env": {},
                                             "mcp_servers": [{"name": "codegraph"}]}},
                     traj=trajectory([agent_step(1)]))
    for d in runs.glob("job-*/*/agent/trajectory.json"):  # the instruction: 100 characters, 250 with the skills
        doc = json.loads(d.read_text())
        doc["steps"].insert(0, {"step_id": 0, "source": "user", "message": "x" * (250 if "job-b" in str(d) else 100)})
        d.write_text(json.dumps(doc))
    study = _study(tmp_path, "name: skills\nbaseline: plain\narms:\n  plain: {fields: {agent.kwargs.skills_dir: null}}\n"
                             "  skills: {fields: {agent.kwargs.skills_dir: /skills}, mcp: true}\n")
    result = analyse(runs, None, workers=1, cache=False, design=study)
    by = {f.check: f.message for f in result.audit.findings}
    assert by["configuration"] == ("skills differs from plain beyond the treatment: environment.override_cpus = unset (3) in "
                                   "plain, 4 (3) in skills")
    assert "instructions are 2.5× as long" in by["instructions"] and "plain: job-a; skills: job-b" in by["assignment"]
    # One job holding both arms (a randomised schedule) is no separate-jobs finding.
    assert "assignment" not in {f.check for f in analyse(runs, None, workers=1, cache=False, design=_study(
        tmp_path, "name: by task\nbaseline: a\narms:\n  a: {paths: ['*/t0__*', '*/t1__a', '*/t2__a']}\n"
                  "  b: {paths: ['*/t1__b', '*/t2__b']}\n")).audit.findings}


def test_a_design_with_no_complete_pair_stops_the_comparisons_in_one_line(tmp_path, run_cli):
    runs = tmp_path / "runs"
    harbor_trial(runs, "base", "a__1", "task-a")
    harbor_trial(runs, "mcp", "b__1", "task-b")
    study = _study(tmp_path, "name: disjoint\nbaseline: base\narms:\n  base: {paths: [base]}\n  mcp: {paths: [mcp]}\n")
    proc = run_cli(runs, "--study", study, "--no-llm", "-q", "-o", tmp_path / "out")
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == ["error: the design cannot support the planned comparisons: no task has a usable trial in both base "
                      "and mcp: nothing to compare (see design_audit.csv); no comparisons written"]
    assert (tmp_path / "out" / "metrics_detail.csv").exists() and not (tmp_path / "out" / "comparisons.csv").exists()


def test_the_audit_flags_concentrated_infrastructure_errors_time_gaps_and_dataset_versions(tmp_path):
    runs = tmp_path / "runs"
    for t in range(4):
        harbor_trial(runs, "base", f"t{t}__a", f"t{t}", source="bench@2.0", started="2026-03-01T10:00:00Z")
        harbor_trial(runs, "mcp", f"t{t}__b", f"t{t}", source="bench@2.1", started="2026-03-12T10:00:00Z",
                     reward=None if t < 2 else 1.0, exception="DaytonaError" if t < 2 else None)
    study = _study(tmp_path, "name: gaps\nbaseline: base\narms:\n  base: {paths: [base]}\n  mcp: {paths: [mcp]}\n")
    result = analyse(runs, None, workers=1, cache=False, design=study)
    msgs = {f.check: f.message for f in result.audit.findings}
    assert "mcp 2 of 4" in msgs["infrastructure"] and "concentrated in one arm" in msgs["infrastructure"]
    assert "mcp ran 11.0 days after base" in msgs["time"]
    assert "2 dataset versions" in msgs["dataset"] and "bench@2.0" in msgs["dataset"]
    arms = result.audit.arms.set_index("arm")
    assert arms.loc["mcp", "infra_reasons"] == "DaytonaError ×2"
    assert arms.loc["mcp", "n_pairs_complete"] == 2 and arms.loc["mcp", "n_pairs_incomplete"] == 2


def test_tb1_submissions_without_metadata_do_not_pool_silently(real_fixtures, tmp_path):
    import shutil

    runs = tmp_path / "runs"
    src = real_fixtures / "tb1-leaderboard"
    # Two submissions (here: two copies of one real run), each without its run_metadata.json.
    for name, run in (("submission-a", "2025-08-07__20-46-16"), ("submission-b", "2025-08-09__11-00-00")):
        shutil.copytree(src / "20250825_swe-agent-mini_claude-4-sonnet" / "2025-08-07__20-46-16", runs / name / run)
    for meta in runs.rglob("run_metadata.json"):
        meta.unlink()
    result = analyse(runs, None, workers=1, cache=False)
    assert set(result.metrics["profile"]) == {"tb1"} and set(result.metrics["repetition"]) == {1, 2}
    pooled = [f for f in result.audit.findings if f.check == "pooled"]
    assert pooled and "submission-a" in pooled[0].message and "submission-b" in pooled[0].message


# --------------------------------------------------------------------------- baseline


def test_one_rule_chooses_the_baseline(tmp_path):
    runs = small_runs(tmp_path / "runs")
    (runs / "index.json").write_text(json.dumps({"baseline": "mcp"}))
    plan = load_plan()
    design = parse_design({"name": "x", "baseline": "base", "arms": {"base": {"paths": ["*base*"]}, "mcp": {"paths": ["*mcp*"]}}})
    profiles = ["base", "mcp"]
    assert resolve_baseline(profiles).name == "base"  # first in sort order
    assert resolve_baseline(profiles, runs_dir=runs).source == "the runs folder's index.json"
    assert resolve_baseline(profiles, runs_dir=runs, design=design).name == "base"
    planned = plan.model_copy(update={"pairing": plan.pairing.model_copy(update={"baseline": "mcp"})})
    assert resolve_baseline(profiles, plan=planned, design=design).name == "mcp"
    assert resolve_baseline(profiles, explicit="base", plan=planned).source == "chosen explicitly"
    with pytest.raises(ValueError, match=r"baseline 'text' \(the analysis plan's pairing.baseline\) is not a profile"):
        resolve_baseline(profiles, plan=plan.model_copy(update={"pairing": plan.pairing.model_copy(update={"baseline": "text"})}))


# --------------------------------------------------------------------------- tokens counted once per API call


def _claude_blocks() -> dict:
    """Harbor's Claude Code conversion, as on a real CodeScaleBench trajectory: one step per content block,
    the call's prompt, cached and cache-write counts repeated, the output growing while it streams;
    cache writes left out of prompt_tokens. The counts are those of its first three API calls."""
    calls = [(16057, 16048, 5233, [3, 3, 467]), (21293, 21281, 499, [4, 110]), (21792, 21780, 1590, [2, 139])]
    steps = []
    for prompt, cached, written, outputs in calls:
        for out in outputs:
            steps.append(agent_step(0, prompt=prompt, completion=out, cached=cached) | {
                "metrics": {"prompt_tokens": prompt, "completion_tokens": out, "cached_tokens": cached,
                            "extra": {"cache_creation_input_tokens": written, "cache_read_input_tokens": cached}}})
    naive = {"total_prompt_tokens": sum(c[0] * len(c[3]) for c in calls),
             "total_completion_tokens": sum(sum(c[3]) for c in calls),
             "total_cached_tokens": sum(c[1] * len(c[3]) for c in calls)}
    return trajectory(steps, final_metrics=naive, agent="claude-code", model="claude-haiku-4-5-20251001")


def test_claude_code_usage_repeated_on_every_block_is_counted_once():
    traj = parse_trajectory(_claude_blocks(), "t.json")
    tokens = trajectory_tokens(traj)
    # Per call: prompt + cache writes (left out by the producer), output = the last (largest) count.
    assert tokens["input"] == (16057 + 5233) + (21293 + 499) + (21792 + 1590)
    assert tokens["output"] == 467 + 110 + 139
    assert tokens["cached"] == 16048 + 21281 + 21780
    assert tokens["cache_write"] == 5233 + 499 + 1590
    assert tokens["repeated"]  # final_metrics = the sum over the 7 steps: set aside


def test_equal_counts_of_other_agents_stay_distinct_calls():
    doc = _claude_blocks()
    doc["agent"]["name"] = "terminus-2"
    tokens = trajectory_tokens(parse_trajectory(doc, "t.json"))
    assert tokens["output"] == 3 + 3 + 467 + 4 + 110 + 2 + 139  # every step is its own call


def test_the_runners_own_layout_needs_no_study_file(sample_runs):
    """Arms are the run folders' profiles; MCP offered where the configuration names MCP servers; arms run
    side by side in a blocked schedule are not flagged for time; nothing is pooled."""
    result = analyse(sample_runs, None, workers=2, cache=False)
    arms = result.audit.arms.set_index("arm")
    assert arms["mcp_offered"].to_dict() == {"codecanvas": True, "codegraph": True, "text": False}
    assert (arms["n_pairs_complete"] == 24).all() and (arms["repetitions_per_task"] == "3").all()
    checks = {f.check for f in result.audit.findings}
    assert not checks & {"pooled", "time", "coverage", "problem"}
    assert result.baseline.name == "text" and result.baseline.source == "the runs folder's index.json"
