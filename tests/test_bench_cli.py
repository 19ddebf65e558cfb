"""``python -m analysis_lib bench ...``: spike as a real subprocess; argument errors, resume and the mcpbr import
in process through the same entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_support import manifest_obj, read_log, setup_bench, write_manifest

from analysis_lib.bench import environment as bench_env

ROOT = Path(__file__).resolve().parents[1]


def _bench(args: list[str], env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real command: a fresh interpreter, as users start it."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "analysis_lib", "bench", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def bench(run_cli, monkeypatch):
    """``python -m analysis_lib bench ARGS`` in this process (cwd and env as the subprocess would get them)."""
    monkeypatch.setattr(bench_env, "_version_cache", {})  # `claude --version` is cached per process

    def run(args: list[str], env: dict | None = None, cwd: Path = ROOT):
        return run_cli("bench", *args, cwd=cwd, env=env)

    return run


def test_spike_runs_one_task_under_both_conditions(tmp_path):
    b = setup_bench(tmp_path)
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"codegraph": {"command": "codegraph-mcp"}}}))
    proc = _bench(
        [
            "spike",
            "--task-id",
            "fix-spike",
            "--repo-path",
            "target",
            "--instruction",
            "Fix it.",
            "--mcp-config",
            "mcp.json",
            "--runs-dir",
            "runs",
            "--output",
            "spike.json",
            "--model",
            "claude-test-model-20260101",
        ],
        b["env"],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("complete: 2/2 trials finished")
    res = json.loads((tmp_path / "spike.json").read_text())
    assert {t["condition"] for t in res["trials"]} == {"baseline", "mcp"}
    assert all(t["environment"]["target_repo_commit"] == b["commit"] for t in res["trials"])
    log = read_log(tmp_path / "claude.log")
    assert sorted((e["condition"], e["mcp"]) for e in log) == [("baseline", False), ("mcp", True)]
    # not evaluated (no evaluation given): no reward, no verdict invented
    assert all(t["outcome"] == "not_evaluated" for t in res["trials"])
    assert (tmp_path / "runs" / "index.json").is_file()
    # paths given relative stay relative: no machine path in the outputs
    text = (tmp_path / "spike.json").read_text()
    assert str(tmp_path) not in text and "/tmp/" not in text


def test_spike_and_full_argument_errors(tmp_path, bench):
    b = setup_bench(tmp_path)
    proc = bench(["spike", "--task-id", "x", "--repo-path", "target"], b["env"], cwd=tmp_path)
    assert proc.returncode == 2 and "instruction: required" in proc.stderr
    proc = bench(
        ["spike", "--task-id", "x", "--repo-path", "nowhere", "--instruction", "i", "--mcp-config", "m.json"], b["env"], cwd=tmp_path
    )
    assert proc.returncode == 2 and "nowhere is not a git checkout" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"manifest_version": 2, "environment": {}, "conditions": [], "tasks": []}))
    proc = bench(
        ["full", "--manifest", str(bad), "--phase-budget-usd", "10", "--seed", "1", "--dry-run", "--output", str(tmp_path / "p.json")]
    )
    assert proc.returncode == 2
    assert f"error: {bad}: invalid manifest" in proc.stderr and "environment.model: Field required" in proc.stderr
    assert not (tmp_path / "p.json").exists()


def test_full_resume_with_another_seed_is_refused(tmp_path, bench):
    b = setup_bench(tmp_path)
    m = write_manifest(b, manifest_obj(b, {"fix-a": "fail"}))
    args = [
        "full",
        "--manifest",
        str(m),
        "--runs-per-condition",
        "1",
        "--phase-budget-usd",
        "10",
        "--output",
        str(tmp_path / "o.json"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "-q",
    ]
    assert bench(args + ["--seed", "1"], b["env"]).returncode == 0
    proc = bench(args + ["--seed", "2"], b["env"])
    assert proc.returncode == 2 and "seed differs from the run already started (stored 1, requested 2)" in proc.stderr


def test_import_mcpbr_results(real_fixtures, bench):
    proc = bench(["import-mcpbr", str(real_fixtures / "mcpbr-readme-example" / "results.json")])
    assert proc.returncode == 0, proc.stderr
    rows = sorted(tuple(line.split("\t")) for line in proc.stdout.splitlines())
    # the README example holds one SWE-bench instance run with and without the MCP server
    assert rows == [("baseline", "astropy__astropy-12907", "1"), ("mcp", "astropy__astropy-12907", "1")]
    assert "imported 2 trials, 0 errors" in proc.stderr
