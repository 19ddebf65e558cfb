"""What the analysis of a study produced, as types the report, the paper and RESULTS.md render.

The engines that fill them are :func:`analysis_lib.inference.analysis.analyse_comparisons` and
:func:`analysis_lib.inference.beside_itt.estimands.beside_itt`; the layers above import these results, not the
engines (import-linter's contract in ``pyproject.toml``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..study.plan import AnalysisPlan
from .beside_itt.result import FILES, BesideResult
from .pooling import Pooled

__all__ = ["FILES", "BesideResult", "Pooled", "ConfigurationPooling", "Analysis"]


@dataclass
class ConfigurationPooling:
    """A study with configurations: each primary metric's effect pooled across them, and why a metric was not."""

    configurations: list[str]  # the configurations compared (both arms present), in order
    pooled: list[Pooled] = field(default_factory=list)  # one per primary metric pooled
    # Primary metric -> why it was not pooled (fewer than two configurations with an estimate, ...), one line.
    not_pooled: dict[str, str] = field(default_factory=dict)

@dataclass
class Analysis:
    """What the comparison engine made of one study: the comparisons, the profile rates and their companions."""

    comparisons: pd.DataFrame
    rates: pd.DataFrame
    plan: AnalysisPlan
    pairs: list[tuple[str, str]]
    hypotheses: pd.DataFrame | None = None  # the plan's fixed sequence, when it declares one
    variance: pd.DataFrame = field(default_factory=pd.DataFrame)  # between- and within-task variance
    pass_at_k: pd.DataFrame = field(default_factory=pd.DataFrame)
    subgroups: pd.DataFrame | None = None  # per group of tasks, when groups are given
    beside: BesideResult | None = None  # the estimands beside intention to treat (compliance.csv, infra_bounds.csv, ...)
    # r of the per-task log ratios between primary endpoints (endpoint_correlations.csv)
    correlations: pd.DataFrame = field(default_factory=pd.DataFrame)
    # A study with configurations: the primary effects pooled across them (pooled.csv and its companions).
    pooling: ConfigurationPooling | None = None


