"""The command line on a small run layout: one real ``python -m analysis_lib`` subprocess, then the options
in process through the same entry point (``run_cli``)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from builders import small_runs

from analysis_lib.core.outputs import OUTPUT_MANIFEST
from analysis_lib.study.layer1 import analyse

FILES = ["metrics_detail.csv", "metrics_summary.csv", "aggregate_metrics.json", "errors.csv",
         # the design audit: per arm, and its findings
         "design_audit.csv", "design_findings.csv",
         # the study resolved once (its record, the reruns met, each trial's actions for the divergence table)
         "study.json", "reruns.csv", "trial_actions.json",
         # with two or more profiles the plan's comparisons and the profile rates are written beside them
         "comparisons.csv", "profile_rates.csv", "comparison_report.md",
         # how closely the primary endpoints move together task by task (the collinearity sentence reads it)
         "endpoint_correlations.csv",
         # what the repetitions of a task say: variance components, pass@k / pass^k
         "variance_components.csv", "pass_at_k.csv",
         # beside intention to treat (the plan's defaults): CACE, infrastructure bounds, divergence
         "compliance.csv", "infra_bounds.csv", "divergence.csv",
         # the analysis plan sidecar (plan hash of the CSVs), and the plan record: these runs carry no
         # pre-registration, so the first analysis records its plan here, never in the runs folder
         "analysis_plan.json", "analysis_plan.lock.json"]


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """The real command: a fresh interpreter, as users start it."""
    return subprocess.run([sys.executable, "-m", "analysis_lib", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def runs(tmp_path) -> Path:
    return small_runs(tmp_path / "runs", n_tasks=4)


def test_writes_the_four_files(runs, tmp_path):
    out = tmp_path / "out"
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    runs.chmod(0o555)  # read-only input (root may still write: the byte comparison below is the check)
    try:
        proc = cli(str(runs), "--no-llm", "-o", str(out))
    finally:
        runs.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()} == before  # nothing written into the runs
    # Beside the outputs: their manifest, and the folder's lock (a dot file, as every file not part of the set).
    assert sorted(p.name for p in out.iterdir() if p.is_file() and not p.name.startswith(".")) == sorted(FILES + [OUTPUT_MANIFEST])
    detail = pd.read_csv(out / "metrics_detail.csv")
    assert list(detail.columns[:5]) == ["profile", "task_id", "repetition", "run_id", "trial_path"]
    assert len(detail) == 8 and set(detail["profile"]) == {"base", "mcp"}
    assert not detail["trial_path"].str.startswith("/").any()  # no machine paths in outputs
    summary = pd.read_csv(out / "metrics_summary.csv").set_index("profile")
    # small_runs: success when (task + profile index) is even -> base tasks 0,2 pass; mcp tasks 1,3 pass
    assert summary.loc["base", "pass_rate"] == 0.5 and summary.loc["mcp", "n_trials"] == 4
    agg = json.loads((out / "aggregate_metrics.json").read_text())
    assert agg["profiles"]["mcp"]["tool_distribution"]["mcp__codegraph__search_code"] == 4
    assert "analysed 8 trials (2 profiles, 4 tasks)" in proc.stdout


def test_list(runs, tmp_path, run_cli):
    proc = run_cli(runs, "--list", "-o", tmp_path / "out")
    assert proc.returncode == 0
    table, arms = proc.stdout.strip().split("\n\n")
    lines = table.splitlines()
    assert lines[0].split() == ["profile", "task", "rep", "outcome", "path"]
    assert len(lines) == 9 and sum("pass" in line for line in lines) == 4
    # The arms and the rule that formed each: here the run folders' own profiles.
    assert arms.splitlines()[0].startswith("arms (the readers' default profiles; baseline: ")
    assert sorted(line.split(":")[0].strip() for line in arms.splitlines()[1:]) == ["base", "mcp"]
    assert all("default: the run folder's profile" in line for line in arms.splitlines()[1:])
    assert not (tmp_path / "out" / "metrics_detail.csv").exists()


def test_filters(runs, tmp_path, run_cli):
    def rows(*args):
        out = tmp_path / ("o" + str(abs(hash(args))))
        proc = run_cli(runs, "--no-llm", "-q", "-o", out, *args)
        # A sample of 3 trials may pair no task: Layer 1 is written, the comparisons stop with exit code 1.
        assert proc.returncode == 0 or (args[0] == "--limit" and "design cannot support" in proc.stderr), proc.stderr
        with open(out / "metrics_detail.csv") as fh:
            return list(csv.DictReader(fh))

    assert {r["profile"] for r in rows("--profiles", "mcp")} == {"mcp"}
    assert {r["task_id"] for r in rows("--tasks", "task-0", "task-2")} == {"task-0", "task-2"}
    assert {r["success"] for r in rows("--succeeded")} == {"True"}
    assert {r["success"] for r in rows("--failed")} == {"False"}
    a, b = rows("--limit", "3", "--seed", "1"), rows("--limit", "3", "--seed", "1")
    assert len(a) == 3 and a == b  # the same seed draws the same sample
    draws = {tuple(r["trial_path"] for r in rows("--limit", "3", "--seed", str(s))) for s in range(2, 6)}
    assert len(draws) > 1  # and the seed matters (4 seeds all drawing the same 3 of 8 trials: p < 0.001)


def test_compare_with_an_unknown_profile_names_it(runs, tmp_path, run_cli):
    proc = run_cli(runs, "--compare", "base", "nope", "--no-llm", "-o", tmp_path / "o")
    assert proc.returncode == 2 and "unknown profile(s) ['nope']" in proc.stderr


def test_plan_next_adds_the_power_analysis_for_the_next_study(runs, tmp_path, run_cli):
    quick = run_cli(runs, "--no-llm", "-q", "-o", tmp_path / "quick")
    assert quick.returncode == 0
    assert "computed on request" in (tmp_path / "quick" / "comparison_report.md").read_text()
    full = run_cli(runs, "--no-llm", "-q", "--plan-next", "-o", tmp_path / "full")
    report = (tmp_path / "full" / "comparison_report.md").read_text()
    assert full.returncode == 0 and "Planned at alpha" in report and "(the plan's)" in report


def test_subcommand_help_and_unknown_option(run_cli):
    assert run_cli("--help").returncode == 0
    bad = run_cli("runs", "--no-such-option")
    assert bad.returncode == 2 and "unrecognized arguments" in bad.stderr


def test_warm_cache_gives_identical_tables_and_sees_changes(runs, tmp_path):
    out = tmp_path / "out"
    cold = analyse(runs, out)
    warm = analyse(runs, out)
    assert cold.cache_hits == 0 and warm.cache_hits == 8
    pd.testing.assert_frame_equal(cold.metrics, warm.metrics)
    pd.testing.assert_frame_equal(cold.summary, warm.summary)
    assert cold.aggregate == warm.aggregate
    reward = next(runs.glob("*__base/task-1/verifier/reward.txt"))
    reward.write_text("1\n")
    again = analyse(runs, out)
    assert again.cache_hits == 7
    row = again.metrics[(again.metrics.profile == "base") & (again.metrics.task_id == "task-1")]
    assert bool(row["success"].iloc[0]) is True


@pytest.mark.parametrize("damage", ["truncate", "zeros", "empty"])
def test_a_cache_damaged_by_a_crash_is_read_as_a_miss(runs, tmp_path, damage):
    """Caches are written without an fsync: a crash may leave any of them cut short or zero-filled."""
    out = tmp_path / "out"
    cold = analyse(runs, out)
    for f in (out / ".cache").iterdir():
        data = f.read_bytes()
        f.write_bytes({"truncate": data[: len(data) // 2], "zeros": bytes(len(data)), "empty": b""}[damage])
    again = analyse(runs, out)
    assert again.cache_hits == 0  # nothing trusted from the damaged files
    pd.testing.assert_frame_equal(cold.metrics, again.metrics)
    pd.testing.assert_frame_equal(cold.summary, again.summary)
    assert analyse(runs, out).cache_hits == 8  # and the caches are whole again


def test_parallel_equals_serial(runs):
    serial = analyse(runs, workers=1, cache=False).metrics
    parallel = analyse(runs, workers=2, cache=False).metrics
    pd.testing.assert_frame_equal(serial, parallel)


def test_repetitions_from_timestamped_folders(tmp_path):
    from builders import agent_step, trajectory, write_trial

    for ts in ("2026-01-03__10-00-00", "2026-01-01__10-00-00", "2026-01-02__10-00-00"):
        write_trial(tmp_path, f"{ts}__text", "task-a", traj=trajectory([agent_step(1)]))
    df = analyse(tmp_path, cache=False).metrics
    by_run = dict(zip(df["run_id"], df["repetition"], strict=True))
    assert by_run == {"2026-01-01__10-00-00__text": 1, "2026-01-02__10-00-00__text": 2, "2026-01-03__10-00-00__text": 3}


def test_second_cli_run_reads_everything_from_cache(runs, tmp_path, run_cli):
    out = tmp_path / "out"
    first = run_cli(runs, "--no-llm", "-o", out)
    cold_bytes = (out / "metrics_detail.csv").read_bytes()
    second = run_cli(runs, "--no-llm", "-o", out)
    assert "0 trials from cache" in first.stdout and "8 trials from cache" in second.stdout
    assert (out / "metrics_detail.csv").read_bytes() == cold_bytes
    (runs / "index.json").write_text('{"simulated": true}')  # a changed index invalidates the whole result
    third = analyse(runs, out)
    assert third.simulated and bool(third.metrics["simulated"].all())


def test_analysis_warns_when_pair_sides_ran_in_different_environments(runs, tmp_path, run_cli):
    trials = [
        {"pair": 1, "task_id": "task-0", "run": 1, "condition": "base", "environment": {"model": "m-1"}},
        {"pair": 1, "task_id": "task-0", "run": 1, "condition": "mcp", "environment": {"model": "m-2"}},
    ]
    (runs / "full_run.json").write_text(json.dumps({"trials": trials}))
    proc = run_cli(runs, "--no-llm", "-q", "-o", tmp_path / "out")
    assert proc.returncode == 0
    assert "warning: pair 1 (task task-0, run 1): model differs: base=m-1, mcp=m-2" in proc.stderr


def test_unwritable_cache_does_not_stop_the_analysis(runs, tmp_path, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    res = analyse(runs, tmp_path / "out", cache_dir=blocker)
    assert len(res.metrics) == 8 and (tmp_path / "out" / "metrics_detail.csv").is_file()
    assert "cache not written" in capsys.readouterr().err


def test_an_empty_runs_folder_is_named_not_dotted(tmp_path, run_cli):
    empty = tmp_path / "my-runs"
    empty.mkdir()
    for given in (".", str(empty)):
        proc = run_cli(given, "--no-llm", "-o", tmp_path / "out", cwd=empty)
        assert proc.returncode == 1
        assert "error: my-runs: discover: no trials found" in proc.stderr  # its name, never "." or a machine path
        assert str(tmp_path) not in (tmp_path / "out" / "errors.csv").read_text()


def test_estimate_cost_prints_and_writes_only_the_estimate(sample_runs, tmp_path, run_cli, no_keys):
    out = tmp_path / "out"
    proc = run_cli(sample_runs, "--estimate-cost", "--limit", "4", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "total" in proc.stdout
    assert sorted(p.name for p in out.iterdir() if p.name != ".cache") == ["llm_cost_estimate.json"]  # no Layer 1, no comparisons
