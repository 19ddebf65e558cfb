"""The import contracts of ``pyproject.toml`` (docs/architecture.md) hold on the package, and fail on a wrong edge.

Each check runs import-linter on a copy of the package, with the project's own configuration, so that the edge
added here never touches the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tmp_path: Path, edit: tuple[str, str] | None = None) -> subprocess.CompletedProcess:
    """import-linter on a copy of analysis_lib, with ``edit`` = (module file, line) appended first."""
    shutil.copytree(ROOT / "analysis_lib", tmp_path / "analysis_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if edit is not None:
        path = tmp_path / "analysis_lib" / edit[0]
        path.write_text(path.read_text(encoding="utf-8") + "\n" + edit[1] + "\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the copy, not the installed checkout
    return subprocess.run([str(LINT), "--config", "pyproject.toml", "--no-cache"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_package_keeps_every_contract(tmp_path):
    proc = _lint(tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "0 broken" in proc.stdout


def test_an_upward_edge_breaks_the_layers(tmp_path):
    """The core importing the report layer is refused, naming both ends."""
    proc = _lint(tmp_path, ("core/fileio.py", "from ..report import markdown  # noqa: E402,F401"))
    assert proc.returncode != 0
    assert "analysis_lib.core is not allowed to import analysis_lib.report" in proc.stdout


def test_a_cycle_behind_type_checking_is_refused(tmp_path):
    """The trial importing the registry (which imports the trial) only for type checking: still a cycle."""
    edit = ("core/trial.py", "from typing import TYPE_CHECKING  # noqa: E402\nif TYPE_CHECKING:\n"
            "    from .registry import Metric  # noqa: F401")
    proc = _lint(tmp_path, edit)
    assert proc.returncode != 0
    assert "No cycles are allowed in analysis_lib.core" in proc.stdout


def test_the_report_may_not_call_an_engine(tmp_path):
    """Rendering imports the analysis' results; the engine that computes them is called above the report."""
    proc = _lint(tmp_path, ("report/tables.py", "from ..inference.analysis import analyse_comparisons  # noqa: E402,F401"))
    assert proc.returncode != 0
    assert "analysis_lib.report is not allowed to import analysis_lib.inference.analysis" in proc.stdout


def test_inference_may_not_read_the_runs(tmp_path):
    """Inference is handed the study; reading trajectories again is ingest's job, below it."""
    proc = _lint(tmp_path, ("inference/rates.py", "from ..ingest import read  # noqa: E402,F401"))
    assert proc.returncode != 0
    assert "analysis_lib.inference is not allowed to import analysis_lib.ingest" in proc.stdout
