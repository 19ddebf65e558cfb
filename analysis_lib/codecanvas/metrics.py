"""CodeCanvas metrics per trial: board counts, blast radius, anticipated failures, informed editing.

Reference for the definitions: the CodeCanvas project's own analytics
(``terminalbench/analytics/extensions/codecanvas.py`` in github.com/ain3sh/codecanvas); where
this module differs (the blast radius includes the target's file, undefined rates are ``None``,
path matching, test-to-file mapping) the docstrings say so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pandas as pd

from ..core.trial import IngestError, InputError, Trial
from .paths import PathMatcher, blast_radius_files, blast_radius_names, distinct_files, edited_paths, failed_test_in_blast_radius
from .state import CanvasState, load_trial_state

log = logging.getLogger(__name__)

# Metric ids, in the order of the table's columns; metrics_detail.csv joins them by trial_path, so they
# must not change.
METRIC_COLUMNS = (
    "evidence_count",
    "claims_count",
    "decisions_count",
    "impact_analyses_count",
    "hypotheses_count",
    "findings_count",
    "questions_count",
    "marks_count",
    "skips_count",
    "plans_count",
    "edits_count",
    "blast_radius_edit_rate",
    "edits_in_blast_radius",
    "edits_outside_blast_radius",
    "total_affected_symbols",
    "total_addressed_symbols",
    "total_skipped_symbols",
    "systematic_progress",
    "anticipated_failure_rate",
    "failed_tests_in_blast_radius",
    "failed_tests_outside_blast_radius",
    "deliberation_depth",
    "reasoning_density",
    "informed_editing_score",
)
# Counts (the others are rates and scores).
INTEGER_METRICS = frozenset(
    c for c in METRIC_COLUMNS
    if c.endswith("_count") or c.startswith(("edits_", "total_", "failed_tests")) or c == "deliberation_depth"
)
IDENTITY_COLUMNS = ("profile", "task_id", "repetition", "run_id", "trial_path")

# The deliberation term of the informed editing score saturates at this many claims + plans.
DELIBERATION_SATURATION = 3


def _ratio(num: int | None, den: int | None) -> float | None:
    if num is None or not den:
        return None
    return num / den


def empty_metrics() -> dict[str, Any]:
    """Every CodeCanvas metric set to ``None`` (a trial without CodeCanvas state)."""
    return {k: None for k in METRIC_COLUMNS}


def codecanvas_metrics(
    trial: Trial, state: CanvasState | None = None, *, errors: list[IngestError] | None = None
) -> dict[str, Any]:
    """The CodeCanvas metrics of one trial; all ``None`` when it has no (readable) CodeCanvas state.

    ``state`` defaults to the trial's own ``state.json``. A broken file never raises here (the
    trial's other metrics must survive it): its one-line message goes to ``trial.warnings``, to
    ``errors`` when given (stage ``codecanvas``) and to the log, and the metrics are ``None``.
    Definitions (counts are of state items; "files" are canonical paths, see PathMatcher):

    - ``evidence_count``, ``claims_count``, ``decisions_count``: items on the board;
      ``impact_analyses_count``: entries of ``analyses``.
    - ``hypotheses_count``/``findings_count``/``questions_count``: claims by kind;
      ``marks_count``/``skips_count``/``plans_count``/``edits_count``: decisions by kind.
    - blast radius: files (through ``symbol_files``) of every analysis' target and affected
      symbols. ``edits_in_blast_radius`` / ``edits_outside_blast_radius``: distinct files edited
      by the trajectory's edit calls inside / outside it; ``blast_radius_edit_rate`` =
      in / (in + out), ``None`` when nothing was edited.
    - ``total_affected_symbols``, ``total_addressed_symbols``, ``total_skipped_symbols``: distinct
      ids per analysis, summed over analyses; ``systematic_progress`` = (addressed + skipped) /
      affected, ``None`` when nothing is affected (not capped: addressing symbols outside the
      affected set can push it above 1).
    - ``failed_tests_in_blast_radius`` / ``..._outside_...``: the verifier's failed tests mapped
      to files (see :func:`failed_test_in_blast_radius`), ``None`` when the trial has no test
      report; ``anticipated_failure_rate`` = in / (in + out), ``None`` when no test failed.
    - ``deliberation_depth`` = claims + plan decisions; ``reasoning_density`` = claims /
      evidence, ``None`` without evidence.
    - ``informed_editing_score`` = 0.4 * blast_radius_edit_rate + 0.3 * anticipated_failure_rate
      + 0.3 * min(1, deliberation_depth / 3): the deliberation term is capped at 1 (saturates at
      3 claims + plans), so the score lies in [0, 1]. A rate that is undefined (``None``: no edit,
      no failed test) contributes 0, as in the CodeCanvas reference analytics; a trial with no
      failing test can therefore score at most 0.7.
    """
    if state is None:
        try:
            state = load_trial_state(trial)
        except InputError as exc:
            log.warning("%s", exc)
            trial.warnings.append(str(exc))
            if errors is not None:
                errors.append(exc.error)
            return empty_metrics()
        if state is None:
            return empty_metrics()
    m = empty_metrics()
    claims_by = _count_kinds(c.kind for c in state.claims)
    decisions_by = _count_kinds(d.kind for d in state.decisions)
    m["evidence_count"] = len(state.evidence)
    m["claims_count"] = len(state.claims)
    m["decisions_count"] = len(state.decisions)
    m["impact_analyses_count"] = len(state.analyses)
    m["hypotheses_count"] = claims_by.get("hypothesis", 0)
    m["findings_count"] = claims_by.get("finding", 0)
    m["questions_count"] = claims_by.get("question", 0)
    m["marks_count"] = decisions_by.get("mark", 0)
    m["skips_count"] = decisions_by.get("skip", 0)
    m["plans_count"] = decisions_by.get("plan", 0)
    m["edits_count"] = decisions_by.get("edit", 0)

    matcher = PathMatcher(state.symbol_files.values())
    blast = blast_radius_files(state, matcher)
    edited = distinct_files(edited_paths(trial), matcher)
    m["edits_in_blast_radius"] = len(edited & blast)
    m["edits_outside_blast_radius"] = len(edited - blast)
    m["blast_radius_edit_rate"] = _ratio(m["edits_in_blast_radius"], len(edited))

    m["total_affected_symbols"] = sum(len(a.affected) for a in state.analyses)
    m["total_addressed_symbols"] = sum(len(a.addressed) for a in state.analyses)
    m["total_skipped_symbols"] = sum(len(a.skipped) for a in state.analyses)
    m["systematic_progress"] = _ratio(
        m["total_addressed_symbols"] + m["total_skipped_symbols"], m["total_affected_symbols"]
    )

    if trial.tests is not None:
        failed = [t for t in trial.tests if str(t.status).lower() == "failed"]
        names = blast_radius_names(state, blast)
        inside = sum(1 for t in failed if failed_test_in_blast_radius(t, blast, matcher, names))
        m["failed_tests_in_blast_radius"] = inside
        m["failed_tests_outside_blast_radius"] = len(failed) - inside
        m["anticipated_failure_rate"] = _ratio(inside, len(failed))

    m["deliberation_depth"] = m["claims_count"] + m["plans_count"]
    m["reasoning_density"] = _ratio(m["claims_count"], m["evidence_count"])
    m["informed_editing_score"] = informed_editing_score(
        m["blast_radius_edit_rate"], m["anticipated_failure_rate"], m["deliberation_depth"]
    )
    return m


def informed_editing_score(
    blast_radius_edit_rate: float | None, anticipated_failure_rate: float | None, deliberation_depth: int
) -> float:
    """0.4 * edit rate + 0.3 * anticipated failure rate + 0.3 * min(1, depth / 3); None terms count 0."""
    brer = blast_radius_edit_rate or 0.0
    afr = anticipated_failure_rate or 0.0
    depth = min(1.0, deliberation_depth / DELIBERATION_SATURATION)
    return 0.4 * brer + 0.3 * afr + 0.3 * depth


def _count_kinds(kinds: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in kinds:
        key = (k or "").strip().lower()
        out[key] = out.get(key, 0) + 1
    return out


def codecanvas_columns(metrics: pd.DataFrame) -> pd.DataFrame:
    """The table :func:`codecanvas_table` makes, taken from a trials table that already holds the CodeCanvas columns
    (``metrics_detail.csv``: every row was measured with them), so that no trial is read again."""
    df = metrics.reindex(columns=list(IDENTITY_COLUMNS + METRIC_COLUMNS)).reset_index(drop=True)
    return _typed(df)


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    # Counts stay integers where present (nullable Int64), rates floats.
    for col in METRIC_COLUMNS:
        values = pd.to_numeric(df[col], errors="coerce")
        df[col] = values.astype("Int64") if col in INTEGER_METRICS else values.astype("Float64")
    return df


def codecanvas_table(trials: Iterable[Trial], errors: list[IngestError] | None = None):
    """One row per trial: identity columns then every CodeCanvas metric (None without state).

    A broken ``state.json`` gives a row of ``None`` metrics and, when ``errors`` is given, one
    :class:`IngestError` (stage ``codecanvas``) appended to it; the rest goes on.
    """
    rows = []
    for trial in trials:
        row: dict[str, Any] = {k: getattr(trial, k) for k in IDENTITY_COLUMNS}
        row.update(codecanvas_metrics(trial, errors=errors))
        rows.append(row)
    return _typed(pd.DataFrame(rows, columns=list(IDENTITY_COLUMNS + METRIC_COLUMNS)))
