"""Environment locking: what each trial ran with, and warnings when two sides of a pair differ.

A paired comparison is only fair when both trials of a pair used the same model, the same tool
build and the same starting commit of the target repository; the adapter version (Claude Code
CLI release) changes behaviour too. Each trial records these; :func:`pair_warnings` flags pairs
whose sides differ so that the analysis can say so (or drop them) instead of trusting them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..core import outputs as files
from ..core.fileio import read_json
from ..core.trial import InputError
from .process import git, run_process

# Keys compared across the two sides of a pair (the MCP config differs by design and is not compared).
PAIRED_KEYS = ("model", "tool_commit", "target_repo_commit", "adapter_version")

_version_cache: dict[tuple[str, ...], str] = {}


def git_commit(path: str | os.PathLike) -> str | None:
    """``git rev-parse HEAD`` of a checkout, or None when it is not a git checkout."""
    try:
        return git(["rev-parse", "HEAD"], cwd=path, timeout=30)
    except RuntimeError:
        return None


def program_version(argv: list[str]) -> str:
    """First line of ``<program> --version`` (cached per argv); "unknown" when it cannot tell."""
    key = tuple(argv)
    if key not in _version_cache:
        res = run_process(argv, timeout=30)
        text = res.stdout.decode("utf-8", "replace").strip().splitlines()
        ok = res.returncode == 0 and not res.timed_out and not res.error and text
        _version_cache[key] = text[0][:200] if ok else "unknown"
    return _version_cache[key]


def tool_commit(pinned: str | None, tool_repo: str | None) -> tuple[str | None, list[str]]:
    """The tool commit actually checked out (when a checkout is given) and a warning if it is not the pin."""
    if not tool_repo:
        return pinned, []
    actual = git_commit(tool_repo)
    if actual is None:
        return pinned, [f"tool_repo {tool_repo}: not a git checkout; recording the pinned tool_commit unverified"]
    if pinned and not actual.startswith(pinned) and not pinned.startswith(actual):
        return actual, [f"tool_repo {tool_repo}: HEAD is {actual[:12]}, manifest pins tool_commit {pinned}"]
    return actual, []


def pair_warnings(trials: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per (pair, key) whose value differs between the sides of the pair.

    ``trials`` are records with ``pair``, ``task_id``, ``run``, ``condition`` and ``environment``
    (as in ``full_run.json["trials"]``); trials without an environment (not run) are ignored.
    """
    by_pair: dict[int, list[Mapping[str, Any]]] = {}
    for t in trials:
        if t.get("environment"):
            by_pair.setdefault(int(t["pair"]), []).append(t)
    out = []
    for pair in sorted(by_pair):
        sides = by_pair[pair]
        if len(sides) < 2:
            continue
        for key in PAIRED_KEYS:
            values = {s["condition"]: s["environment"].get(key) for s in sides}
            if len(set(map(str, values.values()))) > 1:
                shown = ", ".join(f"{c}={v}" for c, v in sorted(values.items()))
                out.append(f"pair {pair} (task {sides[0]['task_id']}, run {sides[0]['run']}): {key} differs: {shown}")
    return out


def check_full_run(full_run: Mapping[str, Any]) -> list[str]:
    """Environment warnings of a ``full_run.json`` object (for the analysis notebooks)."""
    return pair_warnings(full_run.get("trials", []))


def runs_dir_warnings(runs_dir: str | os.PathLike) -> list[str]:
    """Environment warnings of a runs folder made by the runner; [] when it has no ``full_run.json``.

    For the analysis: call it on any runs folder, and print its lines before the comparisons.
    An unreadable ``full_run.json`` gives one warning line naming it rather than an exception.
    """
    path = os.path.join(os.fspath(runs_dir), files.FULL_RUN)
    if not os.path.isfile(path):
        return []
    try:
        obj = read_json(path, stage="bench")
    except InputError as exc:
        return [f"{exc} (environment of pairs not checked)"]
    return check_full_run(obj) if isinstance(obj, dict) else [f"{path}: not a JSON object (environment of pairs not checked)"]
