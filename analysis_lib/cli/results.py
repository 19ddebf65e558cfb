"""``python -m analysis_lib results FULL_RUN.json --output RESULTS.md --plots DIR``: the pre-registered report.

From a benchmark run's ``full_run.json`` (:mod:`analysis_lib.bench.runner`): find its runs folder,
check that every scheduled trial has a pass/fail verdict from its evaluator, compute the Layer 1
metrics of the runs, run the analysis plan (:mod:`analysis_lib.study.plan`) and write RESULTS.md with
the three tiers in order (primary: formal tests, corrected p, CIs, effect sizes; secondary:
corrected p; exploratory: descriptive only), the environment lock, the schedule seed and the spend
against the budget. When a primary outcome is missing the accuracy analysis is refused, the rest
is still written, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from ..bench.journal import state_dir
from ..bench.runner import LOCK_FILE
from ..core import output_set
from ..core import outputs as files
from ..core.fileio import atomic_write_text, read_json
from ..core.lock import BUSY_EXIT_CODE, FolderBusy, busy_line
from ..core.trial import InputError
from ..inference import sequential as seq_mod
from ..inference.beside_itt.estimands import beside_itt
from ..inference.comparisons import compare
from ..inference.hypotheses import test_sequence
from ..inference.subgroups import subgroup_effects_by_pair
from ..report import plan_figures
from ..report.audit import audit_frames, audit_markdown
from ..report.beside_itt import beside_markdown
from ..report.comparison_report import (
    family_role,
    hypotheses_table,
    mcnemar_lines,
    methods_lines,
    preregistered,
    subgroups_table,
    tier_table,
    tier_title,
)
from ..report.figures import FOREST_NOTE, forest_rows, plot_forest, profile_colors
from ..report.markdown import table as _table
from ..report.numbers import number
from ..report.sequential import design_lines as sequential_lines
from ..study import plan as plan_mod
from ..study.audit import DesignAudit
from ..study.baseline import profile_pairs
from ..study.study import open_study

VERDICTS = ("passed", "failed")


class ResultsError(ValueError):
    """The benchmark run cannot be reported at all (one line naming the file)."""


class RunsChanged(ResultsError):
    """The runs folder changed (or went) while the report was made: nothing is written (one line)."""


@dataclass
class ResultsOutcome:
    """What :func:`write_results` did: exit code, files written, trials without a verdict."""

    exit_code: int
    files: list[Path] = field(default_factory=list)
    missing: pd.DataFrame | None = None
    refused: bool = False
    plan_check: plan_mod.PlanCheck | None = None
    table: pd.DataFrame | None = None
    messages: list[str] = field(default_factory=list)
    sequential: pd.DataFrame | None = None  # adjusted estimates of the primary rows (a sequential run)


def read_full_run(path: str | os.PathLike) -> dict:
    """The runner's ``full_run.json``; :class:`ResultsError` when it is not one (a dry run has no trials)."""
    try:
        obj = read_json(path, stage="results")
    except InputError as exc:
        raise ResultsError(str(exc)) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("trials"), list):
        kind = obj.get("kind") if isinstance(obj, dict) else None
        why = "a dry run's plan has no trials; run the benchmark first" if kind == "bench_plan" else \
            "not a benchmark run's full_run.json (no 'trials' list)"
        raise ResultsError(f"{path}: {why}")
    return obj


def find_runs_dir(full_run: str | os.PathLike, obj: dict, override: str | os.PathLike | None = None) -> Path:
    """The runs folder of a benchmark run.

    In order: ``override`` (``--runs-dir``); ``obj["runs_dir"]`` (relative to the file); the file's own
    folder when it holds ``index.json`` (the runner writes ``full_run.json`` into the runs folder);
    the runner's default ``runs/bench-<manifest name>``. :class:`ResultsError` when none holds runs.
    """
    here = Path(full_run).parent
    candidates: list[Path] = []
    if override is not None:
        candidates = [Path(override)]
    else:
        if isinstance(obj.get("runs_dir"), str):
            candidates.append(here / obj["runs_dir"])
        candidates.append(here)
        name = (obj.get("manifest") or {}).get("name") if isinstance(obj.get("manifest"), dict) else None
        if name:
            candidates.append(Path("runs") / f"bench-{name}")
    for c in candidates:
        if (c / files.RUN_INDEX).is_file():
            return c
    tried = ", ".join(plan_mod.display_path(c) for c in candidates)
    raise ResultsError(f"{full_run}: runs folder not found (looked for index.json in {tried}); pass --runs-dir")


def evaluation_table(obj: dict) -> pd.DataFrame:
    """One row per scheduled trial: ``condition, task_id, run, pair, status, outcome, verdict, reason, trial_dir``."""
    rows = []
    for t in obj["trials"]:
        if not isinstance(t, dict) or t.get("status") == "skipped_sequential":
            continue  # not part of the study: the sequential design stopped it before these trials
        outcome = t.get("outcome")
        ev = t.get("evaluation") if isinstance(t.get("evaluation"), dict) else {}
        reason = None
        if outcome not in VERDICTS:
            reason = ev.get("error") or {"pending": "not run yet", "skipped_budget": "not run (budget stop)"}.get(
                t.get("status")) or {"not_evaluated": "no evaluator verdict (not evaluated)",
                                     "evaluation_error": "the evaluator failed"}.get(outcome, "no evaluation recorded")
        rows.append({"condition": t.get("condition"), "task_id": t.get("task_id"), "run": t.get("run"),
                     "pair": t.get("pair"), "status": t.get("status"), "outcome": outcome,
                     "verdict": {"passed": True, "failed": False}.get(outcome), "reason": reason,
                     "trial_dir": t.get("trial_dir")})
    cols = ["condition", "task_id", "run", "pair", "status", "outcome", "verdict", "reason", "trial_dir"]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------- formatting


def _usd(x: Any) -> str:
    return "–" if x is None or pd.isna(x) else number(x, 2) + " USD"


def _tier_section(tier: str, rows: pd.DataFrame, plan: plan_mod.AnalysisPlan, registered: bool = False) -> list[str]:
    out = [f"## {tier_title(tier, getattr(plan.tiers, tier).correction, plan.claim, registered)}", ""]
    if tier == "exploratory":
        out += ["**Exploratory:** these metrics were declared as exploratory in the plan. They are described with "
                "estimates and intervals only; no hypothesis test is run and no p-value is reported, so nothing here "
                "is a confirmed effect.", ""]
    out += [tier_table(rows, tier, plan.bootstrap.confidence), ""]
    if tier == "primary":
        out += mcnemar_lines(rows, plan.bootstrap.confidence) + [""]
    return out


def _env_section(obj: dict) -> list[str]:
    env = obj.get("environment") if isinstance(obj.get("environment"), dict) else {}
    pinned = env.get("pinned") if isinstance(env.get("pinned"), dict) else {}
    rows = [[f"`{k}`", f"`{v}`"] for k, v in sorted(pinned.items())]
    if env.get("tool_commit") is not None:
        rows.append(["`tool_commit` (verified)", f"`{env['tool_commit']}`"])
    man = obj.get("manifest") if isinstance(obj.get("manifest"), dict) else {}
    if man.get("name"):
        rows.append(["manifest", f"`{man['name']}`" + (f" (sha256 `{str(man.get('sha256'))[:12]}`)" if man.get("sha256") else "")])
    seen: dict[str, set] = {}
    for t in obj.get("trials", []):
        e = t.get("environment") if isinstance(t, dict) and isinstance(t.get("environment"), dict) else {}
        for k in ("model", "adapter", "adapter_version", "target_repo_commit"):
            if e.get(k) is not None:
                seen.setdefault(k, set()).add(str(e[k]))
    for k, vals in sorted(seen.items()):
        rows.append([f"trials' `{k}`", ", ".join(f"`{v}`" for v in sorted(vals)[:6]) + (" …" if len(vals) > 6 else "")])
    out = ["## Environment lock", "", _table(["what", "value"], rows) if rows else "No environment recorded.", ""]
    warnings = list(env.get("warnings") or []) + list(obj.get("environment_warnings") or [])
    if warnings:
        out += ["Environment warnings (pairs whose two sides differ, tool checkout mismatches):", ""]
        out += [f"- {w}" for w in warnings] + [""]
    else:
        out += ["No environment warning: both sides of every pair ran with the same pinned environment.", ""]
    return out


def _design_section(obj: dict, plan: plan_mod.AnalysisPlan, baseline: str, n_tasks: int) -> list[str]:
    sched = obj.get("schedule") or []
    return ["## Design", "",
            f"- Conditions: {', '.join(f'`{c}`' for c in obj.get('conditions') or [])}; baseline (A): `{baseline}`.",
            f"- Tasks: {len(obj.get('tasks') or [])} scheduled, {n_tasks} analysed; runs per condition: "
            f"{obj.get('runs_per_condition', '–')}; {len(sched)} scheduled trials.",
            f"- Schedule: blocked, randomised, paired (both conditions of a task and run back to back in random "
            f"order); schedule seed **{obj.get('seed', '–')}**.",
            f"- Pairing rule: unit = {plan.pairing.unit}; repetitions aggregated by {plan.pairing.binary_aggregate.replace('_', ' ')} "
            f"(pass/fail, a tie counts as fail) and {plan.pairing.continuous_aggregate} (continuous); infrastructure "
            "errors excluded.",
            f"- Bootstrap (totals, cost per success): {plan.bootstrap.n_resamples} resamples of tasks, "
            f"{plan.bootstrap.method} intervals at {plan.bootstrap.confidence:.0%}, seed {plan.bootstrap.seed}. "
            f"Alpha {plan.alpha}.", ""]


def _budget_section(obj: dict) -> list[str]:
    b = obj.get("budget") if isinstance(obj.get("budget"), dict) else {}
    proj = obj.get("projection") if isinstance(obj.get("projection"), dict) else {}
    costs = pd.to_numeric(pd.Series([t.get("cost_usd") for t in obj.get("trials", []) if isinstance(t, dict)]), errors="coerce")
    spent = b.get("spent_usd", float(costs.sum()) if costs.notna().any() else None)
    budget = b.get("phase_budget_usd", proj.get("phase_budget_usd"))
    share = f" ({100 * spent / budget:.1f} % of the budget)" if spent is not None and budget else ""
    rows = [["phase budget", _usd(budget)], ["guardrail (stop new pairs at)", _usd(b.get("limit_usd", proj.get("limit_usd")))],
            ["projected before the run", _usd(proj.get("projected_total_usd"))], ["spent", _usd(spent) + share],
            ["trials with a measured cost", f"{int(costs.notna().sum())} of {len(costs)}"],
            ["budget stop", f"yes: {b.get('stop_reason')}" if b.get("stopped") else "no"]]
    return ["## Spend against the budget", "", _table(["", ""], rows), ""]


def results_report(obj: dict, ev: pd.DataFrame, table: pd.DataFrame, metrics: pd.DataFrame, check: plan_mod.PlanCheck, *,
                   simulated: bool, baseline: str, refused_reason: str | None, figures: list[tuple[str, str]],
                   mismatches: list[str], ingest_errors: int, source: str, audit: DesignAudit | None = None,
                   sequential: list[str] | None = None) -> str:
    """RESULTS.md: banners, plan hash, completeness, the design audit, design, the three tiers, environment, budget, figures."""
    plan = check.plan
    out: list[str] = []
    if simulated:
        out += ["> **SIMULATED DATA.** This benchmark run was generated by the seeded simulator; every number below "
                "describes simulated agents and is not a finding.", ""]
    out += check.banner()
    out += [f"# Results: {(obj.get('manifest') or {}).get('name') or 'benchmark run'}"
            + (" (SIMULATED)" if simulated else ""), "",
            check.hash_line(), "", check.timing_line(), "",
            f"Report of the benchmark run `{source}` (status: {obj.get('status', '–')}). The tiers, tests, corrections "
            "and intervals below are those the analysis plan declares"
            + ("; the plan was fixed before the first trial, so nothing was chosen after looking at the data."
               if check.fixed_before_data and not check.changed else "."), ""]
    n = len(ev)
    missing = ev[ev["verdict"].isna()]
    out += ["## Evaluation completeness", ""]
    if missing.empty:
        out += [f"All {n} scheduled trials have a pass/fail verdict from their evaluator.", ""]
    else:
        out += [f"**{len(missing)} of {n} scheduled trials have no pass/fail verdict from their evaluator:**", "",
                _table(["condition", "task", "run", "status", "outcome", "reason"],
                       [[str(r.condition), str(r.task_id), str(r.run), str(r.status), str(r.outcome), str(r.reason)]
                        for r in missing.itertuples()]), ""]
    if refused_reason:
        out += [f"> **Accuracy analysis refused:** {refused_reason}. Resolve rate and every other pass/fail "
                "metric are not computed; the metrics that do not depend on the verdicts are reported below.", ""]
    if mismatches:
        out += ["Verdicts in `full_run.json` that disagree with the trial folders (the folders' rewards were used):", ""]
        out += [f"- {m}" for m in mismatches] + [""]
    if ingest_errors:
        out += [f"{ingest_errors} input problems were met while reading the trial folders (see "
                "`python -m analysis_lib RUNS --no-llm`, errors.csv).", ""]
    if audit is not None:
        out += audit_markdown(*audit_frames(audit))
    out += _design_section(obj, plan, baseline, int(metrics["task_id"].nunique()) if len(metrics) else 0)
    out += sequential or []
    for tier in plan_mod.TIERS + (("sensitivity",) if plan.tiers.sensitivity is not None else ()):
        out += _tier_section(tier, table, plan, preregistered(check))
    out += _env_section(obj)
    out += _budget_section(obj)
    if figures:
        out += ["## Figures", ""]
        out += [f"- `{name}`: {caption}" for name, caption in figures] + [""]
    out += ["## Methods", ""] + methods_lines(plan) + [
        f"- Implementation: `analysis_lib.inference.comparisons.compare` over `analysis_lib.stats`; plan sha256 `{check.sha256}`.", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- the job


def _cross_check(ev: pd.DataFrame, metrics: pd.DataFrame) -> list[str]:
    """Trials whose runner verdict and folder outcome disagree, or whose folder was not read."""
    if metrics.empty:
        return []
    have = {(str(r.profile), str(r.task_id), int(r.repetition)): r.success for r in metrics.itertuples()
            if pd.notna(r.repetition)}
    out = []
    for r in ev.itertuples():
        if r.verdict is None or pd.isna(r.verdict):
            continue
        key = (str(r.condition), str(r.task_id), int(r.run))
        if key not in have:
            out.append(f"{r.condition} / {r.task_id} / run {r.run}: verdict {r.outcome}, but its trial folder was not read")
        elif pd.notna(have[key]) and bool(have[key]) != bool(r.verdict):
            out.append(f"{r.condition} / {r.task_id} / run {r.run}: verdict {r.outcome}, folder reward says "
                       f"{'pass' if have[key] else 'fail'}")
    return out


def manifest_task_groups(obj: dict) -> pd.Series | None:
    """Task id -> repository, from the manifest stored in full_run.json; None unless tasks span two or more."""
    content = ((obj.get("manifest") or {}).get("content") or {}) if isinstance(obj.get("manifest"), dict) else {}
    tasks = content.get("tasks") if isinstance(content, dict) else None
    if not isinstance(tasks, list):
        return None
    groups = {str(t["id"]): str(t["repo"]).rstrip("/").removesuffix(".git").rsplit("/", 1)[-1]
              for t in tasks if isinstance(t, dict) and t.get("id") and t.get("repo")}
    return pd.Series(groups) if len(set(groups.values())) >= 2 else None


def _claims_and_groups(obj: dict, metrics: pd.DataFrame, plan: plan_mod.AnalysisPlan, pairs: list[tuple[str, str]],
                       refused_reason: str | None) -> str:
    """The plan's fixed-sequence hypotheses and, where the manifest names repositories, the subgroup table."""
    out: list[str] = []
    if plan.hypotheses and pairs:
        out += [f"## Fixed-sequence hypotheses (as declared, in order; {family_role(plan, 'hypotheses')})", ""]
        if refused_reason:
            out += [f"Not tested: {refused_reason}.", ""]
        else:
            out += ["Each step only if every step before it held; each profile pair at alpha / (number of pairs); "
                    "decisions read the interval of the comparison's own estimand (docs/analysis-plan.md).", "",
                    hypotheses_table(test_sequence(metrics, plan, pairs)), ""]
    groups = manifest_task_groups(obj)
    if groups is not None and pairs and not refused_reason:
        effects = subgroup_effects_by_pair(metrics, groups, pairs)
        out += ["## Subgroups by repository (descriptive: no per-group tests)", "",
                "pass@1 difference per repository named by the manifest, raw and partially pooled (empirical Bayes, "
                "DerSimonian-Laird); read the pooled column and test no repository on its own.", "",
                subgroups_table(effects, "repository", pull=False), ""]
    return ("\n" + "\n".join(out)) if out else ""


def _sequential(obj: dict, metrics: pd.DataFrame, plan: plan_mod.AnalysisPlan, pairs: list[tuple[str, str]],
                refused: dict[str, str]) -> tuple[list[str], pd.DataFrame | None]:
    """The sequential section: the looks recomputed from the data (checked against the run record) and the
    primary estimates adjusted for the stop; a note when the run or the plan is sequential and the other not."""
    seq = obj.get("sequential") if isinstance(obj.get("sequential"), dict) else None
    if seq is None:
        if plan.sequential is None:
            return [], None
        return ["> **Sequential design not applied:** the plan declares interim looks, but this run recorded none "
                "(it ran as a fixed design); the analysis below is the fixed-sample one.", ""], None
    if plan.sequential is None:
        return ["> **Sequential run analysed as fixed:** the run stopped by a sequential design, but this report's plan "
                "declares none; the estimates below are not adjusted for the stopping.", ""] + \
            sequential_lines(seq, None, plan.bootstrap.confidence, []), None
    ra = seq_mod.analyse_run(seq, metrics, plan, pairs, refused=refused)
    adj, shown = ra.adjusted, ra.record
    not_run = sum(1 for t in obj.get("trials", []) if isinstance(t, dict) and t.get("status") == "skipped_sequential")
    lines = sequential_lines(shown, adj, plan.bootstrap.confidence, ra.mismatch)
    if not_run:
        lines.insert(4, f"{not_run} scheduled trials were not run: the design stopped the study before them (they are "
                        "not part of it, and not missing).\n")
    return lines, adj


def write_results(full_run: str | os.PathLike, output: str | os.PathLike = "RESULTS.md", plots: str | os.PathLike | None = None,
                  *, runs_dir: str | os.PathLike | None = None, plan_path: str | os.PathLike | None = None,
                  baseline: str | None = None, record: bool = True, plan_record: str | os.PathLike | None = None,
                  workers: int | None = 1, staged: Callable[[Path], Path] | None = None) -> ResultsOutcome:
    """Check, analyse and write RESULTS.md (and the plots) for one benchmark run; see the module docstring.

    ``staged`` maps where a file belongs to where this run writes it (the staging folder of
    :mod:`analysis_lib.core.output_set`; default: in place). Raises :class:`ResultsError` or
    :class:`~analysis_lib.study.plan.PlanError` (one line) when nothing can be reported, ``FolderBusy`` while a runner
    still writes the runs folder, :class:`RunsChanged` when the runs changed while they were read. Returns exit code 0, or 1 when the
    accuracy analysis was refused.
    """
    at = staged or (lambda p: p)
    plan = plan_mod.load_plan(plan_path)
    obj = read_full_run(full_run)
    runs = find_runs_dir(full_run, obj, runs_dir)
    # A run still in progress is not reported: its pending trials would read as missing verdicts.
    busy = busy_line(state_dir(runs) / LOCK_FILE, what="runs folder", label=plan_mod.display_path(runs))
    if busy is not None:
        raise FolderBusy(f"{busy}; the benchmark run is not finished, so nothing was reported")
    source = plan_mod.display_path(plan_path if plan_path is not None else plan_mod.PLAN_FILE)
    check = plan_mod.check_plan(runs, plan, source, out_dir=at(Path(output)).parent, record_path=plan_record,
                                record=record)
    outcome = ResultsOutcome(0, plan_check=check)
    ev = evaluation_table(obj)
    conditions = [str(c) for c in obj.get("conditions") or []]
    result = open_study(runs, None, plan, baseline, plan_check=check, profiles=conditions or None, workers=workers)
    simulated = obj.get("simulated") is True or result.simulated
    metrics = result.metrics
    if metrics.empty:
        raise ResultsError(f"{plan_mod.display_path(runs)}: no trial could be read from the runs folder")
    if result.baseline_error:
        raise ResultsError(result.baseline_error)
    mismatches = _cross_check(ev, metrics)
    missing = ev[ev["verdict"].isna()]
    outcome.missing = missing
    refused_reason = None
    refused: dict[str, str] = {}
    if len(missing):
        refused_reason = (f"{len(missing)} of {len(ev)} scheduled trials have no pass/fail verdict from their "
                          "evaluator, so the primary outcome is incomplete")
        refused = {c: "refused: evaluations missing" for c in ("success", "tests_passed_ratio", "token_efficiency")}
        outcome.refused, outcome.exit_code = True, 1
    profiles = sorted(metrics["profile"].astype(str).unique())
    base = result.baseline.name  # the one rule: explicit, plan, the run's index.json (the manifest's first condition)
    pairs = profile_pairs(profiles, baseline=base)
    table = compare(metrics, plan, pairs, refused=refused)
    outcome.table = table
    figures: list[tuple[str, str]] = []
    if plots is not None:
        figures = _write_plots(table, metrics, at(Path(plots)), simulated, outcome, at(Path(output)))
    seq_lines, outcome.sequential = _sequential(obj, metrics, plan, pairs, refused)
    text = results_report(obj, ev, table, metrics, check, simulated=simulated, baseline=pairs[0][0] if pairs else (base or "–"),
                          refused_reason=refused_reason, figures=figures, mismatches=mismatches,
                          ingest_errors=int((result.errors["severity"] == "error").sum()), source=plan_mod.display_path(full_run),
                          audit=result.audit, sequential=seq_lines)
    text += _claims_and_groups(obj, metrics, plan, pairs, refused_reason)
    if pairs:
        beside = beside_itt(result, table, plan, pairs, refused=refused)
        text += "\n" + "\n".join(beside_markdown(beside, plan.bootstrap.confidence))
    changed = result.inputs_changed()
    if changed is not None:
        raise RunsChanged(f"{changed}: {plan_mod.display_path(output)} was not written")
    outcome.files.insert(0, atomic_write_text(at(Path(output)), text))
    outcome.messages = [f"warning: {w}" for w in check.warnings]
    if check.changed:
        outcome.messages.append(f"warning: plan changed after the plan record (recorded sha256 "
                                f"{str(check.recorded.get('analysis_plan_sha256'))[:12]}, now {check.short}); see {output}")
    if refused_reason:
        outcome.messages.append(f"error: accuracy analysis refused: {refused_reason}; missing:")
        outcome.messages += [f"  {r.condition} / {r.task_id} / run {r.run}: {r.outcome or r.status}: {r.reason}"
                             for r in missing.itertuples()]
    return outcome


def _write_plots(table: pd.DataFrame, metrics: pd.DataFrame, out_dir: Path, simulated: bool, outcome: ResultsOutcome,
                 report: Path) -> list[tuple[str, str]]:
    colors = profile_colors(sorted(metrics["profile"].astype(str).unique()))
    sim = " Simulated data: not a finding." if simulated else ""
    rel = lambda p: Path(os.path.relpath(p, report.resolve().parent)).as_posix()  # noqa: E731
    made = []
    for tier in ("primary", "secondary"):
        if not len(forest_rows(table, (tier,))):
            continue
        fig = plot_forest(table, simulated, colors, tiers=(tier,))
        path = plan_figures.save_png(fig, out_dir, f"{tier}_effects")
        plt.close(fig)
        outcome.files.append(path)
        made.append((rel(path.resolve()), f"{tier} metrics: each comparison's estimate with its 95 % interval, as in "
                     f"the table above; filled markers are significant after the tier's correction. {FOREST_NOTE}{sim}"))
    cols = [c for c in dict.fromkeys(table.loc[table["tier"] == "exploratory", "metric"]) if c in metrics.columns]
    if cols:
        fig = plan_figures.plot_exploratory(metrics, cols, simulated, colors)
        path = plan_figures.save_png(fig, out_dir, "exploratory")
        plt.close(fig)
        outcome.files.append(path)
        made.append((rel(path.resolve()), f"exploratory metrics per trial and profile (bar = median); descriptive "
                     f"only, no test.{sim}"))
    return made


def cli(argv: list[str] | None = None) -> int:
    """``python -m analysis_lib results FULL_RUN.json [--output RESULTS.md] [--plots DIR] ...``."""
    p = argparse.ArgumentParser(prog="python -m analysis_lib results",
                                description="Pre-registered report (RESULTS.md) of a benchmark run's full_run.json.")
    p.add_argument("full_run", metavar="FULL_RUN.json", help="the benchmark runner's output (bench full --output)")
    p.add_argument("--output", default="RESULTS.md", help="report to write (default RESULTS.md)")
    p.add_argument("--plots", metavar="DIR", help="folder for the figures (PNG); none when omitted")
    p.add_argument("--runs-dir", metavar="DIR", help="the run's runs folder (default: found from the file)")
    p.add_argument("--plan", metavar="YAML", help="analysis plan (default params/analysis_plan.yaml)")
    p.add_argument("--baseline", metavar="CONDITION", help="baseline condition (default: the plan's, else index.json's, "
                   "else the manifest's first)")
    p.add_argument("--no-record", action="store_true",
                   help="do not record the plan in the output folder when the runs carry no plan record")
    p.add_argument("--plan-record", metavar="JSON", help="compare the plan with this plan record (default: the run "
                   "record's, else the one in the output folder)")
    p.add_argument("--workers", type=int, default=1, help="processes for ingest (default 1)")
    args = p.parse_args(argv)
    try:
        res = _write(args)
    except FolderBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BUSY_EXIT_CODE
    except RunsChanged as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ResultsError, plan_mod.PlanError, output_set.OutputSetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: nothing was written; {_left(args)}", file=sys.stderr)
        return 130
    except OSError as exc:  # a disk that filled up, a folder made read-only meanwhile
        print(f"error: cannot write ({output_set.os_reason(exc)}): nothing was written; {_left(args)}", file=sys.stderr)
        return 1
    for line in res.messages:
        print(line, file=sys.stderr)
    print(f"wrote {args.output}" + (f" and {len(res.files) - 1} figures in {args.plots}" if args.plots else "")
          + (" (accuracy analysis refused)" if res.refused else ""))
    return res.exit_code


def _write(args: argparse.Namespace) -> ResultsOutcome:
    """RESULTS.md alone is one atomic file; with ``--plots`` it and its figures are one output set, kept in the plots
    folder (:mod:`analysis_lib.core.output_set`): staged, then committed together, the figures of an earlier report
    that this one does not draw removed."""
    options = dict(runs_dir=args.runs_dir, plan_path=args.plan, baseline=args.baseline, record=not args.no_record,
                   plan_record=args.plan_record, workers=args.workers)
    if not args.plots:
        return write_results(args.full_run, args.output, None, **options)
    output, plots = Path(args.output), Path(args.plots)
    home_label = args.plots
    with output_set.locked([(plots, args.plots), (output.parent, output.parent.as_posix())], "results"):
        staging = output_set.prepare(plots, label=home_label, command="results",
                                     base=os.path.commonpath([os.path.abspath(plots), os.path.abspath(output.parent)]),
                                     folders=[plots, output.parent], keep=[output.parent / plan_mod.LOCK_NAME],
                                     warn=lambda line: print(line, file=sys.stderr))
        try:
            staging.begin("results")
            res = write_results(args.full_run, output, plots, staged=staging.path, **options)
            staging.commit(steps=["results"], inputs={"full_run": plan_mod.display_path(args.full_run)})
        finally:
            staging.discard()
    return res


def _left(args: argparse.Namespace) -> str:
    """What the report's folders hold after a run that did not write: the previous report, as it was."""
    if not args.plots:
        return f"{args.output} is as it was"
    manifest = output_set.read_manifest(Path(args.plots), args.plots)
    return f"{args.plots} still holds {manifest.line()}" if manifest else f"{args.output} and {args.plots} are as they were"
