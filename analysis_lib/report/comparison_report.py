"""``comparisons.csv``, ``profile_rates.csv`` and ``comparison_report.md`` from the one comparison engine.

The tables here and in RESULTS.md are rendered by :func:`tier_table` from the rows of
:func:`analysis_lib.comparisons.compare`, so the two reports cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from .. import stats
from ..comparisons import compare, profile_pairs, usable_trials
from ..fileio import atomic_write_csv, atomic_write_text
from ..plan import AnalysisPlan, PlanCheck, PlanError, load_plan, plan_hash, write_sidecar
from ..rates import profile_rates
from . import numbers as fmt
from .markdown import table as md_table

__all__ = ["Study", "analyse_comparisons", "write_comparisons", "tier_table", "rates_table", "methods_lines"]

CORRECTION_NAMES = {"holm": "Holm", "fdr_bh": "Benjamini-Hochberg", "none": "none"}
# Below this many paired tasks a p-value says little; the report says so.
FEW_PAIRS = 10
# The planning section: effects worth detecting, and its Monte-Carlo size (power SE <= 2.5 points).
PLAN_TOKEN_REDUCTION = 0.20
PLAN_SUCCESS_LIFT = 0.10
PLAN_N_SIM = 400
PLAN_SPEND_TASKS = 100


@dataclass
class Study:
    """What the comparison engine made of one metrics table: the comparisons and the profile rates."""

    comparisons: pd.DataFrame
    rates: pd.DataFrame
    plan: AnalysisPlan
    pairs: list[tuple[str, str]]


def _default_check() -> PlanCheck | None:
    try:
        plan = load_plan()
    except PlanError:
        return None
    return PlanCheck(plan, plan_hash(plan), "params/analysis_plan.yaml")


def analyse_comparisons(metrics: pd.DataFrame, plan: AnalysisPlan, *, compare_pair: tuple[str, str] | None = None,
                        baseline: str | None = None, refused: dict[str, str] | None = None) -> Study:
    """Run the plan over every profile pair and compute the profile rates."""
    for col in ("profile", "task_id"):
        if col not in metrics.columns:
            raise ValueError(f"the metrics frame has no {col!r} column")
    pairs = profile_pairs(metrics["profile"].dropna().astype(str).unique(), compare=compare_pair,
                          baseline=baseline or plan.pairing.baseline)
    boot = plan.bootstrap
    return Study(compare(metrics, plan, pairs, refused=refused),
                 profile_rates(metrics, confidence=boot.confidence, n_boot=boot.n_resamples, seed=boot.seed), plan, pairs)


def write_comparisons(metrics: pd.DataFrame, out_dir: str | Path, *, plan_check: PlanCheck | None = None,
                      compare_pair: tuple[str, str] | None = None, baseline: str | None = None,
                      simulated: bool = False) -> Study:
    """Analyse and write ``comparisons.csv``, ``profile_rates.csv``, ``comparison_report.md`` (and the plan sidecar)."""
    check = plan_check if plan_check is not None else _default_check()
    if check is None:
        raise PlanError("params/analysis_plan.yaml: the analysis plan cannot be read")
    study = analyse_comparisons(metrics, check.plan, compare_pair=compare_pair, baseline=baseline)
    out = Path(out_dir)
    atomic_write_csv(out / "comparisons.csv", study.comparisons)
    atomic_write_csv(out / "profile_rates.csv", study.rates)
    write_sidecar(out, check)
    atomic_write_text(out / "comparison_report.md", comparison_report(metrics, study, check, simulated=simulated))
    return study


# --------------------------------------------------------------------------- shared tables


def rates_table(rates: pd.DataFrame, confidence: float = 0.95) -> str:
    """Per profile: pass rate per trial (task-clustered interval), resolve rate per task, cost per success."""
    c = f"{confidence:.0%}"
    rows = [[r.profile, str(r.n_trials), str(r.n_infra_errors), f"{fmt.value('success', r.pass_rate, rate=True)} "
             f"[{fmt.number(100 * r.pass_rate_low, 1)}, {fmt.number(100 * r.pass_rate_high, 1)}]",
             fmt.number(r.design_effect, 2), f"{r.tasks_resolved}/{r.n_tasks}",
             f"{fmt.value('success', r.resolve_rate, rate=True)} [{fmt.number(100 * r.resolve_rate_low, 1)}, "
             f"{fmt.number(100 * r.resolve_rate_high, 1)}]",
             f"{fmt.number(r.cost_per_success, 3)} [{fmt.number(r.cost_per_success_low, 3)}, "
             f"{fmt.number(r.cost_per_success_high, 3)}]"] for r in rates.itertuples()]
    return md_table(["profile", "trials", "infra errors (excluded)", f"pass rate per trial [{c} CI, task-clustered]",
                     "design effect", "tasks resolved (majority)", f"resolve rate per task [{c} CI]",
                     f"cost per success, USD [{c} CI]"], rows)


def tier_table(comparisons: pd.DataFrame, tier: str, confidence: float = 0.95) -> str:
    """The rows of one tier as a Markdown table (estimate, its interval, the budget view, the test)."""
    sub = comparisons[comparisons["tier"] == tier]
    c = f"{confidence:.0%}"
    rows = []
    for r in sub.itertuples():
        a = fmt.value(r.metric, r.a_value, rate=r.scale == "rate") if r.scale != "cost_per_success" else fmt.number(r.a_value, 3)
        b = fmt.value(r.metric, r.b_value, rate=r.scale == "rate") if r.scale != "cost_per_success" else fmt.number(r.b_value, 3)
        pairs = str(r.n_pairs) + (f" ({r.n_undefined} undefined)" if r.n_undefined else "")
        total = "" if fmt.missing(r.total_change_pct) else \
            f"{fmt.number(r.total_change_pct, 1, sign=True)} % {fmt.interval(r, 'total_change_low', 'total_change_high')}"
        row = [f"{r.label}, `{r.metric}`", f"{r.profile_b} vs {r.profile_a}", pairs, a, b,
               f"{fmt.estimate(r)} {fmt.interval(r)}" if not fmt.missing(r.estimate) else (r.note or "–"), r.interval or "–"]
        if tier == "exploratory":
            row.append(total)
        else:
            sig = "–" if pd.isna(r.significant) else ("**yes**" if bool(r.significant) else "no")
            row += [total, r.test, fmt.p_value(r.p_value), fmt.p_value(r.p_adjusted), sig]
        rows.append(row)
    header = ["metric", "pair", "tasks paired", "A", "B", f"estimate [{c} CI]", "interval"]
    if tier == "exploratory":
        header.append(f"change of the total [{c} CI]")
    else:
        corr = CORRECTION_NAMES[str(sub["correction"].iloc[0])] if len(sub) else "–"
        header += [f"change of the total [{c} CI]", "test", "p", f"p ({corr})", "significant"]
    return md_table(header, rows)


def mcnemar_lines(comparisons: pd.DataFrame, confidence: float = 0.95) -> list[str]:
    """Per pass/fail row: the discordant tasks and the odds ratio with the exact interval that agrees with the test."""
    out = []
    conf_text = f"{confidence:.0%} "
    for r in comparisons[(comparisons["scale"] == "rate") & comparisons["n_a_only"].notna()].itertuples():
        out.append(f"- {r.label}, {r.profile_b} vs {r.profile_a}: of {fmt.plural(r.n_pairs, 'task')}, "
                   f"{fmt.plural(int(r.n_b_only), 'task')} passed only under {r.profile_b} and "
                   f"{fmt.plural(int(r.n_a_only), 'task')} only under {r.profile_a}; discordant-pair odds ratio "
                   f"{fmt.number(r.odds_ratio, 2)}, exact {conf_text}CI [{fmt.number(r.odds_ratio_low, 2)}, {fmt.number(r.odds_ratio_high, 2)}]"
                   f" ({r.test}, {fmt.p_value(r.p_value, prefix=True)}).")
    return out


def methods_lines(plan: AnalysisPlan) -> list[str]:
    """The methods in a few bullets; the same text in every report."""
    boot = plan.bootstrap
    corr = {t: CORRECTION_NAMES[getattr(plan.tiers, t).correction] for t in ("primary", "secondary")}
    return [
        "- Unit of analysis: the task. Repetitions of a task are combined first (majority vote for pass/fail, a "
        "tie counts as fail; median otherwise), then A and B are paired on the tasks both ran. Infrastructure errors "
        "are left out.",
        "- Pass/fail: the estimate is the difference in task-majority resolve rate B − A with Tango's score interval; "
        "the test is McNemar's (exact: two-sided binomial on the discordant tasks; mid-p where the plan says so). The "
        "discordant-pair odds ratio carries the exact (Clopper-Pearson) interval, which excludes 1 exactly when the "
        "exact test rejects; Tango's interval is a score interval and can exclude 0 when the conservative exact test "
        "does not reject.",
        "- Continuous metrics on a ratio scale (tokens, cost, time, calls): per-task log ratios log(B/A); Wilcoxon "
        "signed-rank test on them (exact below 50 pairs without ties, as R's wilcox.test; else normal approximation "
        "with tie and continuity corrections); Hodges-Lehmann estimate with the interval that inverts that test, "
        "shown as 100 (exp(HL) − 1) %, so the interval excludes 0 exactly when p < 0.05. Tasks where A or B is not "
        "positive have no ratio and are counted as undefined. Beside it, the change of the total over the paired "
        f"tasks (sum B / sum A) with a percentile bootstrap over tasks ({boot.n_resamples} resamples, seed {boot.seed}).",
        "- Counts that can be zero (reads, per-tool calls): the same on the differences B − A, in the metric's unit.",
        "- Rates of a profile: pass rate per trial with Wilson's interval at the design-effective size (repetitions "
        "of a task are clustered); resolve rate per task with Wilson's interval over tasks; cost per success = total "
        "cost / total successes with a bootstrap over tasks.",
        f"- Multiplicity: {corr['primary']} over the whole primary tier and {corr['secondary']} over the whole "
        f"secondary tier (every metric and every profile pair); exploratory rows have no test. Alpha {plan.alpha}.",
    ]


# --------------------------------------------------------------------------- the report


def _planning_section(trials: pd.DataFrame, pairs: list[tuple[str, str]], *, seed: int) -> list[str]:
    """Sample size and spend planning with these runs as the pilot (stats.plan_sample_size / project_spend)."""
    out = ["## Planning (these runs as the pilot)", ""]
    rows = []
    for a, b in pairs:
        for metric, kind, effect, label in (
            ("total_tokens", "continuous", PLAN_TOKEN_REDUCTION, f"{PLAN_TOKEN_REDUCTION:.0%} fewer tokens"),
            ("success", "binary", PLAN_SUCCESS_LIFT, f"+{PLAN_SUCCESS_LIFT * 100:.0f} points resolve rate"),
        ):
            if metric not in trials.columns:
                continue
            pilot = stats.pair_tasks(trials, metric, a, b)
            try:
                plan = stats.plan_sample_size(pilot, effect=effect, kind=kind, n_sim=PLAN_N_SIM, seed=seed)
            except ValueError as exc:
                rows.append([f"{b} vs {a}", label, str(len(pilot)), f"not estimable: {exc}", "–"])
                continue
            need, top = plan["n_required"].iloc[0], plan.iloc[-1]
            rows.append([f"{b} vs {a}", label, str(len(pilot)),
                         f"{int(need)}" if pd.notna(need) else f"> {int(top['n_tasks'])} (power {fmt.number(top['power'], 2)} there)",
                         ", ".join(f"{int(r.n_tasks)}: {r.power:.2f}" for r in plan.itertuples() if r.n_tasks in (20, 50, 100))])
    out.append(md_table(["pair", "effect to detect", "pilot tasks", "tasks for 80 % power (alpha 0.05)",
                         "power at 20 / 50 / 100 tasks"], rows))
    out += ["", f"Power by simulation ({PLAN_N_SIM} studies per size, seed {seed}) resampling the pilot's tasks with the "
            "pre-registered tests: for tokens the pilot's task-to-task variation with its own effect removed and the "
            "target reduction imposed; for success the pilot's baseline rate and loss rate with the gain rate that "
            "gives the lift."]
    reps = int(trials.groupby(["profile", "task_id"]).size().median()) if len(trials) else 3
    cols = [m for m in ("total_cost_usd", "total_tokens", "elapsed_sec") if m in trials.columns]
    if cols:
        spend = stats.project_spend(trials, n_tasks=PLAN_SPEND_TASKS, repetitions=reps, metrics=cols)
        srows = [[r.profile, f"`{r.metric}`", str(r.n_pilot_runs), fmt.value(r.metric, r.per_run_median),
                  fmt.value(r.metric, r.per_run_p90), str(r.n_runs), fmt.value(r.metric, r.projected_median),
                  fmt.value(r.metric, r.projected_p90)] for r in spend.itertuples()]
        out += ["", f"Projected spend of a run of {PLAN_SPEND_TASKS} tasks × {fmt.plural(reps, 'repetition')} per "
                "profile (pilot median and p90 per run, times the runs; the p90 line is a budget with margin):", "",
                md_table(["profile", "metric", "pilot runs", "median per run", "p90 per run", "runs",
                          "projected (median)", "projected (p90)"], srows)]
    return out


def comparison_report(metrics: pd.DataFrame, study: Study, check: PlanCheck, *, simulated: bool = False) -> str:
    """The reviewer's Markdown report: profile rates, the plan's tiers, the McNemar details, planning, methods."""
    plan, comp = study.plan, study.comparisons
    conf = plan.bootstrap.confidence
    parts: list[str] = []
    if simulated:
        parts += ["> **SIMULATED DATA.** These runs were generated by the seeded simulator; every number below "
                  "describes simulated agents and is not a finding.", ""]
    parts += check.banner() + [check.hash_line(), "", check.timing_line(), ""]
    n_prof = metrics["profile"].nunique()
    parts += ["# Profile comparisons", "",
              f"{fmt.plural(n_prof, 'profile')}, {fmt.plural(len(study.pairs), 'pair')} compared "
              f"(B against baseline A). Every number below comes from `comparisons.csv` and `profile_rates.csv`.", "",
              "## Profiles", "", rates_table(study.rates, conf), ""]
    if comp.empty:
        parts += ["No profile pair to compare (fewer than two profiles).", ""]
    for tier in ("primary", "secondary", "exploratory"):
        if not (comp["tier"] == tier).any():
            continue
        corr = CORRECTION_NAMES[getattr(plan.tiers, tier).correction]
        title = {"primary": f"Primary metrics (pre-registered tests, {corr} over the tier)",
                 "secondary": f"Secondary metrics (pre-registered tests, {corr} over the tier)",
                 "exploratory": "Exploratory metrics (descriptive: estimates and intervals, no test)"}[tier]
        parts += [f"## {title}", "", tier_table(comp, tier, conf), ""]
        if tier == "primary":
            parts += mcnemar_lines(comp, conf) + [""]
    few = comp.loc[comp["n_pairs"] > 0, "n_pairs"]
    if len(few) and few.min() < FEW_PAIRS:
        parts += [f"**Only {fmt.plural(int(few.min()), 'paired task')} in some comparison:** with fewer than "
                  f"{FEW_PAIRS} pairs the intervals matter more than the p-values.", ""]
    trials = usable_trials(metrics)
    if study.pairs:
        parts += _planning_section(trials, study.pairs, seed=plan.bootstrap.seed) + [""]
    parts += ["## Methods", ""] + methods_lines(plan) + [""]
    return "\n".join(parts)


def quote_lines(comparisons: pd.DataFrame, tiers: Sequence[str] = ("primary",)) -> list[str]:
    """One sentence per comparison of the given tiers: the estimate, its interval and its test."""
    out = []
    for r in comparisons[comparisons["tier"].isin(tiers) & comparisons["estimate"].notna()].itertuples():
        out.append(f"{r.label}, {r.profile_b} vs {r.profile_a}: {fmt.estimate(r)} {fmt.interval(r)} "
                   f"({fmt.p_value(r.p_adjusted, prefix=True).replace('p', 'adjusted p', 1)})")
    return out
