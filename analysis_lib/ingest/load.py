"""Every trial of a runs folder with its full trajectory, repetitions numbered.

For the metrics table of many trials, see :mod:`analysis_lib.metrics.trials_table`: it reads the same
sources but keeps one row per trial instead of parsed trajectories.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from ..core.trial import IngestError, Trial
from .discover import discover
from .read import read_source


def load_trials(runs_dir: str | os.PathLike, trial_paths: Collection[str] | None = None,
                *, number: bool = True) -> tuple[list[Trial], list[IngestError]]:
    """Every trial under ``runs_dir`` with its full trajectory (for the LLM layer and notebooks).

    With ``trial_paths`` (as trials give them), only those trials, and only the sources that may
    hold one are read (a ``--limit`` sample reads its trials, not the runs folder). Trials are named by
    their reader's default profile; :func:`analysis_lib.study.placement.place_trials` places them in the arms
    of a study file (``number=False`` then leaves the numbering of repetitions to it). This keeps parsed
    trajectories in memory; use it for hundreds of trials, not tens of thousands.
    """
    sources, errors = discover(runs_dir)
    if trial_paths is not None:
        wanted = {os.path.normpath(p) for p in trial_paths}
        sources = [s for s in sources if _may_hold(os.path.normpath(s.path), wanted)]
    trials: list[Trial] = []
    for src in sources:
        ts, es = read_source(src)
        trials.extend(ts)
        errors.extend(es)
    if trial_paths is not None:
        trials = [t for t in trials if os.path.normpath(t.trial_path) in wanted]
    if number:
        number_repetitions(trials)
    return trials, errors


def _may_hold(source: str, wanted: set[str]) -> bool:
    """Whether a source at ``source`` may hold one of ``wanted``: it is one, or their file or folder
    (a trial of a results file is ``<file>#<id>``, of a TB1 run a folder inside it)."""
    return source in wanted or any(w.startswith((source + "#", source + os.sep)) for w in wanted)


def number_repetitions(trials: list[Trial]) -> None:
    """Number the repetitions of ``trials`` in place (see :func:`repetition_numbers`)."""
    keys = [(t.profile, t.task_id, t.repetition, t.run_id, str(t.timing.started_at or ""), t.trial_path) for t in trials]
    for t, rep in zip(trials, repetition_numbers(keys), strict=True):
        t.repetition = rep


def repetition_numbers(keys: list[tuple]) -> list[int]:
    """The repetition of each trial, given as ``(profile, task_id, repetition, run_id, started_at, trial_path)``.

    Trials without a repetition (0 or None: Harbor) get 1..n per (profile, task), in start-time
    order; then the tasks whose repetitions collide across runs are renumbered (see
    :func:`_separate_runs`). Others keep theirs.
    """
    reps = [rep or 0 for _, _, rep, _, _, _ in keys]
    groups: dict[tuple, list[int]] = {}
    for i, (profile, task, rep, _, _, _) in enumerate(keys):
        if not rep:
            groups.setdefault((profile, task), []).append(i)
    for group in groups.values():
        group.sort(key=lambda i: (keys[i][4] or "", keys[i][5]))
        for n, i in enumerate(group, start=1):
            reps[i] = n
    rows = [(p, t, reps[i], run, started or "", path) for i, (p, t, _, run, started, path) in enumerate(keys)]
    for i, rep in _separate_runs(rows).items():
        reps[i] = rep
    return reps


def _separate_runs(rows: list[tuple]) -> dict[int, int]:
    """New repetitions where one (profile, task, repetition) comes from several runs.

    Several runs of one profile each numbering their attempts from 1 (TB1 submissions of
    ``run1/``, ``run2/``... with ``<task>.1-of-1`` trials, two mcpbr result files) would otherwise
    give one task the same repetition twice. Such a task's trials are numbered 1..n in the order
    of their run (its earliest trial start, then its id), then their own repetition.
    ``rows``: (profile, task, repetition, run_id, started_at, trial_path); returns index -> repetition.
    """
    runs_of: dict[tuple, set] = {}
    for profile, task, rep, run, _, _ in rows:
        runs_of.setdefault((profile, task, rep), set()).add(run)
    clashing = {(p, t) for (p, t, _), runs in runs_of.items() if len(runs) > 1}
    if not clashing:
        return {}
    run_start: dict[tuple, str] = {}
    for profile, _task, _, run, started, _ in rows:
        if started:
            key = (profile, run)
            run_start[key] = min(run_start.get(key, started), started)
    groups: dict[tuple, list[int]] = {}
    for i, (profile, task, *_rest) in enumerate(rows):
        if (profile, task) in clashing:
            groups.setdefault((profile, task), []).append(i)
    out: dict[int, int] = {}
    for (profile, _), idx in groups.items():
        idx.sort(key=lambda i: (run_start.get((profile, rows[i][3]), "~"), str(rows[i][3]), rows[i][2] or 0, rows[i][5]))
        out.update({i: n for n, i in enumerate(idx, start=1)})
    return out
