"""CodeCanvas outputs: ``codecanvas_comparison.md`` and ``codecanvas_analysis.json``, and reading them back."""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from ..core import outputs as files
from ..core.fileio import atomic_write_json, atomic_write_text, read_json
from ..core.trial import IngestError, InputError, Trial
from .metrics import IDENTITY_COLUMNS, INTEGER_METRICS, METRIC_COLUMNS, codecanvas_table
from .state import STAGE

SIMULATED_BANNER = (
    "> **SIMULATED DATA — not findings.** These runs come from the seeded simulator; "
    "the numbers only exercise the pipeline."
)
COMPARISON_METRICS = (
    ("informed_editing_score", "Informed editing score"),
    ("blast_radius_edit_rate", "Blast radius edit rate"),
    ("deliberation_depth", "Deliberation depth"),
)
BOARD_METRICS = (
    ("evidence_count", "Evidence"),
    ("claims_count", "Claims"),
    ("decisions_count", "Decisions"),
    ("reasoning_density", "Reasoning density"),
)


def profile_summary(table) -> list[dict[str, Any]]:
    """Per profile: trial count, trials with CodeCanvas data, mean and median of each metric."""
    out = []
    for profile in sorted(table["profile"].dropna().unique()):
        sub = table[table["profile"] == profile]
        row: dict[str, Any] = {
            "profile": profile,
            "trials": int(len(sub)),
            "with_codecanvas": int(sub["evidence_count"].notna().sum()),
        }
        for col, _label in COMPARISON_METRICS + BOARD_METRICS:
            values = [float(v) for v in sub[col].dropna()]
            row[f"{col}_n"] = len(values)
            row[f"{col}_mean"] = statistics.fmean(values) if values else None
            row[f"{col}_median"] = statistics.median(values) if values else None
        out.append(row)
    return out


def _fmt(value: float | None, digits: int) -> str:
    return "N/A" if value is None else f"{value:.{digits}f}"


def comparison_markdown(table, *, simulated: bool) -> str:
    """The ``codecanvas_comparison.md`` text: per-profile means and medians, N/A without data."""
    summary = profile_summary(table)
    lines = ["# CodeCanvas metrics by profile", ""]
    if simulated:
        lines += [SIMULATED_BANNER, ""]
    lines += [
        "Informed editing score = 0.4 x blast radius edit rate + 0.3 x anticipated failure rate "
        "+ 0.3 x min(1, deliberation depth / 3); blast radius edit rate = share of distinct edited "
        "files inside the files of the analysed symbols and their affected symbols; deliberation "
        "depth = claims + plans. Means and medians over the trials that have CodeCanvas data "
        "(n); N/A where a profile has none.",
        "",
        "## Informed editing",
        "",
    ]
    header = "| Profile | Trials | With CodeCanvas |"
    rule = "|---|---:|---:|"
    for _col, label in COMPARISON_METRICS:
        header += f" {label} mean | {label} median |"
        rule += "---:|---:|"
    lines += [header, rule]
    for row in summary:
        cells = [row["profile"], str(row["trials"]), str(row["with_codecanvas"])]
        for col, _label in COMPARISON_METRICS:
            digits = 1 if col == "deliberation_depth" else 3
            cells += [_fmt(row[f"{col}_mean"], digits), _fmt(row[f"{col}_median"], digits)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Evidence board (means)", "", "| Profile | " + " | ".join(label for _c, label in BOARD_METRICS) + " |"]
    lines.append("|---|" + "---:|" * len(BOARD_METRICS))
    for row in summary:
        cells = [row["profile"]] + [
            _fmt(row[f"{col}_mean"], 2 if col == "reasoning_density" else 1) for col, _l in BOARD_METRICS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def _clean(value: Any) -> Any:
    """JSON-ready scalar: pandas NA/NaN -> None, numpy scalars -> Python."""
    try:
        if value is None or pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):
        return value.item()
    return value


def write_codecanvas_outputs(
    trials: list[Trial],
    metrics_df=None,
    out_dir: str | os.PathLike = ".",
    *,
    simulated: bool,
    vision: dict[str, Any] | None = None,
    errors: list[IngestError] | None = None,
    runs_dir: str | os.PathLike | None = None,
) -> dict[str, Path]:
    """Write ``codecanvas_comparison.md`` and ``codecanvas_analysis.json`` atomically into out_dir.

    ``metrics_df`` is a frame holding the CodeCanvas columns by ``trial_path`` (the table of
    :func:`codecanvas_table` or metrics_detail with them joined); without those columns it is
    computed from ``trials``. ``vision`` maps trial_path -> the vision result of that trial.
    With ``runs_dir``, trial paths and messages are written relative to it (as in
    metrics_detail.csv), so that no machine path leaks into the outputs.
    Returns the written paths by name.
    """
    errors = list(errors or [])
    if metrics_df is None or not set(METRIC_COLUMNS) <= set(metrics_df.columns):
        table = codecanvas_table(trials, errors)
    else:
        table = metrics_df[[c for c in IDENTITY_COLUMNS + METRIC_COLUMNS if c in metrics_df.columns]]
    out = Path(out_dir)
    vision = vision or {}
    if runs_dir is not None:
        table = table.assign(trial_path=[relative_path(p, runs_dir) for p in table["trial_path"]])
        vision = {relative_path(k, runs_dir): _scrub(v, runs_dir) for k, v in vision.items()}
        errors = [IngestError(relative_path(e.path, runs_dir), e.stage, _scrub(e.message, runs_dir)) for e in errors]
    runs = []
    for rec in table.to_dict(orient="records"):
        identity = {k: _clean(rec.get(k)) for k in IDENTITY_COLUMNS}
        metrics = {k: _clean(rec.get(k)) for k in METRIC_COLUMNS}
        # a frame read back from CSV holds counts as floats: write them as the integers they are
        metrics = {k: int(v) if k in INTEGER_METRICS and v is not None else v for k, v in metrics.items()}
        runs.append({**identity, "has_codecanvas": metrics["evidence_count"] is not None,
                     "metrics": metrics, "vision": vision.get(identity["trial_path"])})
    doc = {
        "simulated": bool(simulated),
        "note": "SIMULATED DATA — not findings" if simulated else None,
        "metric_definitions": _definitions(),
        "by_profile": profile_summary(table),
        "runs": runs,
        "errors": [{"path": e.path, "stage": e.stage, "message": e.message} for e in errors],
    }
    paths = {
        files.CODECANVAS_COMPARISON: atomic_write_text(out / files.CODECANVAS_COMPARISON,
                                                       comparison_markdown(table, simulated=simulated)),
        files.CODECANVAS_ANALYSIS: atomic_write_json(out / files.CODECANVAS_ANALYSIS, doc),
    }
    return paths


VISION_HEADLINE = ("alignment_score", "visual_understanding", "board_quality_score", "reasoning_style",
                   "edit_appropriateness", "vision_errors")


def vision_headline(result: dict[str, Any]) -> dict[str, Any]:
    """The headline answers of one trial's vision result (None where an analysis is missing)."""
    ia, bq, au = (result.get(k) or {} for k in ("impact_alignment", "board_quality", "architecture_understanding"))
    return {
        "alignment_score": ia.get("alignment_score"),
        "visual_understanding": ia.get("visual_understanding"),
        "board_quality_score": bq.get("board_quality_score"),
        "reasoning_style": bq.get("reasoning_style"),
        "edit_appropriateness": au.get("edit_appropriateness"),
        "vision_errors": len(result.get("errors") or []),
    }


def load_codecanvas_outputs(out_dir: str | os.PathLike) -> dict[str, Any]:
    """Read ``codecanvas_analysis.json`` back as tidy frames (for the notebooks).

    Returns ``{"simulated", "runs", "by_profile", "vision", "errors"}``: ``runs`` has one row per
    trial (identity columns and every metric), ``vision`` one row per analysed trial (the
    headline answers, see :func:`analysis_lib.judge.vision.vision_frame`), ``by_profile`` the
    comparison's numbers. Raises InputError naming the file when it is missing or broken.
    """
    path = Path(out_dir) / files.CODECANVAS_ANALYSIS
    doc = read_json(path, STAGE)
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise InputError(str(path), STAGE, "not a codecanvas_analysis.json (no 'runs' list)")
    runs = pd.DataFrame(
        [{**{k: r.get(k) for k in IDENTITY_COLUMNS}, **(r.get("metrics") or {})} for r in doc["runs"]],
        columns=list(IDENTITY_COLUMNS + METRIC_COLUMNS),
    )
    for col in METRIC_COLUMNS:
        runs[col] = runs[col].astype("Int64" if col in INTEGER_METRICS else "Float64")
    vision = pd.DataFrame(
        [{"profile": r.get("profile"), "trial_path": r.get("trial_path"), **vision_headline(r["vision"])}
         for r in doc["runs"] if r.get("vision")],
        columns=["profile", "trial_path", *VISION_HEADLINE],
    )
    return {
        "simulated": bool(doc.get("simulated")),
        "runs": runs,
        "by_profile": pd.DataFrame(doc.get("by_profile") or []),
        "vision": vision,
        "errors": pd.DataFrame(doc.get("errors") or [], columns=["path", "stage", "message"]),
    }


def relative_path(path: str, runs_dir: str | os.PathLike) -> str:
    """``path`` relative to ``runs_dir``, as metrics_detail.csv writes trial_path (the join key).

    A path not under ``runs_dir`` is kept when relative (already relative to it) and reduced to
    its name when absolute, so that no machine path leaks.
    """
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(runs_dir))
    if not rel.startswith(".."):
        return rel
    return os.path.basename(path) if os.path.isabs(path) else path


def _scrub(value: Any, runs_dir: str | os.PathLike) -> Any:
    """``value`` with the absolute runs folder removed from every string in it."""
    roots = sorted({os.path.abspath(runs_dir), os.path.realpath(runs_dir)}, key=len, reverse=True)
    if isinstance(value, str):
        for root in roots:
            value = value.replace(root + os.sep, "")
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, runs_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, runs_dir) for v in value]
    return value


def _definitions() -> dict[str, str]:
    return {
        "blast_radius": "files (through symbol_files) of every analysis' target and affected symbols",
        "blast_radius_edit_rate": "edits_in_blast_radius / distinct edited files; null when nothing was edited",
        "systematic_progress": "(total_addressed_symbols + total_skipped_symbols) / total_affected_symbols",
        "anticipated_failure_rate": "failed tests in the blast radius (by file, tested module or a name word naming a blast "
        "module/symbol) / failed tests; null when none failed",
        "deliberation_depth": "claims_count + plans_count",
        "reasoning_density": "claims_count / evidence_count",
        "informed_editing_score": "0.4*blast_radius_edit_rate + 0.3*anticipated_failure_rate + 0.3*min(1, deliberation_depth/3); "
        "null rates count 0",
    }
