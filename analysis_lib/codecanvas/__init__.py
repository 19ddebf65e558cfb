"""CodeCanvas extension: the evidence board, blast radius and informed-editing metrics of a trial.

CodeCanvas is an MCP server that shows the agent the blast radius of a change (the symbols an
edit of a target symbol may affect) and keeps an evidence board (evidence -> claims ->
decisions). It leaves ``agent/sessions/codecanvas/state.json`` and PNGs (``architecture.png``,
``impact_<analysis id>.png``, ``board.png``) in the trial. The question these metrics answer:
did seeing the blast radius make the agent edit where it looked, expect what broke, and plan
before acting? Counting MCP calls does not answer it.

Modules: ``state`` (state.json, images), ``paths`` (matching edits and tests to symbol files),
``metrics`` (per-trial metrics and the table), ``outputs`` (comparison and JSON). The vision
analysis of the images (Layer 2) lives with the judge, in :mod:`analysis_lib.judge.vision`; the
command line is :mod:`analysis_lib.cli.codecanvas`.
"""

from __future__ import annotations

from .metrics import (
    DELIBERATION_SATURATION,
    IDENTITY_COLUMNS,
    INTEGER_METRICS,
    METRIC_COLUMNS,
    codecanvas_metrics,
    codecanvas_table,
    empty_metrics,
    informed_editing_score,
)
from .outputs import (
    VISION_HEADLINE,
    comparison_markdown,
    load_codecanvas_outputs,
    profile_summary,
    relative_path,
    vision_headline,
    write_codecanvas_outputs,
)
from .paths import (
    PathMatcher,
    blast_radius_files,
    blast_radius_names,
    distinct_files,
    edited_paths,
    failed_test_in_blast_radius,
    file_of_test,
    normalize_path,
)
from .state import (
    SESSION_SUBDIR,
    STATE_FILE,
    CanvasState,
    Claim,
    Decision,
    Evidence,
    ImpactAnalysis,
    list_images,
    load_trial_state,
    parse_state,
    read_state,
    session_dir_of,
)

__all__ = [
    "DELIBERATION_SATURATION", "IDENTITY_COLUMNS", "INTEGER_METRICS", "METRIC_COLUMNS", "SESSION_SUBDIR",
    "STATE_FILE", "VISION_HEADLINE", "CanvasState", "Claim", "Decision", "Evidence", "ImpactAnalysis",
    "PathMatcher", "blast_radius_files", "blast_radius_names", "codecanvas_metrics",
    "codecanvas_table", "comparison_markdown", "distinct_files", "edited_paths", "empty_metrics",
    "failed_test_in_blast_radius", "file_of_test", "informed_editing_score", "list_images",
    "load_codecanvas_outputs", "load_trial_state", "normalize_path", "parse_state", "profile_summary",
    "read_state", "relative_path", "session_dir_of", "vision_headline", "write_codecanvas_outputs",
]
