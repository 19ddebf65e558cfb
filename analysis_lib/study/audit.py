"""The design audit: what the runs are, arm by arm, before anything is tested.

Real A/B studies differ from their plan in ways that decide whether a comparison means anything:
arms that differ only by a configuration the default rules pool, tasks present in one arm only,
reruns, infrastructure errors concentrated in one arm, MCP tools offered and never called, token
totals that disagree between sources, dataset versions, arms run weeks apart. The audit lists them
per arm (``design_audit.csv``) and as findings (a severity and one sentence each) that open
``comparison_report.md``, RESULTS.md and the paper. Everything here is counted from the trials
table, so the audit and the comparisons see the same trials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd

from ..metrics.tokens import TOKEN_SOURCE_LABELS, TOKEN_SOURCES, untrusted_tokens
from .study_file import StudyDesign

__all__ = ["AUDIT_COLUMNS", "Finding", "DesignAudit", "design_audit", "audit_from_frames", "pooled_configurations",
           "task_pairs", "config_differences", "validity_findings"]

AUDIT_COLUMNS = [
    "arm", "rule", "mcp_offered", "n_trials", "n_tasks", "repetitions_per_task", "n_reruns", "reruns_kept",
    "n_infra_errors", "infra_reasons", "n_never_reached_model", "n_tasks_this_arm_only", "n_pairs_complete",
    "n_pairs_incomplete", "n_mcp_known", "n_zero_mcp_calls", "share_zero_mcp_calls", "token_sources",
    "token_other_source", "token_ratio_median", "token_ratio_min", "token_ratio_max", "dataset_versions",
    "first_start", "last_start", "span_hours", "jobs", "config_vs_baseline", "agent_time_limits",
    "instruction_chars_median", "instruction_ratio_median", "instruction_ratio_min", "instruction_ratio_max",
    "instruction_tasks",
]
# Keys of a trial's configuration that differ between jobs of one setup without changing it.
_RUN_ONLY = ("job",)
# Keys the audit reports elsewhere (the dataset a task came from: dataset versions), not as configuration.
_DATASET_KEYS = ("source", "task.source")
# Keys that name the MCP treatment itself: arms offered MCP and arms not differ in them by design.
_MCP_KEY = re.compile(r"mcp", re.IGNORECASE)
# The keys a default profile is made of (``<agent>@<model>``): profiles differ in them by definition.
_PROFILE_KEYS = ("agent.name", "agent.model_name", "agent.import_path",
                 # a results table's records name their configuration and arm (analysis_lib.ingest.results_table)
                 "configuration", "arm")
# Instructions whose length differs between arms by more than this share (median per-task ratio) are flagged.
INSTRUCTION_GAP = 0.10
# Arms whose median start times lie further apart than this are flagged (time confounds the comparison).
SPAN_GAP_HOURS = 24.0
# Two arms whose token sources disagree by ratios further apart than this make a biased token comparison.
RATIO_GAP = 0.10


@dataclass(frozen=True)
class Finding:
    """One thing the audit found: ``problem`` stops the comparisons it concerns, ``warning`` may bias
    them, ``note`` is worth a line in the report."""

    severity: str  # problem | warning | note
    check: str
    message: str


@dataclass
class DesignAudit:
    """The per-arm table (``design_audit.csv``) and the findings, with the design that formed the arms."""

    arms: pd.DataFrame
    findings: list[Finding] = field(default_factory=list)
    baseline: str | None = None
    design_name: str | None = None
    pairs: pd.DataFrame = field(default_factory=pd.DataFrame)
    # A study with configurations: one row per configuration (study.configurations.CONFIGURATION_AUDIT_COLUMNS), and
    # the baseline profile of each (None: the one ``baseline``).
    configurations: pd.DataFrame | None = None
    baselines: list[str] | None = None

    def baseline_column(self) -> pd.Series:
        """Per row of ``arms``: whether it is a baseline (with configurations, each configuration's control)."""
        return self.arms["arm"].isin(self.baselines if self.baselines is not None else [self.baseline])

    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "problem"]

    def lines(self) -> list[str]:
        """The findings as ``severity: message`` lines (the command line prints them)."""
        return [f"{f.severity}: {f.message}" for f in self.findings]


def _is_true(s: pd.Series) -> np.ndarray:
    return s.map(lambda v: v is True or v == 1 or (isinstance(v, str) and v.lower() == "true")).to_numpy(bool)


def task_pairs(metrics: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per arm B and task: whether the task has a usable trial (an outcome, no infrastructure error)
    under the baseline and under B. Columns ``arm, task_id, in_baseline, in_arm, complete``."""
    usable = metrics[~_is_true(metrics["infra_error"])] if "infra_error" in metrics else metrics
    has = usable.groupby("profile")["task_id"].apply(lambda s: set(map(str, s))).to_dict()
    base = has.get(baseline, set())
    rows = []
    for arm in sorted(set(metrics["profile"].astype(str)) - {baseline}):
        tasks = has.get(arm, set())
        for task in sorted(base | tasks):
            rows.append({"arm": arm, "task_id": task, "in_baseline": task in base, "in_arm": task in tasks,
                         "complete": task in base and task in tasks})
    return pd.DataFrame(rows, columns=["arm", "task_id", "in_baseline", "in_arm", "complete"])


def _reps(sub: pd.DataFrame) -> str:
    counts = sub.groupby("task_id").size()
    if counts.empty:
        return "0"
    lo, hi = int(counts.min()), int(counts.max())
    return str(lo) if lo == hi else f"{lo}–{hi} (median {counts.median():g})"


def _infra_reasons(sub: pd.DataFrame) -> str:
    bad = sub[_is_true(sub["infra_error"])] if "infra_error" in sub else sub.iloc[:0]
    if bad.empty:
        return ""
    reasons = bad["exception"] if "exception" in bad else pd.Series(None, index=bad.index, dtype=object)
    kinds = reasons.fillna("no reason recorded").astype(str).map(lambda e: e.split(":", 1)[0][:60])
    return "; ".join(f"{k} ×{n}" for k, n in kinds.value_counts().sort_index().items())


def _token_ratios(sub: pd.DataFrame) -> tuple[str | None, pd.Series]:
    """The second source most trials of ``sub`` have, and the ratio of its input tokens to the counted ones."""
    if "other_token_source" not in sub:
        return None, pd.Series(dtype=float)
    both = sub[sub["other_token_source"].notna() & (pd.to_numeric(sub["total_input_tokens"], errors="coerce") > 0)]
    if both.empty:
        return None, pd.Series(dtype=float)
    other = str(both["other_token_source"].mode().iloc[0])
    both = both[both["other_token_source"] == other]
    ratio = pd.to_numeric(both["other_input_tokens"], errors="coerce") / pd.to_numeric(both["total_input_tokens"], errors="coerce")
    return other, ratio.dropna()


def _stamp(v: Any) -> pd.Timestamp | None:
    t = pd.to_datetime(v, errors="coerce", utc=True)
    return None if pd.isna(t) else t


# The columns of the trials table the audit reads: it works on these alone, so that each per-arm selection copies a
# handful of columns, not all hundred (tests/test_one_study.py checks the audit of the whole table is the same).
READS = ("profile", "arm", "configuration", "task_id", "task_name", "trial_path", "trial_name", "run_id", "repetition",
         "started_at", "source_format", "agent_name", "model_name", "run_config", "dataset_version", "infra_error",
         "exception", "never_reached_model", "mcp_exposed", "mcp_tool_calls", "mcp_used", "token_source",
         "other_token_source", "total_input_tokens", "other_input_tokens", "instruction_chars", "agent_timeout_sec")


def design_audit(metrics: pd.DataFrame, *, baseline: str | None, design: StudyDesign | None = None,
                 reruns: pd.DataFrame | None = None, errors: pd.DataFrame | None = None) -> DesignAudit:
    """Audit the trials table ``metrics`` (one row per trial, ``profile`` = arm) against ``baseline``."""
    metrics = metrics[[c for c in metrics.columns if c in READS]]
    arms = sorted(metrics["profile"].dropna().astype(str).unique()) if len(metrics) else []
    reruns = reruns if reruns is not None else pd.DataFrame(columns=["arm", "kept", "rule"])
    pairs = task_pairs(metrics, baseline) if baseline in arms else pd.DataFrame(
        columns=["arm", "task_id", "in_baseline", "in_arm", "complete"])
    rows = []
    for arm in arms:
        sub = metrics[metrics["profile"].astype(str) == arm]
        offered = _mcp_offered(arm, sub, design)
        mcp = pd.to_numeric(sub.get("mcp_tool_calls"), errors="coerce") if "mcp_tool_calls" in sub else pd.Series(dtype=float)
        known = mcp.dropna()
        other, ratio = _token_ratios(sub)
        starts = [t for t in map(_stamp, sub.get("started_at", pd.Series(dtype=object))) if t is not None]
        versions = sorted(set(sub["dataset_version"].dropna().astype(str))) if "dataset_version" in sub else []
        tasks_here = set(sub["task_id"].astype(str))
        others = set(metrics.loc[metrics["profile"].astype(str) != arm, "task_id"].astype(str))
        if arm == baseline:
            complete = pairs[pairs["complete"]]["task_id"].nunique() if len(pairs) else 0
            incomplete = pairs[~pairs["complete"]]["task_id"].nunique() if len(pairs) else 0
        else:
            mine = pairs[pairs["arm"] == arm]
            complete, incomplete = int(mine["complete"].sum()), int((~mine["complete"]).sum())
        arm_reruns = reruns[reruns["arm"] == arm] if len(reruns) else reruns
        sources = sub["token_source"].fillna("none").value_counts() if "token_source" in sub else pd.Series(dtype=int)
        rows.append({
            "arm": arm,
            "rule": _rule(arm, sub, design),
            "mcp_offered": offered,
            "n_trials": len(sub),
            "n_tasks": len(tasks_here),
            "repetitions_per_task": _reps(sub),
            "n_reruns": int((~arm_reruns["kept"].astype(bool)).sum()) if len(arm_reruns) and design and design.reruns != "all"
            else int(len(arm_reruns)),
            "reruns_kept": design.reruns if design is not None and len(arm_reruns) else "",
            "n_infra_errors": int(_is_true(sub["infra_error"]).sum()) if "infra_error" in sub else 0,
            "infra_reasons": _infra_reasons(sub),
            "n_never_reached_model": int(sub["never_reached_model"].notna().sum()) if "never_reached_model" in sub else 0,
            "n_tasks_this_arm_only": len(tasks_here - others) if len(arms) > 1 else 0,
            "n_pairs_complete": complete,
            "n_pairs_incomplete": incomplete,
            "n_mcp_known": len(known),
            "n_zero_mcp_calls": int((known == 0).sum()),
            "share_zero_mcp_calls": float((known == 0).mean()) if len(known) else np.nan,
            "token_sources": "; ".join(f"{k} {v}" for k, v in sources.sort_index().items()),
            "token_other_source": other or "",
            "token_ratio_median": float(ratio.median()) if len(ratio) else np.nan,
            "token_ratio_min": float(ratio.min()) if len(ratio) else np.nan,
            "token_ratio_max": float(ratio.max()) if len(ratio) else np.nan,
            "dataset_versions": "; ".join(versions),
            "first_start": min(starts).isoformat() if starts else None,
            "last_start": max(starts).isoformat() if starts else None,
            "span_hours": (max(starts) - min(starts)).total_seconds() / 3600 if starts else np.nan,
            "jobs": "; ".join(sorted(_jobs(sub))),
            "agent_time_limits": _time_limits(sub),
            "instruction_chars_median": _instruction_median(sub),
            "config_vs_baseline": "", "instruction_ratio_median": np.nan, "instruction_ratio_min": np.nan,
            "instruction_ratio_max": np.nan, "instruction_tasks": 0,
        })
    table = pd.DataFrame(rows, columns=AUDIT_COLUMNS)
    if baseline in arms:
        _compare_with_baseline(metrics, table, baseline, design)
    if len(table) and table["mcp_offered"].eq(True).any() and design is None:
        # Configurations that name MCP servers in one arm and none in another: the other was not offered any.
        configured = {a for a in arms if "run_config" in metrics and metrics.loc[metrics["profile"].astype(str) == a,
                                                                                "run_config"].notna().all()}
        table["mcp_offered"] = [False if v is None and a in configured else v for a, v in zip(table["arm"], table["mcp_offered"],
                                                                                            strict=True)]
    audit = DesignAudit(table, baseline=baseline, design_name=design.name if design else None, pairs=pairs)
    audit.findings = _findings(metrics, table, pairs, audit, design, errors, reruns)
    return audit


def audit_from_frames(arms: pd.DataFrame, findings: pd.DataFrame | None, metrics: pd.DataFrame, *, baseline: str | None,
                      design: StudyDesign | None = None) -> DesignAudit:
    """The audit a study saved (``design_audit.csv``, ``design_findings.csv``), with its task pairs from the trials."""
    found = [] if findings is None else [Finding(str(s), str(c), str(m)) for s, c, m in
                                          findings[["severity", "check", "message"]].itertuples(index=False)]
    pairs = task_pairs(metrics, baseline) if baseline is not None and len(metrics) else pd.DataFrame(
        columns=["arm", "task_id", "in_baseline", "in_arm", "complete"])
    # A study with configurations names each arm's configuration first.
    arms = arms.reindex(columns=(["configuration"] if "configuration" in arms else []) + AUDIT_COLUMNS)
    arms["mcp_offered"] = arms["mcp_offered"].map(lambda v: None if pd.isna(v) else v is True or str(v).lower() == "true")
    return DesignAudit(arms, found, baseline=baseline, design_name=design.name if design is not None else None, pairs=pairs)


def _rule(arm: str, sub: pd.DataFrame, design: StudyDesign | None) -> str:
    if design is not None and arm in design.arms:
        return f"study file: {design.arms[arm].rule()}"
    formats = set(sub.get("source_format", pd.Series(dtype=object)).dropna().astype(str))
    if formats == {"run_layout"}:
        return "default: the run folder's profile"
    if formats and formats <= {"harbor"}:
        return "default: <agent>@<model> of the trial's configuration"
    return "default: the reader's profile (" + ", ".join(sorted(formats)) + ")"


def _mcp_offered(arm: str, sub: pd.DataFrame, design: StudyDesign | None) -> bool | None:
    """Whether the arm was offered MCP tools: as the study file declares, else when its trials' configuration
    names MCP servers or the benchmark runner recorded their exposure; None when nothing says."""
    if design is not None and arm in design.arms and design.arms[arm].mcp is not None:
        return design.arms[arm].mcp
    if "mcp_exposed" in sub and sub["mcp_exposed"].notna().any():
        return True  # the benchmark runner records exposure for treatment trials only
    if "run_config" in sub:
        configs = [orjson.loads(c) for c in sub["run_config"].dropna() if isinstance(c, str) and c]
        if any(c.get("agent.mcp_servers") or c.get("mcp_servers") for c in configs):
            return True
    return None


def _findings(metrics: pd.DataFrame, table: pd.DataFrame, pairs: pd.DataFrame, audit: DesignAudit,
              design: StudyDesign | None, errors: pd.DataFrame | None, reruns: pd.DataFrame) -> list[Finding]:
    out: list[Finding] = []
    if design is None:
        out += pooled_configurations(metrics)
    if errors is not None and len(errors) and "stage" in errors:
        outside = errors[errors["stage"] == "design"]
        if len(outside):
            verb = "was" if len(outside) == 1 else "were"
            out.append(Finding("warning", "design", f"{_n(len(outside), 'trial')} matched no arm (or several) of the "
                               f"study design and {verb} left out (errors.csv)"))
    base = audit.baseline
    by_arm = table.set_index("arm") if len(table) else table
    for arm in (a for a in table["arm"] if a != base and base is not None):
        mine = pairs[pairs["arm"] == arm]
        if len(mine) and not mine["complete"].any():
            out.append(Finding("problem", "pairs", f"no task has a usable trial in both {base} and {arm}: nothing to compare"))
        elif (~mine["complete"]).any():
            only_b = sorted(mine.loc[~mine["complete"] & mine["in_arm"], "task_id"])
            only_a = sorted(mine.loc[~mine["complete"] & mine["in_baseline"], "task_id"])
            parts = []
            if only_a:
                parts.append(f"{_n(len(only_a), 'task')} only in {base} ({_names(only_a)})")
            if only_b:
                parts.append(f"{_n(len(only_b), 'task')} only in {arm} ({_names(only_b)})")
            out.append(Finding("warning", "coverage", f"{base} vs {arm}: {int(mine['complete'].sum())} complete pairs; "
                               f"left out of the paired comparisons: {'; '.join(parts)}"))
    if len(table) > 1 and base in set(table["arm"]):
        infra = by_arm["n_infra_errors"]
        if infra.sum() > 0:
            detail = ", ".join(f"{a} {int(v)} of {int(by_arm.loc[a, 'n_trials'])}" for a, v in infra.items())
            rate = infra / by_arm["n_trials"]
            # Concentrated: at least 2 more in one arm than in another, at twice the rate or more.
            uneven = infra.max() - infra.min() >= 2 and rate.max() >= 2 * rate.min()
            out.append(Finding("warning" if uneven else "note", "infrastructure",
                               f"infrastructure errors per arm: {detail}" + (" (concentrated in one arm: excluding "
                               "them is not neutral)" if uneven else "") + "; their tasks leave the paired comparisons"))
    never = int(table["n_never_reached_model"].sum()) if len(table) else 0
    if never:
        per = ", ".join(f"{a} {int(v)}" for a, v in by_arm["n_never_reached_model"].items() if v)
        reason = metrics["never_reached_model"].dropna().astype(str).iloc[0]
        out.append(Finding("warning", "infrastructure", f"{_n(never, 'trial')} ({per}): {reason}; the verifier still scored "
                           "them, so they count as failures as the source scored them, although no agent attempted the "
                           "task; their tool and MCP use is unknown (left out of the uptake and the CACE), and the "
                           "infrastructure bounds impute their outcomes both ways"))
    for arm, row in (by_arm.iterrows() if len(table) else []):
        if row["mcp_offered"] is True and row["n_mcp_known"]:
            share = row["share_zero_mcp_calls"]
            # Trials whose agent never reached a model made no attempt: their MCP use is unknown, not "none".
            never = int(row["n_never_reached_model"])
            unknown = int(row["n_trials"] - row["n_mcp_known"]) - never
            left = "; ".join(p for p in (f"{_n(never, 'trial')} never reached the model" if never else "",
                                         f"{unknown} with no call record" if unknown else "") if p)
            known = int(row["n_mcp_known"])
            used = (f"all {known} trials with a call record called an MCP tool" if share == 0 else
                    f"{int(row['n_zero_mcp_calls'])} of {known} trials with a call record made no MCP call ({share:.0%})")
            out.append(Finding("note" if share == 0 else "warning", "mcp_use",
                               f"{arm} was offered MCP tools: {used}" + (f"; {left}" if left else "")
                               + ("" if share == 0 else "; the comparison is of offering MCP, not of using it")))
        if row["mcp_offered"] is False and row["n_mcp_known"] and row["n_mcp_known"] > row["n_zero_mcp_calls"]:
            out.append(Finding("warning", "mcp_use", f"{arm} was declared without MCP tools but "
                               f"{int(row['n_mcp_known'] - row['n_zero_mcp_calls'])} of its trials made MCP calls"))
    out += _token_findings(metrics, table, base)
    out += validity_findings(table, base)
    versions = {v for vs in table["dataset_versions"] for v in str(vs).split("; ") if v} if len(table) else set()
    if len(versions) > 1:
        out.append(Finding("warning", "dataset", f"{len(versions)} dataset versions in one study "
                           f"({_names(sorted(versions))}): task sets and tests may differ between them"))
    out += _time_findings(table, base)
    if len(reruns):
        n_extra = int((~reruns["kept"].astype(bool)).sum())
        rule = str(reruns["rule"].iloc[0])
        groups = reruns.groupby(["arm", "task_id", "repetition"]).ngroups
        out.append(Finding("note", "reruns", f"{_n(groups, 'trial')} ran more than once; kept: {rule}"
                           + (f" ({n_extra} attempts left out)" if n_extra else " (extra attempts became repetitions)")))
    uneven = [a for a, r in (by_arm.iterrows() if len(table) else []) if "–" in str(r["repetitions_per_task"])]
    if uneven:
        out.append(Finding("note", "repetitions", "uneven repetitions per task in " + ", ".join(
            f"{a} ({by_arm.loc[a, 'repetitions_per_task']})" for a in uneven) + ": reruns or backfills? a study file's "
            "repetition rule tells them apart"))
    order = {"problem": 0, "warning": 1, "note": 2}
    return sorted(out, key=lambda f: order[f.severity])


# --------------------------------------------------------------------------- what else differs between the arms


def _configs(sub: pd.DataFrame) -> list[dict[str, Any]]:
    return [orjson.loads(c) if isinstance(c, str) and c else {} for c in sub.get("run_config", pd.Series(dtype=object))]


def _jobs(sub: pd.DataFrame) -> set[str]:
    """The Harbor jobs (job folders) an arm's trials ran in; empty when the source records none."""
    return {str(c["job"]) for c in _configs(sub) if c.get("job")}


def _seconds(v: float) -> str:
    """A time limit in minutes (``3600.0`` -> ``60 min``), the unit limits are set in."""
    return f"{v / 60:,.1f}".removesuffix(".0") + " min"


def _time_limits(sub: pd.DataFrame) -> str:
    """The agent time limits an arm's trials record (a configured override, or the limit a timeout reports)."""
    if "agent_timeout_sec" not in sub:
        return ""
    limits = pd.to_numeric(sub["agent_timeout_sec"], errors="coerce").dropna()
    return "; ".join(f"{_seconds(v)} ({_n(int(n), 'trial')})" for v, n in limits.value_counts().sort_index().items())


def _instruction_median(sub: pd.DataFrame) -> float:
    chars = pd.to_numeric(sub["instruction_chars"], errors="coerce").dropna() if "instruction_chars" in sub else []
    return float(np.median(chars)) if len(chars) else np.nan


def _treatment_keys(design: StudyDesign | None, arm: str, base: str, offered: dict[str, Any]) -> tuple[set[str], bool]:
    """The configuration keys that make the treatment of ``arm`` against ``base`` (they differ by design), and whether
    keys naming MCP belong to it (the two arms differ in being offered MCP)."""
    keys: set[str] = set(_RUN_ONLY) | set(_DATASET_KEYS)
    if design is None:
        keys |= set(_PROFILE_KEYS)
    else:
        keys |= {k for name in (arm, base) if name in design.arms for k in design.arms[name].fields}
    return keys, offered.get(arm) is not offered.get(base)


def _value_counts(configs: list[dict[str, Any]], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in configs:
        v = c.get(key)
        text = "unset" if v is None or v == {} or v == [] else orjson.dumps(v).decode()
        out[text] = out.get(text, 0) + 1
    return out


def config_differences(a: pd.DataFrame, b: pd.DataFrame, treatment: set[str], mcp_is_treatment: bool) -> list[str]:
    """Configuration keys whose values differ between the trials of two arms, beyond the treatment's keys, each as
    ``key = value (n), ... in A; value (n), ... in B``."""
    ca, cb = _configs(a), _configs(b)
    keys = sorted({k for c in ca + cb for k in c} - treatment)
    out = []
    for k in keys:
        if mcp_is_treatment and _MCP_KEY.search(k):
            continue
        va, vb = _value_counts(ca, k), _value_counts(cb, k)
        if set(va) != set(vb):
            show = lambda v: ", ".join(f"{x} ({n})" for x, n in sorted(v.items(), key=lambda kv: -kv[1])[:3])  # noqa: E731
            out.append(f"{k} = {show(va)} | {show(vb)}")
    return out


def _compare_with_baseline(metrics: pd.DataFrame, table: pd.DataFrame, base: str, design: StudyDesign | None) -> None:
    """Fill, for each arm against the baseline, the configuration keys that differ beyond the treatment and the
    instruction length ratio on the tasks both ran (median of the per-task ratios of mean characters)."""
    prof = metrics["profile"].astype(str)
    offered = dict(zip(table["arm"], table["mcp_offered"], strict=True))
    a = metrics[prof == base]
    for i, arm in zip(table.index, table["arm"], strict=True):
        if arm == base:
            continue
        b = metrics[prof == arm]
        keys, mcp = _treatment_keys(design, arm, base, offered)
        table.at[i, "config_vs_baseline"] = "; ".join(config_differences(a, b, keys, mcp))
        if "instruction_chars" in metrics:
            chars = lambda sub: pd.to_numeric(sub["instruction_chars"], errors="coerce").groupby(sub["task_id"].astype(str)).mean().dropna()  # noqa: E731
            both = pd.concat([chars(a), chars(b)], axis=1, join="inner").dropna()
            both = both[both.iloc[:, 0] > 0]
            if len(both):
                ratio = both.iloc[:, 1] / both.iloc[:, 0]
                table.at[i, "instruction_ratio_median"] = float(np.median(ratio))
                table.at[i, "instruction_ratio_min"], table.at[i, "instruction_ratio_max"] = float(ratio.min()), float(ratio.max())
                table.at[i, "instruction_tasks"] = len(both)


def validity_findings(table: pd.DataFrame, base: str | None) -> list[Finding]:
    """What differs between each arm and the baseline besides the treatment, from the per-arm table: configuration
    keys, the agent's time limit, the instruction's length, jobs run apart (assignment not randomised within task),
    and token counts from several sources. Each one can bias the comparison; the paper's limitations list them."""
    out: list[Finding] = []
    if base is None or base not in set(table["arm"]) or len(table) < 2:
        return out
    rows = table.set_index("arm")
    for arm in (a for a in rows.index if a != base):
        r = rows.loc[arm]
        if isinstance(r["config_vs_baseline"], str) and r["config_vs_baseline"]:
            parts = [d.split(" = ", 1) for d in r["config_vs_baseline"].split("; ")]
            shown = "; ".join(f"{k} = {v.split(' | ')[0]} in {base}, {v.split(' | ')[1]} in {arm}" for k, v in parts)
            out.append(Finding("warning", "configuration", f"{arm} differs from {base} beyond the treatment: {shown}"))
        limits = (str(rows.loc[base, "agent_time_limits"] or ""), str(r["agent_time_limits"] or ""))
        if all(limits) and limits[0] != limits[1]:
            out.append(Finding("warning", "configuration", f"agent time limits differ: {base} {limits[0]}, {arm} "
                               f"{limits[1]} (as the trials record them: a configured limit, or the one a timeout "
                               "reports); one arm had more time to work"))
        ratio = r["instruction_ratio_median"]
        if pd.notna(ratio) and abs(float(ratio) - 1) > INSTRUCTION_GAP:
            out.append(Finding("warning", "instructions", f"{arm}'s instructions are {float(ratio):.1f}× as long as "
                               f"{base}'s (median of the per-task ratios over {int(r['instruction_tasks'])} tasks both "
                               f"ran, {float(r['instruction_ratio_min']):.1f}–{float(r['instruction_ratio_max']):.1f}×; "
                               f"median {float(r['instruction_chars_median']):,.0f} against "
                               f"{float(rows.loc[base, 'instruction_chars_median']):,.0f} characters): the agents were "
                               "told different things, not only given different tools"))
        jobs_a, jobs_b = (set(filter(None, str(rows.loc[x, "jobs"] or "").split("; "))) for x in (base, arm))
        if jobs_a and jobs_b and not jobs_a & jobs_b:
            out.append(Finding("warning", "assignment", f"{base} and {arm} ran as separate jobs ({base}: "
                               f"{_names(sorted(jobs_a))}; {arm}: {_names(sorted(jobs_b))}): the treatment was not "
                               "assigned at random within each task, so whatever else differed between the jobs (time, "
                               "environment, rate limits) is confounded with it"))
    # Trials without any token count (infrastructure errors: "none") mix nothing.
    mixes = {a: [tuple(part.rsplit(" ", 1)) for part in str(v).split("; ") if part and not part.startswith("none ")]
             for a, v in rows["token_sources"].items() if isinstance(v, str) and v}
    if any(len(v) > 1 for v in mixes.values()):
        differ = len({tuple(v) for v in mixes.values()}) > 1
        named = {a: ", ".join(f"{TOKEN_SOURCE_LABELS.get(k, k)} {n}" for k, n in v) for a, v in mixes.items()}
        out.append(Finding("warning" if differ else "note", "tokens", "token counts come from more than one source "
                           "within an arm (" + "; ".join(f"{a}: {v}" for a, v in named.items()) + "): the token and "
                           "cost comparisons mix counting rules" + (", in different proportions per arm" if differ else "")))
    return out


def _token_findings(metrics: pd.DataFrame, table: pd.DataFrame, base: str | None) -> list[Finding]:
    out: list[Finding] = []
    if "token_source" not in metrics or not len(table):
        return out
    agents = metrics["agent_name"] if "agent_name" in metrics else pd.Series(None, index=metrics.index, dtype=object)
    harbor = metrics[[untrusted_tokens(s, a) is not None for s, a in zip(metrics["token_source"], agents, strict=True)]]
    if len(harbor):
        has, its = ("has", "its") if len(harbor) == 1 else ("have", "their")
        out.append(Finding("warning", "tokens", f"{_n(len(harbor), 'Claude Code trial')} ({_arm_counts(harbor)}) {has} "
                           "tokens only from Harbor's result.json, which repeats one API call's usage on every "
                           f"content block: {its} token counts run high, so {its} tokens and cost are left out of "
                           "every token and cost table and comparison"))
    rated = table[table["token_ratio_median"].notna()]
    if len(rated) and (rated["token_ratio_median"] - 1).abs().max() > RATIO_GAP / 2:
        desc = ", ".join(f"{r.arm} {r.token_ratio_median:.2f}× ({r.token_ratio_min:.2f}–{r.token_ratio_max:.2f})"
                         for r in rated.itertuples())
        other = TOKEN_SOURCES.get(str(rated["token_other_source"].iloc[0]), str(rated["token_other_source"].iloc[0]))
        spread = rated["token_ratio_median"].max() / rated["token_ratio_median"].min() - 1 if len(rated) > 1 else 0.0
        biased = spread > RATIO_GAP
        out.append(Finding("warning" if biased else "note", "tokens",
                           f"two token sources disagree: {other} reports this many times the input tokens counted "
                           f"once per API call, median (range) per arm: {desc}" + (
                               "; the factor differs between arms, so a comparison built on that source would be "
                               "biased, not just scaled" if biased else "")))
    return out


def _time_findings(table: pd.DataFrame, base: str | None) -> list[Finding]:
    out: list[Finding] = []
    if base is None or base not in set(table["arm"]):
        return out
    def span(r) -> tuple[pd.Timestamp, pd.Timestamp] | None:
        a, b = _stamp(r["first_start"]), _stamp(r["last_start"])
        return None if a is None or b is None else (a, b)
    rows = table.set_index("arm")
    s0 = span(rows.loc[base])
    for arm in rows.index:
        s1 = span(rows.loc[arm])
        if arm == base or s0 is None or s1 is None:
            continue
        gap = ((s1[0] + (s1[1] - s1[0]) / 2) - (s0[0] + (s0[1] - s0[0]) / 2)).total_seconds() / 3600
        overlap = (min(s0[1], s1[1]) - max(s0[0], s1[0])).total_seconds()
        shorter = min((s0[1] - s0[0]).total_seconds(), (s1[1] - s1[0]).total_seconds())
        interleaved = overlap > 0 and overlap >= 0.5 * shorter  # arms run side by side (a blocked schedule)
        if abs(gap) > SPAN_GAP_HOURS and not interleaved:
            out.append(Finding("warning", "time", f"{arm} ran {abs(gap) / 24:.1f} days {'after' if gap > 0 else 'before'} "
                               f"{base} (midpoints of their start times): model versions, rate limits and the "
                               "environment may have changed between the arms"))
    return out


def pooled_configurations(metrics: pd.DataFrame) -> list[Finding]:
    """What the default rules pooled into one profile although it differs: configuration keys, dataset
    versions, task names that are another task's with an arm prefix, sibling folders holding the same tasks."""
    out: list[Finding] = []
    if not len(metrics):
        return out
    for profile, sub in metrics.groupby(metrics["profile"].astype(str), sort=True):
        reasons = []
        if "run_config" in sub:
            reasons += _config_differences(sub["run_config"])
        if "dataset_version" in sub:
            versions = sorted(set(sub["dataset_version"].dropna().astype(str)))
            if len(versions) > 1:
                reasons.append(f"dataset versions {_names(versions)}")
        renamed = _renamed_tasks(sub["task_id"].astype(str))
        if renamed:
            a, b = renamed[0]
            reasons.append(f"{_n(len(renamed), 'task')} appear under two names ({a!r} and {b!r})")
        siblings = _sibling_folders(sub)
        if siblings:
            reasons.append(f"the same tasks sit in sibling folders {' and '.join(repr(s) for s in siblings)}")
        limits = pd.to_numeric(sub["agent_timeout_sec"], errors="coerce").dropna() if "agent_timeout_sec" in sub else []
        if len(set(limits)) > 1:
            reasons.append("agent time limits " + ", ".join(f"{_seconds(v)} ({n})" for v, n in
                                                             pd.Series(limits).value_counts().sort_index().items()))
        origins = _anonymous_origins(sub)
        if len(origins) > 1:
            reasons.append(f"no agent or model is recorded (a TB1 run without run_metadata.json) and the trials come from "
                           f"{len(origins)} folders ({_names(origins)})")
        if reasons:
            out.append(Finding("warning", "pooled", f"profile {profile} pools {_n(len(sub), 'trial')} that differ: "
                               f"{'; '.join(reasons)}. If these are arms, declare them in a study file (--study FILE: "
                               "arms by path or configuration field, and a task_id rule; docs/studies.md)"))
    return out


def _config_differences(configs: pd.Series) -> list[str]:
    parsed = [orjson.loads(c) if isinstance(c, str) and c else {} for c in configs]
    keys = sorted({k for p in parsed for k in p} - set(_RUN_ONLY))
    out = []
    for k in keys:
        values = pd.Series([orjson.dumps(p.get(k)).decode() for p in parsed]).value_counts()
        if len(values) > 1:
            shown = ", ".join(f"{v} ({n})" for v, n in list(values.items())[:3])
            out.append(f"{k} = {shown}{' …' if len(values) > 3 else ''}")
    return out


def _renamed_tasks(tasks: pd.Series) -> list[tuple[str, str]]:
    """Pairs (short, long) where the long task id is the short one with an arm's prefix and/or a run suffix
    (``mcp_<task>_0pqsfs``): words joined by ``_``, the same prefix or suffix shape on at least two tasks."""
    names = sorted(set(tasks), key=len)
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for i, short in enumerate(names):
        if len(short) < 6:
            continue
        pattern = re.compile(r"^(?P<pre>(?:[A-Za-z0-9]+_)*)" + re.escape(short) + r"(?P<post>(?:_[A-Za-z0-9]+)*)$")
        for long in names[i + 1:]:
            m = pattern.match(long)
            if m and (m["pre"] or m["post"]):
                shape = (m["pre"], re.sub(r"[A-Za-z0-9]", "x", m["post"]))
                found.setdefault(shape, []).append((short, long))
                break
    return [pair for pairs in found.values() if len(pairs) >= 2 for pair in pairs]


def _sibling_folders(sub: pd.DataFrame) -> list[str]:
    """Two folder names at one depth under which the same task folders sit (``.../baseline/X`` and ``.../mcp/X``)."""
    if "trial_path" not in sub:
        return []
    seen: dict[tuple, set[str]] = {}
    for path in sub["trial_path"].astype(str):
        # A trial of a file holding many (``<file>#<record>``) names its record after '#': no folders there.
        parts = path.split("#", 1)[0].replace("\\", "/").split("/")
        for depth in range(len(parts) - 1):
            key = (depth, tuple(parts[:depth]), tuple(parts[depth + 1:-1]) or (parts[-1].split("__")[0],))
            seen.setdefault(key, set()).add(parts[depth])
    for (_, _, _), names in sorted(seen.items(), key=lambda kv: kv[0][0]):
        if len(names) > 1 and not all(re.match(r"^\d{4}-\d{2}-\d{2}", n) for n in names):
            return sorted(names)[:2]
    return []


def _anonymous_origins(sub: pd.DataFrame) -> list[str]:
    """The folders above the run folders of trials whose agent and model are both unknown."""
    if not {"agent_name", "model_name", "run_id", "trial_path"} <= set(sub.columns):
        return []
    anon = sub[sub["agent_name"].isna() & sub["model_name"].isna()]
    origins = set()
    for path, run in zip(anon["trial_path"].astype(str), anon["run_id"].astype(str), strict=True):
        parts = path.replace("\\", "/").split("/")
        origins.add("/".join(parts[:parts.index(run)]) if run in parts else "")
    return sorted(o for o in origins if o) if len(origins) > 1 else []


def _arm_counts(df: pd.DataFrame) -> str:
    return ", ".join(f"{a} {n}" for a, n in df["profile"].astype(str).value_counts().sort_index().items())


def _n(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


def _names(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
