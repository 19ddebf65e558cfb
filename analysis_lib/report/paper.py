"""Assemble the paper snippets: macros, siunitx tables, a results paragraph, figure environments, Markdown.

Input is what the earlier notebooks wrote: ``metrics_detail.csv``, the comparison engine's
``comparisons.csv`` and ``profile_rates.csv`` (:mod:`analysis_lib.inference.comparisons`,
:mod:`analysis_lib.inference.rates`), the plan record, the CodeCanvas table. Output is
``<paper_dir>/snippets/*.tex`` and ``<paper_dir>/paper_snippets.md``. No number is computed here:
every value is a cell of those frames, formatted once (:mod:`.numbers`), so the table, the macros,
the prose and the figures quote the same value. ``paper/main.tex`` inputs the snippets by fixed
names, so it compiles for any set of runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..codecanvas.outputs import BOARD_METRICS, COMPARISON_METRICS
from ..core import outputs as files
from ..core import registry
from ..core.fileio import atomic_write_text
from ..inference.comparisons import PARTIAL_TIER, RATE_DIFFERENCE_UNIT, interval_note, p_floor_note
from ..inference.repetitions import usual_repetitions
from ..study.study import Study
from . import latex, markdown, tables
from . import numbers as fmt
from .audit import audit_markdown, audit_tex, data_banner
from .beside_itt import beside_macros, beside_markdown, beside_tex, lost_any
from .comparison_report import mcnemar_lines, rates_table, tier_table, tier_title
from .configurations import (
    ConfigurationInputs,
    configuration_audit_tex,
    configuration_threats_tex,
    configurations_tex,
    forest_captions,
    heterogeneity_tex,
    pooled_sentence,
    pooling_macros,
    pooling_markdown,
)
from .discussion import comparison_key, conclusion_tex, discussion_macros, limitations_tex
from .figures import FOREST_NOTE
from .method import method_tex, title_tex
from .sequential import adjusted_table, design_sentence, paper_paragraph, sequential_macros

__all__ = ["PaperInputs", "PlanRecord", "quoted_macros", "write_paper_snippets", "FIGURE_CAPTIONS"]

# The comparisons' intervals are 95 % intervals; their tests are read at the matching level.
CONFIDENCE_ALPHA = 0.05
SUMMARY_COLUMNS = ("total_tokens", "total_cost_usd", "agent_steps", "tool_calls_count", "elapsed_sec",
                   "exploration_breadth", "mcp_tool_calls")
# Figure file stem -> caption (what the figure shows); figures.tex includes those present.
FIGURE_CAPTIONS = {
    "rates": "Pass rate per trial (circles; Wilson interval at the design-effective size, repetitions of a task "
             "clustered) and resolve rate per task by majority vote of the repetitions (squares; Wilson interval over "
             "tasks), per profile. Infrastructure errors excluded.",
    "task_outcomes": "Per-task outcomes: share of repetitions that passed (count in the cell); the majority decides "
                     "the task's verdict in the resolve rate and McNemar's test. Tasks sorted by success.",
    "forest": f"Comparisons against the baseline. Top: difference in resolve rate per task ({RATE_DIFFERENCE_UNIT}, Tango's interval). "
              "Bottom: typical per-task change in \\% (Hodges-Lehmann on per-task log ratios, interval inverting the "
              "Wilcoxon test). " + FOREST_NOTE.replace("%", "\\%"),
    "per_task_total_tokens": "Per-task change in total tokens against the baseline, on the per-task values the estimate "
                             "pairs (the axis names them), tasks sorted by effect; dashed lines are the estimates of the "
                             "forest plot.",
    "per_task_total_cost_usd": "Per-task change in cost per trial against the baseline, on the per-task values the "
                               "estimate pairs (the axis names them), tasks sorted by effect; dashed lines are the "
                               "estimates of the forest plot.",
    "tool_mix": "Share of tool calls per category (read, search, edit, execute, MCP, other) within each profile.",
    "codecanvas": "CodeCanvas metrics per trial; the bar marks each profile's median.",
}


def _utc(stamp: str | None) -> str:
    """An ISO UTC stamp as TeX text: ``2026-01-21 09:00:00 UTC``, or ``--`` when unknown."""
    return latex.escape_tex(stamp.replace("T", " ").rstrip("Z") + " UTC") if stamp else "--"


@dataclass
class PlanRecord:
    """The pre-registration the paper states: plan hash, when it was fixed, departures from it."""

    sha256: str
    name: str
    recorded_at: str | None = None
    changed: bool = False
    recorded_in: str | None = None
    first_trial_at: str | None = None
    fixed_before_first_trial: bool | None = None
    claim_family: str = "primary"  # the family that carries the claim: primary tier or hypotheses sequence

    @classmethod
    def from_sidecar(cls, obj: dict) -> PlanRecord:
        plan = obj.get("plan") if isinstance(obj.get("plan"), dict) else {}
        return cls(str(obj.get("analysis_plan_sha256", "")), str(obj.get("plan_name", "")),
                   obj.get("recorded_at"), bool(obj.get("plan_changed_after_record")), obj.get("recorded_in"),
                   obj.get("first_trial_at"), obj.get("fixed_before_first_trial"),
                   str(plan.get("claim_family") or "primary"))


@dataclass
class PaperInputs:
    """What the paper is made from; ``sources`` name the files (relative paths) for the TeX comments."""

    metrics: pd.DataFrame
    comparisons: pd.DataFrame | None = None
    rates: pd.DataFrame | None = None
    codecanvas: pd.DataFrame | None = None
    simulated: bool = False
    baseline: str | None = None
    plan: PlanRecord | None = None
    hypotheses: pd.DataFrame | None = None  # the plan's fixed sequence (hypotheses.csv), when it declares one
    sources: dict[str, str] = field(default_factory=dict)
    # Layer 2's own paper_snippets.md (LLM narratives): quoted in the Markdown, never in macros.
    llm_snippets: str | None = None
    # The design audit (design_audit.csv, design_findings.csv), and where real runs came from (a study file's source).
    audit: tuple[pd.DataFrame, pd.DataFrame] | None = None
    data_source: dict | None = None
    # The estimands beside intention to treat (compliance.csv, infra_bounds.csv, ...: report.beside_itt.read_beside).
    beside: dict[str, pd.DataFrame] | None = None
    # A sequential run: its design with the looks as analysed, and the primary estimates adjusted for the stop.
    sequential: dict | None = None
    sequential_estimates: pd.DataFrame | None = None
    # r of the per-task log ratios between primary endpoints (endpoint_correlations.csv): collinear ones are a limitation.
    correlations: pd.DataFrame | None = None
    # The study the paper describes: its title and Method are written from it (report.method).
    study: Study | None = None
    # A study with configurations: its arms within each, its per-configuration audit and its pooled effects.
    configurations: ConfigurationInputs | None = None

    def source(self, key: str) -> str:
        return self.sources.get(key, f"{key}.csv")


# --------------------------------------------------------------------------- TeX cells


def _qty(x, digits: int, unit: str = "", sign: bool = False) -> str:
    """``\\num{-17.4}\\,\\%``: siunitx sets the minus sign and the digit grouping."""
    return fmt.tex_quantity(x, digits, unit, sign=sign)


def _p_tex(p, adjusted: bool = False) -> str:
    if fmt.missing(p):
        return "--"
    sym = "p_{\\mathrm{adj}}" if adjusted else "p"
    return f"\\ensuremath{{{sym} < 0.001}}" if p < fmt.P_FLOOR else f"\\ensuremath{{{sym} = {p:.3f}}}"


def _p_cell(p) -> str:
    """A p-value for an S column: a number, or ``<0.001`` as braced text."""
    if fmt.missing(p):
        return "{--}"
    return "{$<$0.001}" if p < fmt.P_FLOOR else f"{p:.3f}"


def _preregistered(inputs: PaperInputs) -> bool:
    """Whether the plan is a pre-registration: recorded before the first trial and followed without change."""
    return inputs.plan is not None and inputs.plan.fixed_before_first_trial is True and not inputs.plan.changed


def _partial(inputs: PaperInputs) -> bool:
    """Whether the rewards score partial credit: the engine then compared the mean reward beside pass/fail."""
    comp = inputs.comparisons
    return comp is not None and bool((comp["tier"] == PARTIAL_TIER).any())


def _value_digits(row) -> tuple[float, int]:
    """Scale and decimals of A and B of a comparison row (rates in %, money per the registry, means as their estimate)."""
    if row.scale in fmt.POINT_SCALES:
        return 100.0, 1
    if row.scale == "cost_per_success":
        return 1.0, fmt.decimals("cost_per_success")
    if row.scale == "mean":
        return 1.0, fmt.estimate_digits(row)
    d = fmt.decimals(row.metric)
    if registry.metric(row.metric).kind == "count" and (row.a_value % 1 or row.b_value % 1):
        d = max(d, 1)  # a median of an even number of counts can fall halfway
    return 1.0, d


_key = comparison_key


# --------------------------------------------------------------------------- macros


def quoted_macros(inputs: PaperInputs) -> list[latex.Macro]:
    """Every number the text quotes, as macros with their metric id and source file."""
    m, src = inputs.metrics, inputs.source("metrics")
    known = tables.outcome_trials(m)
    out = [
        latex.Macro("NumTasks", str(m["task_id"].nunique()), "n_tasks", src, "distinct task ids"),
        latex.Macro("NumProfiles", str(m["profile"].nunique()), "n_profiles", src),
        latex.Macro("NumTrials", str(len(m)), "n_trials", src, "all trials incl. infrastructure errors"),
        latex.Macro("NumRepetitions", str(usual_repetitions(m)), "repetition", src,
                    "usual repetitions of a task under a profile (repetitions.usual_repetitions)"),
        latex.Macro("NumInfraErrors", str(int(len(m) - len(known))), "infra_error", src),
    ]
    if inputs.baseline:
        out.append(latex.Macro("BaselineProfile", latex.escape_tex(inputs.baseline), "profile", src, "baseline"))
    if inputs.plan is not None:
        p = inputs.plan
        out += [latex.Macro("PlanHash", p.sha256[:12], "analysis_plan_sha256", files.PLAN_SIDECAR, "first 12 hex digits"),
                latex.Macro("PlanName", latex.escape_tex(p.name), "plan_name", files.PLAN_SIDECAR),
                latex.Macro("PlanFixedAt", _utc(p.recorded_at), "recorded_at", files.PLAN_SIDECAR,
                            "when the plan was recorded"),
                latex.Macro("FirstTrialAt", _utc(p.first_trial_at), "first_trial_at", files.PLAN_SIDECAR,
                            "start of the earliest trial")]
    if inputs.rates is not None:
        rsrc = inputs.source("rates")
        for r in inputs.rates.itertuples():
            p = r.profile
            for stem, est, lo, hi, what in (
                ("pass rate", r.pass_rate, r.pass_rate_low, r.pass_rate_high, "pass_rate"),
                ("resolve rate", r.resolve_rate, r.resolve_rate_low, r.resolve_rate_high, "resolve_rate"),
            ):
                d = fmt.decimals(what)
                out += [latex.Macro(latex.macro_name(stem, p), _qty(100 * est, d, "%"), what, rsrc, p),
                        latex.Macro(latex.macro_name(stem, "low", p), _qty(100 * lo, d, "%"), what, rsrc, f"{p}, 95% CI low"),
                        latex.Macro(latex.macro_name(stem, "high", p), _qty(100 * hi, d, "%"), what, rsrc, f"{p}, 95% CI high")]
            if _partial(inputs) and not fmt.missing(getattr(r, "mean_reward", None)):
                d = fmt.decimals("reward") + 1
                out += [latex.Macro(latex.macro_name("mean reward", p), _qty(r.mean_reward, d), "reward", rsrc,
                                    f"{p}, mean over its {int(r.n_reward)} trials with a reward"),
                        latex.Macro(latex.macro_name("mean reward low", p), _qty(r.mean_reward_low, d), "reward", rsrc,
                                    f"{p}, task-clustered t 95% CI low"),
                        latex.Macro(latex.macro_name("mean reward high", p), _qty(r.mean_reward_high, d), "reward", rsrc,
                                    f"{p}, task-clustered t 95% CI high")]
            out += [latex.Macro(latex.macro_name("successes", p), str(int(r.successes)), "success", rsrc, p),
                    latex.Macro(latex.macro_name("trials", p), str(int(r.n_outcome)), "success", rsrc, f"{p}, known outcome"),
                    latex.Macro(latex.macro_name("tasks resolved", p), str(int(r.tasks_resolved)), "resolve_rate", rsrc, p),
                    latex.Macro(latex.macro_name("tasks", p), str(int(r.n_tasks)), "resolve_rate", rsrc, p),
                    latex.Macro(latex.macro_name("cost per success", p), _qty(r.cost_per_success, fmt.decimals("cost_per_success"), "USD"),
                                "cost_per_success", rsrc, p)]
    if inputs.comparisons is not None:
        csrc = inputs.source("comparisons")
        for r in inputs.comparisons.itertuples():
            if fmt.missing(r.estimate) or r.tier == "exploratory" and r.metric != "cost_per_success":
                continue
            key, unit, d = _key(r), fmt.comparison_unit(r.scale, r.unit), fmt.estimate_digits(r)
            what = f"{r.label}, {r.profile_b} vs {r.profile_a}"
            out += [latex.Macro(key + "Est", _qty(fmt.scaled(r, r.estimate), d, unit, sign=True), r.metric, csrc,
                                f"{r.estimand}; {what}"),
                    latex.Macro(key + "Low", _qty(fmt.scaled(r, r.ci_low), d, unit, sign=True), r.metric, csrc,
                                f"{r.interval} 95% CI low; {what}"),
                    latex.Macro(key + "High", _qty(fmt.scaled(r, r.ci_high), d, unit, sign=True), r.metric, csrc,
                                f"{r.interval} 95% CI high; {what}"),
                    latex.Macro(key + "Pairs", str(int(r.n_pairs)), r.metric, csrc, f"tasks paired; {what}")]
            if not fmt.missing(r.p_value):
                out.append(latex.Macro(key + "P", _p_tex(r.p_value), r.metric, csrc, f"{r.test}; {what}"))
                floor = getattr(r, "p_min", None)
                if not fmt.missing(floor) and floor > 0 and (floor > CONFIDENCE_ALPHA or abs(r.p_value - floor) <= 1e-12):
                    # Quoted only where it says something: the test cannot reject, or p is that smallest p.
                    out.append(latex.Macro(key + "PMin", f"\\num{{{float(floor):.3g}}}", r.metric, csrc,
                                           f"smallest p {r.test} can give on these pairs; {what}"))
                if r.tier != PARTIAL_TIER:  # described beside the tiers: no family, no adjusted p
                    out.append(latex.Macro(key + "PAdj", _p_tex(r.p_adjusted, adjusted=True), r.metric, csrc,
                                           f"{r.correction}-adjusted over the {r.tier} tier; {what}"))
            if r.scale == "rate" and not fmt.missing(r.odds_ratio_low):
                out += [latex.Macro(key + "OddsRatio", _qty(r.odds_ratio, 2), r.metric, csrc, f"discordant-pair odds ratio; {what}"),
                        latex.Macro(key + "OddsRatioLow", _qty(r.odds_ratio_low, 2), r.metric, csrc, f"exact 95% CI low; {what}"),
                        latex.Macro(key + "OddsRatioHigh", _qty(r.odds_ratio_high, 2), r.metric, csrc, f"exact 95% CI high; {what}")]
            if not fmt.missing(r.total_change_pct):
                out += [latex.Macro(key + "Total", _qty(r.total_change_pct, 1, "%", sign=True), r.metric, csrc,
                                    f"change of the total over paired tasks; {what}"),
                        latex.Macro(key + "TotalLow", _qty(r.total_change_low, 1, "%", sign=True), r.metric, csrc,
                                    f"bootstrap 95% CI low; {what}"),
                        latex.Macro(key + "TotalHigh", _qty(r.total_change_high, 1, "%", sign=True), r.metric, csrc,
                                    f"bootstrap 95% CI high; {what}")]
    if inputs.hypotheses is not None:
        hsrc = inputs.source("hypotheses")
        for r in inputs.hypotheses.itertuples():
            key = latex.macro_name("hypothesis", r.metric.replace("__", " "), r.profile_b, "vs", r.profile_a)
            what = f"step {r.step}, {r.claim}; {r.profile_b} vs {r.profile_a}"
            out.append(latex.Macro(key + "Result", latex.escape_tex(str(r.result)), r.metric, hsrc, what))
            if not fmt.missing(r.estimate):
                out += [latex.Macro(key + "Est", _qty(r.estimate, 1, r.unit, sign=True), r.metric, hsrc, what),
                        latex.Macro(key + "Low", _qty(r.ci_low, 1, r.unit, sign=True), r.metric, hsrc,
                                    f"{100 * r.confidence:g}% CI low; {what}"),
                        latex.Macro(key + "High", _qty(r.ci_high, 1, r.unit, sign=True), r.metric, hsrc,
                                    f"{100 * r.confidence:g}% CI high; {what}")]
    if inputs.sequential is not None:
        out += sequential_macros(inputs.sequential, inputs.sequential_estimates, inputs.source("sequential"))
    if inputs.beside:
        out += beside_macros(inputs.beside, inputs.sources.get("beside", "comparisons"))
    out += median_macros(inputs)
    if inputs.configurations is not None:
        out += pooling_macros(inputs.configurations.pooling, inputs.source("pooled"))
    out += discussion_macros(inputs.audit[0] if inputs.audit is not None else None, inputs.correlations,
                             inputs.comparisons, inputs.sources)
    return out


# --------------------------------------------------------------------------- tables


def _tabular(head: list[str], spec: str, rows: list[list[str]], caption: str, label: str, *, wide: bool = False,
             note: str = "") -> str:
    """A booktabs table with siunitx S columns (decimal-aligned); cells are TeX already."""
    env = "table*" if wide else "table"
    body = "\n".join(" & ".join(r) + " \\\\" for r in rows)
    notes = f"\n\\par\\smallskip\\parbox{{\\linewidth}}{{\\footnotesize {note}}}" if note else ""
    sep = "3pt" if wide else "1.5pt"  # a one-column table gets narrower gaps to fit 3.3 in
    return (f"\\begin{{{env}}}\n\\centering\n\\footnotesize\\setlength{{\\tabcolsep}}{{{sep}}}\n"
            f"\\caption{{{caption}}}\n\\label{{{label}}}\n\\begin{{tabular}}{{{spec}}}\n\\toprule\n"
            + " & ".join(head) + " \\\\\n\\midrule\n" + body + "\n\\bottomrule\n\\end{tabular}" + notes
            + f"\n\\end{{{env}}}")


def _s(x, digits: int, sign: bool = False) -> str:
    return fmt.tex_number(x, digits, sign=sign)


def token_note(study: Study | None) -> str:
    """The token policy said where a table's cost or tokens leave trials out (empty when none are)."""
    left = study.token_exclusions if study is not None else None
    if left is None or not len(left):
        return ""
    n = len(left)
    arms = ", ".join(f"{int(c)} in {latex.escape_tex(a)}" for a, c in left["profile"].value_counts().sort_index().items())
    return (f" The tokens and cost of {n} trial{'s' if n != 1 else ''} ({arms}) are left out, as everywhere: only "
            "Harbor's result.json counts them, which runs high for a Claude Code trial (Section~\\ref{sec:method}).")


def rates_tex(rates: pd.DataFrame, simulated: bool, token_policy: str = "") -> str:
    dp, dr, dc = fmt.decimals("pass_rate"), fmt.decimals("resolve_rate"), fmt.decimals("cost_per_success")
    rows = [[latex.escape_tex(r.profile), str(int(r.n_outcome)), _s(100 * r.pass_rate, dp), _s(100 * r.pass_rate_low, dp),
             _s(100 * r.pass_rate_high, dp), f"{int(r.tasks_resolved)}/{int(r.n_tasks)}", _s(100 * r.resolve_rate, dr),
             _s(100 * r.resolve_rate_low, dr), _s(100 * r.resolve_rate_high, dr), _s(r.cost_per_success, dc)]
            for r in rates.itertuples()]
    head = ["Profile", "Trials", "{Pass rate per trial}", "\\multicolumn{2}{c}{95\\% CI}", "Tasks", "{Resolve rate per task}",
            "\\multicolumn{2}{c}{95\\% CI}", "{Cost/success}"]
    # Profile names of studies with configurations are long: the first column wraps, ragged, within a fifth of the page.
    spec = latex.column(0.2) + "r S[table-format=2.1] S[table-format=2.1] S[table-format=3.1] c S[table-format=2.1] " \
           "S[table-format=2.1] S[table-format=3.1] S[table-format=1.3]"
    note = ("Pass rate: successful trials / trials with an outcome (\\%), Wilson interval at the design-effective "
            "size (repetitions of a task clustered). Resolve rate: tasks passed by the majority of their repetitions "
            "(a tie fails) / tasks (\\%), Wilson interval over tasks. Cost per success: total cost / successes over the "
            "trials whose cost is known (USD)." + token_policy)
    return _tabular(head, spec, rows, "Pass and resolve rates per profile" + (" (simulated data)" if simulated else ""),
                    "tab:rates", wide=True, note=note)


def comparisons_tex(comp: pd.DataFrame, simulated: bool, claim: str | None = None, preregistered: bool | None = None) -> str:
    rows, notes, tier = [], [], None
    sides: dict[str, list[str]] = {}  # what A and B are -> the metrics whose rows it describes
    # A tested tier's row without an estimate stays, with why: its test counted as p = 1 in the tier's correction,
    # so the adjusted p of the rows beside it can only be redone with it shown.
    shown = (comp["tier"] != "exploratory") & (comp["estimate"].notna() | comp["tier"].isin(["primary", "secondary"]))
    for r in comp[shown].itertuples():
        if r.tier != tier:  # a tier's rows under its title: a sensitivity row restates a planned one, named apart
            tier = r.tier
            rows.append([f"\\multicolumn{{10}}{{l}}{{\\emph{{{latex.escape_tex(tier_title(tier, r.correction, claim, preregistered))}}}}}"])
        k, d = _value_digits(r)
        unit = fmt.comparison_unit(r.scale, r.unit)
        unit_tex = fmt.tex_unit(unit, space="") if unit in ("%", fmt.RATE_DIFFERENCE_UNIT) else latex.escape_tex(unit)
        e = fmt.estimate_digits(r)
        p_cell = _p_cell(r.p_value)
        undefined = r.note if fmt.missing(r.estimate) and isinstance(r.note, str) else None
        why = "; ".join(w for w in (undefined, interval_note(r, CONFIDENCE_ALPHA, with_p=False),
                                    p_floor_note(r, CONFIDENCE_ALPHA)) if w)
        if why:  # the reason sits beside the p-value it qualifies
            notes.append(f"\\textsuperscript{{{chr(ord('a') + len(notes))}}}\\,{latex.escape_tex(r.label)}, "
                         f"{latex.escape_tex(r.profile_b)}: {latex.escape_tex(why)}.")
            p_cell = "{" + p_cell.strip("{}") + f"\\textsuperscript{{{chr(ord('a') + len(notes) - 1)}}}}}"
        if isinstance(getattr(r, "a_b_summary", None), str):  # what A and B are: in the note, once per kind of row
            sides.setdefault(r.a_b_summary, [])
            if r.label not in sides[r.a_b_summary]:
                sides[r.a_b_summary].append(r.label)
        name = latex.escape_tex(r.label) + (f" ({latex.escape_tex(str(r.test))})" if r.tier == PARTIAL_TIER else "")
        rows.append([f"{name}, {unit_tex}" if unit_tex else name, latex.escape_tex(r.profile_b), str(int(r.n_pairs)),
                     _s(k * r.a_value, d), _s(k * r.b_value, d), _s(fmt.scaled(r, r.estimate), e, True),
                     _s(fmt.scaled(r, r.ci_low), e, True), _s(fmt.scaled(r, r.ci_high), e, True),
                     p_cell, _p_cell(r.p_adjusted)])
    base = ", ".join(sorted(comp["profile_a"].astype(str).unique()))
    head = ["Metric, unit of the change", "B", "Pairs", "{A}", "{B}", "{Change}",
            "\\multicolumn{2}{c}{95\\% CI}", "{$p$}", "{$p_\\mathrm{adj}$}"]
    values, changes = [c for row in rows if len(row) > 1 for c in row[3:5]], [c for row in rows if len(row) > 1 for c in row[5:8]]
    dc = _decimals_of(changes, 1)
    spec = (f"llr {_s_column(values, 3)} {_s_column(values, 3)} {_s_column(changes, dc, True)} "
            f"{_s_column(changes, dc, True)} {_s_column(changes, dc, True)} S[table-format=1.3] S[table-format=1.3]")
    what = "; ".join(f"{latex.escape_tex(summary)} for {', '.join(latex.escape_tex(x) for x in labels)}"
                     for summary, labels in sides.items())
    note = (f"A = baseline ({latex.escape_tex(base)}). A and B are the {what or 'values of each profile'} "
            "(rates in \\%). Change: resolve rate, "
            f"difference in {fmt.comparison_unit('rate')} (percentage points) with Tango's score interval and McNemar's "
            "exact test, which can disagree near 0 (a score interval beside an exact test; a letter marks a row where "
            "they do); other metrics, typical per-task change (Hodges-Lehmann on log ratios, \\%) with the "
            "interval that inverts the Wilcoxon signed-rank test beside it (zeros ranked by Pratt's rule in both), "
            "which excludes 0 exactly when $p < 0.05$. Intervals are unadjusted 95\\% intervals; "
            "$p_\\mathrm{adj}$: the plan's correction over its tier (Holm for primary, Benjamini-Hochberg for "
            "secondary metrics), all pairs together; a row without a test counts as $p = 1$ there, and a letter says "
            "so. A letter also marks a test that cannot reach $p < 0.05$ on its pairs (uninformative at this size), "
            "and a $p$ that is the smallest its test can give."
            + (" Mean reward (the rewards score partial credit): the mean over the paired tasks of each task's mean "
               "reward, and the mean of the per-task differences with the paired t interval or the interval that "
               "inverts the sign-flip randomisation test, described beside pass/fail without a correction."
               if (comp["tier"] == PARTIAL_TIER).any() else "")
            + ("\\par " + " ".join(notes) if notes else ""))
    return _tabular(head, spec, rows, "Paired comparisons against the baseline" + (" (simulated data)" if simulated else ""),
                    "tab:comparisons", wide=True, note=note)


def _decimals_of(cells: list[str], least: int) -> int:
    """The most decimals any number among ``cells`` has (a mean reward's 3 beside a % change's 1), at least ``least``."""
    found = [len(c.split(".", 1)[1]) for c in cells if re.fullmatch(r"[+-]?\d+\.\d+", c)]
    return max([least, *found])


def _s_column(cells: list[str], decimals: int, sign: bool = False) -> str:
    """siunitx's column for these cells: as many integer digits as the widest needs (a 7-digit token count fits)."""
    digits = max([len(re.sub(r"\D", "", c.split(".")[0])) for c in cells if re.search(r"\d", c)] or [1])
    return f"S[table-format={'+' if sign else ''}{max(digits, 1)}.{decimals}]"


def summary_tex(metrics: pd.DataFrame, simulated: bool, token_policy: str = "") -> str:
    summ = tables.profile_summary(metrics, list(SUMMARY_COLUMNS))
    summ = summ[summ["n"] > 0]  # a metric no trial of a profile records (a results table's tokens) has no row
    if summ.empty:
        return "% no trial records a process or cost metric (a results table carries outcomes only): no summary table"
    rows = []
    for r in summ[summ["n"] > 0].itertuples():  # a metric no trial of the profile records has nothing to show
        d = fmt.decimals(r.metric)
        rows.append([latex.escape_tex(registry.metric(r.metric).axis_label), latex.escape_tex(r.profile),
                     _s(r.mean, max(d, 1) if abs(r.mean) < 100 else d), _s(r.median, max(d, 1) if abs(r.median) < 100 else d),
                     str(int(r.n))])
    cells = [c for row in rows for c in row[2:4]]
    return _tabular(["Metric", "Profile", "{Mean over trials}", "{Median over trials}", "Trials"],
                    f"ll {_s_column(cells, 3)} {_s_column(cells, 3)} r", rows,
                    "Per-trial process and cost metrics per profile (mean and median over the trials that record each)"
                    + (" (simulated data)" if simulated else ""),
                    "tab:profile-summary", wide=True, note=token_policy.strip())


# --------------------------------------------------------------------------- prose


def _data_paragraph(inputs: PaperInputs) -> str:
    """Where the runs came from and how they were paired: the seeded simulator, a public study re-analysed, or own runs."""
    src = inputs.data_source
    banner = data_banner(inputs.simulated, src)
    if src and not inputs.simulated:
        where = f"\\url{{{src['url']}}}" + (f" at commit \\texttt{{{latex.escape_tex(str(src['commit'])[:12])}}}"
                                             if src.get("commit") else "") if src.get("url") else ""
        banner_tex = (f"\\textbf{{Real runs of a public study, re-analysed here (we did not run them):}} "
                      f"{latex.escape_tex(src.get('name', ''))}" + (f"; {where}" if where else "") + "."
                      + (f" Licence: {latex.escape_tex(src['licence'])}." if src.get("licence") else ""))
    else:
        banner_tex = f"\\textbf{{{latex.escape_tex(banner)}}}" if banner else ""
    lines = [banner_tex] if banner_tex else []
    if inputs.simulated:
        lines.append("The runs were generated by the project's seeded simulator in the layout of the benchmark runner: "
                     "each task under every profile, repeated, in a blocked and randomised schedule.")
    elif inputs.data_source:
        lines.append("The runs were made by the study's authors, not by us; arms and tasks were formed afterwards by a "
                     "declared study file (arms by path or configuration, one task id across arms), and the design audit "
                     "(Table~\\ref{tab:design-audit}) lists what the runs are before any test.")
    else:
        lines.append("Each task was attempted under every profile, with repeated trials where the runs have them; the "
                     "design audit (Table~\\ref{tab:design-audit}) lists what the runs are before any test.")
    return "\n".join(lines)


# The research questions the results answer, in order: (heading, the metrics quoted). A metric with a
# comparison row is quoted with its estimate, interval and test; one without, by its median per profile.
RESEARCH_QUESTIONS = (
    ("Success", ("success",)),
    ("Efficiency", ("total_tokens", "total_cost_usd", "elapsed_sec", "cost_per_success")),
    ("Process", ("agent_steps", "tool_calls_count", "exploration_breadth", "files_edited")),
    ("MCP use", ("mcp_tool_calls",)),
)
# The budget view's interval is a percentile bootstrap: said once per paragraph.
TOTAL_CAVEAT = ("the percentile bootstrap interval of a total covers less than its nominal level with few tasks")


def _described(inputs: PaperInputs) -> list[str]:
    """Metrics of the research questions quoted by their medians per profile: no comparison row quotes them."""
    comp = inputs.comparisons
    compared = set() if comp is None else set(comp.loc[comp["tier"] != "exploratory", "metric"])
    return [m for _, ids in RESEARCH_QUESTIONS for m in ids
            if m not in compared and m in registry.METRICS and registry.metric(m).kind in ("continuous", "count")
            and m in inputs.metrics and pd.to_numeric(inputs.metrics[m], errors="coerce").notna().any()]


def median_macros(inputs: PaperInputs) -> list[latex.Macro]:
    """The median per trial and profile of each metric the prose describes without a comparison."""
    out = []
    trials = tables.outcome_trials(inputs.metrics)
    totals = trials["profile"].astype(str).value_counts()
    summ = tables.profile_summary(trials, _described(inputs))
    for r in summ[summ["n"] > 0].itertuples():
        m = registry.metric(r.metric)
        key = latex.macro_name("median", r.metric, r.profile)
        out.append(latex.Macro(key, _qty(r.median, max(m.decimals, 1) if r.median % 1 else m.decimals), r.metric,
                               inputs.source("metrics"), f"median per trial, {r.profile}, {int(r.n)} trials"))
        if int(r.n) < int(totals.get(str(r.profile), 0)):  # a median of the trials that record the metric, said so
            out += [latex.Macro(key + "Known", str(int(r.n)), r.metric, inputs.source("metrics"),
                                f"trials of {r.profile} with a value"),
                    latex.Macro(key + "Of", str(int(totals[str(r.profile)])), r.metric, inputs.source("metrics"),
                                f"trials of {r.profile} with an outcome")]
    return out


def _comparison_clause(r, names: set[str]) -> str | None:
    """One profile's estimate with its interval and test, as the engine defines them (macros only)."""
    key = _key(r)
    if key + "Est" not in names:
        return None
    why = interval_note(r, CONFIDENCE_ALPHA, with_p=False) if r.tier == "primary" else None
    tail = f"; {latex.escape_tex(why)}" if why else ""
    if key + "PMin" in names and r.p_min > CONFIDENCE_ALPHA:
        tail += (f"; uninformative at this size: the smallest $p$ this test can give on these pairs is \\{key}PMin{{}}, "
                 "above the level it is read at")
    elif key + "PMin" in names and abs(r.p_value - r.p_min) <= 1e-12:
        tail += f"; the smallest $p$ this test can give with \\{key}Pairs{{}} pairs"
    if r.scale in fmt.POINT_SCALES:
        text = (f"{latex.texttt(r.profile_b)} differed by \\{key}Est{{}} ({latex.escape_tex(r.interval)} 95\\% CI \\{key}Low{{}} "
                f"to \\{key}High{{}}; {latex.escape_tex(str(r.test).split(' (')[0])} \\{key}P{{}}, \\{key}PAdj{{}}")
        if key + "OddsRatio" in names:
            text += (f"; discordant-pair odds ratio \\{key}OddsRatio{{}}, exact 95\\% CI \\{key}OddsRatioLow{{}} to "
                     f"\\{key}OddsRatioHigh{{}}")
        return text + tail + ")"
    if r.scale == "cost_per_success":
        return (f"\\{key}Est{{}} under {latex.texttt(r.profile_b)} ({latex.escape_tex(r.interval)} 95\\% CI \\{key}Low{{}} to "
                f"\\{key}High{{}}; described, not tested)")
    text = f"\\{key}Est{{}} under {latex.texttt(r.profile_b)} (95\\% CI \\{key}Low{{}} to \\{key}High{{}}"
    if key + "P" in names:
        text += f"; Wilcoxon \\{key}P{{}}, \\{key}PAdj{{}}"
    text += f"; \\{key}Pairs{{}} tasks"
    if r.tier == "primary" and key + "Total" in names:
        text += (f"; total over the paired tasks \\{key}Total{{}}, percentile bootstrap 95\\% CI \\{key}TotalLow{{}} to "
                 f"\\{key}TotalHigh{{}}")
    return text + tail + ")"


def _pooled_or_metric_sentence(inputs: PaperInputs, metric_id: str, names: set[str]) -> str | None:
    """A metric pooled across configurations is said by its range and pooled estimate (the table has each
    configuration's); any other by :func:`_metric_sentence`."""
    c = inputs.configurations
    pooled = pooled_sentence(c.pooling, metric_id, names, c.control, c.treatment) if c is not None else None
    return pooled or _metric_sentence(inputs, metric_id, names)


def _metric_sentence(inputs: PaperInputs, metric_id: str, names: set[str]) -> str | None:
    """What a research question says of one metric: its comparisons against the baseline, else its medians."""
    comp = inputs.comparisons
    rows = [] if comp is None else [r for r in comp[(comp["metric"] == metric_id) & comp["tier"].isin(
        ["primary", "secondary", "exploratory"])].itertuples() if _key(r) + "Est" in names]
    label = registry.metric(metric_id).label
    if rows:
        tier = rows[0].tier
        clauses = [c for c in (_comparison_clause(r, names) for r in rows) if c]
        base = latex.texttt(rows[0].profile_a)
        if rows[0].scale in fmt.POINT_SCALES:
            return f"Against {base}, the {tier} {latex.escape_tex(rows[0].label)} of " + latex.series(clauses) + "."
        subject = (f"For the typical task, {latex.escape_tex(label)}" if rows[0].scale in ("ratio", "difference")
                   else latex.escape_tex(label[0].upper() + label[1:]))
        return f"{subject} ({tier}) changed against {base} by " + latex.series(clauses) + "."
    profiles = [p for p in sorted(inputs.metrics["profile"].astype(str).unique())
                if latex.macro_name("median", metric_id, p) in names]
    if not profiles:
        return None
    m = registry.metric(metric_id)
    unit = "" if m.unit in ("", "share", "flag") or m.unit in label else f" ({latex.escape_tex(m.unit)})"
    return (f"Median {latex.escape_tex(label)}{unit} per trial: "
            + latex.series([f"\\{latex.macro_name('median', metric_id, p)}{{}} under {latex.texttt(p)}" + _known(metric_id, p, names)
                       for p in profiles])
            + " (described, not tested).")


def _known(metric_id: str, profile: str, names: set[str]) -> str:
    """`` (of the N of T trials that record it)`` when a median leaves trials out, else nothing."""
    key = latex.macro_name("median", metric_id, profile)
    return f" (of the \\{key}Known{{}} of \\{key}Of{{}} trials that record it)" if key + "Known" in names else ""


def _mcp_use_sentences(inputs: PaperInputs, names: set[str]) -> list[str]:
    """Uptake (share of the MCP arm's trials that called an MCP tool) and the effect among users (CACE)."""
    comp = (inputs.beside or {}).get("compliance")
    if comp is None or comp.empty:
        return []
    out, cace = [], []
    for (a, b), g in comp.groupby(["profile_a", "profile_b"], sort=False):
        shares = [latex.macro_name("share used", m.replace("__", " "), b, "vs", a) for m in g["metric"].unique()]
        share = next((k for k in shares if k in names), None)
        if share:
            arms = inputs.audit[0] if inputs.audit is not None else None
            never = (arms is not None and "n_never_reached_model" in arms
                     and pd.to_numeric(arms.loc[arms["arm"].astype(str) == str(b), "n_never_reached_model"]).fillna(0).sum() > 0)
            # A trial whose agent never reached the model is not in the share: its MCP use is unknown.
            out.append(f"\\{share}{{}} of the {latex.texttt(b)} trials" + (" whose agent reached the model" if never else ""))
        for r in g[g["estimand"] == "cace"].itertuples():
            m = r.metric
            k = latex.macro_name("cace", m.replace("__", " "), b, "vs", a)
            label = registry.metric(m).label if r.scale == "ratio" else r.label  # a % change: the label without its unit
            if k + "Est" in names:
                # An unbounded Fieller set has no two ends: its Set macro gives it whole.
                ci = f"95\\% confidence set \\{k}Set{{}}" if k + "Set" in names else f"95\\% CI \\{k}Low{{}} to \\{k}High{{}}"
                cace.append(f"{latex.escape_tex(label)} of {latex.texttt(b)} \\{k}Est{{}} ({ci})")
    lines = [f"An MCP tool was called in {latex.series(out)} (uptake: mean over tasks of the per-task share; "
             "Table~\\ref{tab:cace})."] if out else []
    if cace:
        lines.append("Among the trials that called them (CACE, a secondary estimand beside intention to treat), the "
                     "effects were " + latex.series(cace) + ".")
    return lines


def _results_paragraph(inputs: PaperInputs, macros: list[latex.Macro]) -> str:
    """The results, one short paragraph per research question, quoting only macros (no number typed)."""
    names = {m.name for m in macros}
    lines = (["\\textbf{SIMULATED DATA: the runs come from the seeded simulator; these numbers are not findings.}"]
             if inputs.simulated else
             ["\\textbf{Real runs of a public study, re-analysed (Section~\\ref{sec:method}).}"] if inputs.data_source else [])
    if inputs.plan is not None:
        dev = ("The analysis departs from the recorded plan; the reports open with the difference."
               if inputs.plan.changed else "The analysis follows the recorded plan without deviation.")
        p = inputs.plan
        if p.fixed_before_first_trial is True:
            when = "recorded by the runner on \\PlanFixedAt{}, before the first trial (\\FirstTrialAt{})"
        elif p.fixed_before_first_trial is False:
            when = ("recorded on \\PlanFixedAt{}, after the first trial (\\FirstTrialAt{}): it is not a "
                    "pre-registration")
        else:
            when = "recorded on \\PlanFixedAt{}"
        lines.append(f"\\paragraph{{{'Pre-registration' if _preregistered(inputs) else 'Analysis plan'}.}} Tiers, tests, "
                     "corrections and intervals follow the analysis plan "
                     f"\\texttt{{\\PlanName}} (plan hash \\texttt{{\\PlanHash}}), {when}. {dev}")
        lines.append(_claim_text(inputs))
    n_prof = inputs.metrics["profile"].nunique()
    n_infra = len(inputs.metrics) - len(tables.outcome_trials(inputs.metrics))
    lines.append(f"\\paragraph{{Data.}} The analysis covers \\NumTasks{{}} tasks under \\NumProfiles{{}} "
                 f"{'profile' if n_prof == 1 else 'profiles'} with usually \\NumRepetitions{{}} "
                 f"{'repetition' if usual_repetitions(inputs.metrics) == 1 else 'repetitions'} each "
                 f"(\\NumTrials{{}} trials; \\NumInfraErrors{{}} infrastructure "
                 f"{'error' if n_infra == 1 else 'errors'} excluded from outcome analyses).")
    comp = inputs.comparisons
    for heading, ids in RESEARCH_QUESTIONS:
        sentences = []
        if heading == "Success" and inputs.rates is not None and inputs.configurations is not None:
            sentences.append("The pass rate per trial and the resolve rate per task of each configuration's arms are in "
                             "Table~\\ref{tab:rates}.")
        elif heading == "Success" and inputs.rates is not None:
            n = lambda *parts: "\\" + latex.macro_name(*parts) + "{}"  # noqa: E731
            sentences.append("Pass rates per trial were " + latex.series(
                [f"{n('pass rate', p)} under {latex.texttt(p)} (95\\% CI {n('pass rate low', p)} to {n('pass rate high', p)})"
                 for p in inputs.rates["profile"]]) + "; by majority vote of the repetitions, " + latex.series(
                [f"{latex.texttt(p)} resolved {n('tasks resolved', p)} of {n('tasks', p)} tasks ({n('resolve rate', p)})"
                 for p in inputs.rates["profile"]]) + ".")
        if heading == "Success":
            sentences += _mean_reward_sentences(inputs, names)
        sentences += [s for s in (_pooled_or_metric_sentence(inputs, m, names) for m in ids) if s]
        if heading == "Efficiency" and comp is not None and any(
                _key(r) + "Total" in names for r in comp[comp["tier"] == "primary"].itertuples()):
            sentences.append(f"({TOTAL_CAVEAT[0].upper()}{TOTAL_CAVEAT[1:]}.)")
        if heading == "MCP use":
            sentences += _mcp_use_sentences(inputs, names)
        if sentences:
            lines.append(f"\\paragraph{{{heading}.}} " + " ".join(sentences))
    if comp is None or comp.empty:
        lines.append("(Paired comparisons were not available when these snippets were generated.)")
    return "\n".join(lines + _sequential_lines(inputs))


def _mean_reward_sentences(inputs: PaperInputs, names: set[str]) -> list[str]:
    """Under partial credit: the mean reward per profile with its interval, and the paired mean difference by each
    test the plan names (macros only)."""
    if not _partial(inputs) or inputs.rates is None:
        return []
    n = lambda *parts: "\\" + latex.macro_name(*parts) + "{}"  # noqa: E731
    profiles = [p for p in inputs.rates["profile"] if latex.macro_name("mean reward", p) in names]
    out = []
    if profiles:
        out.append("The rewards score partial credit; the mean reward per trial was " + latex.series(
            [f"{n('mean reward', p)} under {latex.texttt(p)} (95\\% CI {n('mean reward low', p)} to {n('mean reward high', p)})"
             for p in profiles]) + ".")
    comp = inputs.comparisons
    if inputs.configurations is not None:
        return _configuration_reward_sentences(inputs, names)
    for (a, b), g in comp[comp["tier"] == PARTIAL_TIER].groupby(["profile_a", "profile_b"], sort=False):
        clauses = []
        for r in g.itertuples():
            k = _key(r)
            if k + "Est" not in names:
                continue
            clauses.append(f"{latex.escape_tex(str(r.test))} \\{k}P{{}}, 95\\% CI \\{k}Low{{}} to \\{k}High{{}}")
        if clauses:
            k = _key(g.iloc[0])
            out.append(f"Paired over the \\{k}Pairs{{}} tasks both ran, the mean reward of {latex.texttt(b)} differed from "
                       f"{latex.texttt(a)} by \\{k}Est{{}} ({'; '.join(clauses)}; described beside pass/fail, not part of "
                       "the plan's claim).")
    return out


def _configuration_reward_sentences(inputs: PaperInputs, names: set[str]) -> list[str]:
    """Under partial credit, in a study with configurations: the range of the paired mean-reward differences over the
    configurations (each in Table~\\ref{tab:comparisons}), not one sentence per configuration."""
    cfg, comp = inputs.configurations, inputs.comparisons
    assert cfg is not None and comp is not None
    first = [g.iloc[0] for _, g in comp[comp["tier"] == PARTIAL_TIER].groupby(["profile_a", "profile_b"], sort=False)]
    shown = [r for r in first if _key(r) + "Est" in names and not fmt.missing(r["estimate"])]
    if not shown:
        return []
    lo, hi = min(shown, key=lambda r: r["estimate"]), max(shown, key=lambda r: r["estimate"])
    test = latex.escape_tex(str(lo["test"]))
    return [f"The rewards score partial credit. Paired within each configuration on the tasks both arms ran, the mean "
            f"reward of {latex.texttt(cfg.treatment)} differed from {latex.texttt(cfg.control)} by between "
            f"\\{_key(lo)}Est{{}} ({latex.escape_tex(str(lo['configuration']))}) and \\{_key(hi)}Est{{}} "
            f"({latex.escape_tex(str(hi['configuration']))}; {test}; Table~\\ref{{tab:comparisons}}; described beside "
            "pass/fail, not part of the plan's claim)."]


def _sequential_lines(inputs: PaperInputs) -> list[str]:
    """The sequential design's paragraph, for a sequential run."""
    seq = inputs.sequential
    return [] if seq is None else [paper_paragraph(seq, inputs.sequential_estimates, float(seq.get("confidence", 0.95)))]


def _claim_text(inputs: PaperInputs) -> str:
    """Which family carries the claim (the plan says), the other labelled supportive; with a sequence, its result."""
    if inputs.plan is None or inputs.plan.claim_family != "hypotheses":
        return ("\\paragraph{Claim.} The confirmatory claim rests on the primary tier, Holm-corrected over its metrics "
                "and profile pairs; secondary metrics are a family of their own and exploratory ones are described only.")
    text = ("\\paragraph{Claim.} The confirmatory claim is the plan's fixed sequence of hypotheses, each step tested only "
            "if the one before it held; the tiers of comparisons below are supportive.")
    hyp = inputs.hypotheses
    if hyp is None or hyp.empty:
        return text + " (The sequence's results were not available when these snippets were generated.)"
    ordinal = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
    for r in hyp.itertuples():
        key = latex.macro_name("hypothesis", r.metric.replace("__", " "), r.profile_b, "vs", r.profile_a)
        interval = "" if fmt.missing(r.estimate) else \
            f" (\\{key}Est{{}}, interval \\{key}Low{{}} to \\{key}High{{}})"
        step = ordinal[r.step - 1] if r.step <= len(ordinal) else "next"
        text += (f" The {step} step, \\texttt{{{latex.escape_tex(r.profile_b)}}} against "
                 f"\\texttt{{{latex.escape_tex(r.profile_a)}}}: {latex.escape_tex(r.label)} {r.claim}, "
                 f"\\{key}Result{{}}{interval}.")
    return text


def _figures_tex(figures_dir: Path, rel_prefix: str, simulated: bool, extra: dict[str, str] | None = None) -> str:
    envs = []
    for stem, caption in {**FIGURE_CAPTIONS, **(extra or {})}.items():
        if simulated:
            caption = "SIMULATED DATA. " + caption
        if (figures_dir / f"{stem}.pdf").exists():
            envs.append("\\begin{figure}[tbp]\n\\centering\n"
                        f"\\includegraphics[width=\\columnwidth]{{{rel_prefix}/{stem}.pdf}}\n"
                        f"\\caption{{{caption}}}\n\\label{{fig:{stem.replace('_', '-')}}}\n\\end{{figure}}")
    return "\n\n".join(envs) if envs else "% no figures were generated"


# --------------------------------------------------------------------------- Markdown


def _markdown_sections(inputs: PaperInputs, macros: list[latex.Macro]) -> list[tuple[str, str]]:
    out = []
    if inputs.rates is not None:
        out.append(("Rates per profile", rates_table(inputs.rates, mean_reward=_partial(inputs))))
    comp = inputs.comparisons
    if comp is not None and len(comp):
        for tier in ("primary", PARTIAL_TIER, "secondary"):
            if (comp["tier"] == tier).any():
                body = tier_table(comp, tier) + ("\n\n" + "\n".join(mcnemar_lines(comp)) if tier == "primary" else "")
                claim = inputs.plan.claim_family if inputs.plan is not None else None
                out.append((tier_title(tier, str(comp.loc[comp["tier"] == tier, "correction"].iloc[0]), claim,
                                       _preregistered(inputs)), body))
    seq, adj = inputs.sequential, inputs.sequential_estimates
    if seq is not None:
        body = design_sentence(seq)
        if adj is not None and len(adj):
            body += ("\n\nThe paired comparisons above are fixed-sample numbers, **not adjusted** for the sequential stop; "
                     "adjusted for it:\n\n" + adjusted_table(adj, float(seq.get("confidence", 0.95))))
        out.append(("Sequential design", body))
    return out


def write_paper_snippets(inputs: PaperInputs, paper_dir: str | Path, figures_dir: str | Path,
                         figures_rel: str = "../figures") -> dict[str, Path]:
    """Write macros, tables, the results paragraph, figure environments and paper_snippets.md.

    ``figures_rel`` is the figures folder as seen from ``paper_dir`` (where pdflatex runs).
    Returns the written files by name. Optional tables (comparisons, CodeCanvas) are written only
    when their input exists; ``main.tex`` inputs those with ``\\InputIfFileExists``.
    """
    snip = Path(paper_dir) / "snippets"
    sim, msrc = inputs.simulated, inputs.source("metrics")
    for stale in ("comparisons.tex", "codecanvas.tex", "resolve_rates.tex", "rates.tex", "design_audit.tex", "beside_itt.tex",
                  "discussion.tex", "conclusion.tex", "method.tex", "title.tex"):
        # A table from an earlier run must not outlive its input.
        (snip / stale).unlink(missing_ok=True)
    written: dict[str, Path] = {}
    macros = quoted_macros(inputs)
    written["macros"] = atomic_write_text(snip / files.MACROS, latex.render_macros(macros, sim, msrc))
    if inputs.rates is not None:
        written["rates"] = latex.write_tex(snip / "rates.tex", rates_tex(inputs.rates, sim, token_note(inputs.study)), sim,
                                           inputs.source("rates"))
    written["profile_summary"] = latex.write_tex(snip / "profile_summary.tex",
                                                 summary_tex(inputs.metrics, sim, token_note(inputs.study)), sim, msrc)
    configs = inputs.configurations
    if inputs.comparisons is not None and len(inputs.comparisons):
        claim = inputs.plan.claim_family if inputs.plan else None
        if configs is not None and "configuration" in inputs.comparisons:
            # Results per configuration in one table, with the pooled estimates under each pooled metric.
            titles = {t: tier_title(t, str(g["correction"].iloc[0]), claim, _preregistered(inputs))
                      for t, g in inputs.comparisons.groupby("tier")}
            table = configurations_tex(inputs.comparisons, configs.pooling, sim, titles)
        else:
            table = comparisons_tex(inputs.comparisons, sim, claim, _preregistered(inputs))
        written["comparisons"] = latex.write_tex(snip / "comparisons.tex", table, sim, inputs.source("comparisons"))
    md_sections = _markdown_sections(inputs, macros)
    if configs is not None and configs.pooling is not None and inputs.comparisons is not None:
        md_sections.append(("Per configuration, and pooled across configurations",
                            "\n".join(pooling_markdown(inputs.comparisons, configs.pooling)[2:])))
    if inputs.beside:
        written["beside_itt"] = latex.write_tex(snip / "beside_itt.tex", beside_tex(inputs.beside, sim), sim,
                                                inputs.sources.get("beside", "comparisons"))
        md_sections.append(("Beside intention to treat", "\n".join(beside_markdown(inputs.beside)[2:])))
    if inputs.codecanvas is not None and len(inputs.codecanvas):
        cc = inputs.codecanvas
        # The metrics the CodeCanvas comparison reports, not every column: the full table is codecanvas_table.csv.
        cols = [x for x, _ in COMPARISON_METRICS + BOARD_METRICS
                if x in cc.columns and pd.to_numeric(cc[x], errors="coerce").notna().any()]
        cc_summary = tables.profile_summary(cc, cols)
        cc_summary = cc_summary[cc_summary["n"] > 0]
        if len(cc_summary):
            label = dict(COMPARISON_METRICS + BOARD_METRICS)  # readers see names, not column ids
            rows = [[latex.escape_tex(label.get(r.metric, r.metric)), latex.escape_tex(r.profile), _s(r.mean, 2),
                     _s(r.median, 2), str(int(r.n))] for r in cc_summary.itertuples()]
            written["codecanvas"] = latex.write_tex(snip / "codecanvas.tex", _tabular(
                ["Metric", "Profile", "{Mean over trials}", "{Median over trials}", "Trials with a board"],
                "ll S[table-format=2.2] S[table-format=2.2] r", rows,
                "CodeCanvas metrics per profile, over the trials whose agent left a CodeCanvas board (the others "
                "have no value)" + (" (simulated data)" if sim else ""), "tab:codecanvas", wide=True),
                sim, inputs.source("codecanvas"))
            md_sections.append(("CodeCanvas", markdown.table(
                ["metric", "profile", "mean over trials", "median over trials", "trials with a board"],
                [[label.get(r.metric, r.metric), r.profile, fmt.number(r.mean, 2), fmt.number(r.median, 2), str(int(r.n))]
                 for r in cc_summary.itertuples()])))
    if inputs.llm_snippets and inputs.llm_snippets.strip():
        # Nested under our section: every heading of the judge's file moves down two levels.
        demoted = "\n".join("##" + ln if ln.startswith("#") else ln for ln in inputs.llm_snippets.strip().splitlines())
        md_sections.append(("LLM analyses (Layer 2, explanatory; numbers come from the tables above)", demoted))
    written["data"] = latex.write_tex(snip / "data.tex", _data_paragraph(inputs), sim, msrc)
    method = None
    if inputs.study is not None:
        written["title"] = latex.write_tex(snip / "title.tex", title_tex(inputs.study), sim, msrc)
        method = method_tex(inputs.study)
        written["method"] = latex.write_tex(snip / "method.tex", method, sim, msrc)
    if configs is not None and configs.audit is not None and inputs.audit is not None:
        # Arms as columns do not fit many configurations: one row per configuration, the findings below.
        written["design_audit"] = latex.write_tex(
            snip / "design_audit.tex", configuration_audit_tex(configs.audit, inputs.audit[1], configs.control, configs.treatment,
                                                               "Design audit: what the runs are, configuration by configuration, "
                                                               "before any test" + (" (simulated data)" if sim else "")),
            sim, inputs.source("audit"))
        md_sections.insert(0, ("Design audit", "\n".join(audit_markdown(*inputs.audit)[4:])))
    elif inputs.audit is not None and len(inputs.audit[0]):
        written["design_audit"] = latex.write_tex(
            snip / "design_audit.tex", audit_tex(*inputs.audit, "Design audit: what the runs are, arm by arm, before any "
                                                  "test" + (" (simulated data)" if sim else "")), sim, inputs.source("audit"))
        md_sections.insert(0, ("Design audit", "\n".join(audit_markdown(*inputs.audit)[4:])))
    results = _results_paragraph(inputs, macros)
    written["results"] = latex.write_tex(snip / "results.tex", results, sim, msrc)
    arms = inputs.audit[0] if inputs.audit is not None else None
    beside = inputs.beside or {}
    limitations = limitations_tex(simulated=sim, data_source=inputs.data_source, arms=arms, correlations=inputs.correlations,
                                  comparisons=inputs.comparisons, has_bounds=lost_any(beside.get("bounds")),
                                  has_cace="compliance" in beside and len(beside["compliance"]) > 0)
    if configs is not None:
        limitations += "\n" + heterogeneity_tex(configs.pooling, configs.control, configs.treatment, configs.configurations)
        threats = configuration_threats_tex(inputs.audit[1] if inputs.audit is not None else None)
        if threats:
            limitations += "\n" + threats
    conclusion = conclusion_tex(simulated=sim, comparisons=inputs.comparisons,
                                claim_family=inputs.plan.claim_family if inputs.plan is not None else "primary")
    written["discussion"] = latex.write_tex(snip / "discussion.tex", limitations, sim, msrc)
    written["conclusion"] = latex.write_tex(snip / "conclusion.tex", conclusion, sim, msrc)
    # The same sentences as the PDF, first in the Markdown (after the design audit, which opens it).
    prose = ([("Method", latex.prose_markdown(method, macros))] if method else []) + [
             ("Results", latex.prose_markdown(results, macros).replace("\n", "\n\n")),
             ("Discussion and limitations", latex.prose_markdown(limitations, macros)),
             ("Conclusion", latex.prose_markdown(conclusion, macros))]
    at = 1 if md_sections and md_sections[0][0] == "Design audit" else 0
    md_sections[at:at] = prose
    extra = forest_captions(configs.pooling) if configs is not None else {}
    written["figures"] = latex.write_tex(snip / "figures.tex", _figures_tex(Path(figures_dir), figures_rel, sim, extra), sim, msrc)
    md_sections.append(("Quoted numbers (macros.tex)", markdown.table(
        ["macro", "value", "metric id", "what"], [["\\" + m.name, m.text, m.metric_id, m.note] for m in macros])))
    written["paper_snippets"] = atomic_write_text(Path(paper_dir) / files.PAPER_SNIPPETS,
                                                  markdown.render_snippets(md_sections, sim, msrc,
                                                                           data_banner(sim, inputs.data_source)))
    return written
