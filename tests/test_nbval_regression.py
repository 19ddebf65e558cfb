"""nbval guards the numbers: the committed 01_metrics notebook passes as is and fails when a metric's
definition changes (a real nbval run in a subprocess, the changed definition injected into its kernel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Loaded by every Python process of the perturbed run (kernel included) through PYTHONPATH:
# total_tokens redefined to leave out cached tokens, as a plausible "small" change of definition.
SITECUSTOMIZE = '''
import analysis_lib.metrics.trial_metrics as _m

_original = _m.trial_metrics


def _changed(trial, *args, **kwargs):
    row = _original(trial, *args, **kwargs)
    if row.get("total_tokens") is not None and row.get("total_cached_tokens"):
        row["total_tokens"] = row["total_tokens"] - row["total_cached_tokens"]
    return row


_m.trial_metrics = _changed
'''


def _nbval(project: Path, extra_path: list[Path]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in [*extra_path, ROOT]),
               LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
           "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), "notebooks/01_metrics.ipynb"]
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_nbval_fails_when_a_metric_definition_changes(tmp_path, sample_runs):
    # A throwaway project beside the copy: the notebook reads ../runs/sample and writes ../results.
    (tmp_path / "notebooks").mkdir()
    shutil.copyfile(ROOT / "notebooks" / "01_metrics.ipynb", tmp_path / "notebooks" / "01_metrics.ipynb")
    (tmp_path / "params").mkdir()
    shutil.copyfile(ROOT / "params" / "analysis_plan.yaml", tmp_path / "params" / "analysis_plan.yaml")  # the plan it reads
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "sample").symlink_to(sample_runs, target_is_directory=True)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")

    same = _nbval(tmp_path, [])
    assert same.returncode == 0, same.stdout[-2000:]

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    # results/ of the unperturbed run stays: notebook 01 must not serve stale cached metrics.
    changed = _nbval(tmp_path, [site])
    assert changed.returncode == 1, changed.stdout[-2000:]
    assert "NBVAL_CELL_MISMATCH" in changed.stdout or "mismatch" in changed.stdout.lower()
    assert "total_tokens_mean" in changed.stdout  # the summary table of the notebook is what differs
