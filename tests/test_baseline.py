"""One baseline rule for every output: the command line, RESULTS.md, the notebooks and the paper's macros."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis_lib.cli import pipeline
from analysis_lib.ingest.provenance import declared_baseline
from analysis_lib.study.baseline import resolve_baseline
from analysis_lib.study.plan import load_plan

ROOT = Path(__file__).resolve().parents[1]


def _plan_with_baseline(path: Path, baseline: str) -> Path:
    plan = yaml.safe_load((ROOT / "params" / "analysis_plan.yaml").read_text(encoding="utf-8"))
    plan["pairing"]["baseline"] = baseline
    path.write_text(yaml.safe_dump(plan, sort_keys=False), encoding="utf-8")
    return path


def test_the_rule_in_order(tmp_path):
    profiles = ["codecanvas", "codegraph", "text"]
    plan = load_plan(_plan_with_baseline(tmp_path / "plan.yaml", "codegraph"))
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "index.json").write_text(json.dumps({"baseline": "text"}))
    assert resolve_baseline(profiles, explicit="codecanvas", plan=plan, runs_dir=runs).name == "codecanvas"
    assert resolve_baseline(profiles, plan=plan, runs_dir=runs).source == "the analysis plan's pairing.baseline"
    assert resolve_baseline(profiles, runs_dir=runs).name == "text"
    assert resolve_baseline(profiles).source == "the first profile in sort order"
    with pytest.raises(ValueError, match=r"baseline 'nope' \(chosen explicitly\) is not a profile of these runs"):
        resolve_baseline(profiles, explicit="nope")


@pytest.mark.slow  # the command line, RESULTS.md and four notebooks on the 216 sample trials (about 2 min)
def test_plan_and_index_disagree_and_every_output_names_the_plans_baseline(tmp_path, run_cli, monkeypatch):
    """The plan says codecanvas, the runs' index.json says text: the plan wins everywhere, never half the outputs."""
    from analysis_lib.cli.results import cli as results_cli
    from analysis_lib.simulate.full_run import write_full_run

    runs = Path(shutil.copytree(ROOT / "runs" / "sample", tmp_path / "runs"))
    assert declared_baseline(runs) == "text"
    plan = _plan_with_baseline(tmp_path / "plan.yaml", "codecanvas")

    # the command line
    res = run_cli(runs, "--plan", plan, "--no-llm", "-q", "-o", tmp_path / "cli")
    assert res.returncode == 0, res.stderr
    cli_pairs = pd.read_csv(tmp_path / "cli" / "comparisons.csv")[["profile_a", "profile_b"]].drop_duplicates()
    assert set(cli_pairs["profile_a"]) == {"codecanvas"} and set(cli_pairs["profile_b"]) == {"codegraph", "text"}

    # RESULTS.md of the runner's full run
    full = write_full_run(runs, tmp_path / "results" / "full_run.json")
    monkeypatch.chdir(tmp_path)
    results_cli([str(full), "--output", "RESULTS.md", "--plan", str(plan), "--no-record"])
    assert "baseline (A): `codecanvas`" in (tmp_path / "RESULTS.md").read_text(encoding="utf-8")

    # the notebooks and the paper's macros
    project = tmp_path / "project"
    shutil.copytree(ROOT / "notebooks", project / "notebooks", ignore=shutil.ignore_patterns("*.py", ".ipynb_checkpoints"))
    shutil.copytree(ROOT / "params", project / "params")
    shutil.copytree(ROOT / "paper", project / "paper", ignore=shutil.ignore_patterns("snippets", "*.pdf"))
    params = project / "mine.yaml"
    params.write_text(f"runs_dir: {runs}\nplan_file: {plan}\noutput_dir: results/mine\nfigures_dir: results/mine/figures\n"
                      "paper_dir: results/mine/paper\nrun_llm: false\n", encoding="utf-8")
    code = pipeline.cli(["--params", str(params), "--root", str(project), "--only", "01_metrics", "02_stats",
                         "05_paper", "--no-latex", "-q"])
    assert code == 0
    out = project / "results" / "mine"
    assert json.loads((out / "analytics" / "study.json").read_text())["baseline"] == "codecanvas"
    nb_pairs = pd.read_csv(out / "comparisons" / "comparisons.csv")[["profile_a", "profile_b"]].drop_duplicates()
    assert set(nb_pairs["profile_a"]) == {"codecanvas"}
    assert "baseline: codecanvas;" in (out / "notebooks" / "02_stats.ipynb").read_text(encoding="utf-8")
    macros = (out / "paper" / "snippets" / "macros.tex").read_text(encoding="utf-8")
    assert "\\newcommand{\\BaselineProfile}{codecanvas}" in macros
    # the explorer (interactive, outside the pipeline) opens on the same A
    import papermill

    explored = tmp_path / "explore.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "explore.ipynb"), str(explored), progress_bar=False,
                               parameters={"project_root": str(project), "runs_dir": str(runs), "plan_file": str(plan),
                                           "output_dir": "results/mine"})
    assert "A (baseline): codecanvas" in explored.read_text(encoding="utf-8")
