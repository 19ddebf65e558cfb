"""End to end: a full run on scripted agents is read by ingest and the Layer 1 job, unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from bench_support import manifest_obj, setup_bench, use_bench, write_manifest

from analysis_lib.bench.runner import run_full
from analysis_lib.ingest.load import load_trials
from analysis_lib.metrics.trial_metrics import trial_metrics

pytestmark = pytest.mark.slow  # every test reads one scripted full run of real agent processes (~4 s to make)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """One scripted full run (12 trials) shared by the tests of this module."""
    tmp_path = tmp_path_factory.mktemp("bench_e2e")
    b = setup_bench(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        use_bench(b, mp)
        obj = manifest_obj(b, {"fix-a": "solved", "fix-b": "fail", "fix-c": "garbage"})
        res = run_full(write_manifest(b, obj), 2, 5, 100.0, output=tmp_path / "full_run.json", runs_dir=tmp_path / "runs", quiet=True)
    assert res["status"] == "complete"
    return tmp_path / "runs", res


def test_ingest_reads_every_bench_trial(bench_run):
    runs, res = bench_run
    trials, errors = load_trials(runs)
    assert [e for e in errors if getattr(e, "severity", "error") == "error"] == []
    assert len(trials) == 12
    got = {(t.profile, t.task_id, t.repetition) for t in trials}
    assert got == {(c, t, r) for c in ("text", "codegraph") for t in ("fix-a", "fix-b", "fix-c") for r in (1, 2)}
    for t in trials:
        m = trial_metrics(t)
        assert t.source_format == "run_layout" and t.trajectory is not None
        assert m["total_cost_usd"] == pytest.approx(0.25)
        if t.task_id == "fix-c":  # evaluation error: unknown outcome, not a failure
            assert m["infra_error"] is True and m["success"] is None
        else:
            assert m["infra_error"] is False and m["success"] is (t.task_id == "fix-a")
        assert m["tool_calls_count"] == 2
        assert (m["mcp_tool_calls"] or 0) == (1 if t.profile == "codegraph" else 0)
        if t.task_id == "fix-a":
            assert m["tests_passed"] == 1


def test_layer1_cli_on_bench_runs(bench_run, tmp_path):
    runs, _ = bench_run
    out = tmp_path / "analytics"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis_lib",
            str(runs),
            "--no-llm",
            "-o",
            str(out),
            "-q",
            "--no-cache",
            "--workers",
            "1",
            "--compare",
            "text",
            "codegraph",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(out / "metrics_detail.csv")
    assert len(df) == 12 and set(df["profile"]) == {"text", "codegraph"}
    ok = df[df["task_id"] != "fix-c"]
    assert ok.groupby("profile")["success"].apply(lambda s: s.astype(str).str.lower().eq("true").sum()).to_dict() == {
        "codegraph": 2,
        "text": 2,
    }
    assert df.loc[df["task_id"] == "fix-c", "infra_error"].astype(str).str.lower().eq("true").all()
    # the paired comparison runs on the bench output: text vs codegraph over the evaluated tasks
    cmp = pd.read_csv(out / "comparisons.csv")
    assert len(cmp) and set(zip(cmp["profile_a"], cmp["profile_b"], strict=True)) == {("text", "codegraph")}
    assert "simulated" not in (out / "comparison_report.md").read_text().lower()


def test_notebooks_run_on_bench_output(bench_run, tmp_path):
    """The metrics and statistics notebooks (papermill, real kernel) read the runner's output unchanged."""
    import os

    import yaml

    from analysis_lib.cli.pipeline import run_pipeline

    runs, _ = bench_run

    def rel(p):  # the pipeline's paths are relative to the project root
        return os.path.relpath(p, ROOT)

    params = {
        "runs_dir": rel(runs),
        "output_dir": rel(tmp_path / "out"),
        "figures_dir": rel(tmp_path / "figures"),
        "paper_dir": rel(tmp_path / "paper"),
        "baseline": "text",
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    timings = run_pipeline(
        tmp_path / "p.yaml", root=ROOT, out_dir=rel(tmp_path / "nb"), quiet=True, latex=False, only=["01_metrics", "02_stats"]
    )
    assert set(timings) == {"01_metrics", "02_stats"}
    detail = pd.read_csv(tmp_path / "out" / "analytics" / "metrics_detail.csv")
    assert len(detail) == 12 and set(detail["profile"]) == {"text", "codegraph"}
    cmp = pd.read_csv(tmp_path / "out" / "comparisons" / "comparisons.csv")
    assert set(zip(cmp["profile_a"], cmp["profile_b"], strict=True)) == {("text", "codegraph")}
    assert (tmp_path / "figures" / "forest.png").is_file()
