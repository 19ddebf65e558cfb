"""Shared fixtures (the real third-party fixtures, the sample runs, Harbor's side environment) and the suite's rules.

A test that cannot run here calls ``skip_or_fail_in_ci(reason)`` (``tests/ci_rule.py``): it skips locally and fails
under ``CI=true``; the hooks imported below fail any other skip under ``CI=true`` unless ``tests/README.md`` lists it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from ci_rule import pytest_make_collect_report, pytest_runtest_makereport, skip_or_fail_in_ci  # noqa: F401  (hooks)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")

ROOT = Path(__file__).resolve().parents[1]
# CI clones the project with ../shared beside it; users usually do not have it.
SHARED = ROOT.parent / "shared"
REAL = SHARED / "fixtures" / "real"
SAMPLE_RUNS = ROOT / "runs" / "sample"


def _require(path: Path) -> Path:
    if not path.exists():
        skip_or_fail_in_ci(f"real fixtures not found ({path.name} is not beside the checkout; CI has them in ../shared)")
    return path


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """``../shared/fixtures/real``: skipped when absent, except under CI=true where it must exist."""
    return _require(REAL)


@pytest.fixture(scope="session")
def judge_labels() -> Path:
    return _require(REAL / "judge-labels")


@pytest.fixture(scope="session")
def codescalebench() -> Path:
    """``../shared/fixtures/real-ab/codescalebench``: a real paired A/B slice (Harbor trials of two arms)."""
    return _require(SHARED / "fixtures" / "real-ab" / "codescalebench")


@pytest.fixture(scope="session")
def skillsbench() -> Path:
    """``../shared/fixtures/real-ab/skillsbench``: real Harbor trials of one configuration, with and without skills."""
    return _require(SHARED / "fixtures" / "real-ab" / "skillsbench")


@pytest.fixture(scope="session")
def skillsbench_registry() -> Path:
    """``../shared/fixtures/real-ab/skillsbench-registry``: SkillsBench's per-task results of six configurations."""
    return _require(SHARED / "fixtures" / "real-ab" / "skillsbench-registry")


@pytest.fixture(scope="session")
def sample_runs() -> Path:
    if not (SAMPLE_RUNS / "index.json").exists():
        pytest.fail("runs/sample is missing: regenerate it with `make sample`")
    return SAMPLE_RUNS


@pytest.fixture(scope="session")
def harbor_python() -> Path:
    """The interpreter of Harbor's side environment (``.cache/harbor-<version>``, Python >= 3.12; see side_envs.py)."""
    from side_envs import harbor_env

    return harbor_env()


# The loopback OpenAI-compatible server (tests/llm_server.py) as the `llm_server` fixture.
from llm_server import llm_server  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _llm_cache_in_tmp(tmp_path_factory, monkeypatch):
    """Each test gets its own LLM response cache: the user's shared cache is never read or written."""
    monkeypatch.setenv("ANALYSIS_LIB_LLM_CACHE", str(tmp_path_factory.mktemp("llm-cache")))


@pytest.fixture
def no_keys(monkeypatch, tmp_path):
    """No provider key in the environment and no project .env above the working directory."""
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@dataclass(frozen=True)
class CliRun:
    """What ``python -m analysis_lib ARGS`` would give back: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """``python -m analysis_lib ARGS`` in this process: the same entry point (``analysis_lib.cli.main.main``)
    without a fresh interpreter's imports (1-2 s each). ``cwd`` and ``env`` last until the test ends.

    Each command keeps one real subprocess test; the option tests use this.
    """
    from analysis_lib.cli.main import main

    def run(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliRun:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()  # only this call's output
        try:
            code = main([str(a) for a in args])
        except SystemExit as stop:  # argparse's --help and usage errors; sys.exit(msg) prints msg, exits 1
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
            code = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        out = capsys.readouterr()
        return CliRun(int(code), out.out, out.err)

    return run


SLOW_SECONDS = 10.0


def pytest_terminal_summary(terminalreporter):
    """Name the tests that took over 10 s without the ``slow`` marker (tests/README.md: the slow marker)."""
    unmarked = [
        (r.duration, r.nodeid)
        for r in terminalreporter.getreports("passed") + terminalreporter.getreports("failed")
        if r.when == "call" and r.duration > SLOW_SECONDS and "slow" not in r.keywords
    ]
    if unmarked:
        terminalreporter.section(f"over {SLOW_SECONDS:.0f} s without @pytest.mark.slow")
        for duration, nodeid in sorted(unmarked, reverse=True):
            terminalreporter.line(f"{duration:6.1f} s  {nodeid}")
