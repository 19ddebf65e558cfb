"""The Layer 1 outputs of a study: ``metrics_detail.csv`` and friends, and :func:`analyse`, runs folder in, files out.

``analyse`` is the library entry point (notebooks call it): :func:`analysis_lib.study.study.open_study`, then
:func:`write_outputs`. ``python -m analysis_lib RUNS_DIR`` (:mod:`analysis_lib.cli.analyse`) does the same,
then the comparisons and the LLM analyses.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..codecanvas.outputs import write_codecanvas_outputs
from ..core import outputs as files
from ..core.fileio import atomic_write_csv, atomic_write_json
from ..metrics.trial_metrics import DEFAULT_CONFIG, MetricsConfig
from .plan import write_sidecar
from .study import Study, open_study
from .study_file import StudyDesign

__all__ = ["analyse", "write_outputs"]

def analyse(
    runs_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    tasks: list[str] | None = None,
    profiles: list[str] | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    config: MetricsConfig = DEFAULT_CONFIG,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = False,
    design: StudyDesign | str | os.PathLike | None = None,
    plan: str | os.PathLike | None = None,
    baseline: str | None = None,
    runs_label: str | None = None,
) -> Study:
    """Open the study of ``runs_dir`` (:func:`~analysis_lib.study.study.open_study`) and write its Layer 1 outputs
    to ``out_dir`` (nothing is written when it is None).

    The per-trial cache lives in ``cache_dir`` (default ``out_dir/.cache``; none with ``cache=False``); the other
    arguments are :func:`~analysis_lib.study.study.open_study`'s (``design`` is its ``study``).
    """
    if cache and cache_dir is None and out_dir is not None:
        cache_dir = os.path.join(os.fspath(out_dir), ".cache")
    study = open_study(runs_dir, design, plan, baseline, out_dir=out_dir, runs_label=runs_label, tasks=tasks,
                       profiles=profiles, outcome=outcome, limit=limit, seed=seed, config=config,
                       cache_dir=cache_dir if cache else None, workers=workers, progress=progress)
    if out_dir is not None:
        study.files = write_outputs(study, out_dir)
    return study


def write_outputs(study: Study, out_dir: str | os.PathLike) -> list[Path]:
    """The study (:meth:`~analysis_lib.study.study.Study.save`: trials table, errors, design audit, ``study.json``),
    the per-profile summary and aggregates, the plan sidecar ``analysis_plan.json`` and, with CodeCanvas data, its
    tables; each written atomically.

    The plan hash is inside the JSON (``analysis_plan_sha256``); the CSVs carry it through the sidecar
    written beside them (docs/analysis-plan.md).
    """
    out = Path(out_dir)
    check = study.plan_check
    summary, aggregate = study.summary, study.aggregate
    if check is not None:
        aggregate = {**aggregate, "analysis_plan_sha256": check.sha256, "analysis_plan_changed": check.changed}
    written = [
        atomic_write_csv(out / files.METRICS_SUMMARY, summary),
        atomic_write_json(out / files.AGGREGATE_METRICS, aggregate),
    ]
    if check is not None:
        written.append(write_sidecar(out, check))
    if "informed_editing_score" in study.metrics and study.metrics["informed_editing_score"].notna().any():
        written.extend(write_codecanvas_outputs([], study.metrics, out, simulated=study.simulated).values())
    # The study last: its record names a folder whose tables are all written.
    return written + study.save(out)
