"""A study with configurations: its arm pairs, its design audit per configuration, and its declared moderators.

A study file's ``configurations`` rule puts each trial in a configuration (an agent and model, a suite); its arms
are the control (``baseline``) and one treatment, and each configuration's treatment is compared with its own
control on the tasks both ran (:mod:`analysis_lib.study.placement` names the profiles ``<configuration> / <arm>``).
Everything here is counted from the placed trials table, so the audit and the comparisons see the same trials:

* :func:`configuration_pairs`: configuration -> (control profile, treatment profile), for configurations with
  trials in both arms;
* :func:`configuration_audit`: the audit of :func:`~analysis_lib.study.audit.design_audit` run within each
  configuration (coverage, pairs, reruns, infrastructure errors, MCP use, tokens, time, each finding prefixed
  with its configuration), plus one row per configuration (``design_configurations.csv``: trials per arm, pairs,
  infrastructure errors per arm, the treatment's uptake where recorded, the agent's time limits per arm, the
  moderators) and the threats only a configuration shows: an arm missing, time limits or settings that differ
  between its arms;
* :func:`configuration_moderators`: one value per configuration of each declared moderator (harness, model
  family), for the exploratory meta-regression.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson
import pandas as pd

from .audit import DesignAudit, Finding, design_audit, task_pairs
from .placement import configuration_profile
from .study_file import StudyDesign

__all__ = ["CONFIGURATION_AUDIT_COLUMNS", "has_configurations", "configuration_pairs", "configuration_audit",
           "configuration_task_pairs", "configuration_moderators", "baseline_profiles"]

CONFIGURATION_AUDIT_COLUMNS = [
    "configuration", "n_trials_control", "n_trials_treatment", "n_tasks", "n_pairs_complete", "n_pairs_incomplete",
    "n_infra_errors_control", "n_infra_errors_treatment", "uptake_source", "n_uptake_known", "n_uptake",
    "uptake_share", "time_limits_control", "time_limits_treatment",
]
# Keys of a trial's record that differ between runs of one setting without changing it.
_RUN_ONLY = ("job", "trial_name", "trials_dir", "job_id")
# Harbor's message for an agent stopped by its time limit ("Agent execution timed out after 3600.0 seconds").
_TIMEOUT = re.compile(r"timed out after (\d+(?:\.\d+)?) ?s(?:ec(?:ond)?s?)?\b", re.IGNORECASE)
_ORDER = {"problem": 0, "warning": 1, "note": 2}


def has_configurations(metrics: pd.DataFrame, design: StudyDesign | None) -> bool:
    """Whether ``metrics`` is the table of a study with configurations (placed by a study file that declares them)."""
    return design is not None and design.configurations is not None and "configuration" in metrics.columns


def _configurations(metrics: pd.DataFrame) -> list[str]:
    return sorted(metrics["configuration"].dropna().astype(str).unique()) if len(metrics) else []


def configuration_pairs(metrics: pd.DataFrame, design: StudyDesign) -> dict[str, tuple[str, str]]:
    """``{configuration: (control profile, treatment profile)}`` for every configuration with trials in both arms."""
    control, treatment = str(design.baseline), str(design.treatment_arm)
    profiles = set(metrics["profile"].astype(str))
    out = {}
    for config in _configurations(metrics):
        a, b = configuration_profile(config, control), configuration_profile(config, treatment)
        if a in profiles and b in profiles:
            out[config] = (a, b)
    return out


def baseline_profiles(metrics: pd.DataFrame, design: StudyDesign) -> list[str]:
    """The control arm's profile in every configuration (the baselines the treatments are compared with)."""
    return [configuration_profile(c, str(design.baseline)) for c in _configurations(metrics)]


def configuration_task_pairs(metrics: pd.DataFrame, design: StudyDesign) -> pd.DataFrame:
    """:func:`~analysis_lib.study.audit.task_pairs` within each configuration (``arm`` is the treatment's profile),
    with a ``configuration`` column first."""
    frames = []
    for config in _configurations(metrics):
        sub = metrics[metrics["configuration"].astype(str) == config]
        frames.append(task_pairs(sub, configuration_profile(config, str(design.baseline))).assign(configuration=config))
    cols = ["configuration", "arm", "task_id", "in_baseline", "in_arm", "complete"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def _record(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return orjson.loads(value) if isinstance(value, str) and value else {}


def _truthy(value: Any) -> bool | None:
    """A recorded uptake flag or count as yes/no; None when nothing is recorded."""
    if value is None or value == "" or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, str):
        low = value.strip().lower()
        return None if not low else low not in ("false", "0", "no", "none", "[]")
    if isinstance(value, (list, dict)):
        return len(value) > 0
    return bool(value)


def _uptake(sub: pd.DataFrame, design: StudyDesign) -> tuple[str | None, int, int]:
    """Where the treatment's uptake is recorded, how many of its trials record it and how many used it."""
    arm = design.arms[str(design.treatment_arm)]
    if arm.uptake:
        flags = [_truthy(_record(r).get(arm.uptake)) for r in sub.get("run_config", pd.Series(dtype=object))]
        known = [f for f in flags if f is not None]
        return arm.uptake, len(known), int(sum(known))
    if arm.mcp and "mcp_used" in sub:
        used = sub["mcp_used"].dropna()
        return "MCP calls", len(used), int(used.astype(bool).sum())
    return None, 0, 0


def _time_limits(sub: pd.DataFrame) -> pd.Series:
    """The agent time limits (seconds) the arm's timeout messages state, with how many trials state each."""
    found = [float(m.group(1)) for e in sub.get("exception", pd.Series(dtype=object)).dropna().astype(str)
             if (m := _TIMEOUT.search(e))]
    return pd.Series(found, dtype=float).value_counts().sort_index()


def _limits_text(counts: pd.Series) -> str | None:
    """``3600 s ×2`` (limit, trials that state it); None when no trial timed out."""
    return "; ".join(f"{v:g} s ×{n}" for v, n in counts.items()) or None


def _setting_differences(sub: pd.DataFrame, design: StudyDesign) -> list[str]:
    """Record keys whose values differ between the configuration's two arms (not the keys that select the arms or
    make the configuration): each as ``key (arm: value ×n, ...; arm: ...)``."""
    if "run_config" not in sub:
        return []
    selected = {k for a in design.arms.values() for k in a.fields} | set(design.configurations.fields if
                                                                         design.configurations else [])
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for arm, rec in zip(sub["arm"].astype(str), sub["run_config"], strict=True):
        by_arm.setdefault(arm, []).append(_record(rec))
    if len(by_arm) < 2:
        return []
    keys = sorted({k for recs in by_arm.values() for r in recs for k in r} - selected - set(_RUN_ONLY)
                  - {"configuration", "arm", "profile"})
    out = []
    for key in keys:
        dist = {arm: pd.Series([orjson.dumps(r.get(key)).decode() for r in recs]).value_counts().sort_index()
                for arm, recs in sorted(by_arm.items())}
        if len({frozenset(d.index) for d in dist.values()}) > 1:  # the arms ran under different values
            out.append(f"{key} (" + "; ".join(f"{a}: " + ", ".join(f"{v} ×{n}" for v, n in d.items())
                                              for a, d in dist.items()) + ")")
    return out


def configuration_moderators(metrics: pd.DataFrame, design: StudyDesign) -> pd.DataFrame | None:
    """One row per configuration (index) with each declared moderator's value; a configuration whose trials record
    several values of a moderator, or none, has it missing. None when the study file declares no moderators."""
    rule = design.configurations
    if rule is None or not rule.moderators or not len(metrics):
        return None
    rows = {}
    for config, sub in metrics.groupby(metrics["configuration"].astype(str), sort=True):
        recs = [_record(r) for r in sub.get("run_config", pd.Series(dtype=object))]
        row = {}
        for name, key in rule.moderators.items():
            values = {str(r[key]) for r in recs if r.get(key) not in (None, "")}
            row[name] = values.pop() if len(values) == 1 else None
        rows[config] = row
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(rule.moderators))


def configuration_audit(metrics: pd.DataFrame, *, design: StudyDesign, reruns: pd.DataFrame | None = None,
                        errors: pd.DataFrame | None = None) -> DesignAudit:
    """The design audit of a study with configurations (module docstring): per configuration and arm the audit's
    columns (``arm`` is the profile, ``configuration`` first), every finding of each configuration prefixed with
    it, the configurations table and the study's own findings."""
    control, treatment = str(design.baseline), str(design.treatment_arm)
    plain = design.model_copy(update={"configurations": None})
    reruns = reruns if reruns is not None else pd.DataFrame(columns=["arm", "kept", "rule"])
    arms, findings, rows = [], [], []
    for config in _configurations(metrics):
        sub = metrics[metrics["configuration"].astype(str) == config]
        name = {configuration_profile(config, a): a for a in (control, treatment)}
        mine = reruns[reruns["arm"].astype(str).isin(name)] if len(reruns) else reruns
        mine = mine.assign(arm=mine["arm"].astype(str).map(name)) if len(mine) else mine
        # The audit of one configuration is the audit of a two-arm study: its arms named as the study file names them.
        local = design_audit(sub.assign(profile=sub["arm"].astype(str)), baseline=control, design=plain, reruns=mine)
        table = local.arms.assign(arm=[configuration_profile(config, a) for a in local.arms["arm"]])
        arms.append(table.assign(configuration=config)[["configuration", *local.arms.columns]])
        findings += [Finding(f.severity, f.check, f"{config}: {f.message}") for f in local.findings]
        by_arm = local.arms.set_index("arm")
        cell = {(a, c): int(by_arm.loc[a, c]) if a in by_arm.index else 0 for a in (control, treatment)
                for c in ("n_trials", "n_infra_errors")}
        pairs = local.pairs
        source, known, used = _uptake(sub[sub["arm"].astype(str) == treatment], design)
        limits = {a: _time_limits(sub[sub["arm"].astype(str) == a]) for a in (control, treatment)}
        rows.append({
            "configuration": config, "n_trials_control": cell[(control, "n_trials")],
            "n_trials_treatment": cell[(treatment, "n_trials")], "n_tasks": sub["task_id"].nunique(),
            "n_pairs_complete": int(pairs["complete"].sum()) if len(pairs) else 0,
            "n_pairs_incomplete": int((~pairs["complete"]).sum()) if len(pairs) else 0,
            "n_infra_errors_control": cell[(control, "n_infra_errors")],
            "n_infra_errors_treatment": cell[(treatment, "n_infra_errors")],
            "uptake_source": source, "n_uptake_known": known, "n_uptake": used,
            "uptake_share": used / known if known else np.nan,
            "time_limits_control": _limits_text(limits[control]),
            "time_limits_treatment": _limits_text(limits[treatment]),
        })
        findings += _configuration_findings(config, sub, rows[-1], design, limits)
    table = pd.DataFrame(rows, columns=CONFIGURATION_AUDIT_COLUMNS)
    moderators = configuration_moderators(metrics, design)
    if moderators is not None:
        table = table.join(moderators, on="configuration")
    findings = _study_findings(table, design, errors) + findings
    audit = DesignAudit(pd.concat(arms, ignore_index=True) if arms else pd.DataFrame(columns=["configuration"]),
                        sorted(findings, key=lambda f: _ORDER[f.severity]), baseline=control, design_name=design.name,
                        pairs=configuration_task_pairs(metrics, design), configurations=table,
                        baselines=baseline_profiles(metrics, design))
    return audit


def _configuration_findings(config: str, sub: pd.DataFrame, row: dict[str, Any], design: StudyDesign,
                            limits: dict[str, pd.Series]) -> list[Finding]:
    """What a configuration shows beyond its arms' audit: an arm missing, the treatment's uptake, time limits and
    settings that differ between its arms."""
    control, treatment = str(design.baseline), str(design.treatment_arm)
    out = []
    missing = [a for a, n in ((control, row["n_trials_control"]), (treatment, row["n_trials_treatment"])) if not n]
    if missing:
        out.append(Finding("warning", "configurations", f"{config}: no trial in {' or '.join(missing)}; the configuration "
                           "is left out of the comparisons and of the pooling"))
    if row["uptake_source"] and row["n_uptake_known"]:
        share = row["uptake_share"]
        out.append(Finding("note" if share == 1 else "warning", "uptake",
                           f"{config}: {treatment} used the treatment ({row['uptake_source']}) in {row['n_uptake']} of "
                           f"{row['n_uptake_known']} trials that record it ({share:.0%})" + (
                               "" if share == 1 else "; the comparison is of offering it, not of using it")))
    a, b = limits[control], limits[treatment]
    if len(a) and len(b) and set(a.index) != set(b.index):
        out.append(Finding("warning", "time_limits", f"{config}: the agent's time limit differs between the arms "
                           f"({control}: {_limits_text(a)}; {treatment}: {_limits_text(b)}, as the trials that timed out "
                           "state it): a longer limit can turn a timeout into a pass, so part of the difference may be "
                           "the limit, not the treatment"))
    settings = _setting_differences(sub, design)
    if settings:
        out.append(Finding("note", "settings", f"{config}: the arms' recorded settings differ beyond the treatment: "
                           + "; ".join(settings[:4]) + (f"; and {len(settings) - 4} more" if len(settings) > 4 else "")))
    return out


def _study_findings(table: pd.DataFrame, design: StudyDesign, errors: pd.DataFrame | None) -> list[Finding]:
    """The study's own findings: how many configurations are compared (and pooled), and trials placed nowhere."""
    out = []
    both = table[(table["n_trials_control"] > 0) & (table["n_trials_treatment"] > 0)]
    k = len(both)
    pooled = ("a random-effects model pools them, with the heterogeneity between configurations and a prediction "
              "interval for a new one" if k >= 2 else "one configuration: nothing to pool across configurations")
    out.append(Finding("note", "configurations", f"{k} configuration{'s' if k != 1 else ''} ({design.configurations.rule() if design.configurations else ''}), "
                       f"each comparing {design.treatment_arm} with {design.baseline} on the tasks both ran; {pooled}"))
    if k == 0:
        out.append(Finding("problem", "pairs", f"no configuration has trials in both {design.baseline} and "
                           f"{design.treatment_arm}: nothing to compare"))
    if errors is not None and len(errors) and "stage" in errors:
        outside = errors[errors["stage"] == "design"]
        if len(outside):
            n = len(outside)
            out.append(Finding("warning", "design", f"{n} trial{'s' if n != 1 else ''} matched no arm or configuration "
                               f"(or several) of the study design and {'was' if n == 1 else 'were'} left out (errors.csv)"))
    return out
