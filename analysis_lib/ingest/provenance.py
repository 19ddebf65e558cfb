"""Where the data came from: whether a runs folder holds simulated runs (its ``index.json`` or its trials say so)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ..core import outputs as files
from ..core.fileio import read_json
from ..core.trial import InputError

__all__ = ["is_simulated", "declared_baseline"]


def _index(runs_dir: str | Path) -> dict:
    index = Path(runs_dir) / files.RUN_INDEX
    if not index.exists():
        return {}
    try:
        data = read_json(index, stage="discover")
    except InputError as exc:
        print(f"warning: {exc}")
        return {}
    return data if isinstance(data, dict) else {}


def declared_baseline(runs_dir: str | Path) -> str | None:
    """The baseline profile ``index.json`` declares (``"baseline": "text"``), or None."""
    value = _index(runs_dir).get("baseline")
    return value if isinstance(value, str) and value else None


def _trial_says_simulated(path: Path) -> bool:
    """A Harbor ``result.json`` whose ``config.simulated`` is true (the seeded simulator writes it)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    if b'"simulated"' not in raw:  # most files: no parse needed
        return False
    try:
        data = json.loads(raw)
    except ValueError:
        return False
    config = data.get("config") if isinstance(data, dict) else None
    return isinstance(config, dict) and config.get("simulated") is True


def is_simulated(runs_dir: str | Path, trial_dirs: Iterable[str] | None = None) -> bool:
    """True when ``runs_dir/index.json`` declares ``"simulated": true`` or any trial's ``result.json`` does.

    The trials are asked too, so that a copy of simulated runs without its index is still marked.
    A missing index means real runs unless a trial says otherwise; an unreadable index is reported
    in one line. ``trial_dirs``: the trial folders discovery found, when the caller has them (no
    second walk of the runs folder); else every ``result.json`` under ``runs_dir`` is asked.
    """
    if _index(runs_dir).get("simulated") is True:
        return True
    root = Path(runs_dir)
    if root.is_file():
        return _trial_says_simulated(root) if root.name == "result.json" else False
    results = root.rglob("result.json") if trial_dirs is None else (Path(d) / "result.json" for d in trial_dirs)
    return any(_trial_says_simulated(p) for p in results)
