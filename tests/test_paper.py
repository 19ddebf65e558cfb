"""paper/main.tex compiles for real with the snippets and figures made from the sample runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from ci_rule import skip_or_fail_in_ci

from analysis_lib.cli import pipeline
from analysis_lib.report import figures, paper

ROOT = Path(__file__).resolve().parents[1]


def _require_pdflatex() -> None:
    if not shutil.which("pdflatex"):
        skip_or_fail_in_ci("pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended "
                           "texlive-fonts-recommended texlive-science; .ci/run installs them)")


@pytest.mark.slow
def test_main_tex_compiles_with_generated_snippets(tmp_path, sample_runs):
    _require_pdflatex()
    from analysis_lib import write_comparisons
    from analysis_lib.study.layer1 import analyse

    result = analyse(sample_runs, tmp_path / "analytics", workers=1, cache=False)
    metrics = pd.read_csv(tmp_path / "analytics" / "metrics_detail.csv")
    study = write_comparisons(result, tmp_path / "comparisons")
    fig_dir = tmp_path / "figures"
    figures.save_figure(figures.plot_rates(study.rates, True), fig_dir, "rates")
    figures.save_figure(figures.plot_forest(study.comparisons, True), fig_dir, "forest")
    paper_dir = tmp_path / "paper"
    plan = paper.PlanRecord("a" * 64, "mcp-ab-preregistered", "2026-11-24T00:00:00Z")
    written = paper.write_paper_snippets(
        paper.PaperInputs(metrics, study.comparisons, study.rates, simulated=True, baseline="text", plan=plan),
        paper_dir, fig_dir)
    shutil.copyfile(ROOT / "paper" / "main.tex", paper_dir / "main.tex")
    pdf = pipeline.compile_paper(paper_dir)
    assert pdf is not None and pdf.read_bytes().startswith(b"%PDF")
    log = (paper_dir / "main.log").read_text(errors="replace")
    assert "Undefined control sequence" not in log and "LaTeX Warning: Reference" not in log
    assert "Overfull \\hbox" not in log  # tables fit their column (or both columns for table*)
    figs = written["figures"].read_text()
    assert "rates.pdf" in figs and "forest.pdf" in figs and "tool_mix.pdf" not in figs
    assert figs.count("\\caption{SIMULATED DATA. ") == 2


def test_every_shipped_plan_gives_unique_macro_names():
    """The all-repetitions plan restates success with two sensitivity tests; each gets macros of its own."""
    from analysis_lib import Study, analyse_comparisons
    from analysis_lib.report.latex import render_macros
    from analysis_lib.simulate.model import simulate_metrics
    from analysis_lib.study.plan import load_plan

    metrics = simulate_metrics(seed=4, n_tasks=12, repetitions=3)
    for plan_file in sorted((ROOT / "params").glob("analysis_plan*.yaml")):
        study = analyse_comparisons(Study.from_table(metrics, baseline="text"), load_plan(plan_file))
        macros = paper.quoted_macros(paper.PaperInputs(metrics, study.comparisons, study.rates, simulated=True, baseline="text"))
        names = [m.name for m in macros]
        assert len(names) == len(set(names)), plan_file.name
        render_macros(macros, True, "metrics_detail.csv")
        n_sensitivity = int((study.comparisons["tier"] == "sensitivity").sum())
        assert n_sensitivity == 0 or sum("Sensitivity" in n for n in names) >= n_sensitivity, plan_file.name


def test_compile_error_names_the_file_and_the_tex_error(tmp_path):
    _require_pdflatex()
    (tmp_path / "main.tex").write_text("\\documentclass{article}\\begin{document}\\UndefinedMacro\\end{document}\n")
    with pytest.raises(RuntimeError, match=r"main\.tex: pdflatex failed: ! Undefined control sequence"):
        pipeline.compile_paper(tmp_path)


def test_the_codecanvas_table_names_its_metrics_not_their_column_ids(tmp_path):
    """Readers see "Informed editing score", not ``informed_editing_score`` (the CSV keeps the ids)."""
    from analysis_lib.codecanvas.outputs import BOARD_METRICS, COMPARISON_METRICS
    from analysis_lib.simulate.model import simulate_metrics

    metrics = simulate_metrics(seed=2, n_tasks=4, repetitions=2)
    cc = pd.DataFrame({"profile": ["codecanvas"] * 4, "task_id": list("abcd"), "trial_path": list("wxyz"),
                       "informed_editing_score": [0.2, 0.5, 0.7, 0.9], "evidence_count": [1, 3, 5, 2]})
    written = paper.write_paper_snippets(paper.PaperInputs(metrics, None, None, codecanvas=cc, simulated=True,
                                                           baseline="text"), tmp_path / "paper", tmp_path / "figures")
    tex = written["codecanvas"].read_text()
    labels = dict(COMPARISON_METRICS + BOARD_METRICS)
    assert labels["informed_editing_score"] in tex and labels["evidence_count"] in tex
    assert "informed\\_editing" not in tex and "evidence\\_count" not in tex
