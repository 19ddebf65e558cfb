"""Inference that holds on the sequential design that ran: repeated intervals that agree with their decisions,
adjusted estimates from the actual stop, and final looks forced by the budget at the information they reached.

References sit beside the checks: brute-force enumeration of every sign pattern for the sign-flip inversion,
statsmodels' Clopper-Pearson interval for McNemar's, scipy's paired t on simulated normal studies for the
forced final look, and the simulator's exact population effects (``true_effects``) for median bias and coverage
(``benchmarks/sequential_calibration.py`` runs the full-size version). SIMULATED DATA throughout.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from analysis_lib.inference import sequential
from analysis_lib.simulate.model import Effects, simulate_metrics, true_effects
from analysis_lib.stats import group_sequential as gs
from analysis_lib.study.plan import parse_plan

ROOT = Path(__file__).resolve().parents[1]
A, B = "text", "codegraph"


def _plan(metrics: list[dict], *, looks=4, efficacy: str = "obrien_fleming", stop: str = "all", repetitions: str = "all"):
    d = yaml.safe_load((ROOT / "params" / "analysis_plan_sequential.yaml").read_text())
    d["bootstrap"]["n_resamples"] = 100
    d["pairing"].update(repetitions=repetitions, baseline=A)
    d["tiers"]["primary"]["metrics"] = metrics
    d["tiers"]["secondary"] = {"correction": "none", "metrics": [{"id": "elapsed_sec", "test": "wilcoxon_signed_rank"}]}
    d["tiers"]["exploratory"] = {"correction": "none", "metrics": [{"id": "duplicate_reads", "test": "descriptive"}]}
    d["sequential"].update(looks=looks, efficacy=efficacy, stop=stop)
    return parse_plan(d)


def _run(m, plan, *, intervals: bool = True):
    order = list(dict.fromkeys(m["task_id"].astype(str)))
    sizes = sequential.look_sizes(plan.sequential, len(order))
    mon = sequential.monitor(m, plan, [(A, B)], order, sizes, len(order), final=True, intervals=intervals)
    return mon, sequential.adjusted_estimates(m, plan, [(A, B)], order, sizes, len(order), mon)


# --------------------------------------------------------------------------- repeated intervals of the exact tests


def test_sign_flip_repeated_interval_is_the_exact_inversion_of_the_test():
    rng = np.random.default_rng(1)
    for _ in range(25):
        n = int(rng.integers(3, 11))
        d = rng.integers(-3, 4, size=n) / 3  # per-task pass-rate differences of 3 repetitions
        nominal = float(rng.choice([0.01, 0.05, 0.2, 2 / 2**n, 4 / 2**n]))  # ties with the smallest p-values too
        r = gs.sign_flip_repeated_interval(d, nominal)
        signs = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))

        def p(delta: float, d=d, signs=signs) -> float:  # every sign pattern of d - delta as extreme as the data
            y = d - delta
            return float(np.mean(np.abs(signs @ y) >= abs(y.sum()) - 1e-12))

        assert r["p_value"] == pytest.approx(p(0.0), abs=1e-12)
        walk = gs.sign_flip_bounds([np.abs(d)], [1.0], 0.05, "pocock")[0]["p_of"](float(d.sum()))
        assert r["p_value"] == pytest.approx(walk, abs=1e-12)  # the p the monitor decides with
        if math.isfinite(r["ci_low"]):
            grid = np.unique(np.r_[np.linspace(-1.5, 1.5, 301), r["ci_low"], r["ci_high"], 0.0])
            inside = (grid >= r["ci_low"] - 1e-12) & (grid <= r["ci_high"] + 1e-12)
            assert all(p(g) > nominal * (1 + 1e-12) for g in grid[inside])
            assert not any(p(g) > nominal * (1 + 1e-12) for g in grid[~inside])
        # the interval leaves 0 out exactly when the test rejects at the nominal level (p <= nominal)
        assert (r["p_value"] <= nominal * (1 + 1e-12)) == (not r["ci_low"] <= 0 <= r["ci_high"])


def test_mcnemar_repeated_interval_is_clopper_pearson_left_open_and_agrees_with_the_exact_test():
    for n10, n01 in itertools.product(range(0, 9), range(0, 9)):
        m = n10 + n01
        if m == 0:
            continue
        p = float(min(1.0, 2 * sps.binom.cdf(min(n10, n01), m, 0.5)))  # statsmodels mcnemar(exact=True)
        for nominal in (0.01, 0.05, p):  # the last: McNemar's p on the boundary, which rejects
            r = gs.binomial_repeated_interval(n10, n01, nominal)
            lo, hi = proportion_confint(n01, m, alpha=nominal, method="beta")  # statsmodels 0.15, exact
            assert r["ci_low"] == pytest.approx(lo / (1 - lo), rel=1e-6, abs=1e-9) or r["ci_low"] == 1.0
            if hi < 1:
                assert r["ci_high"] == pytest.approx(hi / (1 - hi), rel=1e-6) or r["ci_high"] == 1.0
            excludes = sequential.interval_excludes(r["ci_low"], r["ci_high"], "low and high", 1.0) if \
                r["low_open"] and r["high_open"] else not r["ci_low"] < 1 < r["ci_high"]
            if nominal < 1:
                assert excludes == (p <= nominal * (1 + 1e-12)), (n10, n01, nominal, r)


@pytest.mark.slow  # 16 simulated studies monitored with each look's repeated interval: ~15 s
@pytest.mark.parametrize("test", ["sign_flip", "mcnemar_exact", "paired_t", "wilcoxon_signed_rank"])
def test_each_looks_repeated_interval_agrees_with_its_decision(test):
    """On every look of every simulated study, the repeated interval leaves the null out exactly when the look's p
    is at or below its boundary, p equal to the boundary included (exact tests reach it often)."""
    metric, reps = {"wilcoxon_signed_rank": ("total_tokens", "all"), "mcnemar_exact": ("success", "majority")}.get(
        test, ("success", "all"))
    plan = _plan([{"id": metric, "test": test}], looks=4, efficacy="pocock", repetitions=reps)
    checked = ties = rejected = 0
    for seed in range(16):
        effects = Effects() if seed % 2 else Effects.null()
        m = simulate_metrics(100 + seed, 48, 3, (A, B), effects)
        mon, adj = _run(m, plan)
        for r in mon.table.itertuples():
            assert bool(r.crossed) == sequential.rci_excludes_null(r), (seed, r)
            checked += 1
            ties += bool(r.crossed and r.p_value == pytest.approx(r.nominal_p, rel=1e-9))
        a = adj.iloc[0]
        if a.decision.startswith("rejected"):
            rejected += 1
            assert sequential.rci_excludes_null(a) and a.mue_look == int(a.decision.split()[-1])
    assert checked >= 32 and rejected >= 2
    if test == "sign_flip":
        assert ties >= 1  # the case that printed "+12.2 pp [0.0, +23.3]" beside "rejected"


# --------------------------------------------------------------------------- adjusted estimates from the actual stop


def test_the_adjusted_estimate_stops_where_the_decision_was_made():
    """Two hypotheses sharing alpha (Holm, recycled), stop at the first rejection: the token row crosses at its level
    alpha / 2 and the study stops there; the success row, never rejected, is labelled by that stop."""
    plan = _plan([{"id": "success", "test": "sign_flip"}, {"id": "total_tokens", "test": "wilcoxon_signed_rank"}],
                 stop="any", efficacy="pocock")
    m = simulate_metrics(7, 80, 3, (A, B), Effects())  # SIMULATED: -20 % tokens, +8 points of success
    mon, adj = _run(m, plan)
    k = mon.stop_look
    assert mon.decision == "efficacy" and k < 4
    adj = adj.set_index("metric")
    tok, suc = adj.loc["total_tokens"], adj.loc["success"]
    nom, p = mon.boundaries[mon.keys[1]]
    crossing = next(j + 1 for j in range(k) if p[j] <= nom[j])
    assert crossing == k and tok["decision"] == f"rejected at look {k}" and tok["mue_look"] == k
    assert tok["level"] == pytest.approx(0.025) and tok["rci_confidence"] == pytest.approx(0.975)
    assert suc["decision"] == f"not rejected; the study stopped at look {k} for another hypothesis"
    # the rejection passed the token row's alpha on: success was held to its boundary at 0.05 by the stop
    assert suc["mue_look"] == k and suc["level"] == pytest.approx(0.05) and suc["rci_confidence"] == pytest.approx(0.95)
    assert not sequential.rci_excludes_null(suc) and sequential.rci_excludes_null(tok)
    assert tok["mue_ci_low"] < tok["mue"] < tok["mue_ci_high"] < 0  # fewer tokens, the interval at 97.5 %


def test_a_row_stopped_for_futility_is_labelled_by_that_look():
    """A null study stopped early by a (non-binding) futility bound: the row's estimate and intervals end at that
    look, named as such, and its repeated interval holds the null."""
    plan = _plan([{"id": "total_tokens", "test": "wilcoxon_signed_rank"}], looks=4)
    plan = plan.model_copy(update={"sequential": plan.sequential.model_copy(update={"futility": "pocock"})})
    mon, adj = _run(simulate_metrics(201, 60, 3, (A, B), Effects.null()), plan)  # SIMULATED: no effect
    a = adj.iloc[0]
    assert mon.decision == "futility" and 1 < mon.stop_look < 4
    assert a["decision"] == f"futility at look {mon.stop_look}" and a["mue_look"] == mon.stop_look
    assert a["mue_ci_low"] < a["mue"] < a["mue_ci_high"] and not sequential.rci_excludes_null(a)


@pytest.mark.slow  # 120 simulated studies, each monitored and adjusted: ~25 s
def test_the_adjusted_estimate_is_median_unbiased_and_its_intervals_cover():
    """Pass@1 by the paired t at two Pocock looks on 40 tasks, at the simulator's effect: P(MUE <= truth) near
    1/2, the stage-wise and repeated intervals at 95 % at least (3 Monte-Carlo SEs)."""
    plan = _plan([{"id": "success", "test": "paired_t"}], looks=2, efficacy="pocock")
    truth = true_effects(Effects(), (A, B), A)[B]["pass_rate_diff_points"] / 100
    below = cover_mue = cover_rci = 0
    n = 120
    for seed in range(n):
        _, adj = _run(simulate_metrics(5_000 + seed, 40, 3, (A, B), Effects()), plan, intervals=False)
        a = adj.iloc[0]
        below += a.mue <= truth
        cover_mue += a.mue_ci_low <= truth <= a.mue_ci_high
        cover_rci += a.rci_low <= truth <= a.rci_high
    se = math.sqrt(0.25 / n)
    assert abs(below / n - 0.5) < 3 * se
    assert cover_mue / n > 0.95 - 3 * math.sqrt(0.95 * 0.05 / n) and cover_rci / n > 0.95 - 3 * math.sqrt(0.95 * 0.05 / n)


# --------------------------------------------------------------------------- a final look forced by the budget


def test_a_final_look_forced_by_the_budget_keeps_its_fraction_and_spends_the_rest():
    """40 tasks planned at four looks; the budget ends the study at 25 tasks after the looks at 10 and 20."""
    reached = np.array([0.25, 0.5, 0.625])
    for kind, before in (("obrien_fleming", 0.0491), ("pocock", 0.0444)):
        c = gs.efficacy_bounds(reached, 0.05, kind, final=True)
        up, lo = gs.crossing_probabilities(c, -c, reached)
        assert up.sum() + lo.sum() == pytest.approx(0.05, abs=1e-6)  # all alpha spent, on the looks that happened
        assert c[:2] == pytest.approx(gs.efficacy_bounds([0.25, 0.5, 0.75, 1.0], 0.05, kind)[:2])  # earlier looks kept
        old = gs.efficacy_bounds(np.r_[reached[:2], 1.0], 0.05, kind, final=True)  # the forced look taken as 1
        up, lo = gs.crossing_probabilities(old, -old, reached)
        assert up.sum() + lo.sum() == pytest.approx(before, abs=5e-4)  # conservative: it kept less than alpha
    # Type-I of the forced stop against the nominal level: scipy's paired t on normal studies, 20,000 of them.
    diffs = np.random.default_rng(9).standard_normal((20_000, 25))
    p = np.stack([sps.ttest_1samp(diffs[:, :k], 0.0, axis=1).pvalue for k in (10, 20, 25)], axis=1)
    for kind in ("obrien_fleming", "pocock"):
        nominal = 2 * sps.norm.sf(gs.efficacy_bounds(reached, 0.05, kind, final=True))
        rate = float((p <= nominal).any(axis=1).mean())
        assert abs(rate - 0.05) < 3 * math.sqrt(0.05 * 0.95 / 20_000), (kind, rate)
    # The monitor records the forced look at the fraction it reached and holds it to that boundary.
    plan = _plan([{"id": "success", "test": "paired_t"}], looks=4, efficacy="pocock")
    m = simulate_metrics(3, 25, 3, (A, B), Effects.null())
    order = list(dict.fromkeys(m["task_id"].astype(str)))
    mon = sequential.monitor(m, plan, [(A, B)], order, [10, 20, 25], 40, final=True, ended_by="budget")
    assert mon.decision == "budget" and [lk["fraction"] for lk in mon.looks] == pytest.approx([0.25, 0.5, 0.625])
    c = gs.efficacy_bounds(reached, 0.05, "pocock", final=True)
    assert mon.table["nominal_p"].tolist() == pytest.approx((2 * sps.norm.sf(c)).tolist(), rel=1e-9)
    assert "information fraction 0.625" in mon.reason
    # A row never rejected is labelled by the budget's stop, and its adjusted estimate stops there.
    adj = sequential.adjusted_estimates(m, plan, [(A, B)], order, [10, 20, 25], 40, mon).iloc[0]
    assert adj["decision"] == "not rejected; the budget ended the study at look 3" and adj["mue_look"] == 3
    assert adj["mue_ci_low"] < adj["mue"] < adj["mue_ci_high"] and not sequential.rci_excludes_null(adj)
