"""The journal of finished trials, for resume after a crash or Ctrl-C.

One small JSON file per finished trial (``<runs_dir>/.bench/journal/p0007-1.json``), written
atomically after the trial's files are in place, plus the plan (``plan.json``) written before the
first trial. Resume re-reads both: a trial with a journal record is never run again; a plan that
differs from the requested one (seed, manifest, runs) is refused rather than silently mixed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core import outputs as files
from ..core.fileio import atomic_write_json, read_json
from ..core.trial import InputError

STATE_DIR = ".bench"


class PlanMismatchError(ValueError):
    """The runs folder holds a plan that differs from the one requested (resume would mix designs)."""


def state_dir(runs_dir: str | os.PathLike) -> Path:
    return Path(runs_dir) / STATE_DIR


class Journal:
    """Finished-trial records under ``<runs_dir>/.bench/``; the only state resume relies on."""

    def __init__(self, runs_dir: str | os.PathLike):
        self.root = state_dir(runs_dir)
        self.dir = self.root / "journal"

    @property
    def plan_path(self) -> Path:
        return self.root / files.BENCHMARK_PLAN

    def load_plan(self) -> dict | None:
        if not self.plan_path.exists():
            return None
        try:
            return read_json(self.plan_path, stage="journal")
        except InputError as exc:
            raise PlanMismatchError(f"{exc}; remove it or use another --runs-dir") from None

    def save_plan(self, plan: dict) -> None:
        atomic_write_json(self.plan_path, plan)

    def check_plan(self, plan: dict, keys: tuple[str, ...] = ("seed", "manifest_sha256", "runs_per_condition", "schedule")) -> None:
        """Raise :class:`PlanMismatchError` naming the first differing key when a stored plan disagrees."""
        stored = self.load_plan()
        if stored is None:
            return
        for key in keys:
            if stored.get(key) != plan.get(key):
                shown = "" if key == "schedule" else f" (stored {stored.get(key)!r}, requested {plan.get(key)!r})"
                raise PlanMismatchError(
                    f"{self.plan_path}: {key} differs from the run already started{shown}; "
                    "resume with the same arguments, or use another --runs-dir"
                )

    def records(self) -> dict[str, dict]:
        """Finished trials by key; an unreadable record is dropped (that trial simply runs again)."""
        out: dict[str, dict] = {}
        if not self.dir.exists():
            return out
        for p in sorted(self.dir.glob("*.json")):
            try:
                rec = read_json(p, stage="journal")
            except InputError:
                continue
            if isinstance(rec, dict) and rec.get("key") == p.stem:
                out[p.stem] = rec
        return out

    def write(self, key: str, record: dict[str, Any]) -> None:
        atomic_write_json(self.dir / f"{key}.json", {**record, "key": key})
