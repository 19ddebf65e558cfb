"""Replay a finished run under the plan's sequential design: where it would have stopped, the spend saved, and
whether its decisions match the full run's (``python -m analysis_lib bench replay``).

The design is applied as if the study had run task by task (the sequential schedule) in one of two orders:

* ``schedule``: the benchmark runner's blocked schedule, read from the run record ``full_run.json`` in the runs
  folder: tasks in the order of their first scheduled trial;
* ``time``: tasks in the order in which their first trial started (``started_at`` of the trials).

Only tasks that every compared profile ran count (a task one arm lacks pairs with nothing). Looks fall after the
plan's shares of those tasks, or of their total spend (``timing: spend``); a task's spend is the recorded cost of all
its trials, every profile. The full run's decisions are the fixed-sample analysis of every task with the plan's
correction (:func:`analysis_lib.inference.sequential.replay`). The runs folder is only read.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from ..core import outputs as files
from ..core.fileio import read_json
from ..core.trial import InputError
from ..inference import sequential as seq_mod
from ..inference.comparisons import usable_trials
from ..study import plan as plan_mod
from ..study.study import open_study

ORDERS = ("auto", "schedule", "time")


def _schedule_order(runs_dir: Path) -> list[str] | None:
    """Task ids in the order of their first scheduled trial, from the runner's record; None without one."""
    path = runs_dir / files.FULL_RUN
    if not path.exists():
        return None
    obj = read_json(path, stage="run record")
    trials = obj.get("trials") if isinstance(obj, dict) else None
    if not isinstance(trials, list) or not trials:
        return None
    rows = [t for t in trials if isinstance(t, dict) and "pair" in t and "task_id" in t]
    rows.sort(key=lambda t: (int(t["pair"]), int(t.get("position", 0))))
    return list(dict.fromkeys(str(t["task_id"]) for t in rows))


def _time_order(metrics: pd.DataFrame) -> list[str]:
    """Task ids in the order their first trial started (ties and unknown starts by task id, at the end)."""
    if "started_at" not in metrics.columns:
        raise ValueError("the trials record no start time (started_at): replay them in the runner's schedule order")
    start = pd.to_datetime(metrics["started_at"], errors="coerce", utc=True)
    first = start.groupby(metrics["task_id"].astype(str)).min()
    if first.isna().all():
        raise ValueError("no trial records its start time (started_at): replay them in the runner's schedule order")
    return list(first.reset_index().sort_values(["started_at", "task_id"], na_position="last")["task_id"])


def replay_runs(runs_dir: str | os.PathLike, a_plan: plan_mod.AnalysisPlan, *, baseline: str | None = None,
                order: str = "auto", workers: int | None = None) -> dict:
    """Replay the runs under ``a_plan``'s design; the :func:`analysis_lib.inference.sequential.replay` record, plus ``order``
    (how the tasks were ordered), ``pairs``, ``left_out`` (tasks not run by every profile), ``cost_known``."""
    if a_plan.sequential is None:
        raise ValueError("the analysis plan declares no sequential design (add a 'sequential' section)")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    runs = Path(runs_dir)
    res = open_study(runs, None, a_plan, baseline, workers=workers)
    metrics = res.metrics
    if metrics.empty:
        raise ValueError(f"{runs}: no trial could be read")
    profiles = sorted(metrics["profile"].dropna().astype(str).unique())
    pairs = res.pairs()
    if not pairs:
        raise ValueError(f"{runs}: one profile only ({', '.join(profiles)}): nothing to compare")
    how, tasks = order, None
    if order in ("auto", "schedule"):
        try:
            tasks = _schedule_order(runs)
        except InputError as exc:
            if order == "schedule":
                raise ValueError(str(exc)) from exc
        if tasks is None and order == "schedule":
            raise ValueError(f"{runs}: no run record with a schedule (full_run.json); replay with --order time")
        how = "schedule" if tasks is not None else "time"
    if tasks is None:
        tasks = _time_order(metrics)
    use = usable_trials(metrics)
    needed = sorted({p for pair in pairs for p in pair})
    ran = [set(use.loc[use["profile"].astype(str) == p, "task_id"].astype(str)) for p in needed]
    paired = set.intersection(*ran) if ran else set()
    kept = [t for t in tasks if t in paired]
    left_out = sorted(set(metrics["task_id"].astype(str)) - set(kept))
    if not kept:
        raise ValueError(f"{runs}: no task was run by every profile of {', '.join(needed)}")
    cost = pd.to_numeric(metrics["total_cost_usd"], errors="coerce") if "total_cost_usd" in metrics else None
    cost_known = cost is not None and cost.notna().any()
    by_task = (cost.fillna(0.0).groupby(metrics["task_id"].astype(str)).sum() if cost_known
               else pd.Series(0.0, index=kept))
    if a_plan.sequential.timing == "spend" and not cost_known:
        raise ValueError(f"{runs}: the trials record no cost, and the plan's looks are at shares of the spend")
    rep = seq_mod.replay(metrics, a_plan, pairs, kept, by_task)
    return {**rep, "order": how, "pairs": pairs, "left_out": left_out, "cost_known": bool(cost_known),
            "task_order": kept}


def _p(x) -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x + 0.0:.4g}"  # no "-0"


def describe_replay(rep: dict, a_plan: plan_mod.AnalysisPlan) -> list[str]:
    """The replay as plain lines: the design, each look, the stop, the spend saved, the decisions."""
    seq = a_plan.sequential
    assert seq is not None
    mon = rep["monitoring"]
    fut = "none" if seq.futility == "none" else f"{seq.futility.replace('_', '-')} (non-binding)"
    lines = [f"replay: {rep['tasks_total']} tasks run by every profile, in {rep['order']} order"
             + (f" ({len(rep['left_out'])} left out, not run by every profile: {', '.join(rep['left_out'])})"
                if rep["left_out"] else ""),
             f"design: looks at {', '.join(f'{x:g}' for x in seq.fractions())} of the "
             f"{'tasks' if seq.timing == 'tasks' else 'spend'} -> after {', '.join(map(str, rep['sizes']))} tasks; "
             f"{seq.efficacy.replace('_', '-')} alpha spending, futility {fut}, stop: {seq.stop}; Holm-shared alpha "
             f"{a_plan.alpha} over {mon.table[['metric', 'profile_a', 'profile_b']].drop_duplicates().shape[0]} "
             "primary hypotheses"]
    for lk in mon.looks:
        spent = "" if not rep["cost_known"] or lk.get("spent_usd") is None else f", ${lk['spent_usd']:.2f} spent"
        lines.append(f"look {lk['look']} ({lk['tasks']} tasks, {lk['pairs']} pairs{spent}): {lk['decision']}")
        for h in lk["hypotheses"]:
            lines.append(f"  {h['metric']} ({h['profile_b']} vs {h['profile_a']}, {h['test']}): p={_p(h['p_value'])}, "
                         f"boundary p<={_p(h['nominal_p'])} at alpha share {_p(h['level'])}"
                         + ("" if h.get("futility_z") is None else f", futility Z<{_p(h['futility_z'])} (Z={_p(h['z'])})")
                         + f": {h['status']}")
    k = rep["stop_look"]
    last = mon.looks[-1]
    stopped = "would have stopped" if mon.decision not in ("final", "budget") else "would have run to the end"
    lines.append(f"the design {stopped} at look {k} of {len(rep['sizes'])} ({rep['tasks_used']} of {rep['tasks_total']} "
                 f"tasks): {last.get('reason') or last['decision']}")
    if rep["cost_known"]:
        lines.append(f"spend: ${rep['spend_used']:.2f} of ${rep['spend_total']:.2f}; saved ${rep['spend_saved']:.2f} "
                     f"({rep['saved_share']:.0%})")
    else:
        lines.append("spend: the trials record no cost; tasks saved: "
                     f"{rep['tasks_total'] - rep['tasks_used']} of {rep['tasks_total']}")
    for r in rep["decisions"].itertuples():
        status = "not rejected" if r.sequential == "continue" else r.sequential  # open at the last look: not rejected
        lines.append(f"decision {r.metric} ({r.profile_b} vs {r.profile_a}): sequential {status}, full run "
                     f"{'significant' if r.fixed_significant else 'not significant'} at the plan's correction: "
                     f"{'matches' if r.matches else 'DIFFERS'}")
    return lines


def replay_json(rep: dict) -> dict:
    """What ``--output`` writes: the looks, the stop, the spend and the decisions (no frames)."""
    mon = rep["monitoring"]
    return {"kind": "sequential_replay", "order": rep["order"], "task_order": rep["task_order"],
            "left_out": rep["left_out"], "pairs": [list(p) for p in rep["pairs"]], "sizes": rep["sizes"],
            "looks": mon.looks, "stop_look": rep["stop_look"], "decision": mon.decision, "reason": mon.reason or None,
            "tasks_used": rep["tasks_used"], "tasks_total": rep["tasks_total"], "cost_known": rep["cost_known"],
            "spend_used_usd": rep["spend_used"], "spend_total_usd": rep["spend_total"],
            "spend_saved_usd": rep["spend_saved"], "saved_share": rep["saved_share"],
            "decisions": rep["decisions"].to_dict("records"), "matches": rep["matches"]}
