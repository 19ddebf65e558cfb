"""Notebook 03 with run_llm on: the judges run through the loopback OpenAI-compatible server, their
outputs land in the output folder, and the API key never reaches the executed notebook."""

from __future__ import annotations

import os
from pathlib import Path

import papermill
import pytest
from judge_fakes import answer_for

from analysis_lib.cli import pipeline

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-test-do-not-leak-0123456789"


@pytest.mark.slow
def test_llm_notebook_runs_the_judges_and_keeps_the_key_out(tmp_path, sample_runs, llm_server, monkeypatch):
    from analysis_lib.study.layer1 import analyse

    llm_server.default = answer_for  # a schema-valid answer for whatever analysis is asked
    out = tmp_path / "out"
    # The study as notebook 01 saves it, naming the runs relative to the project root the notebook is given.
    analyse(sample_runs, out / "analytics", workers=1, cache=False, runs_label=os.path.relpath(sample_runs, tmp_path))
    for key, value in pipeline.kernel_env(ROOT).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the kernel inherits it; it must not show anywhere
    executed = tmp_path / "03.ipynb"
    papermill.execute_notebook(
        str(ROOT / "notebooks" / "03_llm_analysis.ipynb"), str(executed), kernel_name="python3",
        cwd=str(ROOT / "notebooks"), progress_bar=False, extra_arguments=pipeline.KERNEL_ARGS,
        parameters={"project_root": str(tmp_path), "output_dir": "out",
                    "run_llm": True, "model": "openai/loopback-judge", "api_base": llm_server.url, "llm_limit": 4})
    text = executed.read_text()
    assert "judging 4 trials" in text
    assert "strategy: 4 records" in text
    for name in ("strategy_analysis.json", "synthesis.md", "layer2_summary.json"):
        assert (out / "llm" / name).exists(), name
    assert len(llm_server.requests) >= 5  # 4 strategies + at least the synthesis
    assert SECRET not in text
    assert not any(SECRET in p.read_text(errors="replace") for p in (out / "llm").rglob("*") if p.is_file())
