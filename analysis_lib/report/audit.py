"""The design audit as people read it: findings first, then one column per arm (Markdown and TeX).

Rendered from ``design_audit.csv`` and ``design_findings.csv`` (:mod:`analysis_lib.study.audit`), so
the comparison report, RESULTS.md, the notebooks and the paper show the same audit.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..core import outputs as files
from ..core.times import parse_time
from ..metrics.tokens import TOKEN_SOURCE_LABELS
from ..study.audit import DesignAudit
from . import numbers as fmt
from .latex import column, escape_tex
from .markdown import table as md_table

__all__ = ["audit_frames", "read_audit", "audit_grid", "audit_markdown", "audit_tex", "data_banner", "check_name"]

SEVERITY = {"problem": "Problem", "warning": "Warning", "note": "Note"}
# What each check of the audit looks at, as a reader names it (the CSV keeps the ids).
CHECK_NAMES = {"mcp_use": "MCP use", "pooled": "pooled profiles", "design": "study design", "pairs": "pairs",
               "coverage": "coverage", "infrastructure": "infrastructure", "tokens": "tokens", "dataset": "dataset",
               "time": "time", "reruns": "reruns", "repetitions": "repetitions", "configuration": "configuration",
               "instructions": "instructions", "assignment": "assignment"}


def check_name(check: object) -> str:
    """A finding's check in words (``mcp_use`` -> ``MCP use``), never a raw id."""
    return CHECK_NAMES.get(str(check), str(check).replace("_", " "))


def audit_frames(audit: DesignAudit) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-arm table, findings) of an audit, as the CSV files hold them."""
    arms = audit.arms.copy()
    if len(arms):
        arms.insert(int(arms.columns.get_loc("arm")) + 1, "baseline", audit.baseline_column())
    findings = pd.DataFrame([(f.severity, f.check, f.message) for f in audit.findings], columns=["severity", "check", "message"])
    return arms, findings


def read_audit(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``design_audit.csv`` and ``design_findings.csv`` of an analysis folder, None when it has none."""
    folder = Path(folder)
    arms_path, findings_path = folder / files.DESIGN_AUDIT, folder / files.DESIGN_FINDINGS
    if not arms_path.exists():
        return None
    findings = pd.read_csv(findings_path) if findings_path.exists() else pd.DataFrame(columns=["severity", "check", "message"])
    return pd.read_csv(arms_path), findings


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or (isinstance(v, str) and not v)


def _int(v) -> str:
    return fmt.DASH if _missing(v) else f"{int(v):,}"


def _when(first, last) -> str:
    a, b = parse_time(first) if isinstance(first, str) else None, parse_time(last) if isinstance(last, str) else None
    if a is None or b is None:
        return fmt.DASH
    if a.date() == b.date():
        return f"{a:%Y-%m-%d %H:%M}–{b:%H:%M} UTC"
    return f"{a:%Y-%m-%d}–{b:%Y-%m-%d}"


def _tokens(r) -> str:
    sources = str(r.token_sources) if not _missing(r.token_sources) else ""
    return "; ".join(f"{TOKEN_SOURCE_LABELS.get(part.rsplit(' ', 1)[0], part.rsplit(' ', 1)[0])} {part.rsplit(' ', 1)[-1]}"
                     for part in sources.split("; ") if part) or fmt.DASH


def _ratio(r) -> str:
    if _missing(r.token_ratio_median):
        return fmt.DASH
    return (f"{TOKEN_SOURCE_LABELS.get(str(r.token_other_source), str(r.token_other_source))}: "
            f"{fmt.number(r.token_ratio_median, 2)}× ({fmt.number(r.token_ratio_min, 2)}–{fmt.number(r.token_ratio_max, 2)})")


def _zero_mcp(r) -> str:
    if _missing(r.n_mcp_known) or int(r.n_mcp_known) == 0:
        return fmt.DASH
    return f"{int(r.n_zero_mcp_calls)} of {int(r.n_mcp_known)} ({fmt.number(100 * r.share_zero_mcp_calls, 0)} %)"


def _config(r) -> str:
    """The configuration keys in which an arm differs from the baseline beyond the treatment (the keys only)."""
    diff = getattr(r, "config_vs_baseline", None)
    return fmt.DASH if _missing(diff) else ", ".join(d.split(" = ", 1)[0] for d in str(diff).split("; "))


def _instructions(r) -> str:
    median, ratio = getattr(r, "instruction_chars_median", None), getattr(r, "instruction_ratio_median", None)
    if _missing(median):
        return fmt.DASH
    return fmt.number(median, 0) + ("" if _missing(ratio) else f" ({fmt.number(ratio, 1)}× the baseline's)")


def _text(r, column: str) -> str:
    v = getattr(r, column, None)
    return fmt.DASH if _missing(v) else str(v)


def _offered(v) -> str:
    return "yes" if v is True or v == "True" else "no" if v is False or v == "False" else "not declared"


# (row label, cell of one arm's row): the audit table read top to bottom.
ROWS = [
    ("formed by", lambda r: str(r.rule)),
    ("trials", lambda r: _int(r.n_trials)),
    ("tasks", lambda r: _int(r.n_tasks)),
    ("repetitions per task", lambda r: str(r.repetitions_per_task)),
    ("reruns (kept)", lambda r: _int(r.n_reruns) + (f" ({r.reruns_kept})" if not _missing(r.reruns_kept) else "")),
    ("infrastructure errors", lambda r: _int(r.n_infra_errors) + (f": {r.infra_reasons}" if not _missing(r.infra_reasons) else "")),
    ("never reached the model", lambda r: _int(r.n_never_reached_model)),
    ("tasks in this arm only", lambda r: _int(r.n_tasks_this_arm_only)),
    ("complete pairs with the baseline", lambda r: _int(r.n_pairs_complete)),
    ("incomplete pairs", lambda r: _int(r.n_pairs_incomplete)),
    ("MCP tools offered", lambda r: _offered(r.mcp_offered)),
    ("trials with no MCP call", _zero_mcp),
    ("token source (trials)", _tokens),
    ("second source / counted input tokens, median (range)", _ratio),
    ("dataset versions", lambda r: fmt.DASH if _missing(r.dataset_versions) else str(r.dataset_versions)),
    ("first–last start", lambda r: _when(r.first_start, r.last_start)),
    ("jobs", lambda r: _text(r, "jobs")),
    ("configuration beyond the treatment, unlike the baseline", _config),
    ("agent time limit (trials that record it)", lambda r: _text(r, "agent_time_limits")),
    ("instruction, median characters", _instructions),
]


def audit_grid(arms: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header (``""``, then one arm per column, the baseline marked) and rows of the audit table."""
    rows = list(arms.itertuples(index=False))
    head = [""] + [f"{r.arm} (baseline)" if getattr(r, "baseline", False) in (True, "True") else str(r.arm) for r in rows]
    return head, [[label] + [cell(r) for r in rows] for label, cell in ROWS]


def audit_markdown(arms: pd.DataFrame, findings: pd.DataFrame) -> list[str]:
    """The ``## Design audit`` section: what was found (most serious first), then the per-arm table."""
    out = ["## Design audit", "",
           "What the runs are, arm by arm, before anything is tested (`design_audit.csv`, `design_findings.csv`).", ""]
    if len(findings):
        out += [f"- **{SEVERITY.get(str(f.severity), str(f.severity))}** ({check_name(f.check)}): {f.message}"
                for f in findings.itertuples()]
    else:
        out.append("- Nothing found: every arm covers the same tasks, with one token source and no infrastructure error.")
    out.append("")
    if len(arms):
        head, rows = audit_grid(arms)
        out += [md_table(head, rows), ""]
    return out


def audit_tex(arms: pd.DataFrame, findings: pd.DataFrame, caption: str) -> str:
    """The audit as a booktabs table (arms as columns) with the findings as an itemised list below it."""
    head, rows = audit_grid(arms)
    # Columns and their gaps (4 pt each side) fit the text width: 0.24 + 0.70 of it, plus the gaps.
    spec = "@{}" + column(0.24) + "".join(column(0.70 / max(1, len(head) - 1)) for _ in head[1:]) + "@{}"
    body = [" & ".join(escape_tex(c) for c in head) + r" \\", r"\midrule"]
    body += [" & ".join(escape_tex(c) for c in row) + r" \\" for row in rows]
    lines = [r"\begin{table*}[tbp]", r"\centering", r"\footnotesize\setlength{\tabcolsep}{4pt}", f"\\caption{{{escape_tex(caption)}}}",
             r"\label{tab:design-audit}", f"\\begin{{tabular}}{{{spec}}}", r"\toprule", *body, r"\bottomrule",
             r"\end{tabular}"]
    if len(findings):
        lines += [r"\begin{itemize}\setlength\itemsep{0pt}"]
        lines += [f"\\item \\textbf{{{SEVERITY.get(str(f.severity), str(f.severity))}}} ({escape_tex(check_name(f.check))}): "
                  f"{escape_tex(f.message)}" for f in findings.itertuples()]
        lines += [r"\end{itemize}"]
    lines.append(r"\end{table*}")
    return "\n".join(lines) + "\n"


def data_banner(simulated: bool, source: dict | None) -> str | None:
    """One sentence on where the data came from: SIMULATED, a named public source, or None (the user's own runs)."""
    if simulated:
        return "SIMULATED DATA: the runs come from the seeded simulator; these numbers are not findings."
    if source:
        where = source.get("name", "")
        if source.get("url"):
            where += f" ({source['url']}" + (f" at {str(source['commit'])[:12]}" if source.get("commit") else "") + ")"
        licence = f" Licence: {source['licence']}." if source.get("licence") else ""
        note = f" {source['note']}" if source.get("note") else ""
        return f"REAL RUNS of a public study: {where}; re-analysed here, not run by us.{licence}{note}"
    return None
