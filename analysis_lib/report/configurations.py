"""A study with configurations, as people read it: per configuration, then pooled across them.

Rendered from the analysis' rows (``comparisons.csv`` with its ``configuration`` column), the pooled primary
effects (``pooled.csv``: REML with the Hartung-Knapp-Sidik-Jonkman interval, Paule-Mandel and DerSimonian-Laird
beside it, the heterogeneity and the prediction interval), the entries pooled (``pooled_configurations.csv``), the
exploratory meta-regression (``meta_regression.csv``) and the per-configuration design audit
(``design_configurations.csv``). Nothing is computed here: :func:`write_pooling` writes what
:func:`analysis_lib.inference.analysis.pool_configurations` pooled, and every table, macro and sentence quotes
those cells, formatted once (:mod:`.numbers`). The prediction interval is never quoted without its note
(:data:`~analysis_lib.inference.pooling.PI_NOTE`): it covers fewer new configurations than its level unless
heterogeneity dominates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core import outputs as files
from ..core.fileio import atomic_write_csv
from ..inference.comparisons import POINT_SCALES, RATE_DIFFERENCE_UNIT
from ..inference.pooling import EFFECT_COLUMNS, METHOD_COLUMNS, PI_NOTE
from ..inference.results import ConfigurationPooling, Pooled
from ..study.study import Study
from . import latex
from . import numbers as fmt
from .markdown import table as md_table

__all__ = ["POOLED_COLUMNS", "PoolingTables", "ConfigurationInputs", "configuration_inputs", "study_audit_lines",
           "pooling_tables", "write_pooling", "read_pooling", "pooling_markdown", "configuration_audit_markdown",
           "configuration_audit_tex", "configurations_tex", "pooling_macros", "pooled_sentence", "heterogeneity_tex",
           "forest_captions", "forest_stem", "pooled_line", "configuration_threats_tex", "THREAT_CHECKS"]

# The audit's checks that only a configuration shows (study.configurations): when one warns, the limitations say it.
THREAT_CHECKS = ("time_limits", "uptake", "configurations")

# pooled.csv: the three pooled estimates per primary metric (METHOD_COLUMNS), what was left out, the notes; a
# primary metric that could not be pooled is one row with role ``not pooled`` and why in ``note``.
POOLED_COLUMNS = [*METHOD_COLUMNS, "excluded", "prediction_note", "regression_note", "note", "simulated"]
REGRESSION_COLUMNS = ["metric", "term", "estimate", "se", "statistic", "df", "p_val", "ci_low", "ci_high", "k", "tau2",
                      "tau2_without", "r2", "f", "f_df1", "f_df2", "f_p", "note", "simulated"]
METHOD_NAMES = {"primary": "REML, HKSJ", "sensitivity": "Paule-Mandel, HKSJ", "comparison": "DerSimonian-Laird, normal"}


@dataclass
class PoolingTables:
    """What :func:`write_pooling` wrote, read back: the pooled rows, the entries and the meta-regression."""

    pooled: pd.DataFrame
    effects: pd.DataFrame
    regression: pd.DataFrame | None = None

    def rows(self, metric: str) -> pd.DataFrame:
        """The pooled rows of one metric (primary first), empty when it was not pooled."""
        sub = self.pooled[(self.pooled["metric"] == metric) & (self.pooled["role"] != "not pooled")]
        return sub.set_index("role").reindex([r for r in METHOD_NAMES if r in set(sub["role"])])

    def metrics(self) -> list[str]:
        """The metrics pooled, in the plan's order."""
        return list(dict.fromkeys(self.pooled.loc[self.pooled["role"] == "primary", "metric"]))


def pooling_tables(pooling: ConfigurationPooling, simulated: bool) -> PoolingTables:
    """The pooling of an analysis as the tables :func:`write_pooling` writes (and :func:`read_pooling` reads)."""
    rows, effects, regression = [], [], []
    for p in pooling.pooled:
        rows.append(p.methods.assign(excluded="; ".join(p.excluded), prediction_note=PI_NOTE,
                                     regression_note=p.regression_note or "", note="", simulated=simulated))
        effects.append(p.effects.rename(columns={"label": "configuration"}).assign(simulated=simulated))
        if p.regression is not None:
            r = p.regression
            regression.append(r.coefficients.assign(metric=p.metric, k=r.k, tau2=r.tau2, tau2_without=r.tau2_without,
                                                    r2=r.r2, f=r.f, f_df1=r.f_df1, f_df2=r.f_df2, f_p=r.f_p,
                                                    note=p.regression_note or "", simulated=simulated))
    for metric, why in pooling.not_pooled.items():
        rows.append(pd.DataFrame([{"metric": metric, "role": "not pooled", "note": why, "simulated": simulated}]))
    entry_columns = ["configuration", *EFFECT_COLUMNS[1:], "simulated"]
    return PoolingTables(
        pd.concat(rows, ignore_index=True).reindex(columns=POOLED_COLUMNS) if rows else pd.DataFrame(columns=POOLED_COLUMNS),
        pd.concat(effects, ignore_index=True)[entry_columns] if effects else pd.DataFrame(columns=entry_columns),
        pd.concat(regression, ignore_index=True).reindex(columns=REGRESSION_COLUMNS) if regression else None)


def write_pooling(pooling: ConfigurationPooling | None, out_dir: str | Path, simulated: bool) -> list[Path]:
    """``pooled.csv``, ``pooled_configurations.csv`` and (when a meta-regression ran) ``meta_regression.csv``, each
    written atomically; a study without configurations writes none and removes those an earlier analysis left."""
    out = Path(out_dir)
    if pooling is None:
        for name in (files.POOLED, files.POOLED_CONFIGURATIONS, files.META_REGRESSION):
            (out / name).unlink(missing_ok=True)  # a table from an earlier analysis must not outlive its input
        return []
    tables = pooling_tables(pooling, simulated)
    written = [atomic_write_csv(out / files.POOLED, tables.pooled),
               atomic_write_csv(out / files.POOLED_CONFIGURATIONS, tables.effects)]
    if tables.regression is not None:
        written.append(atomic_write_csv(out / files.META_REGRESSION, tables.regression))
    else:
        (out / files.META_REGRESSION).unlink(missing_ok=True)
    return written


def read_pooling(folder: str | Path) -> PoolingTables | None:
    """The pooling tables of an analysis folder, None when the study has no configurations."""
    folder = Path(folder)
    if not (folder / files.POOLED).exists():
        return None
    text = {"configuration": "object", "metric": "object", "label": "object", "note": "object", "excluded": "object"}
    pooled = pd.read_csv(folder / files.POOLED, dtype={c: t for c, t in text.items() if c != "configuration"})
    effects = pd.read_csv(folder / files.POOLED_CONFIGURATIONS, dtype=text) if (folder / files.POOLED_CONFIGURATIONS).exists() \
        else pd.DataFrame(columns=["configuration", *EFFECT_COLUMNS[1:]])
    reg = folder / files.META_REGRESSION
    return PoolingTables(pooled, effects, pd.read_csv(reg) if reg.exists() else None)


@dataclass
class ConfigurationInputs:
    """What the paper shows of a study with configurations: its arms within each, the per-configuration audit and
    the pooled effects (None before the comparisons ran)."""

    control: str
    treatment: str
    configurations: list[str]
    audit: pd.DataFrame | None = None
    pooling: PoolingTables | None = None


def configuration_inputs(study: Study, comparisons_dir: str | Path) -> ConfigurationInputs | None:
    """The paper's inputs of a study with configurations (its saved audit and pooling tables); None without them."""
    if not study.configurations or study.design is None:
        return None
    audit = study.audit.configurations if study.audit is not None else None
    return ConfigurationInputs(str(study.design.baseline), str(study.design.treatment_arm), study.configurations, audit,
                               read_pooling(comparisons_dir))


def study_audit_lines(study: Study) -> list[str]:
    """The per-configuration audit of a study with configurations as Markdown lines (none for other studies)."""
    if not study.configurations or study.design is None or study.audit is None:
        return []
    return configuration_audit_markdown(study.audit.configurations, str(study.design.baseline), str(study.design.treatment_arm))


# --------------------------------------------------------------------------- cells


def _k(row) -> float:
    """The printed scale of a pooled or comparison row: rate differences in pp."""
    return 100.0 if str(getattr(row, "scale", "")) in (*POINT_SCALES, "rate_difference") else 1.0


def _unit(row) -> str:
    scale = str(getattr(row, "scale", ""))
    if scale in (*POINT_SCALES, "rate_difference"):
        return RATE_DIFFERENCE_UNIT
    return "%" if scale in ("ratio", "log_ratio", "cost_per_success") else str(getattr(row, "unit", "") or "")


def _digits(row) -> int:
    return 1 if _unit(row) in ("%", RATE_DIFFERENCE_UNIT) else 2


def _est(row) -> str:
    """``+16.0 pp [+9.7, +22.2]``: a pooled row's estimate and interval on the printed scale."""
    k, d, u = _k(row), _digits(row), _unit(row)
    return (f"{fmt.number(k * row.estimate, d, sign=True)} {u} [{fmt.number(k * row.ci_low, d, sign=True)}, "
            f"{fmt.number(k * row.ci_high, d, sign=True)}]")


def _pi(row) -> str:
    if fmt.missing(row.pi_low):
        return "needs 3 or more configurations"
    k, d = _k(row), _digits(row)
    return f"[{fmt.number(k * row.pi_low, d, sign=True)}, {fmt.number(k * row.pi_high, d, sign=True)}] {_unit(row)}"


def _het(row) -> str:
    """The heterogeneity of a pooled row in one line."""
    return (f"τ² = {fmt.number(row.tau2, 4)} [{fmt.number(row.tau2_low, 4)}, {fmt.number(row.tau2_high, 4)}] "
            f"(REML; Q-profile interval), I² = {fmt.number(100 * row.I2, 0)} % [{fmt.number(100 * row.I2_low, 0)}, "
            f"{fmt.number(100 * row.I2_high, 0)}], Cochran's Q = {fmt.number(row.Q, 2)} on {int(row.Q_df)} df "
            f"({fmt.p_value(row.Q_p, prefix=True)})")


def _arms(comparisons: pd.DataFrame) -> tuple[str, str]:
    """The control and treatment arm names of a configuration study's rows (``<configuration> / <arm>``)."""
    first = comparisons.iloc[0]
    return (str(first.profile_a)[len(str(first.configuration)) + 3:], str(first.profile_b)[len(str(first.configuration)) + 3:])


def pooled_line(pooled: Pooled) -> str:
    """One line of a pooled metric for the command line: the REML + HKSJ estimate, heterogeneity, the prediction
    interval."""
    p = _Row(pooled.primary)
    return (f"{pooled.label} pooled over {pooled.k} configurations: {_est(p)} (REML, HKSJ t on {int(p.df)} df, "
            f"{fmt.p_value(p.p_value, prefix=True)}); I² = {fmt.number(100 * p.I2, 0)} %, Q = {fmt.number(p.Q, 2)} "
            f"({fmt.p_value(p.Q_p, prefix=True)}); {pooled.confidence:.0%} prediction interval {_pi(p)}")


# --------------------------------------------------------------------------- Markdown


def pooling_markdown(comparisons: pd.DataFrame, tables: PoolingTables | None, confidence: float = 0.95) -> list[str]:
    """The ``## Per configuration, and pooled across configurations`` section: per primary metric, each
    configuration's planned comparison, the three pooled estimates, the prediction interval with its note, the
    heterogeneity, what was left out and the meta-regression (or why none ran)."""
    if tables is None or "configuration" not in comparisons or comparisons.empty:
        return []
    control, treatment = _arms(comparisons)
    configs = sorted(comparisons["configuration"].astype(str).unique())
    c = f"{confidence:.0%}"
    if len(configs) == 1:
        return ["## Per configuration, and pooled across configurations", "",
                f"One configuration ({configs[0]}): its comparisons of `{treatment}` with `{control}` are the tiers above; "
                "there is nothing to pool across configurations, and nothing here says how the effect would vary with "
                "another configuration.", ""]
    out = ["## Per configuration, and pooled across configurations", "",
           f"{fmt.plural(len(configs), 'configuration')}, each comparing `{treatment}` (B) with `{control}` (A) on the "
           "tasks both ran, with the plan's tests (one correction per tier over every configuration's rows); each "
           "primary metric's effect is pooled across them with a random-effects model: REML τ² with the "
           "Hartung-Knapp-Sidik-Jonkman interval (t on k − 1 df) as the estimate, Paule-Mandel and DerSimonian-Laird "
           "beside it (`pooled.csv`, `pooled_configurations.csv`).", ""]
    weights = tables.effects.set_index(["metric", "configuration"])["weight"] if len(tables.effects) else pd.Series(dtype=float)
    primary = comparisons[comparisons["tier"] == "primary"]
    for metric in dict.fromkeys(primary["metric"]):
        sub = primary[primary["metric"] == metric]
        first = sub.iloc[0]
        if sub["estimate"].isna().all():  # nothing to tabulate: one line says why
            note = next((n for n in sub["note"] if isinstance(n, str) and n), "no estimate")
            out += [f"### {first.label}, `{metric}` ({first.test})", "",
                    f"No configuration has an estimate ({note}); not pooled.", ""]
            continue
        rows = []
        for r in sub.itertuples():
            rate = r.scale in POINT_SCALES
            w = weights.get((metric, str(r.configuration)))
            rows.append([str(r.configuration), str(r.n_pairs), fmt.value(r.metric, r.a_value, rate=rate),
                         fmt.value(r.metric, r.b_value, rate=rate),
                         r.note if fmt.missing(r.estimate) and isinstance(r.note, str) else f"{fmt.estimate(r)} {fmt.interval(r)}",
                         fmt.p_value(r.p_value), fmt.p_value(r.p_adjusted), "–" if w is None else f"{fmt.number(w, 1)} %"])
        pooled = tables.rows(metric)
        for role, p in pooled.iterrows():
            rows.append([f"**pooled, {METHOD_NAMES[role]}**" if role == "primary" else f"pooled, {METHOD_NAMES[role]}",
                         f"{int(p['k'])} configurations", "", "", _est(_Row(p)),
                         fmt.p_value(p["p_value"]), "", ""])
        if "primary" in pooled.index:
            p = pooled.loc["primary"]
            rows.append([f"{c} prediction interval (a new configuration)", "", "", "", _pi(_Row(p)), "", "", ""])
        out += [f"### {first.label}, `{metric}` ({first.test})", "",
                md_table(["configuration", "tasks paired", f"A ({control})", f"B ({treatment})",
                          f"B − A [{c} CI]", "p", f"p ({first.correction})", "weight (REML)"], rows), ""]
        if "primary" in pooled.index:
            p = _Row(pooled.loc["primary"])
            out += [f"Heterogeneity: {_het(p)}.", "",
                    f"The prediction interval says where a new configuration's effect may fall; {PI_NOTE}.", ""]
            if isinstance(p.excluded, str) and p.excluded:
                out += [f"Left out of the pooling: {p.excluded}.", ""]
            out += _regression_lines(tables, metric, p)
        else:
            why = tables.pooled.loc[(tables.pooled["metric"] == metric) & (tables.pooled["role"] == "not pooled"), "note"]
            out += [f"Not pooled: {why.iloc[0] if len(why) else 'no configuration has an estimate'}.", ""]
    return out


class _Row:
    """A pooled row (a Series) read by attribute, as the cell helpers read comparison rows."""

    def __init__(self, s: pd.Series) -> None:
        self.__dict__.update({str(k): v for k, v in s.items()})


def _regression_lines(tables: PoolingTables, metric: str, p: _Row) -> list[str]:
    reg = tables.regression
    sub = reg[reg["metric"] == metric] if reg is not None else pd.DataFrame()
    note = p.regression_note if isinstance(p.regression_note, str) and p.regression_note else ""
    if sub.empty:
        why = note.removeprefix("no meta-regression: ") if note else "the study file declares no moderators"
        return [f"Meta-regression: not run ({why}).", ""]
    first = sub.iloc[0]
    rows = [[str(r.term), f"{fmt.number(_k(p) * r.estimate, 2, sign=True)} [{fmt.number(_k(p) * r.ci_low, 2, sign=True)}, "
             f"{fmt.number(_k(p) * r.ci_high, 2, sign=True)}]", fmt.p_value(r.p_val)] for r in sub.itertuples()]
    return ["Meta-regression (exploratory; moderators were not randomised): Knapp-Hartung t tests, "
            f"F = {fmt.number(first.f, 2)} on ({int(first.f_df1)}, {int(first.f_df2)}) df ({fmt.p_value(first.f_p, prefix=True)}); "
            f"the moderators account for {fmt.number(100 * first.r2, 0)} % of τ².", "",
            md_table(["term", f"coefficient ({_unit(p)}) [95% CI]", "p"], rows), ""]


def configuration_audit_markdown(table: pd.DataFrame | None, control: str, treatment: str) -> list[str]:
    """The per-configuration audit table (``design_configurations.csv``) as Markdown."""
    if table is None or table.empty:
        return []
    rows = [[str(r.configuration), f"{int(r.n_trials_control)} / {int(r.n_trials_treatment)}", str(int(r.n_tasks)),
             f"{int(r.n_pairs_complete)} ({int(r.n_pairs_incomplete)} incomplete)",
             f"{int(r.n_infra_errors_control)} / {int(r.n_infra_errors_treatment)}", _uptake(r),
             f"{r.time_limits_control if isinstance(r.time_limits_control, str) and r.time_limits_control else '–'} / "
             f"{r.time_limits_treatment if isinstance(r.time_limits_treatment, str) and r.time_limits_treatment else '–'}"]
            for r in table.itertuples()]
    return ["Per configuration (`design_configurations.csv`; A = " f"`{control}`, B = `{treatment}`):", "",
            md_table(["configuration", "trials A / B", "tasks", "complete pairs", "infrastructure errors A / B",
                      f"uptake of {treatment}", "agent time limits A / B (timeouts)"], rows), ""]


def _uptake(r) -> str:
    if fmt.missing(r.uptake_share):
        return "not recorded"
    return f"{int(r.n_uptake)} of {int(r.n_uptake_known)} ({fmt.number(100 * r.uptake_share, 0)} %, {r.uptake_source})"


# --------------------------------------------------------------------------- TeX


def configuration_audit_tex(table: pd.DataFrame, findings: pd.DataFrame, control: str, treatment: str, caption: str) -> str:
    """The design audit of a study with configurations: one row per configuration, the findings listed below."""
    rows = [[latex.escape_tex(str(r.configuration)), f"{int(r.n_trials_control)}/{int(r.n_trials_treatment)}",
             str(int(r.n_tasks)), str(int(r.n_pairs_complete)), str(int(r.n_pairs_incomplete)),
             f"{int(r.n_infra_errors_control)}/{int(r.n_infra_errors_treatment)}", _tex(_uptake(r)),
             _tex(f"{r.time_limits_control if isinstance(r.time_limits_control, str) and r.time_limits_control else '--'}"
                              f" / {r.time_limits_treatment if isinstance(r.time_limits_treatment, str) and r.time_limits_treatment else '--'}")]
            for r in table.itertuples()]
    head = ["Configuration", "Trials A/B", "Tasks", "Pairs", "Incomplete", "Infra errors A/B", f"Uptake of {latex.escape_tex(treatment)}",
            "Time limits A/B (timeouts)"]
    body = [" & ".join(head) + r" \\", r"\midrule", *(" & ".join(r) + r" \\" for r in rows)]
    lines = [r"\begin{table*}[tbp]", r"\centering", r"\footnotesize\setlength{\tabcolsep}{4pt}",
             f"\\caption{{{latex.escape_tex(caption)}}}", r"\label{tab:design-audit}",
             # Widths fit the text width with the column gaps (8 pt each).
             "\\begin{tabular}{@{}" + "".join(latex.column(w) for w in (0.21, 0.07, 0.05, 0.05, 0.08, 0.08, 0.14, 0.16))
             + "@{}}", r"\toprule", *body,
             r"\bottomrule", r"\end{tabular}",
             f"\\par\\smallskip\\parbox{{\\linewidth}}{{\\footnotesize A = {latex.texttt(control)}, B = {latex.texttt(treatment)}. "
             "Pairs: tasks with a usable trial in both arms of the configuration (the comparisons use only these). "
             "Time limits as the trials that timed out state them.}"]
    if len(findings):
        sev = {"problem": "Problem", "warning": "Warning", "note": "Note"}
        lines += [r"\begin{itemize}\setlength\itemsep{0pt}"]
        lines += [f"\\item \\textbf{{{sev.get(str(f.severity), str(f.severity))}}} ({latex.escape_tex(f.check)}): "
                  f"{_tex(f.message)}" for f in findings.itertuples()]
        lines += [r"\end{itemize}"]
    lines.append(r"\end{table*}")
    return "\n".join(lines) + "\n"


def _tex(text: str) -> str:
    """Plain text (a note, a test's name) as TeX for pdflatex: escaped, with its few non-ASCII signs spelled."""
    out = latex.escape_tex(text)
    for sign, tex in (("τ", "$\\tau$"), ("²", "\\textsuperscript{2}"), ("−", "--"), ("×", "$\\times$"), ("–", "--")):
        out = out.replace(sign, tex)
    return out


def _s(x, digits: int, sign: bool = False) -> str:
    return fmt.tex_number(x, digits, sign=sign)


def _p_cell(p) -> str:
    if fmt.missing(p):
        return "{--}"
    return "{$<$0.001}" if p < fmt.P_FLOOR else f"{p:.3f}"


def configurations_tex(comparisons: pd.DataFrame, tables: PoolingTables | None, simulated: bool,
                       titles: dict[str, str]) -> str:
    """Results per configuration in one table: for every planned metric with an estimate (tiers in order, each
    under its title from ``titles``), one row per configuration (A, B, the change with its interval, p, adjusted
    p), then the pooled estimates and the prediction interval of the metrics pooled. Label ``tab:comparisons``."""
    control, treatment = _arms(comparisons)
    rows: list[list[str]] = []
    places: list[int] = []
    tier = None
    shown = comparisons[comparisons["estimate"].notna() & (comparisons["tier"] != "exploratory")]
    for (t, metric, test), sub in shown.groupby(["tier", "metric", "test"], sort=False):
        if t != tier:
            tier = t
            rows.append([f"\\multicolumn{{9}}{{l}}{{\\emph{{{latex.escape_tex(titles.get(str(t), str(t)))}}}}}"])
        first = sub.iloc[0]
        unit = fmt.comparison_unit(first.scale, first.unit)
        unit_tex = fmt.tex_unit(unit, space="") if unit in ("%", RATE_DIFFERENCE_UNIT) else latex.escape_tex(unit)
        unit_part = f", {unit_tex}" if unit_tex else ""  # a mean reward has no unit
        rows.append([f"\\multicolumn{{9}}{{l}}{{{_tex(first.label)} ({_tex(str(test).split(' (')[0])}){unit_part}}}"])
        k_ab = 100.0 if first.scale in POINT_SCALES else 1.0
        d_ab = 1 if first.scale in POINT_SCALES else max(fmt.decimals(metric), 0)
        for r in sub.itertuples():
            e = fmt.estimate_digits(r)
            places.append(e)
            rows.append([f"\\quad {latex.escape_tex(str(r.configuration))}", str(int(r.n_pairs)), _s(k_ab * r.a_value, d_ab),
                         _s(k_ab * r.b_value, d_ab), _s(fmt.scaled(r, r.estimate), e, True), _s(fmt.scaled(r, r.ci_low), e, True),
                         _s(fmt.scaled(r, r.ci_high), e, True), _p_cell(r.p_value), _p_cell(r.p_adjusted)])
        pooled = tables.rows(metric) if tables is not None and t == "primary" else pd.DataFrame()
        for role, p in pooled.iterrows():
            k, d = _k(_Row(p)), _digits(_Row(p))
            name = f"Pooled ({METHOD_NAMES[role]})"
            rows.append([f"\\quad \\textbf{{{name}}}" if role == "primary" else f"\\quad {name}", str(int(p["k"])), "{}", "{}",
                         _s(k * p["estimate"], d, True), _s(k * p["ci_low"], d, True), _s(k * p["ci_high"], d, True),
                         _p_cell(p["p_value"]), "{}"])
        if "primary" in pooled.index and not fmt.missing(pooled.loc["primary", "pi_low"]):
            p = pooled.loc["primary"]
            k, d = _k(_Row(p)), _digits(_Row(p))
            rows.append(["\\quad 95\\% prediction interval$^{\\dagger}$", "", "{}", "{}", "{}", _s(k * p["pi_low"], d, True),
                         _s(k * p["pi_high"], d, True), "{}", "{}"])
    head = ["Metric; configuration", "Pairs", "{A}", "{B}", "{Change}", "\\multicolumn{2}{c}{95\\% CI}", "{$p$}",
            "{$p_\\mathrm{adj}$}"]
    # The change columns hold as many decimals as their most precise row (a mean reward's 3, a rate's 1).
    change = f"S[table-format=+4.{max([1, *places])}]"
    spec = f"lr S[table-format=7.3] S[table-format=7.3] {change} {change} {change} S[table-format=1.3] S[table-format=1.3]"
    note = (f"A = {latex.texttt(control)}, B = {latex.texttt(treatment)}, within each configuration, on the tasks both ran "
            "(rates in \\%). Each configuration's change carries its planned interval and test; $p_\\mathrm{adj}$: the "
            "plan's correction over its tier, every configuration's rows together. Pooled: a random-effects model over the "
            "configurations, REML $\\tau^2$ with the Hartung-Knapp-Sidik-Jonkman interval ($t$ on $k-1$ df) as the "
            "estimate, Paule-Mandel and DerSimonian-Laird (normal interval) beside it; $k$ in the Pairs column. "
            f"$^{{\\dagger}}$Where a new configuration's effect may fall: {_tex(PI_NOTE)}.")
    body = "\n".join(" & ".join(r) + " \\\\" for r in rows)
    return ("\\begin{table*}\n\\centering\n\\footnotesize\\setlength{\\tabcolsep}{3pt}\n"
            f"\\caption{{Results per configuration, and pooled across configurations{' (simulated data)' if simulated else ''}}}\n"
            f"\\label{{tab:comparisons}}\n\\begin{{tabular}}{{{spec}}}\n\\toprule\n" + " & ".join(head)
            + " \\\\\n\\midrule\n" + body + "\n\\bottomrule\n\\end{tabular}\n"
            f"\\par\\smallskip\\parbox{{\\linewidth}}{{\\footnotesize {note}}}\n\\end{{table*}}")


def forest_stem(metric: str) -> str:
    """The figure file stem of one metric's pooled forest plot."""
    return f"forest_pooled_{metric.replace('*', 'all').replace('__', '_')}"


def forest_captions(tables: PoolingTables | None) -> dict[str, str]:
    """Figure stem -> caption of each pooled metric's forest plot (TeX)."""
    if tables is None:
        return {}
    out = {}
    for metric in tables.metrics():
        p = tables.rows(metric).loc["primary"]
        out[forest_stem(metric)] = (
            f"{latex.escape_tex(str(p['label']))}: each configuration's change with its 95\\% interval (marker area by its "
            "REML weight), the pooled estimate (diamond: REML, Hartung-Knapp-Sidik-Jonkman interval) and the 95\\% "
            "prediction interval for a new configuration (bar: a parametric bootstrap over the uncertainty of $\\tau^2$), "
            "with the heterogeneity under the axis.")
    return out


def _key(metric: str) -> str:
    return latex.macro_name("pooled", metric.replace("__", " "))


def pooling_macros(tables: PoolingTables | None, source: str) -> list[latex.Macro]:
    """The pooled numbers the text quotes, per pooled metric: the REML + HKSJ estimate with its interval, p and df,
    the prediction interval, DerSimonian-Laird's estimate and interval, tau^2, I^2 and Q with their intervals and p,
    the number of configurations, and the smallest and largest configuration effects."""
    if tables is None:
        return []
    out = []
    for metric in tables.metrics():
        rows = tables.rows(metric)
        p = _Row(rows.loc["primary"])
        key, k, d, u = _key(metric), _k(p), _digits(p), _unit(p)
        what = f"{p.label}, pooled over {int(p.k)} configurations"
        def q(x, k=k, d=d, u=u) -> str:
            return fmt.tex_quantity(k * x, d, u, sign=True)
        out += [latex.Macro(key + "K", str(int(p.k)), metric, source, "configurations pooled"),
                latex.Macro(key + "Est", q(p.estimate), metric, source, f"REML, HKSJ; {what}"),
                latex.Macro(key + "Low", q(p.ci_low), metric, source, f"HKSJ 95% CI low (t on {int(p.df)} df); {what}"),
                latex.Macro(key + "High", q(p.ci_high), metric, source, f"HKSJ 95% CI high; {what}"),
                latex.Macro(key + "Df", str(int(p.df)), metric, source, "df of the HKSJ t interval"),
                latex.Macro(key + "P", _p_tex(p.p_value), metric, source, f"HKSJ t test of the pooled effect; {what}"),
                # tau^2 as plain digits: siunitx would group its decimals (0.001 9).
                latex.Macro(key + "TauSq", fmt.tex_number(p.tau2, 4), metric, source, "REML tau^2 (pooling scale)"),
                latex.Macro(key + "TauSqLow", fmt.tex_number(p.tau2_low, 4), metric, source, "Q-profile 95% CI low"),
                latex.Macro(key + "TauSqHigh", fmt.tex_number(p.tau2_high, 4), metric, source, "Q-profile 95% CI high"),

                latex.Macro(key + "Isq", fmt.tex_quantity(100 * p.I2, 0, "%"), metric, source, "I^2"),
                latex.Macro(key + "IsqLow", fmt.tex_quantity(100 * p.I2_low, 0, "%"), metric, source, "I^2 95% CI low (Higgins-Thompson)"),
                latex.Macro(key + "IsqHigh", fmt.tex_quantity(100 * p.I2_high, 0, "%"), metric, source, "I^2 95% CI high"),
                latex.Macro(key + "Q", fmt.tex_quantity(p.Q, 2), metric, source, "Cochran's Q"),
                latex.Macro(key + "QDf", str(int(p.Q_df)), metric, source, "df of Q"),
                latex.Macro(key + "QP", _p_tex(p.Q_p), metric, source, "p of Q")]
        if p.scale != "log_ratio":  # tau of a log ratio is no % change: only tau^2 is quoted for it
            out.append(latex.Macro(key + "Tau", fmt.tex_quantity(k * p.tau2 ** 0.5, d, u), metric, source,
                                   "tau: the SD of the configurations' true effects, on the printed scale"))
        if not fmt.missing(p.pi_low):
            out += [latex.Macro(key + "PILow", q(p.pi_low), metric, source, f"95% prediction interval low; {what}"),
                    latex.Macro(key + "PIHigh", q(p.pi_high), metric, source, f"95% prediction interval high; {what}")]
        if "comparison" in rows.index:
            dl = _Row(rows.loc["comparison"])
            out += [latex.Macro(key + "DLEst", q(dl.estimate), metric, source, f"DerSimonian-Laird; {what}"),
                    latex.Macro(key + "DLLow", q(dl.ci_low), metric, source, "DerSimonian-Laird normal 95% CI low"),
                    latex.Macro(key + "DLHigh", q(dl.ci_high), metric, source, "DerSimonian-Laird normal 95% CI high")]
        entries = tables.effects[tables.effects["metric"] == metric]
        if len(entries):
            lo, hi = entries.loc[entries["estimate"].idxmin()], entries.loc[entries["estimate"].idxmax()]
            out += [latex.Macro(key + "Min", q(lo["estimate"]), metric, source, f"smallest configuration effect: {lo['configuration']}"),
                    latex.Macro(key + "Max", q(hi["estimate"]), metric, source, f"largest configuration effect: {hi['configuration']}")]
    return out


def _p_tex(p) -> str:
    if fmt.missing(p):
        return "--"
    return "\\ensuremath{p < 0.001}" if p < fmt.P_FLOOR else f"\\ensuremath{{p = {p:.3f}}}"


def pooled_sentence(tables: PoolingTables | None, metric: str, names: set[str], control: str, treatment: str) -> str | None:
    """The text's pooled result of one metric (macros only), with the prediction interval and its caveat; None when
    the metric was not pooled."""
    if tables is None or metric not in tables.metrics():
        return None
    key = _key(metric)
    if key + "Est" not in names:
        return None
    p = _Row(tables.rows(metric).loc["primary"])
    entries = tables.effects[tables.effects["metric"] == metric]
    lo, hi = entries.loc[entries["estimate"].idxmin()], entries.loc[entries["estimate"].idxmax()]
    text = (f"Within the \\{key}K{{}} configurations, the {latex.escape_tex(str(p.label))} of {latex.texttt(treatment)} "
            f"against {latex.texttt(control)} ranged from \\{key}Min{{}} ({latex.escape_tex(str(lo['configuration']))}) to "
            f"\\{key}Max{{}} ({latex.escape_tex(str(hi['configuration']))}; Table~\\ref{{tab:comparisons}}). Pooled with a "
            f"random-effects model (REML $\\tau^2$, Hartung-Knapp-Sidik-Jonkman interval, $t$ on \\{key}Df{{}} df), the "
            f"difference was \\{key}Est{{}} (95\\% CI \\{key}Low{{}} to \\{key}High{{}}; \\{key}P{{}})")
    if key + "DLEst" in names:
        text += f"; DerSimonian-Laird with a normal interval gave \\{key}DLEst{{}} (\\{key}DLLow{{}} to \\{key}DLHigh{{}})"
    text += "."
    if key + "PILow" in names:
        text += (f" A new configuration's difference would be expected between \\{key}PILow{{}} and \\{key}PIHigh{{}} "
                 "(95\\% prediction interval, a parametric bootstrap that carries the uncertainty of $\\tau^2$; in "
                 "simulation it covered 93 to 96\\% of new configurations wherever the effect varied between them).")
    return text


def heterogeneity_tex(tables: PoolingTables | None, control: str, treatment: str, configurations: list[str]) -> str:
    """The Limitations' paragraph on how much the effect varies between configurations (macros only); with one
    configuration, that the effect is that configuration's."""
    if len(configurations) == 1:
        return (f"\\paragraph{{One configuration.}} The study has a single configuration "
                f"({latex.escape_tex(configurations[0])}): the effect of {latex.texttt(treatment)} is measured for it "
                "alone, and nothing here says how it would vary with another agent, model or suite.")
    if tables is None or not tables.metrics():
        return ""
    parts = []
    for metric in tables.metrics():
        p = _Row(tables.rows(metric).loc["primary"])
        key = _key(metric)
        parts.append(f"for the {latex.escape_tex(str(p.label))}, $\\tau^2$ = \\{key}TauSq{{}} (Q-profile 95\\% CI "
                     f"\\{key}TauSqLow{{}} to \\{key}TauSqHigh{{}}"
                     + (f"; $\\tau$ = \\{key}Tau{{}}, the standard deviation of the configurations' true effects"
                        if p.scale != "log_ratio" else "") + f"), $I^2$ = \\{key}Isq{{}} (95\\% CI \\{key}IsqLow{{}} to "
                     f"\\{key}IsqHigh{{}}) and Cochran's $Q$ = \\{key}Q{{}} on \\{key}QDf{{}} df (\\{key}QP{{}})")
    reg = [str(n) for n in (tables.pooled["regression_note"].dropna().unique() if "regression_note" in tables.pooled else [])
           if str(n)]
    text = ("\\paragraph{Heterogeneity between configurations.} The effect of "
            f"{latex.texttt(treatment)} against {latex.texttt(control)} may differ from one configuration to the next, "
            "and the data say by how much: "
            + latex.series(parts) + ". The pooled estimate is an average over these configurations, not the effect in any "
            "one of them; the prediction interval says where a new configuration's effect may fall: "
            f"{_tex(PI_NOTE)}.")
    if reg:
        text += " Moderators: " + _tex(reg[0]) + "."
    return text


def configuration_threats_tex(findings: pd.DataFrame | None) -> str:
    """The Limitations' paragraph on what threatens a configuration's comparison (the audit's warnings that only a
    configuration shows: agent time limits that differ between its arms, low uptake, an arm missing); empty when
    none applies."""
    if findings is None or findings.empty:
        return ""
    threats = findings[(findings["severity"] == "warning") & findings["check"].isin(THREAT_CHECKS)]
    if threats.empty:
        return ""
    return ("\\paragraph{Within configurations.} The design audit (Table~\\ref{tab:design-audit}) found what may bias a "
            "configuration's comparison beyond chance: " + " ".join(_tex(m.rstrip(".")) + "." for m in threats["message"]))
