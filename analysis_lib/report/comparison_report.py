"""``comparisons.csv``, its companions and ``comparison_report.md``, written from the analysis of one study.

Nothing here computes a comparison: :func:`analysis_lib.inference.analysis.analyse_comparisons` does, and the
tables here and in RESULTS.md are rendered by :func:`tier_table` from its rows, so the two reports cannot disagree.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import stats
from ..core import outputs as files
from ..core.fileio import atomic_write_csv, atomic_write_text
from ..inference import power
from ..inference import sequential as seq_mod
from ..inference.comparisons import (
    COLLINEAR_R,
    CORRECTION_NAMES,
    FEW_PAIRS,
    PARTIAL_TIER,
    collinear_endpoints,
    partial_credit,
    usable_trials,
)
from ..inference.repetitions import usual_repetitions
from ..inference.results import Analysis
from ..study.plan import AnalysisPlan, PlanCheck, PlanError, write_sidecar
from ..study.study import Study
from . import numbers as fmt
from .audit import audit_frames, audit_markdown, data_banner
from .beside_itt import beside_markdown, write_beside
from .configurations import configuration_audit_markdown, pooling_markdown, pooling_tables, write_pooling
from .markdown import table as md_table
from .sequential import planning_table

__all__ = [
    "write_comparison_outputs", "comparison_report", "tier_table", "tier_caption", "rates_table",
    "hypotheses_table",
    "subgroups_table", "methods_lines", "claim_sentence", "family_role", "sequential_planning",
    "collinearity_lines", "preregistered"
]

# The planning section: effects worth detecting, and its Monte-Carlo size (power SE <= 2.5 points).
PLAN_TOKEN_REDUCTION = 0.20
PLAN_SUCCESS_LIFT = 0.10
PLAN_N_SIM = 400
PLAN_SPEND_TASKS = 100


def write_comparison_outputs(study: Study, analysis: Analysis, out_dir: str | Path, *, plan_next: bool = False) -> list[Path]:
    """``comparisons.csv``, ``profile_rates.csv``, their companions, the plan sidecar and ``comparison_report.md``
    of ``analysis``, each written atomically into ``out_dir``. ``plan_next`` adds the power analysis for the next
    study to the report (seconds of exact power sums and simulation; every other section is always there)."""
    if study.plan_check is None:
        raise PlanError("the study carries no analysis plan: no comparisons written")
    out = Path(out_dir)
    written = [atomic_write_csv(out / files.COMPARISONS, analysis.comparisons),
               atomic_write_csv(out / files.PROFILE_RATES, analysis.rates)]
    if analysis.hypotheses is not None:
        written.append(atomic_write_csv(out / files.HYPOTHESES, analysis.hypotheses))
    written += [atomic_write_csv(out / files.VARIANCE_COMPONENTS, analysis.variance),
                atomic_write_csv(out / files.PASS_AT_K, analysis.pass_at_k),
                atomic_write_csv(out / files.ENDPOINT_CORRELATIONS, analysis.correlations)]
    if analysis.subgroups is not None:
        written.append(atomic_write_csv(out / files.SUBGROUPS, analysis.subgroups))
    if analysis.beside is not None:
        written += write_beside(analysis.beside, out)
    written += write_pooling(analysis.pooling, out, study.simulated)
    written.append(write_sidecar(out, study.plan_check))
    written.append(atomic_write_text(out / files.COMPARISON_REPORT, comparison_report(study, analysis, plan_next=plan_next)))
    return written


# --------------------------------------------------------------------------- shared tables


def rates_table(rates: pd.DataFrame, confidence: float = 0.95, *, mean_reward: bool = False) -> str:
    """Per profile: pass rate per trial (task-clustered interval), resolve rate per task, cost per success; with
    ``mean_reward`` (the rewards score partial credit) the mean reward per trial with its interval too."""
    c = f"{confidence:.0%}"
    rows = [[r.profile, str(r.n_trials), str(r.n_infra_errors), f"{fmt.value('success', r.pass_rate, rate=True)} "
             f"[{fmt.number(100 * r.pass_rate_low, 1)}, {fmt.number(100 * r.pass_rate_high, 1)}]",
             fmt.number(r.design_effect, 2), f"{r.tasks_resolved}/{r.n_tasks}",
             f"{fmt.value('success', r.resolve_rate, rate=True)} [{fmt.number(100 * r.resolve_rate_low, 1)}, "
             f"{fmt.number(100 * r.resolve_rate_high, 1)}]",
             f"{fmt.number(r.cost_per_success, 3)} [{fmt.number(r.cost_per_success_low, 3)}, "
             f"{fmt.number(r.cost_per_success_high, 3)}]"] for r in rates.itertuples()]
    head = ["profile", "trials", "infra errors (excluded)", f"pass rate per trial [{c} CI, task-clustered]",
            "design effect", "tasks resolved (majority)", f"resolve rate per task [{c} CI]", f"cost per success, USD [{c} CI]"]
    if mean_reward and "mean_reward" in rates:
        d = fmt.decimals("reward") + 1
        head.append(f"mean reward per trial [{c} CI, task-clustered]")
        for row, r in zip(rows, rates.itertuples(), strict=True):
            row.append(f"{fmt.number(r.mean_reward, d)} [{fmt.number(r.mean_reward_low, d)}, {fmt.number(r.mean_reward_high, d)}]")
    return md_table(head, rows)


def tier_caption(comparisons: pd.DataFrame, tier: str, alpha: float = 0.05) -> str:
    """What holds between the intervals and the tests of a tier's rows, said where the numbers are shown."""
    sub = comparisons[comparisons["tier"] == tier]
    tested = tier != "exploratory" and sub["p_value"].notna().any()
    scales = set(sub.loc[sub["estimate"].notna(), "scale"])
    out = []
    if "rate" in scales and tested:
        out.append("Resolve-rate differences carry Tango's score interval beside McNemar's test: the two can disagree "
                   "near 0, and a note says where they do; the discordant-pair odds ratio's exact interval always "
                   "agrees with the exact test.")
    if scales & {"ratio", "difference"}:
        out.append("Hodges-Lehmann intervals invert the Wilcoxon signed-rank test of the same differences (zeros ranked "
                   "by Pratt's rule in both)" + (f": each excludes 0 exactly when its unadjusted p < {alpha:g}" if tested
                                                  else "") + "; an end that the test itself rejects is open, marked "
                   "'(' or ')' where it is 0.")
    if "pass_rate" in scales and tested:
        out.append(f"pass@1 intervals are the paired t interval, or invert the sign-flip test, or come from the GEE's t "
                   f"test: each excludes 0 exactly when its unadjusted p < {alpha:g}.")
    if "mean" in scales:
        out.append("The rewards score partial credit, so beside the pass/fail comparison stands the mean reward: A and "
                   "B are the mean over the paired tasks of each task's mean reward, and the estimate is the mean of "
                   "the per-task differences B − A, with the paired t interval or the interval that inverts the "
                   f"sign-flip randomisation test; each excludes 0 exactly when its p < {alpha:g}. Described beside "
                   "the planned tiers: no correction, no verdict.")
    if (sub["total_change_pct"].notna().any() or "cost_per_success" in scales):
        out.append("The change of the total and cost per success carry percentile bootstrap intervals over tasks, "
                   "which cover less than their nominal level with few tasks (about 90 % for a nominal 95 % at 12 "
                   "to 24 tasks in the simulator's calibration, benchmarks/calibration.py).")
    if tested and tier not in ("sensitivity", PARTIAL_TIER):
        out.append("Intervals are not adjusted for multiplicity; the adjusted p decides significance.")
    return " ".join(out)


def tier_table(comparisons: pd.DataFrame, tier: str, confidence: float = 0.95) -> str:
    """The rows of one tier as a Markdown table (estimate, its interval, the budget view, the test), with the
    tier's caption above it and each row's note below it, numbered (:func:`tier_caption`)."""
    sub = comparisons[comparisons["tier"] == tier]
    c = f"{confidence:.0%}"
    rows, notes = [], []
    for r in sub.itertuples():
        rate = r.scale in fmt.POINT_SCALES
        if r.scale in ("cost_per_success", "mean"):  # totals and means: as many decimals as the estimate
            a, b = (fmt.number(v, 3 if r.scale == "cost_per_success" else fmt.estimate_digits(r)) for v in (r.a_value, r.b_value))
        else:
            a, b = fmt.value(r.metric, r.a_value, rate=rate), fmt.value(r.metric, r.b_value, rate=rate)
        pairs = str(r.n_pairs) + (f" ({r.n_undefined} undefined)" if r.n_undefined else "")
        total = "" if fmt.missing(r.total_change_pct) else \
            f"{fmt.number(r.total_change_pct, 1, sign=True)} % {fmt.interval(r, 'total_change_low', 'total_change_high')}"
        label = r.label + (f" (repetitions: {r.repetitions})" if tier == "sensitivity" else "")
        if fmt.missing(r.estimate):
            cell = r.note if isinstance(r.note, str) and r.note else "–"
        else:
            cell = f"{fmt.estimate(r)} {fmt.interval(r)}"
            if isinstance(r.note, str) and r.note:
                notes.append(f"{len(notes) + 1}. {r.label}, {r.profile_b} vs {r.profile_a}: {r.note}.")
                cell += f" (note {len(notes)})"
        summary = r.a_b_summary if isinstance(getattr(r, "a_b_summary", None), str) else "–"
        row = [f"{label}, `{r.metric}`", f"{r.profile_b} vs {r.profile_a}", pairs, summary, a, b, cell, r.interval or "–"]
        if tier == "exploratory":
            row.append(total)
        else:
            sig = "–" if pd.isna(r.significant) else ("**yes**" if bool(r.significant) else "no")
            row += [total, r.test, fmt.p_value(r.p_value), fmt.p_value(r.p_adjusted), sig]
        rows.append(row)
    header = ["metric", "pair", "tasks paired", "A and B are", "A", "B", f"estimate [{c} CI]", "interval"]
    if tier == "exploratory":
        header.append(f"change of the total [{c} CI]")
    else:
        corr = CORRECTION_NAMES[str(sub["correction"].iloc[0])] if len(sub) else "–"
        header += [f"change of the total [{c} CI]", "test", "p", f"p ({corr})", "significant"]
        if tier in ("sensitivity", PARTIAL_TIER):  # beside a planned test, not a family: no correction, no verdict
            header, rows = header[:-2], [r[:-2] for r in rows]
    caption = tier_caption(comparisons, tier, 1 - confidence)
    return "\n\n".join(part for part in (caption, md_table(header, rows), "\n".join(notes)) if part)


def hypotheses_table(hyp: pd.DataFrame) -> str:
    """The fixed sequence, step by step per pair: claim, margin, the interval read, and the result."""
    rows = [[f"{r.profile_b} vs {r.profile_a}", str(r.step), f"{r.label}, `{r.metric}`",
             r.claim + ("" if fmt.missing(r.margin) else f" (margin {fmt.number(r.margin, 1)} {r.unit}"
                        + ("" if r.unit != "%" else f": B/A within {fmt.number(r.margin_low, 1, sign=True)} % and "
                           f"{fmt.number(r.margin_high, 1, sign=True)} %, symmetric on the log scale") + ")"),
             f"{100 * r.confidence:g} %",
             "–" if fmt.missing(r.estimate) else f"{fmt.number(r.estimate, 1, sign=True)} {r.unit} "
             f"{fmt.ends(r.ci_low, r.ci_high, 1, sign=True, opened=_opened(r))}",
             f"**{r.result}**" if r.result == "holds" else r.result, r.reason] for r in hyp.itertuples()]
    return md_table(["pair", "step", "metric", "claim", "interval", "estimate [interval]", "result", "why"], rows)


def _opened(row) -> str:
    """The ends a row's interval leaves out (``ci_open``: "low", "high", "low and high"), "" when none or not recorded."""
    value = getattr(row, "ci_open", None)
    return value if isinstance(value, str) else ""


def subgroups_table(subgroups: pd.DataFrame, group: str = "group", pull: bool = True) -> str:
    """Per pair and group of tasks (:func:`analysis_lib.inference.subgroups.subgroup_effects` rows with ``profile_a``,
    ``profile_b``): the raw pass@1 difference with its SE, the partially pooled one and (``pull``) the pull."""
    rows = [[f"{r.profile_b} vs {r.profile_a}", str(r.group), str(r.n_tasks),
             f"{fmt.number(100 * r.raw, 1, sign=True)} pp (SE {fmt.number(100 * r.se, 1)})",
             f"{fmt.number(100 * r.shrunk, 1, sign=True)} pp", *([fmt.number(r.shrinkage, 2)] if pull else [])]
            for r in subgroups.itertuples()]
    return md_table(["pair", group, "tasks", "raw difference", "partially pooled", *(["pull to overall"] if pull else [])], rows)


def mcnemar_lines(comparisons: pd.DataFrame, confidence: float = 0.95) -> list[str]:
    """Per pass/fail row: the discordant tasks and the odds ratio with the exact interval that agrees with the test."""
    out = []
    conf_text = f"{confidence:.0%} "
    for r in comparisons[(comparisons["scale"] == "rate") & comparisons["n_a_only"].notna()].itertuples():
        out.append(
            f"- {r.label}, {r.profile_b} vs {r.profile_a}: of {fmt.plural(r.n_pairs, 'task')}, "
            f"{fmt.plural(int(r.n_b_only), 'task')} passed only under {r.profile_b} and "
            f"{fmt.plural(int(r.n_a_only), 'task')} only under {r.profile_a}; discordant-pair odds ratio "
            f"{fmt.number(r.odds_ratio, 2)}, exact {conf_text}CI {fmt.ends(r.odds_ratio_low, r.odds_ratio_high, 2)}"
            f" ({r.test}, {fmt.p_value(r.p_value, prefix=True)})."
        )
    return out


def tier_title(tier: str, correction: str, claim: str | None = None, preregistered: bool | None = None) -> str:
    """A tier's heading, worded once for the comparison report, RESULTS.md and the paper. ``correction`` is the
    tier's correction id; ``claim`` the family that carries the plan's claim (``primary`` or ``hypotheses``), when known;
    ``preregistered``: whether the plan used was recorded before the first trial and not changed since (only then are
    its tests "pre-registered"; otherwise they are the plan's, "planned")."""
    corr = CORRECTION_NAMES[correction]
    role = "" if claim is None else "; " + ("the plan's claim" if claim == "primary" else "supportive")
    tests = "pre-registered tests" if preregistered is True else "planned tests"
    return {"primary": f"Primary metrics ({tests}, {corr} over the tier{role})",
            "secondary": f"Secondary metrics ({tests}, {corr} over the tier)",
            "exploratory": "Exploratory metrics (descriptive: estimates and intervals, no test)",
            "sensitivity": "Sensitivity analyses (a planned test with repetitions combined otherwise)",
            PARTIAL_TIER: "Partial credit: the mean reward beside pass/fail (no correction, no verdict)"}[tier]


def preregistered(check: PlanCheck | None) -> bool:
    """Whether the plan an analysis used is a pre-registration: recorded before the first trial, and unchanged."""
    return check is not None and check.fixed_before_data is True and not check.changed


def collinearity_lines(correlations: pd.DataFrame | None) -> list[str]:
    """One sentence per pair of primary endpoints whose per-task log ratios are nearly collinear (|r| above the threshold)."""
    out = []
    for r in collinear_endpoints(correlations).itertuples():
        out += [f"**Collinear endpoints:** {r.label_x} and {r.label_y} of {r.profile_b} against {r.profile_a} move "
                f"together task by task (Pearson r = {fmt.number(r.r, 3)} of the per-task log ratios B/A over "
                f"{fmt.plural(int(r.n_pairs), 'paired task')}, above {COLLINEAR_R:g} in absolute value), so their two "
                "tests restate one finding, not two.", ""]
    return out


def family_role(plan: AnalysisPlan, family: str) -> str:
    """``the plan's claim`` or ``supportive``: what a family (``primary`` or ``hypotheses``) is in this plan."""
    return "the plan's claim" if plan.claim == family else "supportive"


def claim_sentence(plan: AnalysisPlan) -> str:
    """Which family carries the plan's claim, and what the other one is."""
    if plan.claim == "hypotheses":
        return ("the plan's claim is the fixed sequence of hypotheses (each profile pair at alpha / pairs); the "
                "primary and secondary tiers are supportive: they describe the same comparisons without a claim of "
                "their own, so the family-wise error of the claim stays at alpha.")
    return ("the plan's claim rests on the primary tier (" + CORRECTION_NAMES[plan.tiers.primary.correction]
            + " over it)" + ("; the hypotheses sequence is supportive" if plan.hypotheses else "")
            + "; secondary metrics are a family of their own (false discovery rate), not part of the claim.")


def methods_lines(plan: AnalysisPlan) -> list[str]:
    """The methods in a few bullets; the same text in every report."""
    boot = plan.bootstrap
    corr = {t: CORRECTION_NAMES[getattr(plan.tiers, t).correction] for t in ("primary", "secondary")}
    if plan.pairing.repetitions == "all":
        unit = (
            "- Unit of analysis: the task, every repetition counting. Repetitions of a task are combined into its "
            "pass rate (pass/fail) and the geometric mean of the repetitions (continuous), then A and B are paired "
            "on the tasks both ran. Infrastructure errors are left out; a task with fewer repetitions in one arm "
            "keeps the pass rate of those it has (no ties)."
        )
        binary = (
            "- Pass/fail: the estimate is pass@1, the mean over tasks of the per-task pass-rate difference B − A "
            "(each task weighs the same). The paired t test on those differences (the CR2 cluster-robust test "
            "with Satterthwaite degrees of freedom, which for one difference per task is exactly this) comes "
            "with its t interval; the sign-flip randomisation test, which the blocked randomised schedule "
            "justifies, comes with the interval that inverts it, computed exactly (its ends are the last shifts "
            "the test accepts; exact over all sign patterns up to 16 tasks, else a seeded Monte-Carlo sample with "
            "its standard error). Either way the interval excludes 0 exactly when the unadjusted p < alpha. The "
            "GEE restatement uses the bias-reduced (Mancl-DeRouen) sandwich with Student's t on tasks − 1 degrees "
            "of freedom; the plain sandwich with a z test rejects a true null too often with few tasks."
        )
    else:
        unit = (
            "- Unit of analysis: the task. Repetitions of a task are combined first (majority vote for pass/fail, "
            "a tie counts as fail; median otherwise), then A and B are paired on the tasks both ran. "
            "Infrastructure errors are left out."
        )
        binary = None
    lines = [
        unit,
        "- Pass/fail: the estimate is the difference in task-majority resolve rate B − A with Tango's score interval; "
        "the test is McNemar's (exact: two-sided binomial on the discordant tasks; mid-p where the plan says so). The "
        "discordant-pair odds ratio carries the exact (Clopper-Pearson) interval, which excludes 1 exactly when the "
        "exact test rejects; Tango's interval is a score interval and can exclude 0 when the conservative exact test "
        "does not reject.",
        *([binary] if binary else []),
        "- Continuous metrics on a ratio scale (tokens, cost, time, calls): per-task log ratios log(B/A); Wilcoxon "
        "signed-rank test on them (exact below 50 pairs without ties or zeros, as R's wilcox.test; with any tie or "
        "zero the normal approximation with tie and continuity corrections, as R switches). Ties and zeros are "
        "found on log ratios rounded to 9 decimals, not on floating-point noise. A zero (the same value under A and "
        "B) is ranked and then set aside, by Pratt's rule, in the test and in its interval alike. Hodges-Lehmann "
        "estimate with the interval that inverts that test exactly (its ends are Walsh averages; one the test itself "
        "rejects is open), shown as 100 (exp(HL) − 1) %, so the interval excludes 0 exactly when the unadjusted "
        f"p < {plan.alpha:g}. Beside it, the change of the total over the paired "
        f"tasks (sum B / sum A) with a percentile bootstrap over tasks ({boot.n_resamples} resamples, seed {boot.seed}).",
        "- Counts that can be zero (reads, per-tool calls): the same on the differences B − A, in the metric's unit"
        + (" (each task's repetitions by their arithmetic mean, which keeps zeros; a geometric mean would leave the "
           "task out)." if plan.pairing.repetitions == "all" else ".")
        + " Every task both profiles ran is either paired or counted as undefined (a ratio or a geometric mean "
        "with a zero, no value, no outcome), with the reason in the row's note.",
        "- Rates of a profile: pass rate per trial with Wilson's interval at the design-effective size (repetitions "
        "of a task are clustered); resolve rate per task with Wilson's interval over tasks; cost per success = total "
        "cost / total successes with a bootstrap over tasks.",
        f"- Multiplicity: {corr['primary']} over the whole primary tier and {corr['secondary']} over the whole "
        f"secondary tier (every metric and every profile pair); exploratory rows have no test. Alpha {plan.alpha}. "
        "Intervals are unadjusted.",
        f"- Claim: {claim_sentence(plan)}",
    ]
    if binary:  # the majority-vote bullet describes a sensitivity analysis at most
        lines[1] = lines[1].replace(
            "- Pass/fail: the estimate", "- Pass/fail by majority vote (where declared as a sensitivity analysis): the estimate", 1
        )
    if plan.tiers.sensitivity is not None:
        lines.append(
            "- Sensitivity analyses restate a planned test with repetitions combined otherwise; they are "
            "reported beside the planned rows, without a correction and without a verdict of their own."
        )
    return lines


# --------------------------------------------------------------------------- the report


def _repetitions_section(study: Analysis, confidence: float) -> list[str]:
    """Variance components and pass@k / pass^k: what the repetitions of a task add."""
    out = ["## Repetitions: variance components and pass@k", ""]
    v = study.variance
    if not v.empty and v["within_task"].isna().all():
        # One repetition per task: nothing to split a task's variance with (no "nan %" table).
        out += ["The within-task variance cannot be estimated: no task has more than one repetition under a profile, "
                "so what repetitions would add is unknown from these runs.", ""]
    elif not v.empty:
        rows = [
            [
                r.profile,
                f"`{r.metric}`",
                r.scale,
                fmt.number(r.between_task, 3),
                fmt.number(r.within_task, 3),
                fmt.number(r.icc, 2),
                " / ".join(fmt.number(100 * getattr(r, f"within_share_{k}"), 0) + " %" for k in (1, 3, 5))
                if all(not fmt.missing(getattr(r, f"within_share_{k}")) for k in (1, 3, 5)) else fmt.DASH,
            ]
            for r in v.itertuples()
        ]
        out += [
            "Between-task and within-task variance (one-way random-effects ANOVA; pass/fail on 0/1, tokens on "
            "the log scale). The last column is the share of a task mean's variance that comes from the "
            "repetitions with 1 / 3 / 5 of them: where it is small, more tasks buy more than more repetitions.",
            "",
            md_table(
                ["profile", "metric", "scale", "between tasks", "within a task", "ICC", "within share at 1 / 3 / 5 repetitions"], rows
            ),
            "",
        ]
    pk = study.pass_at_k
    if not pk.empty:
        c = f"{confidence:.0%}"
        rows = [
            [
                str(r.k),
                r.profile if not r.vs else f"{r.profile} − {r.vs}",
                r.measure,
                str(r.n_tasks) + (f" ({r.n_tasks_short} short)" if r.n_tasks_short else ""),
                f"{fmt.number(100 * r.estimate, 1, sign=bool(r.vs))}"
                + (" pp" if r.vs else " %")
                + f" [{fmt.number(100 * r.ci_low, 1, sign=bool(r.vs))}, "
                f"{fmt.number(100 * r.ci_high, 1, sign=bool(r.vs))}]",
            ]
            for r in pk.itertuples()
        ]
        out += [
            "pass@k (at least one of k repetitions passes) and pass^k (all k pass) for k ≥ 2 (k = 1 is the pass "
            "rate, above), unbiased per task from its own "
            "repetitions, averaged over tasks; a task with fewer than k repetitions is left out of that k (short). "
            f"Intervals: percentile bootstrap over tasks ({c}); differences pair the tasks.",
            "",
            md_table(["k", "profile", "measure", "tasks", f"estimate [{c} CI]"], rows),
            "",
        ]
    return out


def _power_rows(trials: pd.DataFrame, pairs: list[tuple[str, str]], alphas: tuple[float, float]) -> list[list[str]]:
    rows = []
    for a, b in pairs:
        pilot = power.pilot_of(trials, a, b)
        if pilot.n_tasks < 2:
            rows.append([f"{b} vs {a}", "–", "–", "–", "–", "–", "not estimable: fewer than 2 paired tasks"])
            continue
        at_plan, at_alpha = (power.sensitivity(pilot, PLAN_SUCCESS_LIFT, alpha=x) for x in alphas)
        for r, r0 in zip(at_plan.itertuples(), at_alpha.itertuples(), strict=True):
            rows.append([f"{b} vs {a}", str(pilot.n_tasks), r.analysis, r.nuisance, fmt.number(r.value, 3),
                         *(str(int(x)) if pd.notna(x) else "more than 5,000 or impossible" for x in (r.n_tasks, r0.n_tasks))])
    return rows


def _planning_section(trials: pd.DataFrame, pairs: list[tuple[str, str]], plan: AnalysisPlan, *, power_analysis: bool,
                      seed: int) -> list[str]:
    """Tasks and spend for the next study, with these runs as the pilot (analysis_lib.inference.power, stats.project_spend).

    The power analysis runs only when asked for (``power_analysis``): it is the one slow part of a report.
    """
    out = ["## Planning (these runs as the pilot)", ""]
    level = power.claim_level(plan, len(pairs))
    if not power_analysis:
        out += [f"Tasks needed for the next study are computed on request (`python -m analysis_lib RUNS --plan-next`, "
                f"or `write_comparisons(..., plan_next=True)`): exact power at the level the plan tests its claim at "
                f"(alpha {fmt.number(level.alpha, 4)}: {level.why}), and a simulation for tokens.", ""]
    else:
        out += [
            f"Tasks for 80 % power (two-sided) to detect {fmt.number(PLAN_SUCCESS_LIFT * 100, 0, sign=True)} {fmt.comparison_unit('rate')}, under each way of "
            "combining repetitions: exact power of McNemar's exact test on majority verdicts, and of the paired t test "
            "on per-task pass rates (pass@1; noncentral t), each the smallest number of tasks that reaches the power. "
            f"**Planned at alpha {fmt.number(level.alpha, 4)}**, the level the plan tests its claim at ({level.why}); "
            f"beside it the answer at alpha {plan.alpha:g}, a test alone, which the correction does not allow. The "
            "pilot's nuisance parameter is uncertain, so the answer is repeated at the ends of its 95 % interval "
            "(loss rate: exact binomial; spread: chi-square). The lift is in each analysis's own estimand (majority "
            "resolve rate, or pass@1); for a non-inferiority step the two-sided answer is on the safe side.",
            "",
            md_table(["pair", "pilot tasks", "analysis", "pilot parameter", "value",
                      f"tasks needed at alpha {fmt.number(level.alpha, 4)} (the plan's)",
                      f"at alpha {plan.alpha:g} (a test alone)"],
                     _power_rows(trials, pairs, (level.alpha, plan.alpha))),
        ]
        rows = []
        for a, b in pairs:
            if "total_tokens" not in trials.columns:
                continue
            pilot = stats.pair_tasks(trials, "total_tokens", a, b)
            try:
                sims = [stats.plan_sample_size(pilot, effect=PLAN_TOKEN_REDUCTION, kind="continuous", n_sim=PLAN_N_SIM,
                                               seed=seed, alpha=x) for x in (level.alpha, plan.alpha)]
            except ValueError as exc:
                rows.append([f"{b} vs {a}", str(len(pilot)), f"not estimable: {exc}", "–", "–"])
                continue
            cells = []
            for sim in sims:
                need, top = sim["n_required"].iloc[0], sim.iloc[-1]
                cells.append(f"{int(need)}" if pd.notna(need) else
                             f"> {int(top['n_tasks'])} (power {fmt.number(top['power'], 2)} there)")
            rows.append([f"{b} vs {a}", str(len(pilot)), *cells,
                         ", ".join(f"{int(r.n_tasks)}: {r.power:.2f} ± {r.power_se:.2f}" for r in sims[0].itertuples()
                                   if r.n_tasks in (20, 50, 100))])
        if rows:
            out += [
                "",
                f"Tokens, {PLAN_TOKEN_REDUCTION:.0%} fewer (Wilcoxon signed-rank, power by simulation: {PLAN_N_SIM} "
                f"studies per size, seed {seed}, resampling the pilot's tasks with its own effect removed; ± is the "
                "Monte-Carlo standard error):",
                "",
                md_table(["pair", "pilot tasks", f"tasks for 80 % power at alpha {fmt.number(level.alpha, 4)} (grid)",
                          f"at alpha {plan.alpha:g}", f"power at 20 / 50 / 100 tasks, alpha {fmt.number(level.alpha, 4)}"],
                         rows),
                "",
            ]
    reps = usual_repetitions(trials)
    cols = [m for m in ("total_cost_usd", "total_tokens", "elapsed_sec") if m in trials.columns]
    if cols:
        spend = stats.project_spend(trials, n_tasks=PLAN_SPEND_TASKS, repetitions=reps, metrics=cols)
        srows = [
            [
                r.profile,
                f"`{r.metric}`",
                str(r.n_pilot_runs),
                fmt.value(r.metric, r.per_run_median),
                fmt.value(r.metric, r.per_run_p90),
                str(r.n_runs),
                fmt.value(r.metric, r.projected_median),
                fmt.value(r.metric, r.projected_p90),
            ]
            for r in spend.itertuples()
        ]
        out += [
            f"Projected spend of a run of {PLAN_SPEND_TASKS} tasks × {fmt.plural(reps, 'repetition')} per "
            "profile (pilot median and p90 per run, times the runs; the p90 line is a budget with margin):",
            "",
            md_table(
                ["profile", "metric", "pilot runs", "median over pilot runs", "p90 over pilot runs", "runs",
                 "projected (runs × median)", "projected (runs × p90)"], srows
            ),
        ]
    return out


def sequential_planning(trials: pd.DataFrame, pairs: list[tuple[str, str]], plan: AnalysisPlan
                        ) -> tuple[pd.DataFrame, list[str]]:
    """The plan's sequential design beside the fixed design, these runs as the pilot: per pair and primary metric the
    planner covers (success, tokens), the rows of :func:`analysis_lib.inference.sequential.planning` with ``pair, analysis``;
    and a line per metric it does not cover. Each hypothesis is planned at Holm's first level, alpha / family size."""
    seq = plan.sequential
    if seq is None:
        raise ValueError("the analysis plan declares no sequential design (add a 'sequential' section)")
    alpha = plan.alpha / max(1, len(plan.tiers.primary.metrics) * len(pairs))
    reps = usual_repetitions(trials)
    spend = (stats.project_spend(trials, n_tasks=1, repetitions=reps, metrics=["total_cost_usd"]).set_index("profile")
             if "total_cost_usd" in trials.columns and len(trials) else None)
    rows, skipped = [], []
    for a, b in pairs:
        cost = p90 = float("nan")
        if spend is not None and a in spend.index and b in spend.index:
            cost = reps * float(spend.loc[a, "per_run_median"] + spend.loc[b, "per_run_median"])
            p90 = reps * float(spend.loc[a, "per_run_p90"] + spend.loc[b, "per_run_p90"])
        for spec in plan.tiers.primary.metrics:
            fixed = _fixed_design(trials, a, b, spec, plan, alpha)
            if isinstance(fixed, str):
                skipped.append(f"`{spec.id}` ({spec.test}), {b} vs {a}: {fixed}")
                continue
            name, n, pw = fixed
            t = seq_mod.planning(seq, alpha, n_fixed=n, fixed_power=pw, cost_per_task=cost, cost_per_task_p90=p90)
            rows.append(t.assign(pair=f"{b} vs {a}", analysis=name, alpha=alpha))
    return (pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()), skipped


def _sequential_planning_section(trials: pd.DataFrame, pairs: list[tuple[str, str]], plan: AnalysisPlan) -> list[str]:
    """The planning section of a sequential plan: the design, then the fixed and sequential rows (sequential_planning)."""
    seq = plan.sequential
    assert seq is not None
    rows, skipped = sequential_planning(trials, pairs, plan)
    family = max(1, len(plan.tiers.primary.metrics) * len(pairs))
    alpha = plan.alpha / family
    fut = "no futility bound" if seq.futility == "none" else f"a non-binding {seq.futility.replace('_', '-')}-type futility bound"
    out = [
        "## Planning the sequential design (these runs as the pilot)",
        "",
        f"The plan's design: looks at {', '.join(f'{x:g}' for x in seq.fractions())} of the "
        f"{'tasks' if seq.timing == 'tasks' else 'budget'}, {seq.efficacy.replace('_', '-')}-type alpha spending, {fut}. "
        f"Each primary hypothesis is planned at the first level Holm gives it, alpha / {family} = {alpha:.4g} (a "
        "rejection passes its level on, so this is the cautious case). The fixed design is the smallest number of "
        f"tasks with 80 % power at the planned effect ({fmt.number(PLAN_SUCCESS_LIFT * 100, 0, sign=True)} {fmt.comparison_unit('rate')} of success, "
        f"{PLAN_TOKEN_REDUCTION:.0%} fewer tokens) at that level, by the planner above (exact power for McNemar's and "
        "the paired t test, the pilot's own nuisance parameter; simulation on the grid for tokens). The sequential "
        "design takes the fewest tasks at most that give it the same power; its expected tasks under the null and "
        "under the planned effect follow from the chance of stopping at each look (normal theory: the recursion of "
        "`analysis_lib.stats.group_sequential`). Spend is tasks × both profiles × the repetitions × the pilot's cost per "
        "run (median; p90 for the maximum, a budget with margin). With `stop: all` a study runs until every primary "
        "hypothesis is decided: its size is that of its slowest row.",
        "",
    ]
    out += [planning_table(rows)] if len(rows) else ["No primary metric of the plan has a planner."]
    if skipped:
        out += ["", "Not planned here: " + "; ".join(skipped) + "."]
    return out


def _fixed_design(trials: pd.DataFrame, a: str, b: str, spec, plan: AnalysisPlan, alpha: float
                  ) -> tuple[str, int, float] | str:
    """The fixed design of one primary metric: (analysis, tasks for 80 % power, its power), or why there is none."""
    if spec.id == "success":
        pilot = power.pilot_of(trials, a, b)
        if pilot.n_tasks < 2:
            return "fewer than 2 paired tasks in the pilot"
        majority = spec.test == "mcnemar_exact" or plan.pairing.repetitions == "majority"
        label = "majority: McNemar exact" if majority else "all repetitions: paired t"
        r = power.sensitivity(pilot, PLAN_SUCCESS_LIFT, alpha=alpha)
        r = r[(r["analysis"] == label) & r["nuisance"].str.endswith("(pilot)")].iloc[0]
        if pd.isna(r["n_tasks"]):
            return "more than 5,000 tasks, or the lift is impossible from the pilot's baseline"
        name = f"success: {spec.test}" + (" (power of the paired t)" if not majority and spec.test != "paired_t" else "")
        return name, int(r["n_tasks"]), float(r["power_at_n"])
    if spec.id == "total_tokens" and spec.test == "wilcoxon_signed_rank":
        pilot = stats.pair_tasks(trials, "total_tokens", a, b)
        try:
            sim = stats.plan_sample_size(pilot, effect=PLAN_TOKEN_REDUCTION, kind="continuous", n_sim=PLAN_N_SIM,
                                         alpha=alpha, seed=plan.bootstrap.seed)
        except ValueError as exc:
            return str(exc)
        need = sim["n_required"].iloc[0]
        if pd.isna(need):
            return f"more than {int(sim['n_tasks'].max())} tasks"
        pw = float(sim.loc[sim["n_tasks"] == need, "power"].iloc[0])
        return f"total_tokens: {spec.test} (power by simulation)", int(need), min(pw, 1 - 1 / (2 * PLAN_N_SIM))
    return "the planner covers success and tokens only"


def comparison_report(st: Study, study: Analysis, *, plan_next: bool = False) -> str:
    """The reviewer's Markdown report of ``study``'s analysis: where the data came from, the design audit, profile
    rates, the plan's tiers, the McNemar details, planning, methods."""
    # The token policy: trials whose token counts are not trusted count in no token or cost figure here either.
    metrics, check, audit, simulated, source = st.trusted_metrics, st.plan_check, st.audit, st.simulated, st.source
    if check is None:
        raise PlanError("the study carries no analysis plan")
    plan, comp = study.plan, study.comparisons
    conf = plan.bootstrap.confidence
    parts: list[str] = []
    banner = data_banner(simulated, source.model_dump() if hasattr(source, "model_dump") else source)
    if banner:
        parts += [f"> **{banner.split(':', 1)[0]}.**{banner.split(':', 1)[1]}", ""]
    parts += check.banner() + [check.hash_line(), "", check.timing_line(), ""]
    if audit is not None:
        parts += audit_markdown(*audit_frames(audit))
        if audit.configurations is not None and st.design is not None:
            parts += configuration_audit_markdown(audit.configurations, str(st.design.baseline), str(st.design.treatment_arm))
    n_prof = metrics["profile"].nunique()
    parts += [
        "# Profile comparisons",
        "",
        f"{fmt.plural(n_prof, 'profile')}, {fmt.plural(len(study.pairs), 'pair')} compared "
        f"(B against baseline A). Every number below comes from `comparisons.csv` and `profile_rates.csv`.",
        "",
        "## Profiles",
        "",
        rates_table(study.rates, conf, mean_reward=partial_credit(usable_trials(metrics), plan.partial().metric)),
        "",
    ]
    if comp.empty:
        parts += ["No profile pair to compare (fewer than two profiles).", ""]
    for tier in ("primary", PARTIAL_TIER, "secondary", "exploratory", "sensitivity"):
        if not (comp["tier"] == tier).any():
            continue
        correction = "none" if tier == PARTIAL_TIER else getattr(plan.tiers, tier).correction
        title = tier_title(tier, correction, plan.claim, preregistered(check))
        parts += [f"## {title}", "", tier_table(comp, tier, conf), ""]
        if tier == "primary":
            parts += mcnemar_lines(comp, conf) + [""] + collinearity_lines(study.correlations)
        if tier == "primary" and study.hypotheses is not None:
            parts += [
                f"## Fixed-sequence hypotheses (as declared, in order; {family_role(plan, 'hypotheses')})",
                "",
                "Each step is tested only if every step before it held (gatekeeping), which keeps the "
                "family-wise error at alpha; each profile pair runs its own sequence at alpha / (number of pairs) "
                "(Bonferroni), so these intervals are wider than the comparisons' above. Non-inferiority: the worse end of the interval lies within the margin "
                "(one-sided at alpha / 2); superiority: the interval excludes 0 on the better side; equivalence: "
                "the 1 − 2 alpha interval lies inside the margins (TOST).",
                "",
                hypotheses_table(study.hypotheses),
                "",
            ]
    if study.pooling is not None:
        parts += pooling_markdown(comp, pooling_tables(study.pooling, simulated), conf)
    few = comp.loc[comp["n_pairs"] > 0, "n_pairs"]
    if len(few) and few.min() < FEW_PAIRS:
        parts += [
            f"**Only {fmt.plural(int(few.min()), 'paired task')} in some comparison:** with fewer than "
            f"{FEW_PAIRS} pairs the intervals matter more than the p-values.",
            "",
        ]
    if study.beside is not None and study.pairs:
        parts += beside_markdown(study.beside, conf)
    parts += _repetitions_section(study, conf)
    if study.subgroups is not None and not study.subgroups.empty:
        parts += [
            "## Subgroups (descriptive: no per-group tests)",
            "",
            "pass@1 difference per group of tasks, raw and partially pooled (empirical Bayes: each group pulled "
            "towards the overall effect by SE² / (SE² + tau²), tau² by DerSimonian-Laird). Groups with few tasks "
            "are mostly noise; read the pooled column, and test no group on its own.",
            "",
            subgroups_table(study.subgroups),
            "",
        ]
    trials = usable_trials(metrics)
    if study.pairs:
        parts += _planning_section(trials, study.pairs, plan, power_analysis=plan_next, seed=plan.bootstrap.seed) + [""]
        if plan.sequential is not None:
            parts += _sequential_planning_section(trials, study.pairs, plan) + [""]
    parts += ["## Methods", ""] + methods_lines(plan) + [""]
    return "\n".join(parts)
