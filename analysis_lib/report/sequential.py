"""Markdown and LaTeX pieces of a sequential study: the design, the looks, the stop, the adjusted estimates.

Numbers come from :mod:`analysis_lib.inference.sequential` (the looks and :func:`~analysis_lib.inference.sequential.adjusted_estimates`);
this module only formats them, for RESULTS.md, the comparison report's planning section and the paper.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..core import outputs as files
from ..core.fileio import atomic_write_csv, atomic_write_json, read_json
from . import latex
from . import numbers as fmt
from .markdown import table as md_table

__all__ = ["design_sentence", "design_lines", "looks_table", "adjusted_table", "repeated_interval_text", "planning_table",
           "sequential_macros",
           "paper_paragraph", "adjusted_key", "write_outputs", "read_outputs", "SEQUENTIAL_JSON", "SEQUENTIAL_CSV"]

DECISIONS = {"efficacy": "every primary hypothesis crossed its efficacy boundary",
             "futility": "every primary hypothesis crossed its futility bound",
             "decided": "every primary hypothesis was decided (efficacy or futility)",
             "final": "the last look: the whole schedule ran", "budget": "the budget guardrail ended the study",
             "continue": "not stopped"}


def design_sentence(seq: dict) -> str:
    """One sentence: looks, spending, futility, stop rule and where the study stopped and why."""
    d = seq["design"]
    n_looks = len(seq.get("look_tasks") or seq.get("look_spend_usd") or seq.get("boundaries") or [])
    fut = "no futility bound" if d["futility"] == "none" else \
        f"a non-binding {d['futility'].replace('_', '-')}-type futility bound (power {d['power']})"
    when = "after equal shares of the tasks" if isinstance(d["looks"], int) else \
        f"at {', '.join(f'{x:g}' for x in d['looks'])} of the {'tasks' if d['timing'] == 'tasks' else 'budget'}"
    looks = seq.get("looks") or []
    last = looks[-1] if looks else None
    if last is None:
        stop = "No look was taken."
    else:
        why = DECISIONS.get(last["decision"], last["decision"])
        stop = (f"The study stopped at look {last['look']} of {n_looks} ({last['tasks']} of {seq['n_tasks']} tasks): "
                f"{why}.")
    return (f"Group-sequential design: {n_looks} looks {when}, Lan-DeMets {d['efficacy'].replace('_', '-')}-type alpha "
            f"spending over the primary family ({seq['family']} hypotheses, Holm-shared alpha {seq['alpha']}), {fut}, "
            f"stopping when {'every primary hypothesis is decided' if d['stop'] == 'all' else 'one is rejected'}. "
            + stop)


def looks_table(looks: list[dict]) -> str:
    """One row per look and primary hypothesis: tasks, p, boundary, status, the look's decision."""
    rows = []
    for lk in looks:
        for h in lk["hypotheses"]:
            rows.append([str(lk["look"]), f"{lk['tasks']} ({lk['pairs']} pairs)", (lk.get("at") or "–")[:16].replace("T", " "),
                         "–" if lk.get("spent_usd") is None else f"{lk['spent_usd']:.2f} USD",
                         f"`{h['metric']}` {h['profile_b']} vs {h['profile_a']}", _num(h["p_value"]),
                         _num(h["nominal_p"]), _num(h["level"]), "–" if h.get("futility_z") is None else _num(h["futility_z"]),
                         h["status"], lk["decision"]])
    return md_table(["look", "tasks", "at (UTC)", "spent", "hypothesis", "p", "boundary (nominal p ≤)", "alpha share",
                     "futility Z <", "status", "decision"], rows)


def _num(x, d: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{d}g}"


def _est(r: pd.Series | object, est, lo, hi, opened: str | None = None) -> str:
    """An estimate and its interval on the row's printed scale (pp, %), ends left out printed open."""
    scale, unit = r.scale, r.unit
    if est is None or pd.isna(est):
        return "–"
    k = 100.0 if scale in fmt.POINT_SCALES else 1.0
    u = "pp" if scale in fmt.POINT_SCALES else ("%" if unit == "%" else "")
    digits = 1

    def f(x) -> str:
        if x is None or pd.isna(x):
            return "–"
        if not math.isfinite(x):
            return "−∞" if x < 0 else "+∞"
        return fmt.number(k * x, digits, sign=True)

    ends = opened if isinstance(opened, str) else ""
    left = "(" if "low" in ends or (lo is not None and not pd.isna(lo) and math.isinf(lo)) else "["
    right = ")" if "high" in ends or (hi is not None and not pd.isna(hi) and math.isinf(hi)) else "]"
    return f"{f(est)} {u} {left}{f(lo)}, {f(hi)}{right}".replace("  ", " ")


def _odds(x) -> str:
    if x is None or pd.isna(x):
        return "–"
    return "+∞" if math.isinf(x) else f"{x:.2f}"


def repeated_interval_text(r) -> str:
    """A row's repeated interval as it is: on McNemar's discordant-pair odds ratio (the effect its exact test
    is exact for) or on the row's own scale, its open ends printed open, with its simultaneous confidence."""
    conf = getattr(r, "rci_confidence", None)
    level = f" (simultaneous {fmt.number(100 * conf, 1)} %)" if conf is not None and not pd.isna(conf) else ""
    opened = r.rci_open if isinstance(getattr(r, "rci_open", None), str) else ""
    if getattr(r, "rci_scale", None) == "odds_ratio":
        return (f"odds ratio {_odds(r.rci_estimate)} {'(' if 'low' in opened else '['}{_odds(r.rci_low)}, "
                f"{_odds(r.rci_high)}{')' if 'high' in opened or math.isinf(r.rci_high) else ']'}" + level)
    return _est(r, r.naive_estimate, r.rci_low, r.rci_high, opened) + level


def adjusted_table(adj: pd.DataFrame, confidence: float) -> str:
    """Per primary row: the fixed-sample estimate (labelled, not adjusted), and on the design that ran: the
    row's decision and level, the repeated interval and the median-unbiased estimate."""
    c = f"{confidence:.0%}"
    rows = []
    for r in adj.itertuples():
        decision = getattr(r, "decision", None)
        level = getattr(r, "level", None)
        rows.append([f"`{r.metric}` {r.profile_b} vs {r.profile_a}", str(r.look), str(r.n_pairs),
                     _est(r, r.naive_estimate, r.naive_ci_low, r.naive_ci_high, getattr(r, "naive_ci_open", None)),
                     (decision if isinstance(decision, str) else "–")
                     + (f" (tested at {fmt.number(level, 4)})" if level is not None and not pd.isna(level) else ""),
                     repeated_interval_text(r),
                     _est(r, r.mue, r.mue_ci_low, r.mue_ci_high) + f" (look {r.mue_look})"])
    return md_table(["primary hypothesis", "stop look", "tasks", f"fixed-sample estimate [{c} CI], not adjusted",
                     "decision", "repeated confidence interval (at the decision's look)",
                     "median-unbiased estimate [stage-wise interval at the row's level]"], rows)


def design_lines(seq: dict, adj: pd.DataFrame | None, confidence: float, mismatch: list[str]) -> list[str]:
    """RESULTS.md: the design, the looks, the stop and the adjusted estimates."""
    looks = seq.get("looks") or []
    out = ["## Sequential design", "", design_sentence(seq), ""]
    if looks:
        last = looks[-1]
        if last.get("reason"):
            out += [f"Why: {last['reason']}.", ""]
    out += ["Each look analysed the complete tasks only (every pair of each task done), with the plan's engine; "
            "no statistic was computed between looks. McNemar's exact and the sign-flip test are held against exact "
            "boundaries from their own null distribution at each look; the other tests against the normal recursion's "
            "boundary as a nominal p-value. A rejected hypothesis passes its alpha share on (Holm).", "",
            looks_table(looks), ""]
    for m in mismatch:
        out += [f"> **look record differs from this analysis:** {m}", ""]
    if adj is not None and len(adj):
        out += ["### Primary estimates adjusted for the sequential stop", "",
                "The fixed-sample columns treat the tasks at the stop as if their number had been fixed in advance: "
                "they are shown for reference only, labelled **fixed-sample, not adjusted**. The adjusted numbers use "
                "what made each decision: the row's p-values and its boundaries at the level it was tested at (alpha "
                "shared by Holm's procedure and passed on by rejections), the final look at the information it reached. "
                "A rejected row's inference ends at the look its test crossed; a row never rejected ends at the study's "
                "stop, and the decision column says why the study stopped there. The repeated confidence interval holds "
                "its simultaneous level whatever the stopping (Jennison & Turnbull 1989) and is the set of effects the "
                "look's own rule does not reject, so it leaves the null out exactly when the row was rejected (McNemar's "
                "exact test: on the discordant-pair odds ratio, the effect that test is exact for). The median-unbiased "
                "estimate and its interval follow the stage-wise ordering against the same boundaries, by the normal "
                "approximation on the estimand's scale.", "",
                adjusted_table(adj, confidence), ""]
    return out


def planning_table(rows: pd.DataFrame) -> str:
    """The planner's fixed-vs-sequential rows (:func:`analysis_lib.inference.sequential.planning`, with ``pair`` and
    ``analysis`` columns added): maximum and expected tasks and spend, and the power at the planned effect."""
    out = []
    for r in rows.itertuples():
        out.append([r.pair, r.analysis, r.design, ", ".join(str(x) for x in r.looks), _int(r.n_max),
                    _int(r.expected_n_null), _int(r.expected_n_effect), _usd(r.spend_max_median), _usd(r.spend_max_p90),
                    _usd(r.expected_spend_null), _usd(r.expected_spend_effect), _num(r.power, 3)])
    return md_table(["pair", "analysis", "design", "looks (tasks)", "max tasks", "E[tasks] null", "E[tasks] effect",
                     "max spend (median)", "max spend (p90)", "E[spend] null", "E[spend] effect", "power"], out)


def _int(x) -> str:
    return "–" if x is None or pd.isna(x) else f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def _usd(x) -> str:
    return "–" if x is None or pd.isna(x) else f"{x:,.2f} USD" if abs(x) < 1000 else f"{x:,.0f} USD"


def adjusted_key(r) -> str:
    """Macro stem of an adjusted primary row: the comparison's own stem (paper ``_key``) and ``Adjusted``."""
    return latex.macro_name(r.metric.replace("__", " "), r.profile_b, "vs", r.profile_a, "adjusted")


def sequential_macros(seq: dict, adj: pd.DataFrame | None, source: str = files.FULL_RUN) -> list[latex.Macro]:
    """Paper macros of a sequential study: looks planned, stop look and reason, tasks used, adjusted estimates.

    Adjusted estimates are set as the fixed-sample macros are (siunitx, the comparison's unit and decimals); an
    interval end the design leaves open (a repeated interval at a look that spends nothing) is ``--``.
    """
    looks = seq.get("looks") or []
    last = looks[-1] if looks else {}
    out = [latex.Macro("SeqLooksPlanned", str(len(seq.get("boundaries") or [])), "sequential", source, "looks planned"),
           latex.Macro("SeqSpending", latex.escape_tex(seq["design"]["efficacy"].replace("_", "-")), "sequential", source,
                       "Lan-DeMets spending function"),
           latex.Macro("SeqStopLook", str(last.get("look", "--")), "sequential", source, "look the study stopped at"),
           latex.Macro("SeqStopTasks", str(last.get("tasks", "--")), "sequential", source, "tasks analysed at the stop"),
           latex.Macro("SeqTasksPlanned", str(seq.get("n_tasks", "--")), "sequential", source, "tasks scheduled"),
           latex.Macro("SeqStopReason", latex.escape_tex(DECISIONS.get(last.get("decision", "continue"), "")),
                       "sequential", source, "why the study stopped")]
    if adj is not None:
        for r in adj.itertuples():
            key = adjusted_key(r)
            unit, d = fmt.comparison_unit(r.scale, r.unit), fmt.estimate_digits(r)
            odds = getattr(r, "rci_scale", None) == "odds_ratio"
            for suffix, v, what in (("Mue", r.mue, "median-unbiased estimate"), ("MueLow", r.mue_ci_low, "stage-wise CI low"),
                                    ("MueHigh", r.mue_ci_high, "stage-wise CI high"), ("RciLow", r.rci_low, "repeated CI low"),
                                    ("RciHigh", r.rci_high, "repeated CI high")):
                if odds and suffix.startswith("Rci"):  # McNemar's: the discordant-pair odds ratio, no unit
                    text = "--" if fmt.missing(v) or not math.isfinite(v) else f"\\num{{{v:.2f}}}"
                    what += " (discordant-pair odds ratio)"
                else:
                    text = "--" if fmt.missing(v) or not math.isfinite(v) else fmt.tex_quantity(fmt.scaled(r, v), d, unit, sign=True)
                out.append(latex.Macro(key + suffix, text, r.metric, source, f"{what}; {r.profile_b} vs {r.profile_a}"))
    return out


def paper_paragraph(seq: dict, adj: pd.DataFrame | None, confidence: float) -> str:
    """The paper's sentences on the design, the stop and the adjusted estimates (macros only, no typed number)."""
    d = seq["design"]
    fut = "no futility bound" if d["futility"] == "none" else \
        f"a non-binding {latex.escape_tex(d['futility'].replace('_', '-'))}-type futility bound"
    text = ["\\paragraph{Sequential design.} The primary comparisons were planned for up to \\SeqLooksPlanned{} looks "
            "(interim analyses and the final one) with \\SeqSpending{}-type Lan--DeMets alpha spending, Holm-shared "
            f"over the primary family, and {fut}. The study stopped at look \\SeqStopLook{{}} (\\SeqStopTasks{{}} of "
            "\\SeqTasksPlanned{} tasks): \\SeqStopReason{}. The primary estimates above are fixed-sample numbers, not "
            "adjusted for the sequential stop."]
    c = f"{confidence:.0%}".replace("%", "\\%")
    for r in (adj.itertuples() if adj is not None else []):
        k = adjusted_key(r)
        who = (f"{latex.escape_tex(r.label)} of \\texttt{{{latex.escape_tex(r.profile_b)}}} against "
               f"\\texttt{{{latex.escape_tex(r.profile_a)}}}")
        conf = getattr(r, "rci_confidence", None)
        rc = c if conf is None or pd.isna(conf) else f"{fmt.number(100 * conf, 1)}\\%"
        of = " of the discordant-pair odds ratio" if getattr(r, "rci_scale", None) == "odds_ratio" else ""
        rci = f"the repeated {rc} confidence interval{of} \\{k}RciLow{{}} to \\{k}RciHigh{{}}"
        if fmt.missing(r.mue):  # the stage-wise ordering needs an interval with spread at the stop
            text.append(f"Adjusted for it, {who} has {rci} (no median-unbiased estimate: the fixed-sample interval at the "
                        "stop has no spread).")
        else:
            text.append(f"Adjusted for it, {who} has the median-unbiased estimate \\{k}Mue{{}} (stage-wise {c} CI "
                        f"\\{k}MueLow{{}} to \\{k}MueHigh{{}}) and {rci}.")
    return " ".join(text)


SEQUENTIAL_JSON = files.SEQUENTIAL
SEQUENTIAL_CSV = files.SEQUENTIAL_ESTIMATES


def write_outputs(out_dir: str | Path, record: dict | None, adjusted: pd.DataFrame | None,
                  confidence: float = 0.95) -> list[Path]:
    """Write the analysed design (``sequential.json``, with the plan's interval level) and the adjusted estimates
    (``sequential_estimates.csv``) for the paper; without a sequential run, remove any left by an earlier one."""
    out = Path(out_dir)
    if record is None:
        for name in (SEQUENTIAL_JSON, SEQUENTIAL_CSV):
            (out / name).unlink(missing_ok=True)
        return []
    written = [atomic_write_json(out / SEQUENTIAL_JSON, {**record, "confidence": confidence})]
    if adjusted is not None:
        written.append(atomic_write_csv(out / SEQUENTIAL_CSV, adjusted))
    else:
        (out / SEQUENTIAL_CSV).unlink(missing_ok=True)
    return written


def read_outputs(out_dir: str | Path) -> tuple[dict | None, pd.DataFrame | None]:
    """The design and adjusted estimates :func:`write_outputs` wrote, or ``(None, None)`` for a fixed design."""
    out = Path(out_dir)
    if not (out / SEQUENTIAL_JSON).exists():
        return None, None
    adj = pd.read_csv(out / SEQUENTIAL_CSV) if (out / SEQUENTIAL_CSV).exists() else None
    return read_json(out / SEQUENTIAL_JSON), adj
