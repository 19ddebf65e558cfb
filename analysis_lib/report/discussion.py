"""The paper's discussion: its limitations and its conclusion, generated from the design audit and the data.

A limitation appears only when it applies to these runs: simulated or re-analysed data, infrastructure
errors (counted per arm), MCP tools offered and never called, primary endpoints that are nearly collinear
(:func:`analysis_lib.inference.comparisons.endpoint_correlations`), and too few paired tasks. Every number is a
macro made here from one frame (the audit's arms, the correlations, the comparisons), so the text
quotes no typed number.
"""

from __future__ import annotations

import pandas as pd

from ..core import outputs as files
from ..core import registry
from ..inference.comparisons import FEW_PAIRS, PARTIAL_TIER, collinear_endpoints
from ..study.audit import INSTRUCTION_GAP
from . import latex
from . import numbers as fmt

__all__ = ["comparison_key", "discussion_macros", "limitations_tex", "conclusion_tex"]

# The level the paper reads its unadjusted tests at (its intervals are 95 % intervals).
ALPHA = 0.05


def _true(v) -> bool:
    return v is True or str(v).strip().lower() in {"true", "1", "1.0"}


def _int(v) -> int:
    return 0 if fmt.missing(v) else int(v)


def _label(row) -> str:
    """A comparison's metric as prose names it: the registry's label, or the row's (the resolve rate, pass@1)."""
    return row.label if row.scale in fmt.POINT_SCALES or row.metric not in registry.METRICS else registry.metric(row.metric).label


def comparison_key(row) -> str:
    """Macro stem of a comparison row (its Est, Low, High, P, ... macros); a sensitivity row is named apart from the
    planned row it restates, and from another sensitivity test of the same metric (a sign-flip test and a GEE may
    both restate it); the mean outcome's rows under partial credit are named by their test."""
    tier = getattr(row, "tier", "")
    extra = (("sensitivity", str(row.repetitions), str(row.test)) if tier == "sensitivity"
             else ("mean", str(row.test)) if tier == PARTIAL_TIER else ())
    return latex.macro_name(row.metric.replace("__", " "), row.profile_b, "vs", row.profile_a, *extra)


def _correlation_key(r) -> str:
    return latex.macro_name("correlation", r.metric_x, r.metric_y, r.profile_b, "vs", r.profile_a)


def _primary(comparisons: pd.DataFrame | None) -> pd.DataFrame:
    if comparisons is None or comparisons.empty:
        return pd.DataFrame(columns=["tier", "n_pairs", "p_value", "significant"])
    return comparisons[comparisons["tier"] == "primary"]


def discussion_macros(arms: pd.DataFrame | None, correlations: pd.DataFrame | None, comparisons: pd.DataFrame | None,
                      sources: dict[str, str]) -> list[latex.Macro]:
    """Macros the limitations and the conclusion quote: per-arm counts of the audit, the r of collinear
    endpoints, and the primary tier's size, smallest number of pairs and significant comparisons."""
    out: list[latex.Macro] = []
    if arms is not None and len(arms):
        src = sources.get("audit", files.DESIGN_AUDIT)
        for r in arms.itertuples():
            out += [latex.Macro(latex.macro_name("infra errors", r.arm), str(_int(r.n_infra_errors)), "infra_error", src, str(r.arm)),
                    latex.Macro(latex.macro_name("trials arm", r.arm), str(_int(r.n_trials)), "n_trials", src, str(r.arm)),
                    latex.Macro(latex.macro_name("never reached model", r.arm), str(_int(getattr(r, "n_never_reached_model", 0))),
                                "never_reached_model", src, f"{r.arm}: the agent never got a model's answer"),
                    latex.Macro(latex.macro_name("tasks arm only", r.arm), str(_int(getattr(r, "n_tasks_this_arm_only", 0))),
                                "task_id", src, f"{r.arm}: tasks no other arm ran")]
            ratio = getattr(r, "instruction_ratio_median", None)
            if not fmt.missing(ratio) and abs(float(ratio) - 1) > INSTRUCTION_GAP:  # quoted only where it differs
                out.append(latex.Macro(latex.macro_name("instruction ratio", r.arm), f"\\num{{{fmt.tex_number(ratio, 1)}}}",
                                       "instruction_chars", src, f"{r.arm}: median per-task ratio of instruction length to "
                                       "the baseline's"))
            if _true(r.mcp_offered) and _int(r.n_mcp_known):
                out += [latex.Macro(latex.macro_name("trials no MCP call", r.arm), str(_int(r.n_zero_mcp_calls)),
                                    "mcp_tool_calls", src, f"{r.arm}: offered MCP tools, no MCP call"),
                        latex.Macro(latex.macro_name("trials MCP known", r.arm), str(_int(r.n_mcp_known)),
                                    "mcp_tool_calls", src, f"{r.arm}: trials with a call record")]
    src = sources.get("correlations", files.ENDPOINT_CORRELATIONS)
    for r in collinear_endpoints(correlations).itertuples():
        out.append(latex.Macro(_correlation_key(r), f"\\num{{{fmt.tex_number(r.r, 3)}}}", f"{r.metric_x}, {r.metric_y}", src,
                               f"Pearson r of per-task log ratios B/A over {int(r.n_pairs)} tasks; {r.profile_b} vs {r.profile_a}"))
        out.append(latex.Macro(_correlation_key(r) + "Pairs", str(int(r.n_pairs)), f"{r.metric_x}, {r.metric_y}", src,
                               f"tasks with both log ratios; {r.profile_b} vs {r.profile_a}"))
    prim = _primary(comparisons)
    tested = prim[prim["p_value"].notna()]
    if len(tested):
        src = sources.get("comparisons", files.COMPARISONS)
        out += [latex.Macro("NumPrimaryTests", str(len(tested)), "primary", src, "primary comparisons with a test"),
                latex.Macro("NumPrimarySignificant", str(int(tested["significant"].map(_true).sum())), "primary", src,
                            "significant after the tier's correction"),
                latex.Macro("MinPrimaryPairs", str(int(tested["n_pairs"].min())), "primary", src,
                            "fewest tasks paired in a primary comparison")]
    return out


def limitations_tex(*, simulated: bool, data_source: dict | None, arms: pd.DataFrame | None,
                    correlations: pd.DataFrame | None, comparisons: pd.DataFrame | None,
                    has_bounds: bool = False, has_cace: bool = False) -> str:
    """One short paragraph of the limitations that apply to these runs (macros only)."""
    lines = []
    if simulated:
        lines.append("The runs are simulated by the project's seeded simulator: every number above illustrates the "
                     "analysis and none is a finding about MCP tools.")
    elif data_source:
        lines.append("The runs were made by others and re-analysed here; the arms were formed afterwards by a study "
                     "file, so how the runs were scheduled and what the environment pinned is as the source reports it.")
    if arms is not None and len(arms) and arms["n_infra_errors"].fillna(0).astype(int).sum():
        per_arm = latex.series([f"\\{latex.macro_name('infra errors', a)}{{}} of the \\{latex.macro_name('trials arm', a)}{{}} "
                           f"{latex.texttt(a)} trials" for a in arms["arm"]])
        lines.append(f"Infrastructure errors ended {per_arm}; the comparisons leave them out"
                     + (", and Table~\\ref{tab:infra-bounds} bounds what they could have changed." if has_bounds else "."))
    if arms is not None and len(arms) and "n_never_reached_model" in arms and arms["n_never_reached_model"].fillna(0).astype(int).sum():
        per_arm = latex.series([f"\\{latex.macro_name('never reached model', a)}{{}} of the \\{latex.macro_name('trials arm', a)}{{}} "
                           f"{latex.texttt(a)} trials" for a in arms["arm"]])
        lines.append(f"The agent never reached the model in {per_arm} (a rate limit or a failed login answered in its "
                     "place); the verifier still scored them, so they count as the failures the source recorded, "
                     "although no agent attempted the task. What such a trial's agent did (its tool and MCP use) is "
                     "unknown, not none: it is left out of the process metrics, the uptake and the CACE"
                     + (", and Table~\\ref{tab:infra-bounds} bounds what its outcome could have changed." if has_bounds
                        else "."))
    if arms is not None and len(arms) and "n_tasks_this_arm_only" in arms and arms["n_tasks_this_arm_only"].fillna(0).astype(int).sum():
        per_arm = latex.series([f"\\{latex.macro_name('tasks arm only', r.arm)}{{}} under {latex.texttt(r.arm)}"
                                for r in arms.itertuples() if _int(r.n_tasks_this_arm_only)])
        lines.append(f"Some tasks ran in one arm only ({per_arm}); the paired comparisons leave them out.")
    if arms is not None and len(arms):
        unused = [r for r in arms.itertuples() if _true(r.mcp_offered) and _int(r.n_mcp_known) and _int(r.n_zero_mcp_calls)]
        if unused:
            per_arm = latex.series([f"\\{latex.macro_name('trials no MCP call', r.arm)}{{}} of "
                               f"\\{latex.macro_name('trials MCP known', r.arm)}{{}} {latex.texttt(r.arm)} trials" for r in unused])
            lines.append(f"MCP tools were offered and never called in {per_arm}: the comparisons measure offering the "
                         "tools, not using them" + (", which the CACE (Table~\\ref{tab:cace}) estimates under its own "
                                                    "assumptions." if has_cace else "."))
    lines += _validity_lines(arms)
    for r in collinear_endpoints(correlations).itertuples():
        key = _correlation_key(r)
        lines.append(f"For {latex.texttt(r.profile_b)} against {latex.texttt(r.profile_a)}, {latex.escape_tex(r.label_x)} and "
                     f"{latex.escape_tex(r.label_y)} are nearly collinear (Pearson $r$ = \\{key}{{}} of the per-task "
                     f"log ratios over \\{key}Pairs{{}} tasks): their two primary tests restate one finding, not two.")
    prim = _primary(comparisons)
    tested = prim[prim["p_value"].notna()]
    if len(tested) and int(tested["n_pairs"].min()) < FEW_PAIRS:
        lines.append("Some primary comparison rests on only \\MinPrimaryPairs{} paired tasks: with so few tasks the "
                     "tests have little power, and the intervals say more than the p-values.")
    if not lines:
        lines.append("The design audit found nothing that limits the comparisons: every arm ran the same tasks, no "
                     "trial was lost to the infrastructure and the endpoints are not collinear.")
    return "\\paragraph{Limitations.} " + " ".join(lines)


def _size_of(row) -> str:
    """What a primary estimate's size is, in words: the typical per-task change (ratio scale) or a difference."""
    if row.scale == "ratio":
        return " (typical per-task change)"
    return " (difference in percentage points)" if row.scale in fmt.POINT_SCALES else ""


def _text(v) -> str:
    return "" if fmt.missing(v) else str(v)


def _validity_lines(arms: pd.DataFrame | None) -> list[str]:
    """What the design audit found differs between the arms besides the treatment, one sentence each (it holds here)."""
    if arms is None or not len(arms) or "config_vs_baseline" not in arms:
        return []
    out = []
    for r in arms.itertuples():
        diff = _text(r.config_vs_baseline)
        if diff:
            keys = latex.series([latex.texttt(d.split(" = ", 1)[0]) for d in diff.split("; ")])
            out.append(f"Beyond the treatment, the configuration of {latex.texttt(r.arm)} differs from the baseline's in "
                       f"{keys} (Table~\\ref{{tab:design-audit}}).")
    limits = {_text(v) for v in arms["agent_time_limits"]} if "agent_time_limits" in arms else set()
    if len(limits - {""}) > 1:
        out.append("The agent's time limit differs between the arms (Table~\\ref{tab:design-audit}): one arm had more "
                   "time to work.")
    for r in arms.itertuples():
        ratio = getattr(r, "instruction_ratio_median", None)
        if not fmt.missing(ratio) and abs(float(ratio) - 1) > INSTRUCTION_GAP:
            out.append(f"The instructions of {latex.texttt(r.arm)} are \\{latex.macro_name('instruction ratio', r.arm)}{{}} "
                       "times as long as the baseline's (median over the tasks both ran): the arms were told different "
                       "things, not only given different tools.")
    if "jobs" in arms and "baseline" in arms:
        base = arms[arms["baseline"].map(_true)]
        jobs = {str(r.arm): set(filter(None, _text(r.jobs).split("; "))) for r in arms.itertuples()}
        if len(base) and all(jobs.values()) and len(jobs) > 1:
            b = jobs[str(base["arm"].iloc[0])]
            if all(not (v & b) for a, v in jobs.items() if a != str(base["arm"].iloc[0])):
                out.append("The arms ran as separate jobs: the treatment was not assigned at random within each task, so "
                           "whatever else differed between the jobs (time, environment, rate limits) is confounded with it.")
    mixed = [[x for x in _text(v).split("; ") if x and not x.startswith("none ")] for v in arms.get("token_sources", [])]
    if any(len(m) > 1 for m in mixed):
        out.append("Token counts come from more than one source within an arm (Table~\\ref{tab:design-audit}), so the "
                   "token and cost comparisons mix counting rules.")
    return out


def conclusion_tex(*, simulated: bool, comparisons: pd.DataFrame | None, claim_family: str = "primary") -> str:
    """The conclusion: what the confirmatory family established (macros and labels only), and what the data are."""
    prim = _primary(comparisons)
    tested = prim[prim["p_value"].notna()]
    if claim_family == "hypotheses":
        body = ("The claim rests on the plan's fixed sequence of hypotheses; its steps and their results are stated "
                "with the claim above, and the comparisons are supportive.")
    elif not len(tested):
        body = "No primary comparison could be tested on these runs, so they support no claim."
    else:
        sig = tested[tested["significant"].map(_true)]
        body = ("Of the \\NumPrimaryTests{} primary comparisons, \\NumPrimarySignificant{} held after the plan's "
                "correction")
        if len(sig):
            # Direction and size, not only "differed": the estimate each test goes with, as its macro.
            named = latex.series([f"{latex.escape_tex(_label(r))} of {latex.texttt(r.profile_b)} "
                                  f"{'rose' if r.estimate > 0 else 'fell'} by \\{comparison_key(r)}Est{{}}"
                                  f"{_size_of(r)}" for r in sig.itertuples()])
            body += f": against {latex.texttt(sig['profile_a'].iloc[0])}, {named}."
        else:
            body += "; the runs establish no difference from the baseline, which is not evidence that there is none."
        uninformative = tested[tested["p_min"].astype(float) > ALPHA] if "p_min" in tested else tested.iloc[:0]
        if len(uninformative):
            named = latex.series([f"{latex.escape_tex(_label(r))} of {latex.texttt(r.profile_b)}" for r in uninformative.itertuples()])
            body += (f" The comparison of {named} is uninformative at this size: on these pairs its test cannot reach "
                     "significance, whatever the agents did.")
    if simulated:
        body += (" Because the runs are simulated, this conclusion describes the simulator's settings, not MCP tools; "
                 "the same pipeline regenerates every sentence from real runs.")
    return "\\paragraph{Conclusion.} " + body
