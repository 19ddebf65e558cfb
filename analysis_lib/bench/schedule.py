"""The blocked paired schedule: which trial runs when.

The randomisation unit is a (task, run) pair. Its conditions run back to back, in an order drawn
per pair, so that drift in the model service over the day hits both sides of a pair alike and no
condition is systematically first (a randomized complete block design; Box, Hunter & Hunter,
*Statistics for Experimenters*, ch. 4). Pairs are grouped by run (every task's run 1 before any
run 2, tasks shuffled within a run), so that a budget stop leaves a balanced, complete set of
runs rather than all repetitions of a few tasks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

SCHEDULE_KEYS = ("pair", "task_id", "run", "condition", "position")


def build_schedule(task_ids: Sequence[str], conditions: Sequence[str], runs_per_condition: int, seed: int,
                   *, by_task: bool = False) -> list[dict]:
    """Entries ``{"pair", "task_id", "run", "condition", "position"}`` in execution order.

    ``by_task`` (the sequential schedule): tasks in a seeded random order, each task's runs back to back,
    so that every interim look finds whole tasks (the analysis unit) done and a stop leaves no task half
    run; the conditions of each pair are still drawn in random order.

    ``pair`` counts pairs from 0 in execution order, ``run`` counts repetitions from 1, and
    ``position`` is the condition's place inside its pair (0 or 1 with two conditions). The same
    arguments give the same schedule (``random.Random(seed)``, whose shuffle is stable across
    Python 3 releases).
    """
    if runs_per_condition < 1:
        raise ValueError(f"runs_per_condition: must be >= 1, got {runs_per_condition}")
    if len(conditions) < 2 or len(set(conditions)) != len(conditions):
        raise ValueError(f"conditions: need at least two distinct names, got {list(conditions)}")
    if not task_ids or len(set(task_ids)) != len(task_ids):
        raise ValueError("task_ids: need at least one task and no duplicates")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: must be an int, got {seed!r}")
    rng = random.Random(seed)
    schedule: list[dict] = []
    pair = 0
    if by_task:
        order = list(task_ids)
        rng.shuffle(order)
        for task_id in order:
            for run in range(1, runs_per_condition + 1):
                conds = list(conditions)
                rng.shuffle(conds)
                for position, condition in enumerate(conds):
                    schedule.append({"pair": pair, "task_id": task_id, "run": run, "condition": condition,
                                     "position": position})
                pair += 1
        return schedule
    for run in range(1, runs_per_condition + 1):
        order = list(task_ids)
        rng.shuffle(order)
        for task_id in order:
            conds = list(conditions)
            rng.shuffle(conds)
            for position, condition in enumerate(conds):
                schedule.append({"pair": pair, "task_id": task_id, "run": run, "condition": condition, "position": position})
            pair += 1
    return schedule


def pairs(schedule: Sequence[dict]) -> list[list[dict]]:
    """The schedule's entries grouped by pair, in execution order."""
    out: list[list[dict]] = []
    for entry in schedule:
        if not out or out[-1][0]["pair"] != entry["pair"]:
            out.append([])
        out[-1].append(entry)
    return out


def task_order(schedule: Sequence[dict]) -> list[str]:
    """Task ids in the order of their first scheduled trial."""
    return list(dict.fromkeys(e["task_id"] for e in schedule))


def trial_key(entry: dict) -> str:
    """Stable id of one scheduled trial (journal file name): ``p0007-1``."""
    return f"p{entry['pair']:04d}-{entry['position']}"
