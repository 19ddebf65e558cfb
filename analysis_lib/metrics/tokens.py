"""A trial's token counts, each API call counted once, and the source they were taken from.

A trial may carry its tokens in several places that disagree. Claude Code writes one transcript
line, and Harbor's conversion one ATIF step, per content block of an API response, repeating the
response's usage on each (the output count grows as the response streams); summing them counts
a call two or three times, and Harbor's ``agent_result`` (and the ``final_metrics`` of its
conversion) are such sums. The sources, in the order they are used:

1. ``trajectory``: the ATIF steps, one count per API call: steps that share a usage key (a message
   or request id, or, for Claude Code, consecutive agent steps with the same prompt, cached and
   cache-write counts: :func:`analysis_lib.ingest.atif` marks them) are one call, with its input
   counted once and its largest output count. Input tokens are every prompt token, cache writes
   included: where a step's Anthropic cache writes exceed its prompt tokens outside the cache,
   the producer left them out of ``prompt_tokens`` (Harbor's Claude Code conversion does) and they
   are added. The trajectory's ``final_metrics`` win where they add what the steps do not show
   (subagents, a call without a step), unless they are exactly the sum of the repeated usage.
2. ``study_metrics``: a study's own per-trial counts from the raw transcript (CodeScaleBench's
   ``task_metrics.json``, :mod:`analysis_lib.ingest.task_metrics`).
3. ``harbor_result``: Harbor's ``agent_result``. For Claude Code it repeats usage per content block.
4. ``carried``: the totals a format without a trajectory carries (TB1, Inspect, mcpbr).

The first source that knows the input tokens gives every count; the next one that knows them is
kept as ``other_source`` so that the design audit can show how far the sources disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.trial import Trajectory, Trial

__all__ = ["TOKEN_SOURCES", "TOKEN_SOURCE_LABELS", "TOKEN_COLUMNS", "TokenCount", "trajectory_tokens", "trial_tokens",
           "untrusted_tokens"]

TOKEN_SOURCES = {
    "trajectory": "ATIF trajectory, one count per API call",
    "study_metrics": "the study's own per-trial metrics (from the raw transcript)",
    "harbor_result": "Harbor's result.json (its agent totals)",
    "carried": "totals the source format carries",
}
# The same sources in a table cell.
TOKEN_SOURCE_LABELS = {"trajectory": "trajectory", "study_metrics": "study's metrics", "harbor_result": "Harbor result",
                       "carried": "source totals", "none": "none"}


# The per-trial columns computed from a trial's token counts: left empty together when the counts are not trusted.
TOKEN_COLUMNS = ("total_input_tokens", "total_output_tokens", "total_cached_tokens", "total_tokens", "total_cost_usd",
                 "token_efficiency")


def untrusted_tokens(source: Any, agent_name: Any) -> str | None:
    """Why a trial's token counts are not trusted (None: they are): Harbor's result.json is a Claude Code trial's
    only source, and it repeats one API call's usage on every content block, so its totals run high (2-3x the
    counts once per call, measured on real CodeScaleBench trials). One rule for every table: such trials are left
    out of every token and cost summary and comparison, counted and named."""
    if source == "harbor_result" and "claude" in str(agent_name or "").lower():
        return ("only Harbor's result.json counts its tokens, which repeats one API call's usage on every content "
                "block of a Claude Code trial")
    return None


def trajectory_tokens(traj: Trajectory) -> dict[str, Any]:
    """Input (every prompt token, cached and cache writes included), output, cached tokens and cost of a
    trajectory: agent steps outside copied context, each API call once (its largest output count),
    subagents added; ``final_metrics`` win where they say something, unless they only repeat the
    per-block usage. ``cache_write``: Anthropic cache writes, from the steps or ``final_metrics``;
    ``repeated``: the final metrics were set aside. A count no step and no total reports stays None
    (unknown), never 0."""
    calls: dict[str, list] = {}  # usage key -> [input, output, cached, cost, cache writes]
    naive_in = 0
    # Which counts some step or subagent reports: one that none does stays unknown (None), never 0.
    known = {"input": False, "output": False, "cached": False, "cache_write": False}
    any_cost = False
    for s in traj.steps:
        if s.source != "agent" or s.is_copied_context:
            continue
        naive_in += s.prompt_tokens or 0
        known["input"] |= s.prompt_tokens is not None
        known["output"] |= s.completion_tokens is not None
        known["cached"] |= s.cached_tokens is not None
        key = s.usage_key if s.usage_key is not None else f"step-{s.step_id}-{len(calls)}"
        call = calls.get(key)
        if call is None:
            prompt, cached, written = s.prompt_tokens or 0, s.cached_tokens or 0, s.cache_write_tokens
            if written is not None:
                known["cache_write"] = True
                if written > prompt - cached:  # left out of the prompt count by the producer
                    prompt += written
            calls[key] = [prompt, s.completion_tokens or 0, cached, s.cost_usd, written or 0, s.prompt_tokens or 0]
        else:  # the same API call again: its usage once, the output as far as it grew
            call[1] = max(call[1], s.completion_tokens or 0)
            call[3] = call[3] if call[3] is not None else s.cost_usd
        any_cost = any_cost or s.cost_usd is not None
    sums = {"input": sum(c[0] for c in calls.values()), "output": sum(c[1] for c in calls.values()),
            "cached": sum(c[2] for c in calls.values()), "cache_write": sum(c[4] for c in calls.values())}
    raw_in = sum(c[5] for c in calls.values())  # the prompt counts as the producer wrote them, each call once
    cost = sum(c[3] for c in calls.values() if c[3] is not None)
    for sub in traj.subagents:
        st = trajectory_tokens(sub)
        for k in sums:
            if st[k] is not None:
                sums[k] += st[k]
                known[k] = True
        naive_in += st["input"] or 0
        raw_in += st["input"] or 0
        if st["cost"] is not None:
            any_cost = True
            cost += st["cost"]
    out: dict[str, Any] = {k: sums[k] if known[k] else None for k in sums}
    out["cost"] = cost if any_cost else None
    out["repeated"] = False
    fm = traj.final_metrics
    if fm is None:
        return out
    if known["input"] and fm.prompt_tokens is not None and fm.prompt_tokens in (naive_in, raw_in):
        # The totals say what the steps say (once per call), or are the sum of the repeated usage
        # (Harbor's Claude Code conversion): the steps, counted once per call, are the counts.
        out["repeated"] = naive_in > raw_in and fm.prompt_tokens == naive_in
        if not out["repeated"]:  # the producer's own totals: they win on output (streamed steps carry a partial
            # count, e.g. Claude Code's stream-json) and add what only they record (cache writes, cost)
            for key, value in (("output", fm.completion_tokens), ("cached", fm.cached_tokens),
                               ("cache_write", fm.cache_write_tokens), ("cost", fm.cost_usd)):
                if value is not None and (key != "cache_write" or out[key] is None):
                    out[key] = value
        return out
    for key, value in (("input", fm.prompt_tokens), ("output", fm.completion_tokens), ("cached", fm.cached_tokens),
                       ("cost", fm.cost_usd), ("cache_write", fm.cache_write_tokens)):
        if value is not None:
            out[key] = value
    written, cached = fm.cache_write_tokens, fm.cached_tokens or 0
    if fm.prompt_tokens is not None and written is not None and written > fm.prompt_tokens - cached:
        out["input"] = fm.prompt_tokens + written  # cache writes the producer left out of its prompt total
    return out


@dataclass(frozen=True, slots=True)
class TokenCount:
    """The token counts of one trial, their source (a key of :data:`TOKEN_SOURCES`), and the input
    tokens the next source that knows them reports (for the design audit)."""

    input: int | None = None
    output: int | None = None
    cached: int | None = None
    cache_write: int | None = None
    cost: float | None = None
    cost_estimated: bool = False
    source: str | None = None
    other_source: str | None = None
    other_input: int | None = None


def _candidates(trial: Trial) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if trial.trajectory is not None:
        tt = trajectory_tokens(trial.trajectory)
        if tt["input"] is not None:
            out.append(("trajectory", tt))
        elif tt["cost"] is not None:
            out.append(("trajectory", {**tt, "input": None}))
    study = trial.metadata.get("study_metrics")
    if isinstance(study, dict) and study.get("input") is not None:
        out.append(("study_metrics", study))
    hb = trial.metadata.get("harbor_tokens") or {}
    if hb.get("n_input_tokens") is not None or hb.get("cost_usd") is not None:
        out.append(("harbor_result", {"input": hb.get("n_input_tokens"), "output": hb.get("n_output_tokens"),
                                      "cached": hb.get("n_cache_tokens"), "cost": hb.get("cost_usd"),
                                      "estimated": bool(hb.get("cost_estimated"))}))
    carried = trial.carried_metrics
    if carried.get("total_input_tokens") is not None or carried.get("total_cost_usd") is not None:
        out.append(("carried", {"input": carried.get("total_input_tokens"), "output": carried.get("total_output_tokens"),
                                "cached": carried.get("total_cached_tokens"), "cost": carried.get("total_cost_usd")}))
    return out


def trial_tokens(trial: Trial) -> TokenCount:
    """The counts of the first source that knows the input tokens (order in the module docstring); the
    recorded cost of that source, else of the first source that has one (never estimated here)."""
    cands = _candidates(trial)
    counted = [(name, c) for name, c in cands if c.get("input") is not None]
    if counted:
        name, c = counted[0]
        other = counted[1] if len(counted) > 1 else (None, {})
        cost, estimated = c.get("cost"), bool(c.get("estimated"))
        if cost is None:
            priced = next((x for _, x in cands if x.get("cost") is not None), None)
            if priced is not None:
                cost, estimated = priced["cost"], bool(priced.get("estimated"))
        return TokenCount(c["input"], c.get("output"), c.get("cached"), c.get("cache_write"), cost, estimated, name,
                          other[0], other[1].get("input"))
    priced = next((x for _, x in cands if x.get("cost") is not None), None)
    if priced is not None:
        return TokenCount(cost=priced["cost"], cost_estimated=bool(priced.get("estimated")))
    return TokenCount()
