"""Group-sequential boundaries against published values, and exact boundaries against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps
from scipy.optimize import brentq

from analysis_lib.stats import group_sequential as gs


def test_spending_boundaries_match_rpact():
    # rpact tests/testthat/test-f_design_group_sequential_design.R, x6:
    # getDesignGroupSequential(kMax = 3, alpha = 0.03, typeOfDesign = "asOF")$criticalValues
    ref = [3.5815302, 2.417863, 1.9175839]
    assert gs.efficacy_bounds([1 / 3, 2 / 3, 1], 0.03, "obrien_fleming", sided=1) == pytest.approx(ref, abs=1e-6)
    # the same file, x5: getDesignGroupSequential(typeOfDesign = "asUser", userAlphaSpending = c(0.01, 0.02, 0.03, 0.05))
    ref = [2.3263479, 2.2192994, 2.1201347, 1.8189562]
    got = gs.efficacy_bounds([0.25, 0.5, 0.75, 1], 0.05, cumulative=[0.01, 0.02, 0.03, 0.05], sided=1)
    assert got == pytest.approx(ref, abs=1e-6)


def test_two_sided_obrien_fleming_spending_matches_gsdesign():
    # gsDesign::gsDesign(k = 4, test.type = 2, alpha = 0.025, sfu = sfLDOF)$upper$bound (symmetric two-sided 0.05)
    ref = [4.3326, 2.9631, 2.3590, 2.0141]
    assert gs.efficacy_bounds([0.25, 0.5, 0.75, 1], 0.05, "obrien_fleming") == pytest.approx(ref, abs=2e-4)


@pytest.mark.parametrize(("k", "pocock", "obf"), [(2, 2.178, 1.977), (3, 2.289, 2.004), (4, 2.361, 2.024), (5, 2.413, 2.040)])
def test_classical_constants_match_jennison_turnbull(k, pocock, obf):
    # Jennison & Turnbull (2000), Table 2.1 (Pocock C_P(K, 0.05)) and Table 2.3 (O'Brien-Fleming C_B(K, 0.05)),
    # two-sided alpha = 0.05, equally spaced looks; published to three decimals
    assert gs.classical_bounds(k, 0.05, "pocock")[0] == pytest.approx(pocock, abs=6e-4)
    assert gs.classical_bounds(k, 0.05, "obrien_fleming")[-1] == pytest.approx(obf, abs=6e-4)


def test_classical_obrien_fleming_matches_rpact():
    # rpact: getDesignInverseNormal()$criticalValues (kMax = 3, alpha = 0.025 one-sided, typeOfDesign = "OF")
    ref = [3.4710914, 2.4544323, 2.0040356]
    assert gs.classical_bounds(3, 0.025, "obrien_fleming", sided=1) == pytest.approx(ref, abs=1e-6)


def test_non_binding_futility_design_matches_rpact():
    # rpact, x7: getDesignGroupSequential(kMax = 3, alpha = 0.03, typeOfDesign = "asOF", typeBetaSpending = "bsP")
    # $futilityBounds 0.42062972, 1.2539286; $power (cumulative) 0.03410434, 0.52267986, 0.8
    d = gs.design([1 / 3, 2 / 3, 1], 0.03, "obrien_fleming", "pocock", beta=0.2, sided=1)
    assert d.futility[:2] == pytest.approx([0.42062972, 1.2539286], abs=1e-6)
    s = gs.stopping(d, d.drift)
    assert np.cumsum(s["efficacy"]) == pytest.approx([0.03410434, 0.52267986, 0.8], abs=1e-6)


def test_pocock_spending_is_spent_exactly_in_simulation():
    """Brownian motion at the looks crosses the Pocock-type two-sided boundaries as often as the function spends."""
    t = np.array([0.2, 0.45, 0.7, 1.0])
    c = gs.efficacy_bounds(t, 0.05, "pocock")
    rng = np.random.default_rng(1)
    n = 400_000
    w = np.cumsum(rng.standard_normal((n, len(t))) * np.sqrt(np.diff(np.r_[0, t])), axis=1)
    z = w / np.sqrt(t)
    first = np.argmax(np.abs(z) >= c, axis=1)
    crossed = (np.abs(z) >= c).any(axis=1)
    by_look = np.bincount(first[crossed], minlength=len(t)) / n
    spent = np.diff(np.r_[0, 2 * gs.spending("pocock", 0.025, t)])
    se = np.sqrt(spent / n)
    assert np.all(np.abs(np.cumsum(by_look) - np.cumsum(spent)) < 4 * np.sqrt(np.cumsum(spent) / n))
    assert by_look.sum() == pytest.approx(0.05, abs=4 * se.sum())


def test_expected_sample_size_agrees_with_simulation():
    d = gs.design([0.25, 0.5, 0.75, 1.0], 0.05, "obrien_fleming")
    s = gs.stopping(d, d.drift)
    rng = np.random.default_rng(2)
    n = 200_000
    t = d.t
    w = np.cumsum(rng.standard_normal((n, 4)) * np.sqrt(np.diff(np.r_[0, t])) + d.drift * np.diff(np.r_[0, t]), axis=1)
    z = w / np.sqrt(t)
    hit = np.abs(z) >= d.efficacy
    look = np.where(hit.any(axis=1), np.argmax(hit, axis=1), 3)
    assert s["expected_fraction"] == pytest.approx(t[look].mean(), abs=4 * t[look].std() / np.sqrt(n))
    assert s["power"] == pytest.approx(0.8, abs=1e-6) and d.inflation == pytest.approx(1.02, abs=0.01)


def test_mcnemar_boundaries_are_exact_by_brute_force():
    m, t = [3, 7, 12], [1 / 3, 2 / 3, 1]
    b = gs.mcnemar_bounds(m, t, 0.05, "pocock")
    rej = 0
    for bits in itertools.product([0, 1], repeat=12):  # every sequence of discordant tasks favouring B or A
        x = np.cumsum(bits)
        rej += any(abs(x[mk - 1] - mk / 2) >= bk["distance"] for mk, bk in zip(m, b, strict=True))
    assert rej / 2**12 == pytest.approx(b[-1]["spent"], abs=1e-12)
    assert b[-1]["spent"] <= 0.05 and b[1]["spent"] <= 2 * gs.spending("pocock", 0.025, 2 / 3)
    assert b[0]["nominal_p"] == 0.0  # 3 discordant tasks: the smallest p, 0.25, cannot be spent at look 1


def test_sign_flip_boundaries_are_exact_by_brute_force():
    rng = np.random.default_rng(1)
    d = rng.integers(-3, 4, size=12) / 3  # per-task pass-rate differences of 3 repetitions
    b = gs.sign_flip_bounds([np.abs(d[:4]), np.abs(d[4:8]), np.abs(d[8:])], [1 / 3, 2 / 3, 1], 0.05, "pocock")
    rej = 0
    for s in itertools.product([-1, 1], repeat=12):
        tot = np.cumsum(np.array(s) * np.abs(d))
        rej += any(abs(tot[n - 1]) >= bk["threshold"] - 1e-9 for n, bk in zip((4, 8, 12), b, strict=True))
    assert rej / 2**12 == pytest.approx(b[-1]["spent"], abs=1e-12) and b[-1]["spent"] <= 0.05
    assert gs.sign_flip_bounds([np.array([np.pi])], [1.0], 0.05, "pocock") is None  # no lattice: the normal bound serves


def test_stagewise_at_the_first_look_is_the_fixed_interval():
    sw = gs.stagewise([2.5], [16.0], [], 0.95)
    assert sw["estimate"] == pytest.approx(2.5 / 4, abs=1e-8)
    assert (sw["ci_low"], sw["ci_high"]) == pytest.approx(((2.5 - 1.959964) / 4, (2.5 + 1.959964) / 4), abs=1e-6)


@pytest.mark.slow  # 300 stage-wise estimates, each a root search over the recursion: ~20 s
def test_stagewise_estimate_is_median_unbiased_in_simulation():
    """P(MUE <= theta) = 1/2 and the stage-wise interval covers at 95 %, over studies stopped by the boundary."""
    t = np.array([0.5, 1.0])
    c = gs.efficacy_bounds(t, 0.05, "pocock")
    theta, info = 0.5, np.array([8.0, 16.0])  # drift theta sqrt(16) = 2
    rng = np.random.default_rng(5)
    below, cover, n = 0, 0, 300
    for _ in range(n):
        s1 = rng.normal(theta * info[0], np.sqrt(info[0]))
        s2 = s1 + rng.normal(theta * (info[1] - info[0]), np.sqrt(info[1] - info[0]))
        z1, z2 = s1 / np.sqrt(info[0]), s2 / np.sqrt(info[1])
        sw = gs.stagewise([z1], info[:1], [], 0.95) if abs(z1) >= c[0] else gs.stagewise([z1, z2], info, [c[0]], 0.95)
        if z1 <= -c[0]:  # stopped low: the ordering looks down (as analysis_lib.inference.sequential does)
            sw = {k: -v for k, v in gs.stagewise([-z1], info[:1], [], 0.95).items()}
            sw["ci_low"], sw["ci_high"] = sw["ci_high"], sw["ci_low"]
        below += sw["estimate"] <= theta
        cover += sw["ci_low"] <= theta <= sw["ci_high"]
    assert abs(below / n - 0.5) < 3 * np.sqrt(0.25 / n)
    assert abs(cover / n - 0.95) < 3 * np.sqrt(0.95 * 0.05 / n)


def test_expected_sample_size_matches_rpact_design_characteristics():
    # rpact tests/testthat/test-f_design_group_sequential.R, y1: getDesignCharacteristics(getDesignInverseNormal(kMax = 3,
    # informationRates = c(0.2, 0.4, 1), alpha = 0.03, sided = 1, beta = 0.14, typeOfDesign = "asHSD", gammaA = 0))
    # $shift 9.4594102, $inflationFactor 1.0788327, $power c(0.12783451, 0.34055165, 0.86),
    # $averageSampleNumber1 0.83081135, $averageSampleNumber01 1.0142116, $averageSampleNumber0 1.0697705
    # (ASNs relative to the fixed design's size). Hwang-Shih-DeCani spending with gamma = 0 is linear: alpha * t.
    t = np.array([0.2, 0.4, 1.0])
    c = gs.efficacy_bounds(t, 0.03, cumulative=0.03 * t, sided=1)
    lower = np.full(3, -np.inf)
    eta = brentq(lambda e: gs.crossing_probabilities(c, lower, t, e)[0].sum() - 0.86, 0.0, 15.0, xtol=1e-12)
    inflation = (eta / (sps.norm.isf(0.03) + sps.norm.isf(0.14))) ** 2
    d = gs.Design(t, 0.03, 1, c, None, 0.14, eta, inflation)
    assert eta**2 == pytest.approx(9.4594102, abs=1e-5) and inflation == pytest.approx(1.0788327, abs=1e-6)
    assert np.cumsum(gs.stopping(d, eta)["efficacy"]) == pytest.approx([0.12783451, 0.34055165, 0.86], abs=1e-6)
    for drift, asn in ((eta, 0.83081135), (eta / 2, 1.0142116), (0.0, 1.0697705)):
        assert gs.stopping(d, drift)["expected_fraction"] * inflation == pytest.approx(asn, abs=1e-6)
