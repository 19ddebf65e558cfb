"""Notebook setup: the project root is found from any working directory, and a parameter of the wrong
type fails in one line naming it, also under plain papermill."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from analysis_lib.report.notebook_params import check_parameters, find_project_root

ROOT = Path(__file__).resolve().parents[1]


def _project(tmp: Path) -> Path:
    (tmp / "notebooks").mkdir(parents=True)
    (tmp / "pyproject.toml").write_text("[project]\nname = 'copy'\n")
    return tmp


def test_root_found_upward_beside_and_given(tmp_path):
    root = _project(tmp_path / "p")
    assert find_project_root("", root / "notebooks") == ".."
    assert find_project_root("", root) == "."
    bare = tmp_path / "bare" / "notebooks"  # notebooks without a pyproject.toml: their parent
    bare.mkdir(parents=True)
    assert find_project_root("", bare) == ".."
    assert find_project_root(str(root)) == str(root)
    with pytest.raises(ValueError, match=r"project_root='nowhere' is not a folder"):
        find_project_root("nowhere")


def test_check_parameters_names_the_parameter():
    ns = {"__annotations__": {"n_boot": int, "alpha": float, "name": str, "flag": bool}, "n_boot": 10, "alpha": 1,
          "name": "x", "flag": False}
    check_parameters(ns)  # an int is a valid float
    with pytest.raises(TypeError, match=r"^parameter n_boot: expected int, got str 'notanint'$"):
        check_parameters({**ns, "n_boot": "notanint"})
    with pytest.raises(TypeError, match="parameter n_boot: expected int, got bool True"):
        check_parameters({**ns, "n_boot": True})
    with pytest.raises(TypeError, match="parameter flag: expected bool"):
        check_parameters({**ns, "flag": "yes"})


def _papermill(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR")
    cmd = [sys.executable, "-m", "papermill", "notebooks/01_metrics.ipynb", "out.ipynb", "-k", "python3",
           "--log-level", "ERROR", *args]
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_papermill_from_the_project_root(tmp_path, sample_runs):
    """Notebook 01 made from its text pair alone (no stored outputs), run by plain papermill from the project root."""
    import jupytext

    project = _project(tmp_path)
    nbformat.write(jupytext.read(ROOT / "notebooks" / "01_metrics.py"), project / "notebooks" / "01_metrics.ipynb")
    (project / "runs").mkdir()
    (project / "runs" / "sample").symlink_to(sample_runs, target_is_directory=True)
    bad = _papermill(project, "-p", "workers", "notanint")
    assert bad.returncode != 0
    assert "TypeError: parameter workers: expected int, got str 'notanint'" in bad.stderr + bad.stdout
    assert not (project / "results").exists()  # failed before anything was written
    ok = _papermill(project)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert (project / "results" / "sample" / "analytics" / "metrics_detail.csv").is_file()
    shutil.rmtree(project / "results")
