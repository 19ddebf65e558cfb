"""One study, resolved once: every output reads the same arms, success rule and baseline from one ``Study``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from judge_fakes import answer_for
from llm_server import prompt_text

from analysis_lib import Study, open_study
from analysis_lib.study.baseline import profile_pairs
from analysis_lib.study.study import StudyError

ROOT = Path(__file__).resolve().parents[1]
CSB_STUDY = ROOT / "params" / "studies" / "codescalebench.yaml"


def test_the_real_slice_is_one_study_on_the_command_line(codescalebench, tmp_path, run_cli):
    """13 of 18 passes under the study's ``reward > 0``; the same arms and baseline in study.json and comparisons.csv."""
    proc = run_cli(codescalebench, "--study", CSB_STUDY, "--no-llm", "-q", "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    study = Study.load(tmp_path / "out")
    assert (study.arms, study.baseline.name, study.baseline.source) == (["baseline", "mcp"], "baseline", "the study file")
    assert study.success_rule == "reward > 0" and study.metrics["success"].dtype == "boolean"
    assert (len(study.metrics), int(study.metrics["success"].sum())) == (18, 13)
    comp = pd.read_csv(tmp_path / "out" / "comparisons.csv")
    assert set(comp["profile_a"]) == {"baseline"} and set(comp["profile_b"]) == {"mcp"}


def test_a_saved_study_loads_as_it_was_opened(sample_runs, tmp_path):
    opened = open_study(sample_runs, out_dir=tmp_path, cache_dir=None, workers=1)
    opened.save(tmp_path)
    loaded = Study.load(tmp_path)
    assert (loaded.arms, loaded.baseline, loaded.simulated, loaded.success_rule) == (
        opened.arms, opened.baseline, opened.simulated, opened.success_rule)
    assert loaded.plan_check.sha256 == opened.plan_check.sha256 and loaded.plan.name == opened.plan.name
    assert [f.message for f in loaded.audit.findings] == [f.message for f in opened.audit.findings]
    cols = ["profile", "task_id", "repetition", "trial_path", "success", "total_tokens"]
    pd.testing.assert_frame_equal(loaded.metrics[cols], opened.metrics[cols].reset_index(drop=True), check_dtype=False)
    assert loaded.metrics["success"].dtype == "boolean" and loaded.metrics["repetition"].dtype == "Int64"


def test_a_folder_without_a_study_is_a_one_line_error(tmp_path):
    with pytest.raises(StudyError, match="study.json is missing: open the study first"):
        Study.load(tmp_path)


def test_no_consumer_guesses_a_baseline(sample_runs):
    """A declared baseline that is not an arm leaves the study without one: whoever needs it raises, naming why."""
    study = open_study(sample_runs, baseline="nope", workers=1)
    assert study.baseline.name is None and "'nope' (chosen explicitly) is not a profile" in study.baseline_error
    with pytest.raises(StudyError, match="chosen explicitly"):
        study.pairs()
    with pytest.raises(ValueError, match="no baseline given"):
        profile_pairs(["a", "b"])


def _runs_with_renamed_arms(sample_runs: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The sample runs (index.json declares ``text``) under a study file whose arms are named otherwise."""
    runs = tmp_path / "runs"
    shutil.copytree(sample_runs, runs)
    study = tmp_path / "study.yaml"
    study.write_text("name: renamed arms\nsimulated: true\nbaseline: control\narms:\n"
                     "  control: {paths: ['*__text/**'], mcp: false}\n  treatment: {paths: ['*__codegraph/**'], mcp: true}\n")
    return runs, study


@pytest.mark.slow  # a papermill run of the explorer (about 20 s)
def test_an_explorer_whose_study_renames_the_arms_opens_on_the_studys_arms(sample_runs, tmp_path):
    import papermill

    runs, study = _runs_with_renamed_arms(sample_runs, tmp_path)
    out = tmp_path / "explore.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "explore.ipynb"), str(out), progress_bar=False,
                               parameters={"project_root": str(ROOT), "runs_dir": str(runs), "study_file": str(study)},
                               execution_timeout=300)
    text = out.read_text(encoding="utf-8")
    assert "2 profiles" in text and "A (baseline): control (the study file)" in text
    assert "A-vs-B explorer (control vs treatment)" in text


def test_the_cost_estimate_names_the_study_baseline(sample_runs, tmp_path, run_cli):
    """index.json declares ``text``; the first arm in sort order is ``codecanvas``: the estimate names ``text``."""
    proc = run_cli(sample_runs, "--estimate-cost", "--limit", "6", "--model", "openai/gpt-4o-mini", "-q",
                   "-o", tmp_path / "out", env={"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "llm_cost_estimate.json").read_text())["baseline"] == "text"


@pytest.mark.slow  # every judgement of a 6-trial sample against the loopback server
def test_the_judge_is_told_the_baseline_the_comparisons_use(sample_runs, tmp_path, llm_server, run_cli, no_keys):
    llm_server.default = answer_for
    proc = run_cli(sample_runs, "--limit", "6", "--model", "openai/loopback-judge", "--api-base", llm_server.url, "-q",
                   "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert json.loads((out / "study.json").read_text())["baseline"] == "text"
    assert set(pd.read_csv(out / "comparisons.csv")["profile_a"]) == {"text"}
    assert json.loads((out / "layer2_summary.json").read_text())["baseline"] == "text"
    synthesis = [prompt_text(b) for b in llm_server.requests if b["response_format"]["json_schema"]["name"] == "Synthesis"]
    assert synthesis and all("Baseline profile: text" in s for s in synthesis), synthesis[0][:2000]


@pytest.mark.parametrize("runs, study_file", [
    ("sample_runs", None),
    ("codescalebench", "codescalebench.yaml"),
    ("skillsbench", "skillsbench.yaml"),
])
def test_the_audit_reads_only_the_columns_it_declares(runs, study_file, request, monkeypatch):
    """The audit works on :data:`READS` alone for speed: it must find exactly what it finds on the whole table."""
    from analysis_lib.study import audit

    folder = request.getfixturevalue(runs)
    path = ROOT / "params" / "studies" / study_file if study_file else None
    narrow = open_study(folder, path, cache_dir=None, workers=1)
    monkeypatch.setattr(audit, "READS", tuple(narrow.metrics.columns) + ("simulated",))
    whole = open_study(folder, path, cache_dir=None, workers=1)
    assert len(narrow.audit.findings) > 0
    assert [(f.severity, f.check, f.message) for f in narrow.audit.findings] == [
        (f.severity, f.check, f.message) for f in whole.audit.findings]
    pd.testing.assert_frame_equal(narrow.audit.arms, whole.audit.arms)
