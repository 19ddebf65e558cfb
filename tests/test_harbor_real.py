"""The Harbor adapter against the real Harbor CLI and models from PyPI (pinned), not its documentation.

Harbor needs Python >= 3.12: the ``harbor_python`` fixture builds its side environment once in
``.cache/harbor-<version>`` (tests/side_envs.py) from the first such interpreter on PATH or in pyenv's versions.
Harbor runs trials in containers; ``tests/harbor_host.py`` gives it an environment on this machine (a chroot in a
private namespace) and an agent with known usage, so that ``harbor run`` itself writes the job folders read here:

- every flag the adapter passes lands in the field of Harbor's JobConfig it means (``--print-config``);
- the benchmark runner drives real ``harbor run`` trials and keeps what Harbor wrote (reward, usage, trajectory);
- the analysis reads a job folder written by Harbor;
- the runner's own ``result.json`` is a valid Harbor ``TrialResult`` that loses nothing but its ``bench`` section.

A Harbor release that renames a flag, a field or a file fails one of these.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from ci_rule import skip_or_fail_in_ci
from side_envs import harbor_version, run_json

from analysis_lib.bench import adapters
from analysis_lib.bench.manifest import parse_manifest

pytestmark = pytest.mark.slow  # each `harbor` start imports Harbor (2-20 s); the side environment takes 1-3 min on first use

TESTS = Path(__file__).resolve().parent
MODEL = "anthropic/claude-sonnet-4-5-20250929"
# What KnownUsageAgent reports to Harbor (as agent kwargs); every number must arrive unchanged.
USAGE = {"n_input_tokens": 11368, "n_cache_tokens": 7364, "n_output_tokens": 224, "cost_usd": 0.0179}
HOST = ["--env", "harbor_host:HostEnvironment", *[a for k, v in USAGE.items() for a in ("--ak", f"{k}={v}")]]
AGENT = "harbor_host:KnownUsageAgent"


@pytest.fixture
def harbor(harbor_python, monkeypatch) -> str:
    """The ``harbor`` program, with tests/ on its PYTHONPATH (for harbor_host) and no network price lookups."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy")  # the claude-code agent's preflight wants a key
    return str(harbor_python.parent / "harbor")


@pytest.fixture
def host_namespaces() -> None:
    """HostEnvironment's chroot needs a user and mount namespace (util-linux's unshare; no root needed)."""
    try:
        proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True, text=True, timeout=60)
        problem = proc.stderr.strip() if proc.returncode else None
    except OSError as exc:
        problem = str(exc)
    if problem:
        skip_or_fail_in_ci(f"unshare cannot make a user and mount namespace here ({problem}): Harbor's trials cannot run")


def harbor_task(folder: Path) -> Path:
    """A Harbor task: write ``hello`` to /app/hello.txt; its verifier rewards 1 for exactly that."""
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(
        'schema_version = "1.4"\n\n[task]\nname = "demo/hello-world"\n\n'
        '[verifier]\ntimeout_sec = 120.0\nenvironment_mode = "shared"\n\n[agent]\ntimeout_sec = 120.0\n'
    )
    (folder / "instruction.md").write_text("Write hello to /app/hello.txt.\n")
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text(
        '#!/bin/bash\nif [ "$(cat /app/hello.txt)" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    )
    return folder


def _ctx(tmp: Path, harbor: str, settings: dict) -> adapters.TrialContext:
    harbor_task(tmp / "task")
    m = parse_manifest(
        {
            "manifest_version": 2,
            "environment": {"model": MODEL},
            "conditions": [
                {"name": "mcp", "adapter": "harbor", "settings": {"harbor_bin": harbor, **settings}},
                {"name": "text", "adapter": "harbor", "settings": {"harbor_bin": harbor}},
            ],
            "tasks": [{"id": "hello-world", "repo": "task", "commit": "HEAD", "instruction": "x"}],
        },
        "<test>",
        base_dir=str(tmp),
    )
    values = {"condition": "mcp", "pair": "0", "task_id": "hello-world"}
    return adapters.TrialContext(m, m.tasks[0], m.conditions[0], tmp / "trial", None, values, dict(os.environ))


def _harbor(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.mark.parametrize(
    "settings",
    [{}, {"dataset": "terminal-bench@2.0"}, {"extra_args": ["--ak", "max_turns=5", "--n-attempts", "2"]}],
    ids=["path", "dataset", "extra-args"],
)
def test_every_flag_the_adapter_passes_lands_in_harbors_job_config(harbor, tmp_path, settings):
    argv = adapters.harbor_argv(_ctx(tmp_path, harbor, settings), tmp_path / "jobs", "mcp__0")
    proc = _harbor([*argv, "--print-config"], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-1500:]
    config = json.loads(proc.stdout)  # Harbor's JobConfig, as its parser resolved our flags
    assert config["job_name"] == "mcp__0" and Path(config["jobs_dir"]) == tmp_path / "jobs"
    (agent,) = config["agents"]
    assert (agent["name"], agent["model_name"]) == ("claude-code", MODEL)
    if "dataset" in settings:
        (dataset,) = config["datasets"]
        assert (dataset["name"], dataset["version"], dataset["task_names"]) == ("terminal-bench", "2.0", ["hello-world"])
        assert not config.get("tasks")  # 0.25 prints only the fields set, 0.26 all of them
    else:
        assert [Path(t["path"]) for t in config["tasks"]] == [tmp_path / "task"] and not config.get("datasets")
    if "extra_args" in settings:
        assert agent["kwargs"] == {"max_turns": 5} and config["n_attempts"] == 2


def test_harbors_dry_run_accepts_the_task_and_the_adapters_command(harbor, tmp_path):
    """Harbor's own preflight (config, task metadata, environment) passes on the adapter's command for our task."""
    argv = adapters.harbor_argv(_ctx(tmp_path, harbor, {"agent": AGENT, "extra_args": HOST}), tmp_path / "jobs", "mcp__0")
    proc = _harbor([*argv, "--dry-run"], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-1500:]
    assert not (tmp_path / "jobs").exists()  # a dry run runs nothing


def test_the_runner_drives_real_harbor_trials_and_keeps_what_harbor_wrote(harbor, host_namespaces, tmp_path):
    from analysis_lib.bench.runner import run_full
    from analysis_lib.metrics.trials_table import trials_table

    harbor_task(tmp_path / "tasks" / "hello-world")
    settings = {"harbor_bin": harbor, "agent": AGENT}
    manifest = {
        "manifest_version": 2,
        "name": "harbor-real",
        "environment": {"model": MODEL},
        "conditions": [
            {"name": "mcp", "adapter": "harbor", "settings": {**settings, "extra_args": [*HOST, "--ak", "greeting=hello"]}},
            {"name": "text", "adapter": "harbor", "settings": {**settings, "extra_args": [*HOST, "--ak", "greeting=bye"]}},
        ],
        "tasks": [{"id": "hello-world", "repo": "tasks/hello-world", "commit": "HEAD", "instruction": "x", "timeout_seconds": 600}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    runs = tmp_path / "runs"
    res = run_full(tmp_path / "manifest.json", 1, 0, 100.0, output=None, runs_dir=runs, quiet=True)
    by = {t["condition"]: t for t in res["trials"]}
    # Harbor's verifier decided: the agent that wrote "hello" passed, the one that wrote "bye" failed.
    assert [(by[c]["status"], by[c]["outcome"]) for c in ("mcp", "text")] == [("completed", "passed"), ("completed", "failed")]
    assert res["budget"]["spent_usd"] == pytest.approx(2 * USAGE["cost_usd"])
    for cond, t in by.items():
        assert t["warnings"] == [] and t["environment"]["adapter_version"] == harbor_version()
        d = runs / t["trial_dir"]
        text = (d / "result.json").read_text()
        result = json.loads(text)
        assert result["agent_info"]["name"] == "known-usage" and result["agent_info"]["model_info"]["name"] == MODEL.split("/")[1]
        assert {k: result["agent_result"][k] for k in USAGE} == USAGE
        assert result["verifier_result"]["rewards"] == {"reward": 1.0 if cond == "mcp" else 0.0}
        assert (d / "verifier" / "reward.txt").read_text().strip() == ("1" if cond == "mcp" else "0")
        assert json.loads((d / "agent" / "trajectory.json").read_text())["final_metrics"]["total_prompt_tokens"] == USAGE["n_input_tokens"]
        assert str(tmp_path) not in text  # Harbor's absolute host paths do not reach our outputs
    assert not list(tmp_path.glob("**/*.harbor-jobs"))  # Harbor's job folders are gone once ingested
    rows = trials_table(runs, workers=1).frame.set_index("profile")
    assert rows.loc["mcp", "success"] == True and rows.loc["text", "success"] == False  # noqa: E712 (numpy bools)
    for profile in ("mcp", "text"):
        assert rows.loc[profile, ["total_input_tokens", "total_cached_tokens", "total_output_tokens"]].tolist() == [11368, 7364, 224]
        assert rows.loc[profile, "total_cost_usd"] == pytest.approx(USAGE["cost_usd"]) and rows.loc[profile, "tool_calls_count"] == 1


def test_the_analysis_reads_a_job_folder_harbor_wrote(harbor, host_namespaces, tmp_path):
    from analysis_lib.metrics.trials_table import trials_table

    task = harbor_task(tmp_path / "hello-world")
    jobs = tmp_path / "jobs"
    proc = _harbor([harbor, "run", "--path", str(task), "--agent", AGENT, "--model", MODEL, "--job-name", "job-1",
                    "--jobs-dir", str(jobs), "--quiet", *HOST], tmp_path, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-1500:]
    (trial_dir,) = [p.parent for p in (jobs / "job-1").glob("*/result.json")]
    harbor_result = json.loads((trial_dir / "result.json").read_text())
    table = trials_table(jobs, workers=1)
    assert [e.message for e in table.errors if e.severity == "error"] == []
    (row,) = table.frame.to_dict("records")
    assert row["profile"] == "known-usage@claude-sonnet-4-5-20250929" and row["task_id"] == "hello-world"
    assert row["success"] == True and row["reward"] == 1.0 and row["infra_error"] == False  # noqa: E712
    assert (row["total_input_tokens"], row["total_cached_tokens"], row["total_output_tokens"]) == (11368, 7364, 224)
    assert row["total_cost_usd"] == pytest.approx(USAGE["cost_usd"]) and row["cost_estimated"] == False  # noqa: E712
    assert row["tool_calls_count"] == 1 and row["total_steps"] == 2
    # elapsed_sec is Harbor's agent_execution phase
    phase = harbor_result["agent_execution"]
    seconds = (datetime.fromisoformat(phase["finished_at"]) - datetime.fromisoformat(phase["started_at"])).total_seconds()
    assert row["elapsed_sec"] == pytest.approx(seconds)


def test_the_runners_result_json_is_a_valid_harbor_trial_result(harbor_python, tmp_path, monkeypatch):
    """Our result.json claims Harbor's TrialResult shape: Harbor's own model accepts it and drops only ``bench``."""
    from bench_support import manifest_obj, setup_bench, use_bench, write_manifest

    from analysis_lib.bench.runner import run_full

    b = setup_bench(tmp_path)
    use_bench(b, monkeypatch)
    obj = manifest_obj(b, {"fix-a": "solved", "fix-c": "garbage"})  # a passed trial and an evaluation error
    run_full(write_manifest(b, obj), 1, 3, 100.0, output=None, runs_dir=tmp_path / "runs", quiet=True)
    files = sorted(str(p) for p in (tmp_path / "runs").glob("*/*/result.json"))
    assert len(files) == 4
    check = """
import json, sys
from harbor.models.trial.result import TrialResult

def dropped(doc, kept, prefix=""):
    out = []
    for key, value in doc.items():
        if key not in kept:
            out.append(prefix + key)
        elif isinstance(value, dict) and isinstance(kept[key], dict):
            out += dropped(value, kept[key], prefix + key + ".")
    return out

out = {}
for f in json.load(sys.stdin):
    doc = json.load(open(f))
    out[f] = dropped(doc, json.loads(TrialResult.model_validate(doc).model_dump_json()))
print(json.dumps(out))
"""
    assert run_json(harbor_python, check, files) == {f: ["bench"] for f in files}
