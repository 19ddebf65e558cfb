"""Agreement statistics for judge reliability: Cohen's kappa, Fleiss' kappa, Krippendorff's alpha, Gwet's AC1.

Used three ways: a judge against itself over K samples, two judge models
against each other, and a judge against human labels. All functions take plain label lists;
``None`` marks a missing label and is dropped pairwise (kappa) or per unit (alpha).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import permutations

import numpy as np
import pandas as pd
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as _fleiss


def percent_agreement(a: Sequence[Hashable | None], b: Sequence[Hashable | None]) -> float | None:
    """Share of units, labelled by both, on which the two labels are equal."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else None


def cohen_kappa(a: Sequence[Hashable | None], b: Sequence[Hashable | None]) -> float | None:
    """Cohen's kappa of two raters over the units both labelled.

    kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e = sum_c p_a(c) p_b(c) the
    agreement expected from the raters' marginals (Cohen 1960, Educ. Psychol. Meas. 20:37-46).
    None with no paired unit; NaN when p_e = 1 (both raters always gave one same label).
    """
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in pairs) / n
    ca, cb = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    p_e = sum(ca[c] * cb[c] for c in ca) / (n * n)
    if math.isclose(p_e, 1.0):
        return float("nan")
    return (p_o - p_e) / (1 - p_e)


def fleiss_kappa(units: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa of a fixed number of ratings per unit (statsmodels' implementation).

    Units with a missing rating are dropped, since Fleiss' kappa needs equal counts per unit
    (Fleiss 1971, Psychol. Bull. 76:378-382). None with fewer than two complete units.
    """
    complete = [list(u) for u in units if u and all(v is not None for v in u)]
    if len(complete) < 2 or len({len(u) for u in complete}) != 1 or len(complete[0]) < 2:
        return None
    cats = sorted({str(v) for u in complete for v in u})
    codes = np.array([[cats.index(str(v)) for v in u] for u in complete])
    table, _ = aggregate_raters(codes, n_cat=len(cats))
    with np.errstate(invalid="ignore", divide="ignore"):  # one category only: NaN, said in the table
        return float(_fleiss(table, method="fleiss"))


def krippendorff_alpha_nominal(units: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's alpha for nominal data, any number of coders, missing values allowed.

    ``units`` holds, per unit, the values of every coder (None = not coded). Units with fewer than
    two values are not pairable and are ignored. With the coincidence matrix
    o_ck = sum_u (number of c-k pairs in u) / (m_u - 1), n_c its margins and n = sum n_c:
    alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k
    (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability", sec. C). None with no
    pairable unit; NaN when every value is the same category (no variation to agree on).
    """
    coinc: Counter = Counter()
    for unit in units:
        vals = [v for v in unit if v is not None]
        m = len(vals)
        if m < 2:
            continue
        for i, j in permutations(range(m), 2):
            coinc[(vals[i], vals[j])] += 1.0 / (m - 1)
    if not coinc:
        return None
    n_c: Counter = Counter()
    for (c, _k), v in coinc.items():
        n_c[c] += v
    n = sum(n_c.values())
    observed = sum(v for (c, k), v in coinc.items() if c != k)
    expected = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k)
    if expected == 0:
        return float("nan")
    return 1.0 - (n - 1) * observed / expected


def agreement_row(name: str, comparison: str, a: Sequence, b: Sequence, reps: int = 1000, seed: int = 0) -> dict:
    """One row of the agreement table for two label lists (units aligned), with bootstrap intervals.

    ``missing_a`` / ``missing_b`` count the units a side has no label for (failed judgements):
    they are reported, not dropped silently.
    """
    return {"analysis": name, "comparison": comparison, **pair_reliability(a, b, reps, seed), "fleiss_kappa": None}


def self_agreement_row(
    name: str, samples: Sequence[Sequence[Hashable | None]], temperature: float | None = None, reps: int = 1000, seed: int = 0
) -> dict:
    """Agreement of one judge with itself: ``samples[u]`` = the K labels of unit u (all at one temperature)."""
    pairable = [u for u in samples if sum(v is not None for v in u) >= 2]
    k = max((len(u) for u in samples), default=0)
    agree = [len(set(v for v in u if v is not None)) == 1 for u in pairable]
    cats = sorted({v for u in samples for v in u if v is not None}, key=str)
    temp = "" if temperature is None else f" at temperature {temperature:g}"
    return {
        "analysis": name,
        "comparison": f"self, {k} samples{temp}",
        "units": len(pairable),
        "missing_a": sum(1 for u in samples for v in u if v is None),  # failed samples
        "missing_b": None,
        "percent_agreement": (sum(agree) / len(agree)) if agree else None,  # units where all samples agree
        "cohen_kappa": None,
        "cohen_kappa_ci": (None, None),
        "krippendorff_alpha": krippendorff_alpha_nominal(samples),
        "krippendorff_alpha_ci": bootstrap_ci(krippendorff_alpha_nominal, list(samples), reps, seed),
        "gwet_ac1": gwet_ac1(samples, cats),
        "gwet_ac1_ci": bootstrap_ci(lambda us: gwet_ac1(us, cats), list(samples), reps, seed),
        "fleiss_kappa": fleiss_kappa(samples),
    }


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "n/a (one category)" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def _with_ci(value, ci) -> str:
    text = _fmt(value)
    lo, hi = ci if ci else (None, None)
    return text if lo is None or value is None or (isinstance(value, float) and math.isnan(value)) else f"{text} [{lo:.2f}, {hi:.2f}]"


def format_agreement_md(rows: list[dict]) -> str:
    """Markdown table of agreement rows: point values with [95 % bootstrap interval], '-' for not applicable."""
    lines = [
        "| analysis | comparison | units | failed (a / b) | % agreement | Cohen's kappa | Krippendorff's alpha | Gwet's AC1 | Fleiss' kappa |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        failed = f"{_fmt(r.get('missing_a'))} / {_fmt(r.get('missing_b'))}"
        lines.append(
            f"| {r['analysis']} | {r['comparison']} | {r['units']} | {failed} | {_fmt(r['percent_agreement'])} | "
            f"{_with_ci(r['cohen_kappa'], r.get('cohen_kappa_ci'))} | {_with_ci(r['krippendorff_alpha'], r.get('krippendorff_alpha_ci'))} | "
            f"{_with_ci(r.get('gwet_ac1'), r.get('gwet_ac1_ci'))} | {_fmt(r['fleiss_kappa'])} |"
        )
    return "\n".join(lines)


def format_confusion_md(table) -> str:
    """A confusion matrix (from :func:`confusion_matrix`) as a Markdown table."""
    if table is None or table.empty:
        return "(no unit labelled by both)"
    head = f"| {table.index.name} \\ {table.columns.name} | " + " | ".join(map(str, table.columns)) + " |"
    lines = [head, "|---|" + "---:|" * len(table.columns)]
    for idx, row in table.iterrows():
        lines.append(f"| {idx} | " + " | ".join(str(int(v)) for v in row) + " |")
    return "\n".join(lines)


def gwet_ac1(units: Sequence[Sequence[Hashable | None]], categories: Sequence[Hashable] | None = None) -> float | None:
    """Gwet's AC1 for nominal data, any number of raters, missing values allowed.

    With r_ik raters putting unit i in class k and r_i raters of unit i: p_a is the mean over units
    with r_i >= 2 of sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)); pi_k the mean over rated units of
    r_ik / r_i; p_e = sum_k pi_k (1 - pi_k) / (q - 1), q the number of classes; AC1 =
    (p_a - p_e) / (1 - p_e) (Gwet 2014, Handbook of Inter-Rater Reliability, 4th ed., ch. 4).
    Unlike kappa it stays stable when one class dominates. None with no pairable unit.
    """
    rated = [[v for v in u if v is not None] for u in units]
    rated = [u for u in rated if u]
    pairable = [u for u in rated if len(u) >= 2]
    if not pairable:
        return None
    cats = list(categories) if categories is not None else sorted({v for u in rated for v in u}, key=str)
    q = len(cats)
    p_a = sum(sum(c * (c - 1) for c in Counter(u).values()) / (len(u) * (len(u) - 1)) for u in pairable) / len(pairable)
    if q < 2:
        return float("nan")
    pi = {k: sum(Counter(u)[k] / len(u) for u in rated) / len(rated) for k in cats}
    p_e = sum(p * (1 - p) for p in pi.values()) / (q - 1)
    return (p_a - p_e) / (1 - p_e)


def confusion_matrix(a: Sequence[Hashable | None], b: Sequence[Hashable | None], name_a: str = "a", name_b: str = "b"):
    """Counts of (label a, label b) over the units both labelled: rows ``name_a``, columns ``name_b``."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    if not pairs:
        return pd.DataFrame()
    cats = sorted({str(v) for p in pairs for v in p})
    table = pd.crosstab(pd.Categorical([str(x) for x, _ in pairs], cats), pd.Categorical([str(y) for _, y in pairs], cats), dropna=False)
    table.index.name, table.columns.name = name_a, name_b
    return table


def bootstrap_ci(stat, units: Sequence, reps: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of ``stat(resampled units)`` over ``reps`` unit resamples (seeded).

    Resamples where the statistic is undefined (None or NaN, e.g. a single class) are left out;
    (None, None) when fewer than half of them are defined.
    """
    n = len(units)
    if n < 2:
        return None, None
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(reps):
        idx = rng.integers(0, n, n)
        v = stat([units[i] for i in idx])
        if v is not None and not math.isnan(v):
            vals.append(v)
    if len(vals) < reps / 2:
        return None, None
    lo, hi = np.quantile(vals, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def pair_reliability(a: Sequence[Hashable | None], b: Sequence[Hashable | None], reps: int = 1000, seed: int = 0) -> dict:
    """Kappa, alpha and AC1 of two raters with 95 % bootstrap intervals, and each side's missing count."""
    units = [(x, y) for x, y in zip(a, b, strict=True)]
    paired = [(x, y) for x, y in units if x is not None and y is not None]
    cats = sorted({v for p in paired for v in p}, key=str)

    def kappa(us):
        return cohen_kappa([x for x, _ in us], [y for _, y in us])

    def alpha(us):
        return krippendorff_alpha_nominal([list(u) for u in us])

    def ac1(us):
        return gwet_ac1([list(u) for u in us], cats)

    out: dict = {
        "units": len(paired),
        "missing_a": sum(1 for x, y in units if x is None),
        "missing_b": sum(1 for x, y in units if y is None),
        "percent_agreement": percent_agreement(a, b),
    }
    for name, f in (("cohen_kappa", kappa), ("krippendorff_alpha", alpha), ("gwet_ac1", ac1)):
        out[name] = f(paired) if paired else None
        out[f"{name}_ci"] = bootstrap_ci(f, paired, reps, seed) if paired else (None, None)
    return out


def majority_label(labels: Sequence[Hashable | None]) -> tuple[Hashable | None, int]:
    """The most frequent non-missing label and its index of first appearance (ties: the earliest sample)."""
    votes = Counter(v for v in labels if v is not None)
    if not votes:
        return None, -1
    top = max(votes.values())
    for i, v in enumerate(labels):
        if v is not None and votes[v] == top:
            return v, i
    return None, -1  # pragma: no cover
