"""Every interval that inverts a test agrees with that test, on small studies full of ties and zeros.

The inverted intervals of the project are the sign-flip interval (pass@1 under every repetition), the
Hodges-Lehmann interval of the Wilcoxon signed-rank test (ratio and difference metrics) and the exact
(Clopper-Pearson) interval of the discordant-pair odds ratio (McNemar's exact test). For each simulated
study the property is: the interval excludes 0 (1 for the odds ratio) exactly when its own test has
p < 0.05, and its ends are the last shifts the test accepts (closed at the jumps of the p-value; an end
the Wilcoxon approximation rejects is reported open). The references are the tests themselves, run
directly on the shifted data: ``scipy.stats.permutation_test`` for the sign-flip p-value, and
:func:`analysis_lib.stats.nonparametric.wilcoxon` (checked against R and scipy in test_stats.py) for the signed ranks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis_lib import stats
from analysis_lib.inference import comparisons
from analysis_lib.simulate.model import Effects, simulate_metrics
from analysis_lib.study.plan import load_plan

ALPHA = 0.05


def _small_studies(n_studies: int, seed: int):
    """Per-task differences of small studies, in the shapes the comparisons produce: pass-rate differences of
    three repetitions, differences and log ratios of small counts, rounded continuous values."""
    rng = np.random.default_rng(seed)
    for k in range(n_studies):
        n = int(rng.integers(3, 25))
        shape = k % 4
        if shape == 0:
            d = (rng.binomial(3, 0.6, n) - rng.binomial(3, 0.5, n)) / 3.0
        elif shape == 1:
            d = (rng.poisson(1.0, n) - rng.poisson(1.3, n)).astype(float)
        elif shape == 2:
            d = np.log(rng.integers(1, 9, n) / rng.integers(1, 9, n))
        else:
            d = np.round(rng.normal(0.4, 1.0, n), 1)
        yield shape, d


def _flip_p(x: np.ndarray) -> float:
    """The exact sign-flip p-value by enumerating all 2^n sign patterns, a tie (to 1e-9 of the data's scale) counting
    as extreme. scipy's ``permutation_test`` gives the same value except where the data's mean is 0 and rounds to
    1e-17: it then misses the ties (checked on data without such ties below)."""
    n = x.size
    signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    tol = 1e-9 * (np.max(np.abs(x)) or 1.0)
    return float(np.mean(np.abs(signs @ x) >= abs(x.sum()) - tol))


def test_the_enumerated_reference_is_scipys_permutation_test_on_untied_data():
    for n in (5, 9, 12):
        d = np.random.default_rng(n).normal(0.3, 1.0, n)
        ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
        assert _flip_p(d) == pytest.approx(ref.pvalue, abs=1e-12)


def test_sign_flip_interval_is_exactly_the_set_of_accepted_shifts():
    checked = 0
    for _, d in _small_studies(240, 1):
        if d.size > 12:
            d = d[:12]  # keep scipy's enumeration quick; the closed form does not depend on n
        r = stats.sign_flip(d).iloc[0]
        assert r["p_val"] == pytest.approx(_flip_p(d), abs=1e-12)
        assert (r["p_val"] < ALPHA) == (not r["ci_low"] <= 0 <= r["ci_high"])
        for end, outward in ((r["ci_low"], -1.0), (r["ci_high"], 1.0)):
            if not np.isfinite(end):
                continue
            # The end itself is accepted (closed), any shift beyond it is rejected.
            assert _flip_p(d - end) >= ALPHA
            assert _flip_p(d - (end + outward * 1e-7)) < ALPHA
            checked += 1
    assert checked > 200


def test_sign_flip_monte_carlo_interval_agrees_with_its_own_p_value():
    rng = np.random.default_rng(5)
    for k in range(40):
        n = int(rng.integers(17, 40))
        d = (rng.binomial(3, 0.55, n) - rng.binomial(3, 0.5, n)) / 3.0
        r = stats.sign_flip(d, n_resamples=4000, seed=k).iloc[0]
        assert not r["exact"]
        assert (r["p_val"] < ALPHA) == (not r["ci_low"] <= 0 <= r["ci_high"])
        for end in (r["ci_low"], r["ci_high"]):  # the end's own test (same patterns) accepts
            assert stats.sign_flip(d - end, n_resamples=4000, seed=k).iloc[0]["p_val"] >= ALPHA


def _wilcoxon_p(d: np.ndarray, exact_branch: bool) -> float:
    method = "exact" if exact_branch and np.all(d != 0) and np.unique(np.abs(d)).size == d.size else "approx"
    if exact_branch and method == "approx":
        return np.nan  # a Walsh average itself: the exact test is not defined there; the interval is closed by convention
    return float(stats.wilcoxon(d, zero_method="pratt", method=method if exact_branch else "approx")["p_val"].iloc[0])


@pytest.mark.slow  # 400 studies, each interval checked against the test at and beyond both ends (about 20 s)
def test_hodges_lehmann_interval_is_the_set_of_shifts_its_wilcoxon_test_accepts():
    seen = {"approx": 0, "exact": 0, "open": 0, "zero_width": 0}
    for _, d in _small_studies(400, 2):
        d = np.round(d, 9)
        hl = stats.hodges_lehmann(d, decimals=9).iloc[0]
        exact = hl["method"].endswith("exact")
        seen["exact" if exact else "approx"] += 1
        p0 = float(stats.wilcoxon(d, zero_method="pratt")["p_val"].iloc[0])
        assert hl["p_val"] == pytest.approx(p0, abs=1e-12)
        assert hl["contiguous"]
        assert comparisons.excludes_zero(hl.to_dict()) == (p0 < ALPHA), d.tolist()
        assert hl["ci_low"] <= hl["estimate"] <= hl["ci_high"]
        seen["zero_width"] += hl["ci_low"] == hl["ci_high"] and np.unique(d).size > 1
        for side, end, outward in (("low", hl["ci_low"], -1.0), ("high", hl["ci_high"], 1.0)):
            if not np.isfinite(end):
                continue
            at = _wilcoxon_p(np.round(d - end, 11), exact)  # d has 9 decimals, a Walsh average 10
            if not np.isnan(at):  # the approximation's own verdict at the end: accepted exactly when closed
                assert (at >= ALPHA) == bool(hl[f"{side}_closed"]), (d.tolist(), side)
            seen["open"] += not hl[f"{side}_closed"]
            beyond = _wilcoxon_p(d - (end + outward * 1e-6), exact)
            assert beyond < ALPHA, (d.tolist(), side)  # one step beyond the end, the test rejects
            inside = _wilcoxon_p(d - (end - outward * 1e-6), exact)
            assert inside >= ALPHA or hl["ci_low"] == hl["ci_high"], (d.tolist(), side)
    assert seen["approx"] > 100 and seen["exact"] > 20 and seen["open"] > 0
    assert seen["zero_width"] == 0  # no [0.5, 0.5] where the test accepts a whole range


@pytest.mark.slow  # 400 small studies (about 5 s)
def test_exact_odds_ratio_interval_agrees_with_mcnemar_exact_on_simulated_small_studies():
    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(6, 30))
        p_task = rng.beta(1.5, 1.5, n)
        a = rng.random(n) < p_task
        b = rng.random(n) < np.clip(p_task + rng.choice([0.0, 0.2]), 0, 1)
        n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))
        if n10 + n01 == 0:
            continue
        o = stats.conditional_odds_ratio(n10, n01).iloc[0]
        p = stats.mcnemar_from_table([[0, n10], [n01, 0]], exact=True).iloc[0]["p_val"]
        assert (p < ALPHA) == (not o["ci_low"] <= 1 <= o["ci_high"]), (n10, n01)


@pytest.mark.slow  # 48 simulated studies through the whole comparison engine (about 40 s on 2 cores)
@pytest.mark.parametrize("n_tasks", [8, 12])
def test_every_inverted_interval_of_the_engine_agrees_with_its_test(n_tasks):
    """Whole studies from the simulator (counts with zeros and ties, three repetitions) through the all-repetitions
    plan, whose rows hold every inverted interval: sign-flip (sensitivity), Hodges-Lehmann (ratio and difference
    metrics, Pratt's zeros) and the exact odds ratio of the majority-vote McNemar row."""
    plan = load_plan("params/analysis_plan_all_repetitions.yaml")
    checked = 0
    for seed in range(24):
        effects = Effects.null() if seed % 2 else Effects()
        m = simulate_metrics(9_000 + seed, n_tasks, 3, ("text", "codegraph"), effects)
        rows = comparisons.compare(m, plan, [("text", "codegraph")])
        for r in rows[rows["p_value"].notna()].itertuples():
            if r.interval in ("inverted Wilcoxon", "inverted sign-flip test"):
                assert comparisons.excludes_zero(r._asdict()) == (r.p_value < ALPHA), r
                checked += 1
            if r.scale == "rate" and r.test == "McNemar exact" and pd.notna(r.odds_ratio_low):
                assert (not r.odds_ratio_low <= 1 <= r.odds_ratio_high) == (r.p_value < ALPHA), r
                checked += 1
        tasks_run = m.groupby("profile")["task_id"].nunique().min()
        est = rows[rows["estimate"].notna()]
        assert ((est["n_pairs"] + est["n_undefined"]) == tasks_run).all()  # no task left out uncounted
    assert checked > 24 * 6
