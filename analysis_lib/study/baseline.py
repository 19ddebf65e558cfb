"""Which profile (arm) is the baseline: one rule for the command line, the notebooks, RESULTS.md and the paper.

In order: the explicit choice (``--baseline``, a notebook parameter), the analysis plan's
``pairing.baseline``, the study design's ``baseline``, the runs folder's own ``index.json``, else
the first profile in sort order. A declared baseline that is not a profile of the data is an error
naming where it was declared, never a silent fallback.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..ingest.provenance import declared_baseline
from .plan import AnalysisPlan
from .study_file import StudyDesign

__all__ = ["Baseline", "resolve_baseline"]


@dataclass(frozen=True)
class Baseline:
    """The baseline profile and where it was chosen (None: fewer than one profile)."""

    name: str | None
    source: str

    def line(self) -> str:
        return f"baseline: {self.name} ({self.source})" if self.name else "no baseline (no profile)"


def resolve_baseline(profiles: Iterable[str], *, explicit: str | None = None, plan: AnalysisPlan | None = None,
                     design: StudyDesign | None = None, runs_dir: str | os.PathLike | None = None) -> Baseline:
    """The baseline among ``profiles`` by the rule of the module docstring; ValueError when a declared one is absent."""
    names = sorted(set(map(str, profiles)))
    declared = [
        (explicit, "chosen explicitly"),
        (plan.pairing.baseline if plan is not None else None, "the analysis plan's pairing.baseline"),
        (design.baseline if design is not None else None, "the study file"),
        (declared_baseline(runs_dir) if runs_dir is not None and design is None else None, "the runs folder's index.json"),
    ]
    for name, source in declared:
        if name:
            if name not in names:
                raise ValueError(f"baseline {name!r} ({source}) is not a profile of these runs; profiles are {names}")
            return Baseline(name, source)
    return Baseline(names[0], "the first profile in sort order") if names else Baseline(None, "no profile")
