"""The Harbor adapter against the real Harbor CLI and models from PyPI (pinned), not its documentation.

Harbor needs Python >= 3.12: the test makes that environment itself in ``.cache/harbor-<version>``
(skipped, with the reason, when no such interpreter is on PATH)
from the first of ``python3.13``, ``python3.12``, ``python3`` on PATH that is >= 3.12. Every flag the adapter passes must get past
Harbor's own parser (``--dry-run``: it stops before Docker), and a job folder written with Harbor's
result models must round-trip through the adapter's ingest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from install_lock import exclusive

from analysis_lib.bench import adapters
from analysis_lib.bench.manifest import parse_manifest

pytestmark = pytest.mark.slow  # a venv with Harbor on first use, then about 5 s

ROOT = Path(__file__).resolve().parents[1]
HARBOR_VERSION = "0.25.0"
MODEL = "anthropic/claude-sonnet-4-5-20250929"


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def _is_312(name: str) -> bool:
    """A runnable Python >= 3.12 (a pyenv shim of an inactive version fails to start)."""
    exe = shutil.which(name)
    if exe is None:
        return False
    try:
        return (
            subprocess.run(
                [exe, "-c", "import sys, venv; sys.exit(sys.version_info < (3, 12))"], capture_output=True, timeout=60
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def harbor_env() -> Path:
    """A Python >= 3.12 virtual environment with Harbor; returns its bin folder."""
    venv = ROOT / ".cache" / f"harbor-{HARBOR_VERSION}"
    bindir = venv / "bin"
    with exclusive(venv.with_name(f"harbor-{HARBOR_VERSION}.lock")):  # a parallel worker waits for this install
        if not (bindir / "harbor").exists():
            python = next((p for p in ("python3.13", "python3.12", "python3") if _is_312(p)), None)
            if python is None:
                # Not a CI failure: Debian stable's python3 is 3.11 and no other interpreter is installed there.
                pytest.skip("no Python >= 3.12 on PATH (python3.13, python3.12 or python3): Harbor cannot be installed")
            subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
            proc = subprocess.run(
                [str(bindir / "pip"), "install", "-q", f"harbor=={HARBOR_VERSION}"], capture_output=True, text=True, timeout=900
            )
            if proc.returncode != 0:
                _unavailable(f"pip could not install harbor=={HARBOR_VERSION}: {proc.stderr.strip()[-300:]}")
    return bindir


def _ctx(tmp: Path, harbor: Path, settings: dict) -> adapters.TrialContext:
    (tmp / "task").mkdir(exist_ok=True)
    m = parse_manifest(
        {
            "manifest_version": 2,
            "environment": {"model": MODEL},
            "conditions": [
                {"name": "mcp", "adapter": "harbor", "settings": {"harbor_bin": str(harbor), **settings}},
                {"name": "text", "adapter": "harbor", "settings": {"harbor_bin": str(harbor)}},
            ],
            "tasks": [{"id": "hello-world", "repo": "task", "commit": "HEAD", "instruction": "x"}],
        },
        "<test>",
        base_dir=str(tmp),
    )
    values = {"condition": "mcp", "pair": "0", "task_id": "hello-world"}
    return adapters.TrialContext(m, m.tasks[0], m.conditions[0], tmp / "trial", None, values, dict(os.environ))


@pytest.mark.parametrize(
    "settings",
    [{}, {"dataset": "terminal-bench@2.0"}, {"extra_args": ["--ak", "max_turns=5", "--n-attempts", "1"]}],
    ids=["path", "dataset", "extra-args"],
)
def test_every_flag_the_adapter_passes_is_accepted_by_harbor(harbor_env, tmp_path, settings):
    argv = adapters.harbor_argv(_ctx(tmp_path, harbor_env / "harbor", settings), tmp_path / "jobs", "mcp__0")
    proc = subprocess.run(
        [*argv, "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-dummy"},
    )
    out = proc.stdout + proc.stderr
    # 2 is a usage error of Harbor's parser; past the parser, a dry run stops at the Docker check (or succeeds).
    assert proc.returncode != 2 and "No such option" not in out and "Invalid value" not in out, out[-800:]


def test_a_job_written_by_harbors_models_round_trips_through_ingest(harbor_env, tmp_path):
    job = tmp_path / "jobs" / "mcp__0"
    trial = job / "hello-world__AbC1234"
    writer = f"""
import json, pathlib
from harbor.models.trial.config import TrialConfig, TaskConfig
from harbor.models.trial.result import TrialResult, AgentInfo, ModelInfo
from harbor.models.agent.context import AgentContext
from harbor.models.verifier.result import VerifierResult
from harbor.models.task.id import LocalTaskId
trial = pathlib.Path({str(trial)!r})
(trial / "agent").mkdir(parents=True)
(trial / "verifier").mkdir()
(trial / "verifier" / "reward.txt").write_text("1\\n")
res = TrialResult(task_name="hello-world", trial_name=trial.name, trial_uri=trial.as_uri(), task_id=LocalTaskId(path=pathlib.Path({str(tmp_path / "task")!r})),
                  task_checksum="abc", config=TrialConfig(task=TaskConfig(path=pathlib.Path({str(tmp_path / "task")!r}))),
                  agent_info=AgentInfo(name="claude-code", version="2.1.197", model_info=ModelInfo(name="claude-sonnet-4-5-20250929", provider="anthropic")),
                  agent_result=AgentContext(n_input_tokens=11368, n_cache_tokens=7364, n_output_tokens=224, cost_usd=0.0179),
                  verifier_result=VerifierResult(rewards={{"reward": 1.0}}))
(trial / "result.json").write_text(res.model_dump_json(indent=2))
"""
    subprocess.run([str(harbor_env / "python"), "-c", writer], check=True, timeout=120)
    trial_dir = tmp_path / "staged"
    trial_dir.mkdir()
    outcome = adapters.AgentOutcome("harbor", HARBOR_VERSION)
    adapters.ingest_harbor_trial(job, trial_dir, outcome)
    assert outcome.warnings == [] and outcome.error is None
    assert (outcome.n_input_tokens, outcome.n_cache_tokens, outcome.n_output_tokens, outcome.cost_usd) == (11368, 7364, 224, 0.0179)
    assert outcome.reward == 1.0 and outcome.model_reported == "claude-sonnet-4-5-20250929"
    assert (trial_dir / "verifier" / "reward.txt").read_text() == "1\n"
    assert json.loads(json.dumps(outcome.harbor_result))["task_name"] == "hello-world"


def test_the_runners_result_json_is_a_valid_harbor_trial_result(harbor_env, tmp_path, monkeypatch):
    """Our result.json claims Harbor's TrialResult shape: Harbor's own model must accept it."""
    from bench_support import manifest_obj, setup_bench, use_bench, write_manifest

    from analysis_lib.bench.runner import run_full

    b = setup_bench(tmp_path)
    use_bench(b, monkeypatch)
    obj = manifest_obj(b, {"fix-a": "solved", "fix-c": "garbage"})  # a passed trial and an evaluation error
    run_full(write_manifest(b, obj), 1, 3, 100.0, output=None, runs_dir=tmp_path / "runs", quiet=True)
    files = sorted((tmp_path / "runs").glob("*/*/result.json"))
    assert len(files) == 4
    check = "import json, sys\nfrom harbor.models.trial.result import TrialResult\nfor f in sys.argv[1:]:\n    TrialResult.model_validate(json.load(open(f)))\n"
    proc = subprocess.run([str(harbor_env / "python"), "-c", check, *map(str, files)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
