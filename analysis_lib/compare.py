"""Profile comparisons: ``comparisons.csv`` and ``comparison_report.md`` from the metrics table.

``run_comparisons`` compares profile B against baseline A on the tasks both ran, one row per
metric and profile pair (see :mod:`analysis_lib.stats` for the conventions: differences are
B - A, tasks are the unit, repetitions are aggregated first). Primary metrics (``success``,
``total_tokens``, ``total_cost_usd``) are Holm-adjusted as one family per profile pair; the
secondary metrics as a second family, so that ``p_holm`` and ``significant`` mean the same
thing in every row.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from . import stats
from .fileio import atomic_write_csv, atomic_write_text
from .report.markdown import table as _md_table

PRIMARY_METRICS = ("success", "total_tokens", "total_cost_usd")
SECONDARY_METRICS = ("elapsed_sec", "tool_calls_count", "exploration_breadth")
COLUMNS = [
    "metric", "test", "profile_a", "profile_b", "n_pairs", "a_value", "b_value", "difference",
    "relative_change_pct", "statistic", "p_value", "p_holm", "ci_low", "ci_high", "ci_of",
    "effect_size", "effect_size_name", "significant",
]
ALPHA = 0.05
# Below this many paired tasks, a p-value says little; the report says so.
FEW_PAIRS = 10

# The planning section: effects worth detecting, and its Monte-Carlo size (power SE <= 2.5 points).
PLAN_TOKEN_REDUCTION = 0.20
PLAN_SUCCESS_LIFT = 0.10
PLAN_N_SIM = 400
PLAN_REPETITIONS_DEFAULT = 3
PLAN_SPEND_TASKS = 100

CI_OF_SUCCESS = "difference in resolve rate (B-A)"
CI_OF_CONTINUOUS = "median paired difference (B-A)"
TEST_MCNEMAR = "McNemar exact (binomial, two-sided)"
EFFECT_SUCCESS = "Cohen's h (B-A)"
EFFECT_CONTINUOUS = "matched-pairs rank-biserial r (B-A)"


def _is_true(values: pd.Series) -> np.ndarray:
    return (stats.as_outcome(values.to_numpy()) == 1.0).to_numpy()


def usable_trials(metrics: pd.DataFrame) -> pd.DataFrame:
    """Trials that count: infra errors (``infra_error`` true) are not agent attempts and are left out."""
    if "infra_error" in metrics.columns:
        return metrics[~_is_true(metrics["infra_error"])]
    return metrics


def profile_pairs(profiles: Sequence[str], *, compare: tuple[str, str] | None = None, baseline: str | None = None) -> list[tuple[str, str]]:
    """The (A, B) pairs to compare: ``compare`` alone, or every other profile against ``baseline``.

    The baseline defaults to the first profile in sort order. Raises ValueError naming a profile
    that is not in the data.
    """
    names = sorted(set(map(str, profiles)))
    if compare is not None:
        a, b = map(str, compare)
        for p in (a, b):
            if p not in names:
                raise ValueError(f"--compare: profile {p!r} not found; profiles are {names}")
        if a == b:
            raise ValueError(f"--compare needs two different profiles, got {a!r} twice")
        return [(a, b)]
    if not names:
        return []
    base = names[0] if baseline is None else str(baseline)
    if base not in names:
        raise ValueError(f"baseline profile {base!r} not found; profiles are {names}")
    return [(base, p) for p in names if p != base]


def _relative(a: float, b: float) -> float:
    return 100.0 * (b - a) / a if a and np.isfinite(a) and np.isfinite(b) else np.nan


def _success_row(trials: pd.DataFrame, a: str, b: str, *, seed: int, n_boot: int) -> tuple[dict, dict]:
    pairs = stats.pair_tasks(trials, "success", a, b, binary=True)
    row = {"metric": "success", "test": TEST_MCNEMAR, "n_pairs": len(pairs), "ci_of": CI_OF_SUCCESS,
           "effect_size_name": EFFECT_SUCCESS}
    extra = {"pairs": pairs, "table": None, "typical_change": (np.nan, np.nan, np.nan)}
    if len(pairs) == 0:
        return row, extra
    ra, rb = float(pairs["a"].mean()), float(pairs["b"].mean())
    table = stats.mcnemar_table(pairs["a"] > 0.5, pairs["b"] > 0.5)
    test = stats.mcnemar_from_table(table.to_numpy(), exact=True).iloc[0]
    boot = stats.bootstrap_paired(pairs["a"], pairs["b"], statistics=("mean_diff",), n_boot=n_boot, seed=seed).iloc[0]
    row.update(a_value=ra, b_value=rb, difference=rb - ra, relative_change_pct=_relative(ra, rb),
               statistic=float(test["statistic"]), p_value=float(test["p_val"]), ci_low=boot["ci_low"],
               ci_high=boot["ci_high"], effect_size=float(stats.cohens_h(ra, rb)))
    extra["table"] = table
    return row, extra


def _continuous_row(trials: pd.DataFrame, metric: str, a: str, b: str, *, seed: int, n_boot: int) -> tuple[dict, dict]:
    pairs = stats.pair_tasks(trials, metric, a, b, binary=False)
    row = {"metric": metric, "test": "Wilcoxon signed-rank", "n_pairs": len(pairs), "ci_of": CI_OF_CONTINUOUS,
           "effect_size_name": EFFECT_CONTINUOUS}
    extra = {"pairs": pairs, "typical_change": (np.nan, np.nan, np.nan), "wilcoxon": None}
    if len(pairs) == 0:
        return row, extra
    # wilcoxon(x=b, y=a): d = B - A, so V sums the ranks of tasks where B is larger.
    w = stats.wilcoxon(pairs["b"], pairs["a"]).iloc[0]
    boot = stats.bootstrap_paired(pairs["a"], pairs["b"], statistics=("median_diff", "median_ratio_pct"),
                                  n_boot=n_boot, seed=seed).set_index("statistic")
    va, vb = float(pairs["a"].median()), float(pairs["b"].median())
    row.update(test=f"Wilcoxon signed-rank ({w['method']})", a_value=va, b_value=vb,
               difference=float(boot.loc["median_diff", "estimate"]), relative_change_pct=_relative(va, vb),
               statistic=float(w["V"]), p_value=float(w["p_val"]), ci_low=float(boot.loc["median_diff", "ci_low"]),
               ci_high=float(boot.loc["median_diff", "ci_high"]), effect_size=float(w["RBC"]))
    r = boot.loc["median_ratio_pct"]
    extra["typical_change"] = (float(r["estimate"]), float(r["ci_low"]), float(r["ci_high"]))
    extra["wilcoxon"] = w
    return row, extra


def compare_profiles(metrics: pd.DataFrame, a: str, b: str, *, seed: int = 0, n_boot: int = 10_000) -> tuple[pd.DataFrame, dict]:
    """All metric rows for one profile pair (B against baseline A), Holm-adjusted per family.

    Returns the rows (``COLUMNS``) and, per metric, the details the report shows (pairs, the
    McNemar table, the relative-change interval). Metrics absent from ``metrics`` are skipped.
    """
    trials = usable_trials(metrics)
    rows, details = [], {}
    for metric in PRIMARY_METRICS + SECONDARY_METRICS:
        if metric not in trials.columns:
            continue
        if metric == "success":
            row, extra = _success_row(trials, a, b, seed=seed, n_boot=n_boot)
        else:
            row, extra = _continuous_row(trials, metric, a, b, seed=seed, n_boot=n_boot)
        row.update(profile_a=a, profile_b=b)
        rows.append(row)
        details[metric] = extra
    out = pd.DataFrame(rows, columns=COLUMNS)
    for family in (PRIMARY_METRICS, SECONDARY_METRICS):
        mask = out["metric"].isin(family).to_numpy()
        out.loc[mask, "p_holm"] = stats.holm(out.loc[mask, "p_value"].to_numpy(float))
    out["significant"] = (out["p_holm"].astype(float) < ALPHA).astype(bool)
    out["n_pairs"] = out["n_pairs"].astype(int)
    return out, details


def run_comparisons(
    metrics: pd.DataFrame,
    out_dir: str | Path,
    *,
    compare: tuple[str, str] | None = None,
    baseline: str | None = None,
    seed: int = 0,
    n_boot: int = 10_000,
    simulated: bool = False,
    plan_check=None,
) -> pd.DataFrame:
    """Compare profiles and write ``comparisons.csv`` and ``comparison_report.md`` into ``out_dir``.

    ``metrics`` is the metrics_detail frame (one row per trial). Without ``compare``, every
    profile is compared against ``baseline`` (default: the first profile in sort order). Infra
    errors are left out and counted in the report. Returns the comparisons frame (``COLUMNS``).
    ``plan_check`` (:class:`analysis_lib.plan.PlanCheck`, default: the default plan, unrecorded) puts
    the plan hash (and a plan-change banner) into the report and ``analysis_plan.json`` beside the CSV.
    """
    for col in ("profile", "task_id"):
        if col not in metrics.columns:
            raise ValueError(f"the metrics frame has no {col!r} column")
    pairs = profile_pairs(metrics["profile"].dropna().astype(str).unique(), compare=compare, baseline=baseline)
    frames, details = [], {}
    for a, b in pairs:
        rows, extra = compare_profiles(metrics, a, b, seed=seed, n_boot=n_boot)
        frames.append(rows)
        details[(a, b)] = extra
    result = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    result = result[COLUMNS]
    out = Path(out_dir)
    atomic_write_csv(out / "comparisons.csv", result)
    check = plan_check if plan_check is not None else _default_plan_check()
    head: list[str] = []
    if check is not None:
        from .plan import write_sidecar

        head = check.banner() + [check.hash_line() + " The families below are this report's fixed ones; "
                                 "the plan's tiers are reported by `python -m analysis_lib results`.", ""]
        write_sidecar(out, check)
    text = comparison_report(metrics, result, details, seed=seed, n_boot=n_boot, simulated=simulated, plan_lines=head)
    atomic_write_text(out / "comparison_report.md", text)
    return result


def _default_plan_check():
    """The default plan's hash without a runs folder to compare with (None when it cannot be read)."""
    from .plan import PlanCheck, PlanError, load_plan, plan_hash

    try:
        plan = load_plan()
    except PlanError:
        return None
    return PlanCheck(plan, plan_hash(plan), "params/analysis_plan.yaml")


# --------------------------------------------------------------------------- report


def _num(x, digits: int = 3) -> str:
    """One rounding rule for the whole report: ``digits`` significant figures, thousands kept whole."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)) or pd.isna(x):
        return "–"
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}" if abs(x) >= 1e-3 else f"{x:.2e}"


def _p(p) -> str:
    if p is None or pd.isna(p):
        return "–"
    s = f"{p:.2e}" if p < 1e-4 else f"{p:.4f}"
    return s + (" *" if p < ALPHA else "")


def _pct(x) -> str:
    return "–" if x is None or pd.isna(x) else f"{x:+.1f} %"


def _profile_summary(metrics: pd.DataFrame) -> str:
    trials = usable_trials(metrics)
    rows = []
    for profile in sorted(metrics["profile"].dropna().astype(str).unique()):
        all_p = metrics[metrics["profile"].astype(str) == profile]
        use = trials[trials["profile"].astype(str) == profile]
        n_infra = len(all_p) - len(use)
        agg = stats.aggregate_repetitions(use, "success", binary=True) if "success" in use.columns else pd.DataFrame()
        n_missing = int(stats.as_outcome(use["success"].to_numpy()).isna().sum()) if "success" in use.columns else 0
        if len(agg):
            w = stats.wilson_ci(int(agg["value"].sum()), len(agg)).iloc[0]
            outcomes = stats.as_outcome(use["success"].to_numpy()).dropna()
            k = int(agg["n_reps"].max())
            pk = stats.pass_at_k(use, k).iloc[0] if k >= 1 else None
            rows.append([profile, str(len(all_p)), str(n_infra), str(n_missing), str(len(agg)), str(int(agg["tie"].sum())),
                         _num(w["proportion"]), f"[{_num(w['ci_low'])}, {_num(w['ci_high'])}]",
                         _num(outcomes.mean()), str(k), _num(pk["pass_at_k"]), _num(pk["pass_hat_k"])])
        else:
            rows.append([profile, str(len(all_p)), str(n_infra), str(n_missing), "0", "0"] + ["–"] * 6)
    header = ["profile", "trials", "infra errors (excluded)", "outcome missing", "tasks", "majority-vote ties (= fail)",
              "resolve rate (majority vote)", "Wilson 95 % CI", "trial pass rate", "k", "pass@k", "pass^k"]
    return _md_table(header, rows)


def _pair_section(a: str, b: str, rows: pd.DataFrame, details: dict, trials: pd.DataFrame) -> str:
    out = [f"## {b} vs {a} (B = {b}, A = {a})", ""]
    n_min = int(rows["n_pairs"].min()) if len(rows) else 0
    table = []
    for r in rows.itertuples(index=False):
        family = "primary" if r.metric in PRIMARY_METRICS else "secondary"
        est, lo, hi = details.get(r.metric, {}).get("typical_change", (np.nan, np.nan, np.nan))
        table.append([
            f"`{r.metric}`", family, r.test, str(r.n_pairs), _num(r.a_value), _num(r.b_value), _num(r.difference),
            f"[{_num(r.ci_low)}, {_num(r.ci_high)}]", _pct(r.relative_change_pct),
            "–" if pd.isna(est) else f"{_pct(est)} [{_pct(lo)}, {_pct(hi)}]",
            _num(r.statistic), _p(r.p_value), _p(r.p_holm), _num(r.effect_size), r.effect_size_name,
        ])
    out.append(_md_table(
        ["metric", "family", "test", "pairs", "A", "B", "difference (B-A)", "95 % CI of difference", "relative change (of medians)",
         "typical per-task change [95 % CI]", "statistic", "p", "p (Holm)", "effect size", "effect size is"], table))
    out.append("")
    out.append("For `success`, A and B are resolve rates of the per-task majority votes and the difference is their "
               "difference; for the other metrics A and B are medians over tasks of the per-task medians, and the "
               "difference is the median of the per-task differences B - A (so it need not equal B minus A). "
               "Relative change is 100 * (B - A) / A of those two values; the typical per-task change is "
               "100 * (median over tasks of B/A - 1), whose paired interval is the one to quote for a relative "
               "reduction (\u2013 where some task has A = 0).")
    if n_min < FEW_PAIRS:
        out += ["", f"**Only {n_min} paired tasks:** with fewer than {FEW_PAIRS} pairs, the effect sizes and "
                "intervals matter more than the p-values, which can hardly reach significance."]
    succ = details.get("success", {})
    if succ.get("table") is not None:
        t = succ["table"]
        out += ["", "McNemar table (tasks, per-task majority votes):", "",
                _md_table(["", "B pass", "B fail"], [[i, str(t.loc[i, "B pass"]), str(t.loc[i, "B fail"])] for i in t.index])]
        ties = int(succ["pairs"]["tie_a"].sum() + succ["pairs"]["tie_b"].sum())
        if ties:
            out += ["", f"{ties} per-task majority votes were ties (as many passes as fails) and count as fail."]
    # Trial-level blocked pairs: same task and repetition; SE clustered by task.
    block = []
    for metric in rows["metric"]:
        try:
            tp = stats.pair_trials(trials, metric, a, b)
        except ValueError as exc:
            out += ["", f"Trial-level pairs not formed: {exc}."]
            block = []
            break
        if len(tp) == 0:
            continue
        c = stats.clustered_mean_difference(tp).iloc[0]
        block.append([f"`{metric}`", str(int(c["n_trials"])), str(int(c["n_clusters"])), _num(c["mean_diff"]),
                      _num(c["se_cluster"]), f"[{_num(c['ci_low'])}, {_num(c['ci_high'])}]", _num(c["design_effect"])])
    if block:
        out += ["", "Trial-level blocked pairs (same task and repetition), mean difference B - A with task-clustered "
                "standard errors (CR1; t interval with tasks - 1 df):", "",
                _md_table(["metric", "trial pairs", "tasks", "mean difference", "clustered SE", "95 % CI",
                           "design effect"], block)]
    return "\n".join(out)


def _planning_section(trials: pd.DataFrame, pairs: list[tuple[str, str]], *, seed: int) -> str:
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
            need = plan["n_required"].iloc[0]
            top = plan.iloc[-1]
            rows.append([f"{b} vs {a}", label, str(len(pilot)),
                         f"{int(need)}" if pd.notna(need) else f"> {int(top['n_tasks'])} (power {_num(top['power'])} there)",
                         ", ".join(f"{int(r.n_tasks)}: {r.power:.2f}" for r in plan.itertuples() if r.n_tasks in (20, 50, 100))])
    out.append(_md_table(["pair", "effect to detect", "pilot tasks", "tasks for 80 % power (alpha 0.05)", "power at 20 / 50 / 100 tasks"], rows))
    out += ["", f"Power by simulation ({PLAN_N_SIM} studies per size, seed {seed}) resampling the pilot's tasks with the "
            "tests used above: for tokens the pilot's task-to-task variation with its own effect removed and the target "
            "reduction imposed; for success the pilot's baseline rate and loss rate with the gain rate that gives the lift."]
    reps = int(trials.groupby(["profile", "task_id"]).size().median()) if len(trials) else PLAN_REPETITIONS_DEFAULT
    cols = [m for m in ("total_cost_usd", "total_tokens", "elapsed_sec") if m in trials.columns]
    if cols:
        spend = stats.project_spend(trials, n_tasks=PLAN_SPEND_TASKS, repetitions=reps, metrics=cols)
        srows = [[r.profile, f"`{r.metric}`", str(r.n_pilot_runs), _num(r.per_run_median), _num(r.per_run_p90),
                  str(r.n_runs), _num(r.projected_median), _num(r.projected_p90)] for r in spend.itertuples()]
        out += ["", f"Projected spend of a run of {PLAN_SPEND_TASKS} tasks x {reps} repetitions per profile "
                "(pilot median and p90 per run, times the runs; the p90 line is a budget with margin):", "",
                _md_table(["profile", "metric", "pilot runs", "median per run", "p90 per run", "runs", "projected (median)",
                           "projected (p90)"], srows)]
    return "\n".join(out)


def comparison_report(metrics: pd.DataFrame, comparisons: pd.DataFrame, details: dict, *, seed: int, n_boot: int,
                      simulated: bool = False, plan_lines: Sequence[str] = ()) -> str:
    """The reviewer's Markdown report: data summary, per-pair tables, and the methods used.

    ``plan_lines`` (the analysis plan's banner and hash, :class:`analysis_lib.plan.PlanCheck`) follow
    the simulated-data banner, so that a plan change shows in the first lines.
    """
    parts = []
    if simulated:
        parts += ["> **SIMULATED DATA.** These runs were generated by the seeded simulator; every number below "
                  "describes simulated agents and is not a finding.", ""]
    parts += list(plan_lines)
    parts += ["# Profile comparisons", "",
              f"Bootstrap: {n_boot} resamples of tasks, seed {seed}, percentile intervals. "
              "Significance: `*` marks p < 0.05; `significant` in comparisons.csv means p (Holm) < 0.05.", ""]
    parts += ["## Profiles", "", _profile_summary(metrics), "",
              "Resolve-rate intervals are Wilson score intervals over tasks. pass@k (at least one of k repetitions "
              "passes) and pass^k (all k pass) use every repetition (Chen et al. 2021; Yao et al. 2024).", ""]
    if comparisons.empty:
        parts += ["No profile pair to compare (fewer than two profiles).", ""]
    trials = usable_trials(metrics)
    for (a, b), extra in details.items():
        rows = comparisons[(comparisons["profile_a"] == a) & (comparisons["profile_b"] == b)]
        parts += [_pair_section(a, b, rows, extra, trials), ""]
    if details:
        parts += [_planning_section(trials, list(details), seed=seed), ""]
    parts += ["## Methods", "",
              "- Unit of analysis: the task. Repetitions are aggregated per task first (majority vote for `success`, "
              "a tie counts as fail; median for continuous metrics), then A and B are paired on the tasks both ran. "
              "Infra-error trials are excluded; trials without an outcome are excluded from `success`.",
              "- Differences are B - A; relative change is 100 * (B - A) / A (negative = B lower).",
              "- `success`: McNemar's exact test (two-sided binomial test on the discordant tasks; statistic = "
              "min of the two discordant counts); interval: paired bootstrap of the difference in resolve rate; "
              "effect size: Cohen's h = 2 asin(sqrt(B)) - 2 asin(sqrt(A)).",
              "- Continuous metrics: Wilcoxon signed-rank test on the per-task differences; zero differences are "
              "dropped (as R's wilcox.test does, so that every p-value can be reproduced there); exact null "
              "distribution when at most 50 non-zero differences without ties, otherwise the normal approximation "
              "with tie-corrected variance and a 0.5 continuity correction. Statistic V = sum of the ranks where "
              "B > A. Effect size: matched-pairs rank-biserial r = (T+ - T-) / (T+ + T-) (Kerby 2014), "
              "negative when B tends to be lower.",
              f"- Intervals: percentile bootstrap, {n_boot} resamples of tasks (pairs kept together), seed {seed}.",
              "- Multiplicity: Holm's step-down correction within each profile pair, separately over the primary "
              "family (`success`, `total_tokens`, `total_cost_usd`) and the secondary family (`elapsed_sec`, "
              "`tool_calls_count`, `exploration_breadth`).", ""]
    return "\n".join(parts)
