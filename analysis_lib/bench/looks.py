"""Interim looks of a sequential benchmark run: when to look, the analysis at a look, and their record.

With an analysis plan that declares a ``sequential`` design, the runner uses the sequential schedule
(each task's pairs back to back, tasks in a seeded random order) and analyses the complete tasks only at
the declared looks, with the plan's engine (:func:`analysis_lib.inference.sequential.monitor`): no statistic is
computed between looks. Each look is journaled (``<runs>/.bench/looks.json``) before the run goes on, so
a resumed run continues from the last look, and a look that stopped the study stops the resumed run too.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..core.fileio import atomic_write_json, read_json
from ..core.trial import InputError
from ..inference import sequential as seq_mod
from ..stats.group_sequential import smallest_p
from ..study import plan as plan_mod
from ..study.baseline import profile_pairs, resolve_baseline
from ..study.study import open_study
from .journal import state_dir

LOOKS_FILE = "looks.json"
VERDICTS = ("passed", "failed")
# Columns that depend on the evaluator's verdict: refused at a look whose tasks lack one (as in RESULTS.md).
VERDICT_COLUMNS = ("success", "tests_passed_ratio", "token_efficiency")


def family_size(a_plan: plan_mod.AnalysisPlan, n_pairs: int) -> int:
    """Hypotheses of the primary family: its metrics times the profile pairs (an MCP family counts once)."""
    return max(1, len(a_plan.tiers.primary.metrics) * max(n_pairs, 1))


def design_record(a_plan: plan_mod.AnalysisPlan, n_tasks: int, conditions: list[str], phase_budget_usd: float,
                  limit_usd: float, cost_per_task_usd: float = float("nan")) -> dict:
    """What the run record and a dry run say of the design: the looks, the boundaries of one hypothesis, the looks
    each planned test cannot reject at (its smallest attainable p is above the boundary), and its maximum and
    expected tasks and spend beside the fixed design (``cost_per_task_usd``: every trial of a task), with the
    power the design really has."""
    seq = a_plan.sequential
    assert seq is not None
    pairs = profile_pairs(conditions, baseline=baseline_of(a_plan, conditions))
    m = family_size(a_plan, len(pairs))
    tests = {s.id: s.test for s in a_plan.tiers.primary.metrics}
    rec = {"design": seq.model_dump(mode="json"), "alpha": a_plan.alpha, "family": m,
           "primary": [s.id for s in a_plan.tiers.primary.metrics], "tests": tests, "n_tasks": n_tasks}
    if seq.timing == "tasks":
        sizes = seq_mod.look_sizes(seq, n_tasks)
        rec["look_tasks"] = sizes
        shares: list[float | None] = [None] * len(sizes)
    else:
        # Every declared share of the guardrail stays a trigger (the runner skips one that finds no new task done);
        # the table shows the distinct looks they give when every task costs alike.
        rec["look_spend_usd"] = [round(f * limit_usd, 6) for f in seq.fractions()]
        sizes, shares = seq_mod.spend_look_sizes(seq, n_tasks, limit_usd, cost_per_task_usd)
    tab = seq_mod.design_table(seq, a_plan.alpha / m, sizes, n_tasks, list(tests.values()))
    tab["spend_usd"] = [None if f is None else round(f * limit_usd, 6) for f in shares]
    rec["boundaries"] = [{k: (None if isinstance(v, float) and not np.isfinite(v) else _plain(v))
                          for k, v in row.items()} for row in tab.to_dict("records")]
    # One planning table per pattern of looks the tests can reject at: tests that share it share their power.
    groups: dict[tuple, list[str]] = {}
    for metric_id, test in tests.items():
        can = tuple(bool(x) for x in tab[f"can_reject_{test}"])
        groups.setdefault(can, []).append(f"{metric_id} ({test})")
    rec["planning"] = []
    for can, names in groups.items():
        test = next(t for t in tests.values() if tuple(bool(x) for x in tab[f"can_reject_{t}"]) == can)
        rows = seq_mod.planning(seq, a_plan.alpha / m, n_max=n_tasks, cost_per_task=cost_per_task_usd, test=test,
                                sizes=sizes)
        rec["planning"] += [{**{k: _plain(v) for k, v in row.items()}, "tests": names} for row in rows.to_dict("records")]
    return rec


def _plain(v):
    """A JSON value: lists of ints, finite floats rounded, None for NaN."""
    if isinstance(v, list):
        return [int(x) for x in v]
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, float | np.floating):
        return round(float(v), 6) if np.isfinite(v) else None
    return int(v) if isinstance(v, np.integer) else v


def baseline_of(a_plan: plan_mod.AnalysisPlan, conditions: list[str]) -> str:
    """The baseline condition by the one rule (analysis_lib.study.baseline), the manifest's first as declared."""
    return str(resolve_baseline(conditions, plan=a_plan, manifest=conditions[0]).name)


def describe(rec: dict) -> list[str]:
    """The looks and boundaries as plain text lines (what ``--dry-run`` prints)."""
    d = rec["design"]
    fut = d["futility"]
    n_looks = len(rec["boundaries"])
    lines = [f"sequential design: {n_looks} look{'' if n_looks == 1 else 's'} ({d['timing']}), {d['efficacy'].replace('_', '-')} "
             f"alpha spending, futility {'none' if fut == 'none' else fut.replace('_', '-') + ' (non-binding, power ' + str(d['power']) + ')'}, "
             f"stop when {'every primary hypothesis is decided' if d['stop'] == 'all' else 'any primary hypothesis is rejected'}",
             f"primary family: {', '.join(f'{k} ({v})' for k, v in rec['tests'].items())}: {rec['family']} hypotheses, "
             f"Holm-shared alpha {rec['alpha']}; boundaries of one hypothesis at alpha/{rec['family']} = "
             f"{rec['alpha'] / rec['family']:.4g} (a rejection passes its alpha on):"]
    lines.append(f"{'look':>4} {'when':>16} {'fraction':>8} {'alpha spent':>11} {'|Z| >=':>7} {'nominal p <=':>12} "
                 f"{'futility Z <':>12}")
    for b in rec["boundaries"]:
        if "look_tasks" in rec:
            when = f"{b['tasks']} task{'' if b['tasks'] == 1 else 's'}"
        else:
            when = f"${b['spend_usd']:.2f} spent" if b.get("spend_usd") is not None else "schedule end"
        fz = b.get("futility_z")
        lines.append(f"{b['look']:>4} {when:>16} {b['fraction']:>8.3f} {b['spent']:>11.5f} "
                     f"{(b['z_bound'] if b['z_bound'] is not None else float('inf')):>7.3f} {b['nominal_p']:>12.6f} "
                     f"{'–' if fz is None else f'{fz:.3f}':>12}")
    if "look_spend_usd" in rec:
        lines.append(f"(looks by spend, at shares {', '.join(f'{x:g}' for x in rec['design']['looks'])} of the guardrail: "
                     "the tasks expected done then, every task costing the manifest's estimate; a share that finds no new "
                     "task done adds no look, and the end of the schedule is the final look)")
    exact = [k for k, v in rec["tests"].items() if v in seq_mod.EXACT_TESTS]
    if exact:
        lines.append(f"{', '.join(exact)}: exact boundaries at each look from the test's own null distribution given "
                     "the data (same spending); the Z bounds above are the normal ones")
    lines += cannot_reject_lines(rec)
    if rec.get("planning"):
        lines += planning_lines(rec)
    return lines


def cannot_reject_lines(rec: dict) -> list[str]:
    """One line per look at which some planned test cannot reject: its smallest attainable p is above the boundary."""
    out = []
    for b in rec["boundaries"]:
        blocked = [f"{k} ({v}: smallest p {smallest_p(v, int(b['tasks'])):.3g})" for k, v in rec["tests"].items()
                   if b.get(f"can_reject_{v}") is False]
        if blocked:
            limit = "the alpha spent by then" if all(v in seq_mod.EXACT_TESTS for k, v in rec["tests"].items()
                                                      if b.get(f"can_reject_{v}") is False) else "the boundary"
            tasks = f"{b['tasks']} task{'' if b['tasks'] == 1 else 's'}"
            out.append(f"look {b['look']} ({tasks}) cannot reject {', '.join(blocked)}: the smallest "
                       f"attainable p is above {limit}")
    return out


def planning_lines(rec: dict) -> list[str]:
    """The dry run's planning table: the fixed and the sequential design of one hypothesis, tasks and spend, per
    group of tests that can reject at the same looks, with the power the design really has."""
    rows = rec["planning"]
    power = rec["design"]["power"]
    lines = [f"expected tasks and spend (one hypothesis at {rec['alpha'] / rec['family']:.4g}, normal theory; planned effect: "
             f"the one at which {rows[-1]['n_max']} tasks give the sequential design {power:.0%} power when every look "
             "can reject; spend at the manifest's estimate per trial; power: of the design that really runs, the looks "
             "that cannot reject left out):",
             f"{'design':<11} {'looks (tasks)':<18} {'max tasks':>9} {'E[tasks] null':>13} {'E[tasks] effect':>15} "
             f"{'max spend':>10} {'E[spend] null':>13} {'E[spend] effect':>15} {'power':>6}"]

    def usd(x) -> str:
        return "–" if x is None else f"${x:,.2f}"

    several = len({tuple(r.get("tests") or []) for r in rows}) > 1
    for r in rows:
        if several and r["design"] == "fixed":
            lines.append(f"{', '.join(r.get('tests') or [])}:")
        lines.append(f"{r['design']:<11} {', '.join(str(x) for x in r['looks']):<18} {r['n_max']:>9} "
                     f"{r['expected_n_null']:>13.1f} {r['expected_n_effect']:>15.1f} {usd(r['spend_max_median']):>10} "
                     f"{usd(r['expected_spend_null']):>13} {usd(r['expected_spend_effect']):>15} {r['power']:>6.3f}")
    if any(r.get("power") == 0 for r in rows):
        lines.append("power 0: no look of that design can reject with so few tasks, whatever the effect; add tasks")
    return lines


def load_looks(runs_dir: str | os.PathLike) -> list[dict]:
    path = state_dir(runs_dir) / LOOKS_FILE
    if not path.exists():
        return []
    try:
        obj = read_json(path, stage="journal")
    except InputError:
        return []
    return obj if isinstance(obj, list) else []


def save_looks(runs_dir: str | os.PathLike, looks: list[dict]) -> None:
    atomic_write_json(state_dir(runs_dir) / LOOKS_FILE, looks)


def refused_columns(records: list[dict], tasks: set[str]) -> dict[str, str]:
    """Verdict columns refused at a look: some trial of its tasks has no pass/fail verdict."""
    missing = [r for r in records if r["task_id"] in tasks and r.get("outcome") not in VERDICTS]
    if not missing:
        return {}
    return {c: f"refused: {len(missing)} trials of the analysed tasks have no verdict" for c in VERDICT_COLUMNS}


def run_look(runs_dir: Path, a_plan: plan_mod.AnalysisPlan, conditions: list[str], order: list[str],
             sizes: list[int], n_tasks: int, records: list[dict], *, final: bool, ended_by: str | None,
             times: list[str | None], spent: list[float | None]) -> seq_mod.Monitoring:
    """Analyse the complete tasks at the looks ``sizes`` with the plan's engine and hold them against the design."""
    res = open_study(runs_dir, None, a_plan, profiles=conditions, workers=1)
    metrics = res.metrics
    pairs = profile_pairs(conditions, baseline=baseline_of(a_plan, conditions))
    refused = refused_columns(records, set(order[: sizes[-1]]))
    return seq_mod.monitor(metrics, a_plan, pairs, order, sizes, n_tasks, final=final, ended_by=ended_by,
                           refused=refused, times=times, spent=spent)
