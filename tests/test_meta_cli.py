"""``python -m analysis_lib meta STUDY_OUTPUT... --metric M [--scale S] -o OUT``: one effect pooled across analysed
studies, each named, with its refusals in one line (exit 2) and its outputs written atomically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis_lib.core.fileio import atomic_write_csv, atomic_write_json
from analysis_lib.inference.comparisons import compare
from analysis_lib.inference.pooling import pool_comparisons
from analysis_lib.simulate.configurations import ConfigurationStudy, results_table
from analysis_lib.simulate.model import simulate_metrics
from analysis_lib.study.plan import load_plan

ROOT = Path(__file__).resolve().parents[1]
PLAN_ALL = "params/analysis_plan_all_repetitions.yaml"


def _study(folder: Path, seed: int, *, plan: str = PLAN_ALL, profiles=("text", "codegraph"), source: str | None = None,
           confidence: float = 0.95, simulated: bool = True) -> Path:
    """An analysed study's output folder as the main command leaves it: comparisons.csv, the plan beside it,
    metrics_detail.csv (its ``simulated`` column) and, under a study file, study.json naming its data source."""
    metrics = simulate_metrics(seed, n_tasks=16, profiles=profiles).assign(simulated=simulated)
    p = load_plan(plan)
    p = p.model_copy(update={"bootstrap": p.bootstrap.model_copy(update={"confidence": confidence, "n_resamples": 200})})
    folder.mkdir(parents=True)
    atomic_write_csv(folder / "comparisons.csv", compare(metrics, p, [(profiles[0], b) for b in profiles[1:]]))
    atomic_write_csv(folder / "metrics_detail.csv", metrics)
    atomic_write_json(folder / "analysis_plan.json", {"plan": p.model_dump(mode="json")})
    if source:
        atomic_write_json(folder / "study.json", {"design": {"name": "study file name", "source": {"name": source}},
                                                  "data_source": {"name": source}})
    return folder


@pytest.fixture
def three(tmp_path):
    return [_study(tmp_path / f"s{i}", seed=20 + i, source="Public study A" if i == 0 else None) for i in range(3)]


def test_pools_three_studies_names_them_and_writes_the_table_and_the_forest_plot(run_cli, three, tmp_path):
    out = tmp_path / "pooled"
    r = run_cli("meta", *three, "--metric", "success", "-o", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("SIMULATED studies: pass@1") and "pooled over 3 studies (Public study A, s1, s2)" in r.stdout
    methods = pd.read_csv(out / "pooled_success.csv")
    studies = pd.read_csv(out / "pooled_success_studies.csv")
    assert list(methods["role"]) == ["primary", "sensitivity", "comparison"] and methods["simulated"].all()
    assert list(studies["study"]) == ["Public study A", "s1", "s2"] and list(studies["folder"]) == ["../s0", "../s1", "../s2"]
    assert (out / "forest_pooled_success.png").stat().st_size > 0 and (out / "forest_pooled_success.pdf").is_file()
    # The same numbers as the library computes from the three comparisons.csv.
    rows = pd.concat([pd.read_csv(f / "comparisons.csv").assign(study=n)
                      for f, n in zip(three, ["Public study A", "s1", "s2"], strict=True)])
    ref = pool_comparisons(rows, "success", by="study")
    assert methods["estimate"].tolist() == pytest.approx(ref.methods["estimate"].tolist(), rel=1e-12)
    assert methods["pi_high"].iloc[0] == pytest.approx(ref.primary["pi_high"], rel=1e-12)
    assert f"{100 * ref.primary['estimate']:+.2f} pp" in r.stdout and "prediction interval" in r.stdout
    assert "prediction interval" in methods["prediction_note"].iloc[0]


def test_different_estimands_are_refused_in_one_line_with_exit_2(run_cli, three, tmp_path):
    majority = _study(tmp_path / "majority", seed=40, plan="params/analysis_plan.yaml")
    r = run_cli("meta", three[0], three[1], majority, "--metric", "success", "-o", tmp_path / "out")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: cannot pool success: the rows have different estimands")
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_declared_scale_the_studies_are_not_on_is_refused(run_cli, three, tmp_path):
    r = run_cli("meta", *three, "--metric", "success", "--scale", "log_ratio", "-o", tmp_path / "out")
    assert r.returncode == 2 and "on the log_ratio scale" in r.stderr and r.stderr.count("\n") == 1


def test_a_study_with_two_comparisons_of_the_metric_is_refused(run_cli, three, tmp_path):
    wide = _study(tmp_path / "wide", seed=41, profiles=("text", "codegraph", "codecanvas"))
    r = run_cli("meta", three[0], wide, "--metric", "success", "-o", tmp_path / "out")
    assert r.returncode == 2 and "2 comparisons of success (codegraph vs text, codecanvas vs text)" in r.stderr


def test_different_confidence_levels_are_refused(run_cli, three, tmp_path):
    ninety = _study(tmp_path / "ninety", seed=42, confidence=0.9)
    r = run_cli("meta", three[0], three[1], ninety, "--metric", "success", "-o", tmp_path / "out")
    assert r.returncode == 2 and "different confidence levels ([0.9, 0.95])" in r.stderr


def test_an_unreadable_study_is_one_line_and_the_rest_are_pooled(run_cli, three, tmp_path):
    empty = tmp_path / "not-analysed"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "comparisons.csv").write_text("just,some\n1,2\n")
    r = run_cli("meta", *three, empty, broken, "--metric", "success", "-o", tmp_path / "out")
    assert r.returncode == 0 and "pooled over 3 studies" in r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and str(empty / "comparisons.csv") in lines[0] and "no comparisons.csv" in lines[0]
    assert str(broken / "comparisons.csv") in lines[1] and "not a comparisons table" in lines[1]


def test_fewer_than_two_readable_studies_exit_1(run_cli, three, tmp_path):
    r = run_cli("meta", three[0], tmp_path / "missing", "--metric", "success", "-o", tmp_path / "out")
    assert r.returncode == 1 and "needs at least 2 analysed studies, 1 could be read" in r.stderr


def test_real_studies_are_not_called_simulated(run_cli, tmp_path):
    real = [_study(tmp_path / f"r{i}", seed=50 + i, simulated=False) for i in range(2)]
    r = run_cli("meta", *real, "--metric", "total_tokens", "-o", tmp_path / "out")
    assert r.returncode == 0 and "SIMULATED" not in r.stdout and " % [" in r.stdout  # a ratio metric pools as % change
    methods = pd.read_csv(tmp_path / "out" / "pooled_total_tokens.csv")
    assert not methods["simulated"].any() and set(methods["scale"]) == {"log_ratio"} and set(methods["unit"]) == {"%"}


@pytest.mark.slow  # three analyses and the pooling as real processes: about 15 s
def test_results_tables_analysed_then_pooled_by_the_real_command(tmp_path):
    """From published-style results tables to a pooled estimate: ``python -m analysis_lib RUNS`` per study, then
    ``python -m analysis_lib meta``; the exit codes are the interpreter's own."""
    outs = []
    for i in range(2):
        runs = tmp_path / f"runs{i}"
        runs.mkdir()
        table, _ = results_table(ConfigurationStudy(n_configs=1, n_tasks=24), seed=70 + i)
        table.to_csv(runs / "results.csv", index=False)
        (runs / "index.json").write_text(json.dumps({"simulated": True}))
        outs.append(tmp_path / f"out{i}")
        done = subprocess.run([sys.executable, "-m", "analysis_lib", runs, "--no-llm", "-q", "--plan", PLAN_ALL,
                               "-o", outs[-1]], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "design warning" not in done.stderr  # a results file's records are not sibling folders
    done = subprocess.run([sys.executable, "-m", "analysis_lib", "meta", *outs, "--metric", "success", "-o",
                           tmp_path / "pooled"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SIMULATED studies: pass@1") and "pooled over 2 studies (out0, out1)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "analysis_lib", "meta", *outs, "--metric", "success", "--scale",
                          "difference", "-o", tmp_path / "x"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
