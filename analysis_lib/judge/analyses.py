"""The five judge analyses: which trials each one looks at and what its prompt is given.

Each ``*_jobs`` function turns trials (and the Layer 1 metrics table when there is one) into
:class:`Job`s: the unit judged, its identity, the template and the variables to render. The
runner (:mod:`.run`) asks the client for every job; the estimator (:mod:`.estimate`) renders the
same jobs to count their tokens, so both always agree on what would be sent.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import BaseModel

from ..core.tools import DEFAULT_MCP_TOOLS, is_mcp
from ..core.trial import Trial
from .blind import Blinder, Vocabulary
from .class_order import class_list_text, class_order, seeded_shuffle
from .condense import Condensed, condense
from .schemas import ComparativeNarrative, FailureAnalysis, MCPUtilization, StrategyAnalysis, Synthesis, comparative_model

ANALYSES = ("strategy", "failure", "mcp", "comparative", "synthesis")

# Expected answer sizes (tokens) for --estimate-cost: a generous guess of each schema's filled size.
EXPECTED_OUTPUT_TOKENS = {"strategy": 350, "failure": 250, "mcp": 400, "comparative": 600, "synthesis": 1500}


@dataclass
class Job:
    """One judgement to ask: the analysis, the unit's identity, the template and its variables."""

    analysis: str
    unit_id: str
    identity: dict[str, Any]
    template: str
    variables: dict[str, Any]
    schema: type[BaseModel]
    condensed: list[Condensed] = field(default_factory=list)
    class_order: list[str] | None = None  # the order the classes were listed in (classification prompts)
    mapping: dict[str, str] | None = None  # blinding token -> original name; None when not blinded


def trial_id(trial: Trial) -> str:
    """Stable id of a trial across runs: ``profile/task_id/repetition`` (used by human-label CSVs)."""
    return f"{trial.profile}/{trial.task_id}/{trial.repetition}"


def _identity(trial: Trial) -> dict[str, Any]:
    return {
        "trial_id": trial_id(trial),
        "profile": trial.profile,
        "task_id": trial.task_id,
        "repetition": trial.repetition,
        "run_id": trial.run_id,
    }


def metrics_lookup(metrics: pd.DataFrame | None) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Layer 1 rows keyed by (profile, task_id, repetition); empty when no table is given."""
    if metrics is None or len(metrics) == 0 or not {"profile", "task_id", "repetition"} <= set(metrics.columns):
        return {}
    out = {}
    for row in metrics.to_dict(orient="records"):
        try:
            out[(str(row["profile"]), str(row["task_id"]), int(row["repetition"]))] = row
        except (TypeError, ValueError):
            continue
    return out


def _val(row: dict | None, name: str) -> Any:
    if not row:
        return None
    v = row.get(name)
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    return v


def trial_success(trial: Trial, row: dict | None) -> bool | None:
    """Outcome: the study's verdict, its trials table's ``success`` (scored by the study's success rule); None when
    unknown (no row, an infrastructure error, no verdict). The reward alone decides nothing here."""
    if _val(row, "infra_error") in (True, "True", "true", 1):
        return None
    s = _val(row, "success")
    if s is not None:
        return str(s).lower() in ("true", "1", "1.0")
    return None


def outcome_text(trial: Trial, row: dict | None) -> str:
    """A short outcome line for prompts: success, reward and tests."""
    success = trial_success(trial, row)
    parts = ["success" if success else "failure" if success is False else "unknown outcome"]
    if trial.reward is not None:
        parts.append(f"reward {trial.reward:g}")
    if trial.tests:
        passed = sum(1 for t in trial.tests if t.status == "passed")
        parts.append(f"tests {passed}/{len(trial.tests)} passed")
    if trial.exception:
        parts.append(f"harness exception: {trial.exception[:200]}")
    return ", ".join(parts)


def mcp_calls(trial: Trial, mcp_tools: Iterable[str] = DEFAULT_MCP_TOOLS) -> list[str]:
    """Names of the trial's MCP tool calls, in order."""
    if trial.trajectory is None:
        return []
    tools = set(mcp_tools)
    return [c.name for s in trial.trajectory.steps for c in s.tool_calls if is_mcp(c.name, tools)]


def _trajectory_vars(trial: Trial, max_chars: int) -> tuple[dict[str, Any], Condensed]:
    c = condense(trial.trajectory, max_chars=max_chars)
    return {"trajectory": c.text, "shown_steps": c.shown_steps, "total_steps": c.total_steps}, c


def _classified(analysis: str, t: Trial, variables: dict[str, Any], seed: int, shuffle: bool) -> tuple[dict[str, Any], list[str]]:
    order = class_order(analysis, trial_id(t), seed, shuffle)
    return {**variables, "classes": class_list_text(analysis, order)}, order


def blind_job(job: Job, vocab: Vocabulary) -> Job:
    """The job with its profile shown as ``arm`` and MCP server / tool names as neutral tokens."""
    b = Blinder(vocab)
    variables = {k: (b.profile(v) if k == "profile" else b.value(v)) for k, v in job.variables.items()}
    return Job(job.analysis, job.unit_id, job.identity, job.template, variables, job.schema, job.condensed, job.class_order, b.mapping)


def strategy_jobs(trials: list[Trial], lookup: dict, max_chars: int = 12_000, seed: int = 0, shuffle_classes: bool = True) -> list[Job]:
    """Strategy classification of every trial with a trajectory."""
    jobs = []
    for t in trials:
        if t.trajectory is None or not t.trajectory.steps:
            continue
        row = lookup.get((t.profile, t.task_id, t.repetition))
        tv, c = _trajectory_vars(t, max_chars)
        variables, order = _classified(
            "strategy", t, {"task_id": t.task_id, "profile": t.profile, "outcome": outcome_text(t, row), **tv}, seed, shuffle_classes
        )
        jobs.append(Job("strategy", trial_id(t), _identity(t), "strategy", variables, StrategyAnalysis, [c], order))
    return jobs


def failure_jobs(trials: list[Trial], lookup: dict, max_chars: int = 12_000, seed: int = 0, shuffle_classes: bool = True) -> list[Job]:
    """Root cause of every failed trial with a trajectory (infrastructure errors excluded)."""
    jobs = []
    for t in trials:
        row = lookup.get((t.profile, t.task_id, t.repetition))
        if t.trajectory is None or not t.trajectory.steps or trial_success(t, row) is not False:
            continue
        tv, c = _trajectory_vars(t, max_chars)
        variables, order = _classified(
            "failure", t, {"task_id": t.task_id, "profile": t.profile, "outcome": outcome_text(t, row), **tv}, seed, shuffle_classes
        )
        jobs.append(Job("failure", trial_id(t), _identity(t), "failure", variables, FailureAnalysis, [c], order))
    return jobs


def mcp_jobs(trials: list[Trial], lookup: dict, max_chars: int = 12_000, mcp_tools: Iterable[str] = DEFAULT_MCP_TOOLS) -> list[Job]:
    """MCP utilisation of every trial that called at least one MCP tool."""
    jobs = []
    for t in trials:
        names = mcp_calls(t, mcp_tools)
        if not names:
            continue
        row = lookup.get((t.profile, t.task_id, t.repetition))
        tv, c = _trajectory_vars(t, max_chars)
        counts = ", ".join(f"{n} x{k}" for n, k in sorted(Counter(names).items()))
        variables = {"task_id": t.task_id, "profile": t.profile, "outcome": outcome_text(t, row), "mcp_tools": counts, **tv}
        jobs.append(Job("mcp", trial_id(t), _identity(t), "mcp", variables, MCPUtilization, [c]))
    return jobs


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _mean(values: list[Any]) -> float | None:
    nums = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(nums) / len(nums) if nums else None


def profile_rows(trials: list[Trial], lookup: dict) -> dict[str, dict[str, Any]]:
    """Per profile: trials, successes, pass rate, mean steps / tokens / cost from Layer 1."""
    groups: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        groups[t.profile].append(t)
    out = {}
    for profile in sorted(groups):
        ts = groups[profile]
        rows = [lookup.get((t.profile, t.task_id, t.repetition)) for t in ts]
        outcomes = [trial_success(t, r) for t, r in zip(ts, rows, strict=True)]
        known = [o for o in outcomes if o is not None]
        out[profile] = {
            "trials": len(ts),
            "successes": sum(known),
            "pass_rate": (sum(known) / len(known)) if known else None,
            "mean_steps": _mean(
                [
                    _val(r, "total_steps") if r else (len(t.trajectory.steps) if t.trajectory else None)
                    for t, r in zip(ts, rows, strict=True)
                ]
            ),
            "mean_tokens": _mean([_val(r, "total_tokens") for r in rows]),
            "mean_cost_usd": _mean([_val(r, "total_cost_usd") for r in rows]),
            "mean_mcp_calls": _mean([_val(r, "mcp_tool_calls") if r else len(mcp_calls(t)) for t, r in zip(ts, rows, strict=True)]),
        }
    return out


def profile_table(rows: dict[str, dict[str, Any]]) -> str:
    """Markdown table of :func:`profile_rows`."""
    lines = [
        "| profile | trials | successes | pass rate | mean steps | mean tokens | mean cost USD | mean MCP calls |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p, r in rows.items():
        lines.append(
            f"| {p} | {r['trials']} | {r['successes']} | {_fmt(r['pass_rate'])} | {_fmt(r['mean_steps'], 1)} | "
            f"{_fmt(r['mean_tokens'], 0)} | {_fmt(r['mean_cost_usd'], 4)} | {_fmt(r['mean_mcp_calls'], 1)} |"
        )
    return "\n".join(lines)


def comparative_jobs(
    trials: list[Trial], lookup: dict, max_chars: int = 16_000, vocab: Vocabulary | None = None, seed: int = 0
) -> list[Job]:
    """One comparison per task attempted by two or more profiles; one trajectory per profile.

    The trajectory shown for a profile is its lowest repetition with a trajectory (deterministic).
    With ``vocab`` the profiles are shown as ``arm_1``, ``arm_2``... in a seeded order per task
    (the answer's winner is mapped back) and MCP names as neutral tokens.
    """
    by_task: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        by_task[t.task_id].append(t)
    jobs = []
    for task_id in sorted(by_task):
        ts = by_task[task_id]
        profiles = sorted({t.profile for t in ts})
        if len(profiles) < 2:
            continue
        b = None
        if vocab is not None:
            b = Blinder(vocab, arms_in_prompt=len(profiles))
            shown = seeded_shuffle(profiles, f"{task_id}|{seed}")
            for p in shown:
                b.profile(p)
            profiles = sorted(profiles, key=b.profile)
        name = b.profile if b else (lambda p: p)
        per_chars = max(2_000, max_chars // len(profiles))
        blocks, condensed = [], []
        for p in profiles:
            cands = sorted(
                (t for t in ts if t.profile == p and t.trajectory is not None and t.trajectory.steps), key=lambda t: t.repetition
            )
            if not cands:
                blocks.append(f"### {name(p)}\n(no trajectory recorded)")
                continue
            t = cands[0]
            c = condense(t.trajectory, max_chars=per_chars)
            condensed.append(c)
            row = lookup.get((t.profile, t.task_id, t.repetition))
            text = b.text(c.text) if b else c.text
            blocks.append(
                f"### {name(p)} (repetition {t.repetition}: {outcome_text(t, row)}; {c.shown_steps} of {c.total_steps} steps shown)\n{text}"
            )
        table = profile_table({name(p): r for p, r in profile_rows(ts, lookup).items()})
        variables = {
            "task_id": task_id,
            "profiles": ", ".join(name(p) for p in profiles),
            "profile_table": table,
            "trajectories": "\n\n".join(blocks),
        }
        if b:
            variables["task_id"] = b.text(task_id)
        identity = {"task_id": task_id, "profiles": sorted(profiles)}
        schema = comparative_model([name(p) for p in profiles])
        jobs.append(Job("comparative", task_id, identity, "comparative", variables, schema, condensed, None, b.mapping if b else None))
    return jobs


def task_table(trials: list[Trial], lookup: dict, limit: int = 60) -> str:
    """Pass rate per task and profile (share of its trials that succeeded), hardest tasks first (markdown)."""
    cells: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for t in trials:
        o = trial_success(t, lookup.get((t.profile, t.task_id, t.repetition)))
        if o is not None:
            cells[t.task_id][t.profile].append(o)
    profiles = sorted({t.profile for t in trials})

    def overall(task: str) -> float:
        vals = [v for p in cells[task].values() for v in p]
        return sum(vals) / len(vals) if vals else 0.0

    tasks = sorted(cells, key=lambda k: (overall(k), k))[:limit]
    lines = ["| task | " + " | ".join(profiles) + " |", "|---|" + "---:|" * len(profiles)]
    for task in tasks:
        row = []
        for p in profiles:
            v = cells[task].get(p)
            row.append(f"{sum(v)}/{len(v)}" if v else "-")
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def judge_findings(results: dict[str, list[dict[str, Any]]]) -> str:
    """Counts of the earlier analyses' labels per profile, for the synthesis prompt."""
    lines = []
    for analysis, field_name in (("strategy", "primary_strategy"), ("failure", "root_cause"), ("mcp", "init_timing")):
        per: dict[str, Counter] = defaultdict(Counter)
        for rec in results.get(analysis, []):
            if rec.get("ok") and rec.get("result"):
                per[rec["profile"]][rec["result"].get(field_name)] += 1
        for p in sorted(per):
            counts = ", ".join(f"{k} {v}" for k, v in sorted(per[p].items(), key=lambda kv: (-kv[1], str(kv[0]))))
            lines.append(f"- {analysis} ({field_name}), {p}: {counts}")
    qual = defaultdict(list)
    for rec in results.get("mcp", []):
        if rec.get("ok") and rec.get("result"):
            qual[rec["profile"]].append(rec["result"]["utilization_quality"])
    for p in sorted(qual):
        lines.append(f"- mcp utilization_quality, {p}: mean {sum(qual[p]) / len(qual[p]):.2f} over {len(qual[p])} trials")
    winners = Counter(rec["result"]["winner"] for rec in results.get("comparative", []) if rec.get("ok") and rec.get("result"))
    if winners:
        lines.append("- comparative winners: " + ", ".join(f"{k} {v}" for k, v in sorted(winners.items(), key=lambda kv: (-kv[1], kv[0]))))
    return "\n".join(lines) or "(none)"


def synthesis_job(
    trials: list[Trial], lookup: dict, results: dict[str, list[dict[str, Any]]], baseline: str | None, simulated: bool
) -> Job:
    """The single synthesis judgement over everything, given the other analyses' results; ``baseline``: the study's
    (:class:`~analysis_lib.study.study.Study`), required as soon as two arms are judged."""
    profiles = sorted({t.profile for t in trials})
    if baseline is None and len(profiles) > 1:
        raise ValueError("the synthesis needs the study's baseline: none was given")
    base = baseline if baseline is not None else (profiles[0] if profiles else "n/a")
    note = (
        "SIMULATED runs from the seeded simulator: findings describe the simulator, not real agents."
        if simulated
        else f"{len(trials)} trials, {len({t.task_id for t in trials})} tasks, profiles {', '.join(profiles)}."
    )
    variables = {
        "dataset_note": note,
        "baseline": base,
        "profile_table": profile_table(profile_rows(trials, lookup)),
        "task_table": task_table(trials, lookup),
        "judge_findings": judge_findings(results),
    }
    return Job("synthesis", "all", {"profiles": profiles, "baseline": base}, "synthesis", variables, Synthesis, [])


# Exported for type hints elsewhere.
__all__ = [
    "ANALYSES",
    "EXPECTED_OUTPUT_TOKENS",
    "Job",
    "trial_id",
    "metrics_lookup",
    "trial_success",
    "outcome_text",
    "mcp_calls",
    "strategy_jobs",
    "failure_jobs",
    "mcp_jobs",
    "comparative_jobs",
    "synthesis_job",
    "profile_rows",
    "profile_table",
    "ComparativeNarrative",
]
