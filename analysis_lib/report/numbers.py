"""One way to print a number: per-metric precision, a real minus sign, ``p < 0.001``, units, plurals.

Markdown, notebooks and figure labels use these plain-text forms; the TeX snippets use the same
rounding through :func:`tex_number` (siunitx typesets the minus sign and aligns the decimals).
Rounding happens here, once, at the end: frames keep full precision.
"""

from __future__ import annotations

import math

import pandas as pd

from ..core import registry
from ..inference.comparisons import POINT_SCALES, RATE_DIFFERENCE_UNIT, scale_unit

__all__ = [
    "MINUS", "RATE_DIFFERENCE_UNIT", "missing", "number", "value", "difference", "estimate", "interval",
    "ends", "open_at_zero",
    "p_value", "plural", "decimals", "tex_number", "tex_quantity", "tex_unit", "comparison_unit", "scaled",
    "estimate_digits"
]

MINUS = "\u2212"
DASH = "–"
P_FLOOR = 0.001


def missing(x) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def number(x, digits: int = 0, *, sign: bool = False) -> str:
    """``x`` rounded to ``digits`` decimals with thousands separators and a real minus; ``–`` when missing."""
    if missing(x):
        return DASH
    x = float(x)
    if math.isinf(x):
        return ("+" if sign else "") + "∞" if x > 0 else MINUS + "∞"
    text = f"{x:{'+' if sign else ''},.{digits}f}"
    if text.lstrip("+-").strip("0.,") == "":  # rounds to zero: no signed zero
        text = f"{0:.{digits}f}"
    return text.replace("-", MINUS)


def decimals(metric_id: str) -> int:
    """The metric's precision: counts as integers, money in tenths of a cent, as the registry says."""
    try:
        return registry.metric(metric_id).decimals
    except ValueError:
        return 2


def value(metric_id: str, x, *, rate: bool = False) -> str:
    """A value of the metric in its unit (a rate as a percentage, with the registry's decimals of a rate)."""
    if rate:
        return DASH if missing(x) else number(100 * float(x), decimals("pass_rate")) + " %"
    d = decimals(metric_id)
    if registry.metric(metric_id).kind == "count" and not missing(x) and float(x) != round(float(x)) and abs(float(x)) < 100:
        d = 1  # the median of an even number of small counts can fall halfway
    return number(x, d)


def difference(metric_id: str, x, *, rate: bool = False) -> str:
    """A signed difference of two values of the metric, as precise as :func:`value` prints them (rates in pp)."""
    if rate:
        return DASH if missing(x) else number(100 * float(x), decimals("pass_rate"), sign=True) + f" {RATE_DIFFERENCE_UNIT}"
    d = decimals(metric_id)
    if registry.metric(metric_id).kind == "count" and not missing(x) and float(x) != round(float(x)) and abs(float(x)) < 100:
        d = 1
    return number(x, d, sign=True)


def comparison_unit(scale: str, unit: str = "") -> str:
    """The unit of a comparison's estimate: ``%`` (ratios), ``pp`` (rates) or the metric's own
    (:func:`analysis_lib.inference.comparisons.scale_unit`, the rule behind the CSVs' ``unit`` column)."""
    return scale_unit(scale, unit)


def scaled(row, x):
    """A comparison's value on its printed scale: rate differences in percentage points (pp), the rest as they are."""
    return 100 * x if row.scale in POINT_SCALES else x


def estimate_digits(row) -> int:
    """Decimals of a comparison's estimate and interval: one for % and pp, else the metric's own."""
    if row.scale in ("ratio", "cost_per_success", *POINT_SCALES):
        return 1
    d = decimals(row.metric)
    if row.scale == "mean":
        return d + 1  # a mean of rewards (0.83, 0.5, ...) needs one decimal more than a reward
    return max(d, 1) if registry.metric(row.metric).kind == "count" else d


def estimate(row, *, unit: bool = True) -> str:
    """A comparison's estimate, signed, in its unit: ``−17.4 %``, ``+25.0 pp``, ``−0.5 reads``."""
    if missing(row.estimate):
        return DASH
    u = comparison_unit(row.scale, row.unit)
    return number(scaled(row, row.estimate), estimate_digits(row), sign=True) + (f" {u}" if unit and u else "")


def open_at_zero(row) -> tuple[bool, bool]:
    """Whether the comparison's interval is open at a low or high end that is 0 (the test rejects at 0 itself: the
    interval excludes 0 although 0 is its end)."""
    ci_open = getattr(row, "ci_open", None)
    if not isinstance(ci_open, str):
        return False, False
    return "low" in ci_open and row.ci_low == 0, "high" in ci_open and row.ci_high == 0


def interval(row, low: str = "ci_low", high: str = "ci_high", *, unit: bool = False, opened: str | None = None) -> str:
    """``[low, high]`` of a comparison, signed, on its estimate's scale, with ``(`` / ``)`` at an end the interval
    leaves out: an end its inverted test rejects (``ci_open``, or ``opened`` for other columns: the Hodges-Lehmann
    interval's ends in a gap between Walsh averages, whatever their value), and an infinite end."""
    lo, hi = getattr(row, low), getattr(row, high)
    if missing(lo) or missing(hi):
        return DASH
    u = comparison_unit(row.scale, row.unit)
    d = estimate_digits(row)
    left_out = opened if opened is not None else (getattr(row, "ci_open", None) if low == "ci_low" else None)
    text = ends(scaled(row, lo), scaled(row, hi), d, sign=True, opened=left_out if isinstance(left_out, str) else "")
    return text + (f" {u}" if unit and u else "")


def ends(lo, hi, digits: int, *, sign: bool = False, opened: str = "") -> str:
    """``[lo, hi]`` with ``(`` / ``)`` at an end the interval leaves out: one ``opened`` names (``low``, ``high``)
    and an infinite one; ``–`` when either end is unknown."""
    if missing(lo) or missing(hi):
        return DASH
    left = "low" in opened or math.isinf(float(lo))
    right = "high" in opened or math.isinf(float(hi))
    return (f"{'(' if left else '['}{number(lo, digits, sign=sign)}, "
            f"{number(hi, digits, sign=sign)}{')' if right else ']'}")


def p_value(p, *, prefix: bool = False) -> str:
    """``0.070`` or ``< 0.001`` (three decimals); with ``prefix``: ``p = 0.070`` / ``p < 0.001``."""
    if missing(p):
        return DASH
    if p < P_FLOOR:
        return "p < 0.001" if prefix else "< 0.001"
    return f"p = {p:.3f}" if prefix else f"{p:.3f}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 profile``, ``3 profiles``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def tex_number(x, digits: int, *, sign: bool = False) -> str:
    """A number for siunitx (``\\num{}`` or an S column): rounded, ``-`` for minus, ``{--}`` when missing."""
    if missing(x):
        return "{--}"
    x = float(x)
    if math.isinf(x):
        return "{$\\infty$}" if x > 0 else "{$-\\infty$}"
    text = f"{x:{'+' if sign else ''}.{digits}f}"
    return f"{0:.{digits}f}" if text.lstrip("+-").strip("0.") == "" else text


def tex_quantity(x, digits: int, unit: str = "", *, sign: bool = False) -> str:
    """``\\num{-17.4}\\,\\%``: siunitx sets the minus sign and the digit grouping; ``--`` when missing."""
    if missing(x):
        return "--"
    if math.isinf(float(x)):  # an interval open to infinity: siunitx's \num takes no symbol
        return ("\\ensuremath{+\\infty}" if float(x) > 0 and sign else "\\ensuremath{\\infty}" if float(x) > 0
                else "\\ensuremath{-\\infty}") + tex_unit(unit)
    tex = f"\\num{{{tex_number(x, digits, sign=sign)}}}"
    return tex + tex_unit(unit)


def tex_unit(unit: str, *, space: str = "\\,") -> str:
    """A comparison unit in TeX after a number: ``\\,\\%``, ``\\,pp``, ``\\,USD``, else ``~unit``."""
    known = {"%": "\\%", RATE_DIFFERENCE_UNIT: RATE_DIFFERENCE_UNIT, "USD": "USD"}
    return space + known[unit] if unit in known else (f"~{unit}" if unit else "")
