"""The estimands beside intention to treat as people read them: Markdown sections, companion CSVs, TeX and macros.

Rendered from :class:`analysis_lib.inference.beside_itt.estimands.BesideResult` (or the companion CSVs it writes), so the
comparison report, RESULTS.md, notebook 02 and the paper show the same numbers.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..core.fileio import atomic_write_csv
from ..inference.beside_itt.bounds import is_unbounded
from ..inference.beside_itt.compliance import ASSUMPTIONS, ESTIMANDS, SCHEMA_COST_METRICS, TOKEN_CAVEAT
from ..inference.beside_itt.divergence import divergence_table
from ..inference.beside_itt.mediation import ASSUMPTIONS as MEDIATION_ASSUMPTIONS
from ..inference.results import FILES, BesideResult
from . import latex
from . import numbers as fmt
from .markdown import table as md_table

__all__ = ["ITT_LINE", "write_beside", "read_beside", "beside_markdown", "compliance_markdown", "bounds_markdown",
           "divergence_markdown", "mediation_markdown", "beside_tex", "beside_macros", "confidence_set"]

ITT_LINE = ("The planned comparisons are by assignment (intention to treat): every trial counts in the arm it was "
            "assigned to, whatever its agent did, and no trial is dropped for not calling the tools. The estimands "
            "below stand beside them, each under its own name and in its own file.")
DIVERGENCE_LINE = ("A discordant pair is repetition k of a task under A and under B where exactly one passed. Each "
                   "trajectory is read as its sequence of tool calls (root trajectory, in order), each call as its tool "
                   "name and target (the first file it edits, else reads; a shell call's program; else the name alone); "
                   "the first divergence is the first position where the two sequences differ (or where the shorter one "
                   "ends). Exploratory: a description of where the runs part ways, not a test.")


def write_beside(result: BesideResult, out_dir: str | Path) -> list[Path]:
    """The companion CSVs of ``comparisons.csv`` that were computed; a file of an estimand not computed is removed."""
    out = Path(out_dir)
    written = []
    for key, name in FILES.items():
        frame = getattr(result, key)
        if frame is None:
            (out / name).unlink(missing_ok=True)  # a table from an earlier run must not outlive its input
        else:
            written.append(atomic_write_csv(out / name, frame))
    return written


def read_beside(folder: str | Path) -> dict[str, pd.DataFrame]:
    """The companion CSVs present in an analysis folder, by their key in :data:`analysis_lib.inference.beside_itt.estimands.FILES`."""
    folder = Path(folder)
    return {key: pd.read_csv(folder / name) for key, name in FILES.items() if (folder / name).exists()}


def _pct(x) -> str:
    return fmt.DASH if fmt.missing(x) else fmt.number(100 * float(x), 1) + " %"


def _set_kind(r) -> str:
    kind = getattr(r, "ci_set", None)
    return kind if isinstance(kind, str) else "interval"


def _excludes_zero(r) -> bool:
    return _set_kind(r) == "two rays" and float(r.ci_gap_low) < 0 < float(r.ci_gap_high)


def confidence_set(r) -> str:
    """A compliance row's confidence set as it is: ``[a, b]``; two rays as a union, saying when it excludes 0
    (``(−∞, −2.3] ∪ [+0.5, +∞), excludes 0``); the whole line. On a % scale −∞ is −100 %, an end not attained."""
    kind = _set_kind(r)
    floor = fmt.number(-100.0, 1, sign=True) if r.scale == "ratio" else fmt.MINUS + "∞"
    if kind == "whole line":
        return f"({floor}, +∞)"
    if kind == "two rays":
        d = fmt.estimate_digits(r)
        text = (f"({floor}, {fmt.number(fmt.scaled(r, r.ci_gap_low), d, sign=True)}] ∪ "
                f"[{fmt.number(fmt.scaled(r, r.ci_gap_high), d, sign=True)}, +∞)")
        return text + (", excludes 0" if _excludes_zero(r) else "")
    low_open = r.scale == "ratio" and not fmt.missing(r.ci_low) and float(r.ci_low) <= -100.0
    return fmt.interval(r, opened="low" if low_open else "")


def _est(r) -> str:
    """Estimate and interval (a confidence set: Fieller's may be unbounded) of a compliance or bounds row on its
    printed scale, flagged when the estimate lies outside the parameter space."""
    if fmt.missing(r.estimate):
        return r.note if isinstance(getattr(r, "note", None), str) else fmt.DASH
    flag = " (outside the parameter space)" if getattr(r, "outside_parameter_space", False) is True else ""
    return f"{fmt.estimate(r)} {confidence_set(r) if hasattr(r, 'ci_set') else fmt.interval(r)}{flag}"


def _why_unbounded(r) -> str:
    """The interval's method, and for an unbounded Fieller set why (the reason beside the number)."""
    method = r.interval if isinstance(r.interval, str) else fmt.DASH
    kind = _set_kind(r)
    if kind in ("two rays", "whole line"):
        return f"{method}: {kind}, the share of users is not significantly above 0"
    return method


def _pair(r) -> str:
    return f"{r.profile_b} vs {r.profile_a}"


def compliance_markdown(comp: pd.DataFrame, confidence: float = 0.95) -> list[str]:
    """The CACE table, then the naive comparison apart and labelled biased, then the assumptions."""
    c = f"{confidence:.0%}"
    out = ["### Effect among trials that used MCP (CACE, a secondary estimand)", ""]
    if comp.empty:
        return out + ["No profile pair compares an arm offered MCP tools with one that was not: no CACE.", ""]
    rows, naive = [], []
    for (_, _, metric), g in comp.groupby(["profile_a", "profile_b", "metric"], sort=False):
        by = {r.estimand: r for r in g.itertuples()}
        itt, share, cace, nv = by["itt_mean"], by["share_used"], by["cace"], by["naive_users"]
        used = f"{_pct(share.estimate)} [{fmt.number(100 * share.ci_low, 1)}, {fmt.number(100 * share.ci_high, 1)}] " \
               f"({share.n_used} of {share.n_trials_b})" if not fmt.missing(share.estimate) else fmt.DASH
        rows.append([_pair(itt), f"{itt.label}, `{metric}`", _est(itt), used, _est(cace), _why_unbounded(cace),
                     str(itt.n_tasks)])
        naive.append([_pair(nv), f"{nv.label}, `{metric}`", _est(nv), str(nv.n_tasks)])
    out += ["CACE = effect of offering MCP (`itt_mean`) / share of the MCP arm's trials that called an MCP tool "
            "(`share_used`), per task pair (`compliance.csv`).", "",
            md_table(["pair", "metric", f"effect of offering MCP (ITT, mean per task) [{c} CI]",
                      f"trials that used MCP [{c} CI]", f"effect among users (CACE) [{c} CI]", "interval", "tasks"], rows),
            "", ASSUMPTIONS]
    if comp["metric"].isin(SCHEMA_COST_METRICS).any():
        out += ["", f"*Caveat.* {TOKEN_CAVEAT}"]
    out += ["", "**Naive comparison, biased (not an estimate of either effect):** the trials that called an MCP tool "
            "against all baseline trials. Agents choose when to call the tools, so users are not comparable with the "
            "baseline; it is shown only to contrast it with the CACE.", "",
            md_table(["pair", "metric", f"users vs baseline (biased) [{c} CI]", "tasks with a user"], naive), ""]
    return out


def bounds_markdown(bounds: pd.DataFrame, confidence: float = 0.95) -> list[str]:
    """Per primary comparison: the planned estimate, the trials lost per arm with their reasons, and the bounds."""
    c = f"{confidence:.0%}"
    out = ["### Infrastructure failures: worst- and best-case bounds", ""]
    if bounds.empty:
        return out + ["No primary comparison to bound.", ""]
    rows, notes = [], []
    for r in bounds.itertuples():
        lost = f"{r.n_affected_a} / {r.n_affected_b}"
        reasons = "; ".join(f"{p}: {why}" for p, why in ((r.profile_a, r.reasons_a), (r.profile_b, r.reasons_b))
                            if isinstance(why, str) and why)
        unit = fmt.comparison_unit(r.scale, r.unit)
        unbounded = is_unbounded(r)
        low = f"{fmt.number(fmt.scaled(r, r.bound_low), fmt.estimate_digits(r), sign=True)} {unit} " \
              f"{fmt.interval(r, 'bound_low_ci_low', 'bound_low_ci_high')}" if not fmt.missing(r.bound_low) else \
            ("unbounded" if unbounded else fmt.DASH)
        high = f"{fmt.number(fmt.scaled(r, r.bound_high), fmt.estimate_digits(r), sign=True)} {unit} " \
               f"{fmt.interval(r, 'bound_high_ci_low', 'bound_high_ci_high')}" if not fmt.missing(r.bound_high) else \
            ("unbounded" if unbounded else fmt.DASH)
        worst = {"low": "lower", "high": "upper"}.get(str(r.worst_case), fmt.DASH)
        support = r.support if isinstance(getattr(r, "support", None), str) else \
            ("pass or fail" if r.scale in fmt.POINT_SCALES else "none declared")
        rows.append([f"{r.label}, `{r.metric}`", _pair(r), f"{fmt.estimate(r)} {fmt.interval(r)}", lost,
                     str(r.n_tasks_affected), reasons or fmt.DASH, support, low, high, worst])
        if isinstance(r.note, str) and r.note and r.n_affected_a + r.n_affected_b:
            notes.append(f"- {r.label}, {_pair(r)}: {r.note}.")
    out += ["The planned estimate leaves infrastructure errors out and counts trials whose agent never reached a "
            "model as the source scored them. The bounds impute the outcomes of those trials at both ends of what they "
            "could have been and rerun the planned test: pass/fail as fail in B and pass in A (lower) and the reverse "
            "(upper); continuous metrics at the ends of the support the plan declares for them (`beside_itt.support`), "
            "per task; without a declared support a continuous bound is unbounded: a lost trial could have had any "
            "value (`infra_bounds.csv`).", "",
            md_table(["metric", "pair", f"planned estimate [{c} CI]", "trials lost (A / B)", "tasks affected", "why",
                      "support", f"lower bound [{c} CI]", f"upper bound [{c} CI]", "worst case for B"], rows), ""]
    if notes:
        out += ["**Where the lost trials decide:**", "", *notes, ""]
    return out


def divergence_markdown(div: pd.DataFrame | None, note: str | None = None) -> list[str]:
    """The divergence table of the discordant pairs (exploratory)."""
    out = ["### Where discordant trajectories diverge (exploratory)", ""]
    if div is None:
        return out + [f"Not computed: {note}." if note else "Not computed.", ""]
    table = divergence_table(div)
    if table.empty:
        return out + [DIVERGENCE_LINE, "", "No discordant pair: every task's repetition k passed or failed under both "
                      "profiles alike.", ""]
    mcp = {(r.profile_a, r.profile_b): r.mcp_arm for r in div.itertuples() if isinstance(r.mcp_arm, str) and r.mcp_arm}
    rows = [[f"{r.profile_b} vs {r.profile_a}", str(r.passed), str(r.n_pairs), str(r.n_no_trajectory), str(r.n_identical),
             str(r.n_diverged), f"{r.n_at_mcp_call}" if mcp.get((r.profile_a, r.profile_b)) else fmt.DASH,
             f"{r.n_at_other_call}" if mcp.get((r.profile_a, r.profile_b)) else str(r.n_diverged),
             fmt.number(r.median_diverge_at, 1) if not fmt.missing(r.median_diverge_at) else fmt.DASH]
            for r in table.itertuples()]
    out += [DIVERGENCE_LINE, "",
            md_table(["pair", "passed", "discordant pairs", "no trajectory", "identical calls", "diverged",
                      "first divergence at an MCP call of the MCP arm", "at another call",
                      "median call number of the first divergence"], rows), ""]
    missing = int(table["n_no_trajectory"].sum())
    if missing:
        out += [f"{fmt.plural(missing, 'pair')} could not be compared: a trajectory of one side or both is not in the "
                "runs (only the metrics the source recorded are).", ""]
    return out


def mediation_markdown(med: pd.DataFrame | None, confidence: float = 0.95) -> list[str]:
    """The decomposition table (exploratory) with its assumptions."""
    out = ["### Mediation through trajectory behaviour (exploratory)", ""]
    if med is None:
        return out + ["Not declared by the analysis plan (`beside_itt.mediation: true` reports it).", ""]
    c = f"{confidence:.0%}"

    def cell(r) -> str:
        if fmt.missing(r.estimate):
            return fmt.DASH
        k = 100.0 if r.scale in ("pass_rate", "share") else 1.0
        d = 2 if r.scale in ("per_unit",) else 1
        lo = fmt.number(k * r.ci_low, d, sign=True) if not fmt.missing(r.ci_low) else fmt.DASH
        hi = fmt.number(k * r.ci_high, d, sign=True) if not fmt.missing(r.ci_high) else fmt.DASH
        unit = {"pass_rate": " pp", "share": " %", "ratio": " %"}.get(r.scale, f" {r.unit}")
        return f"{fmt.number(k * r.estimate, d, sign=True)}{unit} [{lo}, {hi}]"

    rows = []
    for (a, b, outcome, mediator), g in med.groupby(["profile_a", "profile_b", "outcome", "mediator"], sort=False):
        by = {r.estimand: r for r in g.itertuples()}
        if "total_effect" not in by:
            note = next((r.note for r in g.itertuples() if isinstance(r.note, str)), fmt.DASH)
            rows.append([f"{b} vs {a}", f"`{outcome}`", f"`{mediator}`", note, "", "", "", ""])
            continue
        rows.append([f"{b} vs {a}", f"`{outcome}`", f"`{mediator}`", cell(by["total_effect"]), cell(by["arm_on_mediator"]),
                     cell(by["indirect_effect"]), cell(by["direct_effect"]), cell(by["share_mediated"])])
    return out + ["Per pair, outcome and mediator: linear models with task fixed effects, indirect effect = (arm → "
                  "mediator) × (mediator → outcome), direct = total − indirect; percentile bootstrap over tasks "
                  "(`mediation.csv`). Tokens on the log scale, shown as % change.", "",
                  md_table(["pair", "outcome", "mediator", f"total effect [{c} CI]", f"arm → mediator [{c} CI]",
                            f"through the mediator [{c} CI]", f"direct [{c} CI]", f"share mediated [{c} CI]"], rows),
                  "", MEDIATION_ASSUMPTIONS, ""]


def beside_markdown(result: BesideResult | dict[str, pd.DataFrame], confidence: float = 0.95,
                    notes: dict[str, str] | None = None) -> list[str]:
    """The ``## Beside intention to treat`` section: ITT first, then every estimand computed."""
    frames = result.frames() if isinstance(result, BesideResult) else result
    notes = result.notes if isinstance(result, BesideResult) else (notes or {})
    out = ["## Beside intention to treat", "", ITT_LINE, ""]
    if "compliance" in frames:
        out += compliance_markdown(frames["compliance"], confidence)
    if "bounds" in frames:
        out += bounds_markdown(frames["bounds"], confidence)
    if "divergence" in frames or "divergence" in notes:
        out += divergence_markdown(frames.get("divergence"), notes.get("divergence"))
    if "mediation" in frames:
        out += mediation_markdown(frames["mediation"], confidence)
    return out


# --------------------------------------------------------------------------- TeX


def _tex_est(r, low: str = "ci_low", high: str = "ci_high", value: str = "estimate") -> str:
    d = fmt.estimate_digits(r)
    v, lo, hi = getattr(r, value), getattr(r, low), getattr(r, high)
    if fmt.missing(v):
        return "unbounded" if value.startswith("bound") and is_unbounded(r) else "--"
    unit = fmt.tex_unit(u) if (u := fmt.comparison_unit(r.scale, r.unit)) in ("%", fmt.RATE_DIFFERENCE_UNIT) else ""
    if value == "estimate" and hasattr(r, "ci_set") and _set_kind(r) != "interval":
        return f"{fmt.tex_number(fmt.scaled(r, v), d, sign=True)}{unit} {_tex_set(r)}"
    ends = "" if fmt.missing(lo) else f" {'(' if math.isinf(float(lo)) else '['}" \
                                      f"{fmt.tex_number(fmt.scaled(r, lo), d, sign=True)}, " \
                                      f"{fmt.tex_number(fmt.scaled(r, hi), d, sign=True)}{')' if math.isinf(float(hi)) else ']'}"
    return f"{fmt.tex_number(fmt.scaled(r, v), d, sign=True)}{unit}{ends}"


def _tex_set(r) -> str:
    """An unbounded Fieller set in TeX: two rays as a union (saying when it excludes 0), or the whole line."""
    d = fmt.estimate_digits(r)
    floor = "$-100$" if r.scale == "ratio" else "$-\\infty$"
    if _set_kind(r) == "whole line":
        return f"({floor}, $\\infty$)"
    return (f"({floor}, {fmt.tex_number(fmt.scaled(r, r.ci_gap_low), d, sign=True)}] $\\cup$ "
            f"[{fmt.tex_number(fmt.scaled(r, r.ci_gap_high), d, sign=True)}, $\\infty$)"
            + (", excludes 0" if _excludes_zero(r) else ""))


def _tex_text(text: str) -> str:
    """Plain text for TeX: specials escaped, the minus sign in math mode."""
    return latex.escape_tex(text).replace(fmt.MINUS, "$-$")


def _name_columns(frame: pd.DataFrame, metric_width: float, arm_width: float) -> str:
    """The metric and arm columns: as wide as their names, or wrapped within the given share of the page when the
    names are long (a study with configurations names each arm ``<configuration> / <arm>``)."""
    long = max((len(str(v)) for v in frame.get("profile_b", pd.Series(dtype=object))), default=0) > 24
    return latex.column(metric_width) + latex.column(arm_width) if long else "ll"


def beside_tex(frames: dict[str, pd.DataFrame], simulated: bool) -> str:
    """Two small tables for the paper: ITT and CACE with the share of users; the infrastructure bounds."""
    parts = []
    comp = frames.get("compliance")
    if comp is not None and len(comp):
        rows = []
        for _, g in comp.groupby(["profile_a", "profile_b", "metric"], sort=False):
            by = {r.estimand: r for r in g.itertuples()}
            share = by["share_used"]
            rows.append(" & ".join([_tex_text(by["itt_mean"].label), _tex_text(share.profile_b),
                                    _tex_est(by["itt_mean"]),
                                    "--" if fmt.missing(share.estimate) else f"{fmt.tex_number(100 * share.estimate, 1)}\\,\\%",
                                    _tex_est(by["cace"])]) + " \\\\")
        parts.append(
            "\\begin{table*}[tbp]\n\\centering\n\\footnotesize\\setlength{\\tabcolsep}{3pt}\n"
            "\\caption{Effect of offering MCP (ITT) and among trials that used it (CACE)"
            + (" (simulated data)" if simulated else "") + "}\n\\label{tab:cace}\n"
            "\\begin{tabular}{" + _name_columns(comp, 0.2, 0.22) + "lll}\n\\toprule\n"
            "Metric & B & ITT [95\\% CI] & Used MCP & CACE [95\\% CI] \\\\\n\\midrule\n" + "\n".join(rows)
            + "\n\\bottomrule\n\\end{tabular}\n\\par\\smallskip\\parbox{\\linewidth}{\\footnotesize "
            + _tex_text(f"ITT: {ESTIMANDS['itt_mean']}. CACE: ITT / share of B's trials that called an MCP tool "
                        f"(secondary estimand). {ASSUMPTIONS}") + "}\n\\end{table*}")
    bounds = frames.get("bounds")
    if lost_any(bounds):
        rows = [" & ".join([_tex_text(r.label), _tex_text(r.profile_b), _tex_est(r),
                            f"{r.n_affected_a}/{r.n_affected_b}",
                            _tex_est(r, "bound_low_ci_low", "bound_low_ci_high", "bound_low"),
                            _tex_est(r, "bound_high_ci_low", "bound_high_ci_high", "bound_high")]) + " \\\\"
                for r in bounds.itertuples()]
        parts.append(
            "\\begin{table*}[tbp]\n\\centering\n\\footnotesize\\setlength{\\tabcolsep}{3pt}\n"
            "\\caption{Primary comparisons with bounds for the trials lost to infrastructure failures"
            + (" (simulated data)" if simulated else "") + "}\n\\label{tab:infra-bounds}\n"
            "\\begin{tabular}{" + _name_columns(bounds, 0.14, 0.18) + "llll}\n"
            "\\toprule\nMetric & B & Planned [95\\% CI] & Lost A/B & Lower bound & Upper bound \\\\\n\\midrule\n"
            + "\n".join(rows) + "\n\\bottomrule\n\\end{tabular}\n\\par\\smallskip\\parbox{\\linewidth}{\\footnotesize "
            "Lost: trials with an infrastructure error or whose agent never reached a model, per arm. Bounds: their "
            "outcomes imputed at both ends of what they could have been (pass/fail: fail in B and pass in A, and the "
            "reverse; continuous: the ends of the support the analysis plan declares, per task; unbounded without "
            "one), the planned test rerun.}\n\\end{table*}")
    return "\n\n".join(parts) if parts else "% nothing reported beside intention to treat"


def lost_any(bounds: pd.DataFrame | None) -> bool:
    """Whether any primary comparison lost a trial to infrastructure: the paper's bounds table is shown only then (a
    table of planned estimates repeated as both bounds says nothing)."""
    if bounds is None or not len(bounds) or not {"n_affected_a", "n_affected_b"} <= set(bounds.columns):
        return False
    return bool((pd.to_numeric(bounds["n_affected_a"], errors="coerce").fillna(0)
                 + pd.to_numeric(bounds["n_affected_b"], errors="coerce").fillna(0)).gt(0).any())


def _tex_value(x, digits: int, unit_tex: str) -> str:
    """A signed value with its TeX unit for a macro: ``--`` when unknown, an open end at infinity as the symbol."""
    return "--" if fmt.missing(x) else fmt.tex_quantity(x, digits, sign=True) + unit_tex


def beside_macros(frames: dict[str, pd.DataFrame], folder: str) -> list[latex.Macro]:
    """Macros for the CACE (estimate, interval, share of users) and the bounds of the primary comparisons;
    ``folder``: where the companion CSVs are (relative), named in each macro's comment."""
    out: list[latex.Macro] = []
    source = f"{folder.rstrip('/')}/{FILES['compliance']}"
    comp = frames.get("compliance")
    if comp is not None and len(comp):
        for r in comp[comp["estimand"].isin(["cace", "share_used"]) & comp["estimate"].notna()].itertuples():
            stem = latex.macro_name("cace" if r.estimand == "cace" else "share used", r.metric.replace("__", " "),
                                    r.profile_b, "vs", r.profile_a)
            what = f"{ESTIMANDS[r.estimand]}; {r.profile_b} vs {r.profile_a}"
            if r.estimand == "share_used":
                out.append(latex.Macro(stem, f"\\num{{{fmt.tex_number(100 * r.estimate, 1)}}}\\,\\%", r.metric, source, what))
                continue
            d, unit = fmt.estimate_digits(r), fmt.tex_unit(u) if (u := fmt.comparison_unit(r.scale, r.unit)) in ("%", fmt.RATE_DIFFERENCE_UNIT) else ""
            bounded = _set_kind(r) == "interval"
            for suffix, v in (("Est", r.estimate), ("Low", r.ci_low), ("High", r.ci_high)):
                if suffix != "Est" and not bounded:
                    continue  # an unbounded set has no two ends: the Set macro says what it is
                out.append(latex.Macro(stem + suffix, _tex_value(fmt.scaled(r, v), d, unit), r.metric, source,
                                       f"{what}; {suffix.lower()}"))
            if not bounded:
                out.append(latex.Macro(stem + "Set", _tex_set(r), r.metric, source,
                                       f"{what}; Fieller's confidence set, unbounded: the share of users is not "
                                       "significantly above 0"))
    bounds = frames.get("bounds")
    source = f"{folder.rstrip('/')}/{FILES['bounds']}"
    if bounds is not None and len(bounds):
        for r in bounds[bounds["bound_low"].notna()].itertuples():
            stem = latex.macro_name("infra bound", r.metric.replace("__", " "), r.profile_b, "vs", r.profile_a)
            d, unit = fmt.estimate_digits(r), fmt.tex_unit(u) if (u := fmt.comparison_unit(r.scale, r.unit)) in ("%", fmt.RATE_DIFFERENCE_UNIT) else ""
            for suffix, v in (("Low", r.bound_low), ("High", r.bound_high)):
                out.append(latex.Macro(stem + suffix, _tex_value(fmt.scaled(r, v), d, unit), r.metric, source,
                                       f"{suffix.lower()} bound, infrastructure failures imputed; "
                                                         f"{r.profile_b} vs {r.profile_a}"))
    return out
