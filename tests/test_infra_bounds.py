"""Infrastructure failures as bounds: the affected trials imputed both ways, the planned test rerun by the engine."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from analysis_lib import stats
from analysis_lib.inference.beside_itt import bounds as IB
from analysis_lib.inference.comparisons import compare
from analysis_lib.simulate.imperfect import Imperfections, simulate_imperfect
from analysis_lib.study import plan as P


def _plan(metrics: list[dict] | None = None, support: dict | None = None, repetitions: str = "majority"
          ) -> P.AnalysisPlan:
    d = P.load_plan().model_dump(mode="json")
    d["bootstrap"]["n_resamples"] = 200
    d["pairing"]["repetitions"] = repetitions
    d["pairing"].pop("binary_aggregate", None)
    d["pairing"].pop("continuous_aggregate", None)
    if metrics is not None:
        d["tiers"]["primary"]["metrics"] = metrics
    if support is not None:
        d["beside_itt"] = {"support": support}
    return P.parse_plan(d)


def _study(outcomes: dict[str, tuple[list, list]]) -> pd.DataFrame:
    """One repetition per task; ``None`` is an infrastructure error."""
    rows = []
    for task, (a, b) in outcomes.items():
        for prof, v in (("A", a), ("B", b)):
            rows.append({"profile": prof, "task_id": task, "repetition": 1, "success": v, "infra_error": v is None,
                         "exception": "DaytonaError: sandbox lost" if v is None else None,
                         "total_tokens": 1000.0, "total_cost_usd": 0.01})
    return pd.DataFrame(rows)


def test_pass_fail_bounds_by_hand():
    # 10 tasks: 4 pass in both, 2 fail in both, 2 pass only in B, 1 only in A; one task lost in B.
    spec = {f"t{i}": (True, True) for i in range(4)} | {f"f{i}": (False, False) for i in range(2)}
    spec |= {"b1": (False, True), "b2": (False, True), "a1": (True, False), "lost": (True, None)}
    m = _study(spec)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    comp = compare(m, plan, [("A", "B")])
    b = IB.infra_bounds(m, comp, plan).iloc[0]
    # Planned: 9 paired tasks, B wins 2, A wins 1 -> +1/9. Lower: the lost B trial fails (A passed) -> (2 - 2)/10 = 0.
    # Upper: it passes -> (2 - 1)/10 = +0.1.
    assert b["estimate"] == pytest.approx(1 / 9) and b["n_pairs"] == 9
    assert b["bound_low"] == pytest.approx(0.0) and b["bound_high"] == pytest.approx(0.1)
    assert b["n_pairs_imputed"] == 10 and (b["n_affected_a"], b["n_affected_b"]) == (0, 1)
    assert b["reasons_b"] == "infrastructure error: DaytonaError ×1" and b["worst_case"] == "low"
    # Each bound carries the engine's own interval (Tango) for the imputed data.
    tango = stats.tango_interval(2, 2, 10).iloc[0]
    assert (b["bound_low_ci_low"], b["bound_low_ci_high"]) == pytest.approx((tango["ci_low"], tango["ci_high"]))


def test_a_note_when_the_bounds_include_zero_while_the_planned_interval_excludes_it():
    spec = {f"w{i}": (False, True) for i in range(12)} | {f"s{i}": (True, True) for i in range(4)}
    spec |= {f"x{i}": (True, None) for i in range(12)}  # twelve B trials lost, all on tasks A passed
    m = _study(spec)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    assert b["ci_low"] > 0 and b["bound_low"] <= 0 <= b["bound_high"]
    assert "depends on the trials lost" in b["note"]


def _tokens_study(a_tokens, ratios, reps: int = 1, seed: int = 0) -> pd.DataFrame:
    """Every task passes in both arms; B's tokens are A's times the task's ratio, with a little repetition noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, (x, r) in enumerate(zip(a_tokens, ratios, strict=True)):
        for rep in range(1, reps + 1):
            for prof, v in (("A", x), ("B", x * r)):
                rows.append({"profile": prof, "task_id": f"t{i}", "repetition": rep, "success": True, "infra_error": False,
                             "exception": None, "total_tokens": float(np.rint(v * np.exp(rng.normal(0, 0.05)))),
                             "total_cost_usd": 0.01})
    return pd.DataFrame(rows)


def _lose(m: pd.DataFrame, profile: str, task: str, rep: int = 1) -> pd.DataFrame:
    out = m.copy()
    at = (out["profile"] == profile) & (out["task_id"] == task) & (out["repetition"] == rep)
    out.loc[at, ["total_tokens", "infra_error", "exception"]] = [np.nan, True, "DaytonaError: sandbox lost"]
    return out


# Eight tasks, one repetition; the last task is 40 times larger than the others and its B trial is lost.
FORTY_X = ([100_000, 120_000, 90_000, 110_000, 95_000, 105_000, 115_000, 4_000_000],
           [1.30, 1.05, 1.12, 0.97, 1.18, 1.09, 1.25, 1.16])
TOKENS = [{"id": "total_tokens", "test": "wilcoxon_signed_rank"}]


def test_bounds_contain_the_full_data_estimate_when_a_task_forty_times_larger_loses_its_b_trial():
    full = _tokens_study(*FORTY_X)
    m = _lose(full, "B", "t7")
    for support in ({"total_tokens": {"high": 10_000_000}}, {"total_tokens": {"high_times_task_max": 3}}):
        plan = _plan(TOKENS, support)
        b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
        truth = compare(full, plan, [("A", "B")]).iloc[0]["estimate"]
        # Imputing B at its pooled observed extremes put both bounds at one value (+10.3 %) below the planned
        # (+12.9 %) and the full-data (+13.7 %) estimates; at the task's own support they hold the full data.
        assert b["bound_low"] < b["estimate"] < b["bound_high"] and b["bound_low"] <= truth <= b["bound_high"]
        assert b["bound_high"] > b["bound_low"] + 5 and b["support"].startswith("total_tokens in [0, ")
    plan = _plan(TOKENS)
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    assert np.isnan(b["bound_low"]) and np.isnan(b["bound_high"]) and IB.is_unbounded(b)
    assert b["note"].startswith("unbounded: no support declared for total_tokens (beside_itt.support)")
    assert (b["n_affected_a"], b["n_affected_b"]) == (0, 1)  # what was lost is still counted


def test_continuous_bounds_impute_the_support_ends_of_each_task():
    m = _lose(_lose(_tokens_study(*FORTY_X, reps=2, seed=3), "B", "t7", 2), "A", "t2", 1)
    plan = _plan(TOKENS, {"total_tokens": {"low": 1000, "high_times_task_max": 2}})
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    seen = m[~m["infra_error"]].groupby("task_id")["total_tokens"].max()
    lost_b = m.index[(m["profile"] == "B") & m["infra_error"]]
    lost_a = m.index[(m["profile"] == "A") & m["infra_error"]]
    for side, (va, vb) in (("bound_low", (2 * seen["t2"], 1000)), ("bound_high", (1000, 2 * seen["t7"]))):
        imputed = m.copy()
        imputed.loc[lost_a, ["total_tokens", "infra_error"]] = [va, False]
        imputed.loc[lost_b, ["total_tokens", "infra_error"]] = [vb, False]
        ref = compare(imputed, plan, [("A", "B")]).iloc[0]
        assert (b[side], b[f"{side}_ci_low"], b[f"{side}_ci_high"]) == pytest.approx((ref["estimate"], ref["ci_low"],
                                                                                       ref["ci_high"]))
    assert b["bound_low"] <= b["estimate"] <= b["bound_high"] and b["worst_case"] == "high"


def _completions(m: pd.DataFrame, metric: str, values_per_trial: list[list]) -> list[pd.DataFrame]:
    lost = list(m.index[m["infra_error"].astype(bool)])
    out = []
    for combo in itertools.product(*values_per_trial):
        c = m.copy()
        col = c[metric].astype(object) if metric == "success" else c[metric].astype(float)
        for i, v in zip(lost, combo, strict=True):
            col[i] = v
        c[metric] = col
        c.loc[lost, "infra_error"] = False
        out.append(c)
    return out


@pytest.mark.slow  # about 400 reruns of the planned test, one per completion of the lost trials: ~15 s
@pytest.mark.parametrize("repetitions", ["majority", "all"])
def test_the_bounds_contain_every_completion_of_the_lost_trials(repetitions):
    """Brute force: every way the lost trials could have come out (pass/fail), and a grid of values within the
    declared support including both ends and 0 (continuous, tasks of different scale), gives an estimate within
    the bounds."""
    # Pass/fail: 6 tasks x 2 repetitions, four trials lost in both arms: all 16 completions.
    rng = np.random.default_rng(11)
    spec = []
    for t in range(6):
        for rep in (1, 2):
            for prof in ("A", "B"):
                spec.append({"profile": prof, "task_id": f"t{t}", "repetition": rep, "success": bool(rng.random() < 0.5),
                             "infra_error": False, "exception": None, "total_tokens": 1000.0, "total_cost_usd": 0.01})
    m = pd.DataFrame(spec).astype({"success": object})
    for prof, task, rep in (("B", "t0", 1), ("B", "t3", 2), ("A", "t3", 1), ("A", "t5", 2)):
        at = (m["profile"] == prof) & (m["task_id"] == task) & (m["repetition"] == rep)
        m.loc[at, ["success", "infra_error", "exception"]] = [None, True, "RuntimeError: lost"]
    test = "mcnemar_exact" if repetitions == "majority" else "paired_t"
    plan = _plan([{"id": "success", "test": test}], repetitions=repetitions)
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    ests = [compare(c, plan, [("A", "B")]).iloc[0]["estimate"] for c in _completions(m, "success", [[True, False]] * 4)]
    assert b["bound_low"] - 1e-12 <= min(ests) and max(ests) <= b["bound_high"] + 1e-12
    assert min(ests) == pytest.approx(b["bound_low"]) and max(ests) == pytest.approx(b["bound_high"])  # attained

    # Tokens: a task 40 times larger loses a B trial, a small task its A trial and another its B trial.
    m = _tokens_study(*FORTY_X, reps=2, seed=5)
    for prof, task, rep in (("B", "t7", 1), ("A", "t1", 2), ("B", "t4", 1)):
        m = _lose(m, prof, task, rep)
    for support in ({"high_times_task_max": 3}, {"high": 20_000_000}):
        plan = _plan(TOKENS, {"total_tokens": support}, repetitions=repetitions)
        b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
        seen = m[~m["infra_error"]].groupby("task_id")["total_tokens"]
        grid = []
        for i in m.index[m["infra_error"]]:
            task = m.at[i, "task_id"]
            top = 3 * seen.max()[task] if "high_times_task_max" in support else support["high"]
            grid.append([0.0, 0.5 * seen.min()[task], float(seen.median()[task]), float(seen.max()[task]), top])
        ests = [compare(c, plan, [("A", "B")]).iloc[0]["estimate"] for c in _completions(m, "total_tokens", grid)]
        assert b["bound_low"] - 1e-9 <= min(ests) and max(ests) <= b["bound_high"] + 1e-9, (support, b["bound_low"],
                                                                                           b["bound_high"], min(ests),
                                                                                           max(ests))


def test_the_bounds_contain_the_full_data_estimate_whatever_the_lost_trials_were():
    # Failures concentrated in B and on failing trials, tokens capped by the runner's per-trial budget (the
    # declared support): the planned estimate moves, the bounds hold the full-data estimate.
    imp = Imperfections(compliance=1.0, infra_rate_a=0.03, infra_rate_b=0.15, infra_selection=1.5, token_cap=400_000)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}, {"id": "total_tokens", "test": "wilcoxon_signed_rank"}],
                 {"total_tokens": {"high": 400_000}})
    for seed in range(6):
        m = simulate_imperfect(seed, 16, 3, imp)
        b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).set_index("metric")
        full = m.assign(success=m["success_full"], total_tokens=m["total_tokens_full"], infra_error=False)
        truth = compare(full, plan, [("A", "B")]).set_index("metric")["estimate"]
        for metric in ("success", "total_tokens"):
            assert b.loc[metric, "bound_low"] - 1e-9 <= truth[metric] <= b.loc[metric, "bound_high"] + 1e-9


def test_a_support_is_declared_per_continuous_metric_and_checked():
    base = P.load_plan().model_dump(mode="json")
    ok = P.parse_plan({**base, "beside_itt": {"support": {"total_tokens": {"high": 2_000_000},
                                                          "elapsed_sec": {"high": 1800},
                                                          "total_cost_usd": {"high_times_task_max": 3}}}})
    assert ok.beside().support["total_cost_usd"].describe("total_cost_usd") == \
        "total_cost_usd in [0, 3 x the task's largest observed value]"
    assert P.plan_hash(P.parse_plan(base)) != P.plan_hash(ok)  # a declared support is part of the plan
    for bad, msg in (({"success": {"high": 1}}, "support.success: a pass/fail metric needs no support"),
                     ({"total_tokens": {"low": 0}}, "give one upper end"),
                     ({"total_tokens": {"high": 5, "high_times_task_max": 2}}, "give one upper end"),
                     ({"total_tokens": {"low": 10, "high": 5}}, r"high \(5\) must be above low \(10\)"),
                     ({"total_tokenz": {"high": 1}}, "unknown metric 'total_tokenz'")):
        with pytest.raises(P.PlanError, match=msg):
            P.parse_plan({**base, "beside_itt": {"support": bad}}, "p.yaml")


def test_trials_that_never_reached_the_model_are_bounded_too():
    spec = {f"t{i}": (True, True) for i in range(5)} | {"rl": (False, False)}
    m = _study(spec)
    m["never_reached_model"] = np.where(m["task_id"] == "rl", "the agent never reached the model: rate limit", None)
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan).iloc[0]
    assert b["estimate"] == 0 and (b["bound_low"], b["bound_high"]) == pytest.approx((-1 / 6, 1 / 6))
    assert b["reasons_a"] == b["reasons_b"] == "never reached the model ×1"


def test_no_affected_trial_gives_the_planned_estimate_as_both_bounds():
    m = _study({f"t{i}": (i % 2 == 0, True) for i in range(6)})
    plan = _plan([{"id": "success", "test": "mcnemar_exact"}])
    b = IB.infra_bounds(m, compare(m, plan, [("A", "B")]), plan)
    assert list(b.columns) == IB.COLUMNS
    assert b.iloc[0]["bound_low"] == b.iloc[0]["bound_high"] == b.iloc[0]["estimate"]
    assert b.iloc[0]["note"] == "no trial lost to an infrastructure failure"


@pytest.mark.slow  # the real slice read, then 50 completions each rerunning the plan: ~10 s
def test_bounds_on_a_real_study_hold_every_completion_within_a_declared_cap(codescalebench):
    """CodeScaleBench's real slice: one task's trial in each arm never reached the model (a usage limit). With the
    per-trial caps declared, tokens and cost are bounded and every completion of the two lost trials on a grid within
    the caps (0, the smallest, median and largest value the study saw, the cap) gives an estimate inside the bounds;
    a multiple of the task's largest value cannot be set on a task with no value seen, and the row says so."""
    from pathlib import Path

    from analysis_lib.study.study import open_study

    caps = {"total_tokens": 5_000_000, "total_cost_usd": 10.0}
    plan = _plan(support={k: {"high": v} for k, v in caps.items()})
    study = open_study(codescalebench, Path(__file__).resolve().parents[1] / "params" / "studies" / "codescalebench.yaml",
                       plan, workers=1)
    m, pairs = study.metrics.reset_index(drop=True), [("baseline", "mcp")]
    b = IB.infra_bounds(m, compare(m, plan, pairs), plan).set_index("metric")
    lost = IB.affected_reasons(m).notna().to_numpy()
    assert (b.loc["success", "bound_low"], b.loc["success", "bound_high"]) == pytest.approx((-1 / 8, 1 / 8))
    assert int(lost.sum()) == 2 and b.loc["total_tokens", "support"] == "total_tokens in [0, 5,000,000]"
    for metric, cap in caps.items():
        lo, hi = b.loc[metric, "bound_low"], b.loc[metric, "bound_high"]
        assert lo < b.loc[metric, "estimate"] < hi and np.isfinite([lo, hi]).all()
        seen = pd.to_numeric(m.loc[~lost, metric], errors="coerce").dropna()
        grid = [0.0, float(seen.min()), float(seen.median()), float(seen.max()), cap]
        ests = []
        for combo in itertools.product(grid, repeat=2):
            c = m.copy()
            col = pd.to_numeric(c[metric], errors="coerce").astype(float)
            col[np.flatnonzero(lost)] = combo
            c[metric] = col
            c["never_reached_model"] = None
            got = compare(c, plan, pairs)
            ests.append(got[(got["tier"] == "primary") & (got["metric"] == metric)].iloc[0]["estimate"])
        assert lo - 1e-9 <= min(ests) and max(ests) <= hi + 1e-9, (metric, lo, hi, min(ests), max(ests))
    per_task = _plan(support={"total_tokens": {"high_times_task_max": 3}})
    row = IB.infra_bounds(m, compare(m, per_task, pairs), per_task).set_index("metric").loc["total_tokens"]
    assert IB.is_unbounded(row) and "no value of total_tokens observed on task" in row["note"]

