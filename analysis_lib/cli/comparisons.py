"""The comparisons step of an analysis, for the command line and notebook 02: run the plan on a study, then write
``comparisons.csv``, its companions and ``comparison_report.md``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..inference.analysis import analyse_comparisons
from ..inference.results import Analysis
from ..report.comparison_report import write_comparison_outputs
from ..study.study import Study

__all__ = ["write_comparisons"]


def write_comparisons(study: Study, out_dir: str | Path, *, compare_pair: tuple[str, str] | None = None,
                      task_groups: pd.Series | None = None, plan_next: bool = False) -> Analysis:
    """Analyse ``study`` (:func:`~analysis_lib.inference.analysis.analyse_comparisons`: every arm against its baseline,
    or ``compare_pair``) and write the outputs into ``out_dir``; returns the analysis."""
    analysis = analyse_comparisons(study, compare_pair=compare_pair, task_groups=task_groups)
    write_comparison_outputs(study, analysis, out_dir, plan_next=plan_next)
    return analysis
