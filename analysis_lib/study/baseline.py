"""Which profile (arm) is the baseline: one rule for the command line, the notebooks, RESULTS.md and the paper.

In order: the explicit choice (``--baseline``, a notebook parameter), the analysis plan's
``pairing.baseline``, the study design's ``baseline``, the runs' own declaration (``index.json``, or the
benchmark runner's manifest, whose first condition is the baseline), else the first profile in sort
order. A declared baseline that is not a profile of the data is an error naming where it was declared,
never a silent fallback. :func:`analysis_lib.study.study.open_study` applies it once per study; everything
after is handed the result (:class:`Baseline`, with where it was declared).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..ingest.provenance import declared_baseline
from .plan import AnalysisPlan
from .study_file import StudyDesign

__all__ = ["Baseline", "resolve_baseline", "profile_pairs"]


@dataclass(frozen=True)
class Baseline:
    """The baseline profile and where it was chosen (None: fewer than one profile)."""

    name: str | None
    source: str

    def line(self) -> str:
        return f"baseline: {self.name} ({self.source})" if self.name else "no baseline (no profile)"


def resolve_baseline(profiles: Iterable[str], *, explicit: str | None = None, plan: AnalysisPlan | None = None,
                     design: StudyDesign | None = None, runs_dir: str | os.PathLike | None = None,
                     manifest: str | None = None) -> Baseline:
    """The baseline among ``profiles`` by the rule of the module docstring; ValueError when a declared one is absent.

    ``manifest``: the benchmark runner's baseline condition (its manifest's first), for looks taken before the
    runs folder's ``index.json`` exists."""
    names = sorted(set(map(str, profiles)))
    declared = [
        (explicit, "chosen explicitly"),
        (plan.pairing.baseline if plan is not None else None, "the analysis plan's pairing.baseline"),
        (design.baseline if design is not None else None, "the study file"),
        (declared_baseline(runs_dir) if runs_dir is not None and design is None else None, "the runs folder's index.json"),
        (manifest, "the benchmark manifest's first condition"),
    ]
    for name, source in declared:
        if name:
            if name not in names:
                raise ValueError(f"baseline {name!r} ({source}) is not a profile of these runs; profiles are {names}")
            return Baseline(name, source)
    return Baseline(names[0], "the first profile in sort order") if names else Baseline(None, "no profile")


def profile_pairs(profiles: Sequence[str], *, compare: tuple[str, str] | None = None,
                  baseline: str | None = None) -> list[tuple[str, str]]:
    """The (A, B) pairs to compare: ``compare`` alone, or every other profile against ``baseline``.

    Raises ValueError naming a profile that is not in the data, and when neither ``compare`` nor ``baseline``
    is given: the baseline is resolved once (:func:`resolve_baseline`), never guessed here.
    """
    names = sorted(set(map(str, profiles)))
    if compare is not None:
        a, b = map(str, compare)
        for p in (a, b):
            if p not in names:
                raise ValueError(f"--compare: profile {p!r} not found; profiles are {names}")
        if a == b:
            raise ValueError(f"--compare needs two different profiles, got {a!r} twice")
        return [(a, b)]
    if not names:
        return []
    if baseline is None:
        raise ValueError("no baseline given: resolve it once (analysis_lib.study.baseline.resolve_baseline) and pass it")
    base = str(baseline)
    if base not in names:
        raise ValueError(f"baseline profile {base!r} not found; profiles are {names}")
    return [(base, p) for p in names if p != base]
