"""The paper's Method, written from the study it describes: a sentence exists only when its fact holds.

What the runs are (arms, agent and model, treatment), how a trial passes (the study's success rule), where each
number comes from per arm (which source counted the tokens, how many trials kept a trajectory, what the time
measures), which trials the token policy leaves out, and how the analysis plan compares the arms. Every fact is
read from the :class:`~analysis_lib.study.study.Study` (its trials table, design and plan), never assumed; the
Markdown is the same TeX sentences (:func:`analysis_lib.report.latex.prose_markdown`).
"""

from __future__ import annotations

import pandas as pd

from ..core import registry
from ..core.success import parse_success
from ..inference.comparisons import CORRECTION_NAMES, TEST_LABELS
from ..metrics.tokens import TOKEN_SOURCES
from ..metrics.trial_metrics import ELAPSED_SOURCES
from ..study.plan import AnalysisPlan
from ..study.study import Study
from .latex import escape_tex, series, texttt

__all__ = ["DEFAULT_TITLE", "study_title", "success_words", "method_tex", "title_tex"]

DEFAULT_TITLE = "MCP tools for coding agents: a paired A/B evaluation"
# What each planned test's estimate and interval are, in the Method's words.
TEST_EXPLAINED = {
    "mcnemar_exact": "on the task-majority resolve rates, with Tango's score interval of the difference, which near 0 "
                     "can disagree with the exact test, and the discordant-pair odds ratio with the exact interval that "
                     "agrees with it",
    "mcnemar_midp": "on the task-majority resolve rates, with Tango's score interval of the difference",
    "wilcoxon_signed_rank": "on per-task log ratios, with the Hodges-Lehmann estimate and the interval that inverts the "
                            "test, reported as the change of the typical task",
    "paired_t": "on the per-task differences, with its t interval",
    "sign_flip": "on the per-task differences, with the interval that inverts the randomisation test",
}
# Token sources in a sentence (analysis_lib.metrics.tokens.TOKEN_SOURCES, said as a reader says them).
SOURCE_WORDS = {"trajectory": "the trajectory (each API call counted once)",
                "study_metrics": "the study's own per-trial metrics",
                "harbor_result": "Harbor's result.json",
                "carried": "the totals the source format carries"}


def study_title(study: Study) -> str:
    """The study file's ``title``; else the generic title (with the simulator's mark for simulated runs)."""
    if study.design is not None and study.design.title:
        return study.design.title
    return DEFAULT_TITLE + (" (simulated runs)" if study.simulated else "")


def title_tex(study: Study) -> str:
    """``snippets/title.tex``: the title macro ``main.tex`` sets."""
    return f"\\newcommand{{\\StudyTitle}}{{{escape_tex(study_title(study))}}}\n"


def success_words(rule: str) -> str:
    """The success rule as a sentence's clause: ``reward > 0`` -> "its reward is above 0, so any partial credit is a pass"."""
    op, x = parse_success(rule)
    value = f"{x:g}"
    if op == "==":
        return f"its reward is exactly {value}"
    if op == ">=":
        return f"its reward is at least {value}"
    return f"its reward is above {value}" + (", so any partial credit is a pass" if x == 0 else "")


def _count(n: int, of: int, what: str = "trials") -> str:
    return f"all {of} {what}" if n == of and of > 1 else f"{n} of {of} {what}"


def _agents(sub: pd.DataFrame) -> str | None:
    """``agent claude-code with model claude-haiku-4-5`` of an arm, as its trials record them (several: each named)."""
    agents = sorted(set(sub["agent_name"].dropna().astype(str))) if "agent_name" in sub else []
    models = sorted(set(sub["model_name"].dropna().astype(str))) if "model_name" in sub else []
    if not agents and not models:
        return None
    parts = []
    if agents:
        parts.append(("agent " if len(agents) == 1 else "agents ") + series([texttt(a) for a in agents]))
    if models:
        parts.append(("model " if len(models) == 1 else "models ") + series([texttt(m) for m in models]))
    return " with ".join(parts)


def _usable(m: pd.DataFrame) -> pd.DataFrame:
    """The trials with a verdict (no infrastructure error): what the analysis reads and the Method describes."""
    return m[~m["infra_error"].fillna(False).astype(bool)] if "infra_error" in m else m


def _arms_paragraph(study: Study) -> str:
    m = study.metrics
    base = study.baseline.name
    design = study.design
    offered = study.mcp_offered
    per_arm = {arm: _agents(m[m["profile"].astype(str) == arm]) for arm in study.arms}
    shared = next(iter(per_arm.values())) if len(set(per_arm.values())) == 1 else None
    lines = []
    for arm in sorted(study.arms, key=lambda a: (a != base, a)):  # the baseline first
        sub = m[m["profile"].astype(str) == arm]
        reps = sub.groupby("task_id").size()
        rep_text = (f"{int(reps.iloc[0])} repetition{'s' if int(reps.iloc[0]) != 1 else ''} each" if reps.nunique() == 1
                    else f"{int(reps.min())}--{int(reps.max())} repetitions each")
        who = _agents(sub)
        role = "the baseline" if arm == base else "compared with the baseline"
        text = f"{texttt(arm)} ({role}): {len(sub)} trials of {sub['task_id'].nunique()} tasks, {rep_text}"
        if who and shared is None:
            text += f"; {who}"
        if design is not None:
            if arm == base and design.control:
                text += f"; {escape_tex(design.control)}"
            elif arm != base and design.treatment and (offered.get(arm) is not False):
                text += f"; {escape_tex(design.treatment)}"
        elif offered.get(arm) is True:
            text += "; offered MCP tools"
        elif offered.get(arm) is False:
            text += "; no MCP tools"
        lines.append(text)
    every = f" Every arm ran {shared}." if shared else ""
    return "\\textbf{Arms.} " + "; ".join(lines) + "." + every


def _outcome_paragraph(study: Study) -> str:
    m = study.metrics
    words = success_words(study.success_rule)
    text = (f"\\textbf{{Outcome.}} A trial passes when {words} (the study's success rule, "
            f"\\texttt{{{escape_tex(study.success_rule)}}}), as its verifier scored it.")
    infra = int(m["infra_error"].fillna(False).astype(bool).sum()) if "infra_error" in m else 0
    if infra:
        text += (f" {infra} trial{'s' if infra != 1 else ''} without any verdict (an infrastructure error) "
                 f"count{'s' if infra == 1 else ''} in no rate.")
    never = m["never_reached_model"].notna() if "never_reached_model" in m else pd.Series(False, index=m.index)
    if never.any():
        n = int(never.sum())
        text += (f" {n} trial{'s' if n != 1 else ''} never reached the model; {'they count' if n != 1 else 'it counts'} "
                 "as the source scored them, and what their agent did (tool use, process) is unknown.")
    return text


def _sources_paragraph(study: Study) -> str:
    """Per arm, where the tokens, the process counts and the time come from; who the token policy leaves out."""
    m = study.metrics
    usable = _usable(m)  # an infrastructure error has no tokens, no process and no time to speak of
    out = []
    if "token_source" in m:
        per_arm = []
        kinds = usable["token_source"].fillna("none").astype(str).unique()
        if len(kinds) == 1 and kinds[0] != "none":
            per_arm = None
            out.append(f"Tokens and cost were counted by {SOURCE_WORDS.get(kinds[0], kinds[0])} in every trial.")
        for arm in study.arms if per_arm is not None else []:
            sub = usable[usable["profile"].astype(str) == arm]
            counts = sub["token_source"].dropna().astype(str).value_counts()
            if counts.empty:
                continue
            said = [f"{SOURCE_WORDS.get(k, TOKEN_SOURCES.get(k, k))} for {_count(int(v), len(sub))}"
                    for k, v in counts.sort_index().items()]
            none = len(sub) - int(counts.sum())
            if none:
                said.append(f"no source for {_count(none, len(sub))}")
            per_arm.append(f"{texttt(arm)}: {series(said)}")
        if per_arm:
            out.append("Tokens and cost were counted by " + "; ".join(per_arm) + ".")
    left = study.token_exclusions
    if len(left):
        n = len(left)
        arms = series([f"{int(c)} in {texttt(a)}" for a, c in left["profile"].value_counts().sort_index().items()])
        out.append(f"The tokens and cost of {n} trial{'s' if n != 1 else ''} ({arms}) are left out of every token and "
                   f"cost table and comparison: {escape_tex(str(left['reason'].iloc[0]))}, so such totals run high.")
    if "has_trajectory" in m:
        kept, every = [], True
        for arm in study.arms:
            sub = usable[usable["profile"].astype(str) == arm]
            n = int(sub["has_trajectory"].fillna(False).astype(bool).sum())
            every = every and n == len(sub)
            kept.append(f"{n} of {len(sub)} in {texttt(arm)}")
        if every:
            out.append("Tool use and the process metrics are counted from each trial's trajectory.")
        else:
            out.append("Tool use and the process metrics are counted from the trials' trajectories where the runs kept "
                       f"one ({series(kept)}); for the others only the counts the source recorded are known, and a "
                       "process metric known for fewer than half of an arm's trials is described, not tested.")
    if "elapsed_source" in usable and usable["elapsed_source"].notna().any():
        kinds = usable["elapsed_source"].dropna().astype(str).value_counts()
        said = [f"{ELAPSED_SOURCES.get(k, k)} ({_count(int(v), len(usable))})" if len(kinds) > 1 else ELAPSED_SOURCES.get(k, k)
                for k, v in kinds.items()]
        out.append("Wall-clock time is " + series(said) + ".")
    return "\\textbf{Where the numbers come from.} " + " ".join(out) if out else ""


def _analysis_paragraph(plan: AnalysisPlan | None) -> str:
    """How the plan compares the arms: the unit, the tests of the primary tier, the corrections, the claim."""
    if plan is None:
        return ""
    all_reps = plan.pairing.repetitions == "all"
    unit = ("The task is the unit of analysis: each arm is paired with the baseline on the tasks both ran, every "
            "repetition of a task counting (its pass rate; the geometric mean of continuous metrics)" if all_reps else
            "The task is the unit of analysis: the repetitions of a task are combined first (a majority vote for the "
            "outcome, a tie counting as a failure; the median otherwise) and each arm is paired with the baseline on the "
            "tasks both ran")
    # The primary tier's metrics grouped by their test, each test with what its estimate and interval are.
    by_test: dict[str, list[str]] = {}
    for spec in plan.tiers.primary.metrics:
        name = registry.metric(spec.id).label if registry.is_known(spec.id) else spec.id
        by_test.setdefault(spec.test, []).append(escape_tex(name))
    said = []
    for test, names in by_test.items():
        clause = f"{series(names)} by the {escape_tex(TEST_LABELS.get(test, test))} test"
        explain = TEST_EXPLAINED.get(test)
        said.append(clause + (f" ({explain})" if explain else ""))
    corr = {t: CORRECTION_NAMES[getattr(plan.tiers, t).correction] for t in ("primary", "secondary")}
    text = (f"\\textbf{{Analysis.}} {unit}. The primary tier compares {series(said)}. Multiplicity: "
            f"{escape_tex(corr['primary'])} over the primary tier and {escape_tex(corr['secondary'])} over the secondary "
            f"tier, every arm pair together; exploratory metrics are described, not tested; alpha {plan.alpha:g}, "
            "intervals unadjusted.")
    return text


def method_tex(study: Study, plan: AnalysisPlan | None = None) -> str:
    """``snippets/method.tex``: the Method's paragraphs on arms, outcome, sources and analysis, each from the study."""
    parts = [_arms_paragraph(study), _outcome_paragraph(study), _sources_paragraph(study),
             _analysis_paragraph(plan if plan is not None else study.plan)]
    return "\n\n".join(p for p in parts if p) + "\n"
