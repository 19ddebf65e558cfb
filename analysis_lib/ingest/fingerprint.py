"""The fingerprint of a source: size and mtime of what it is read from, to tell that it changed.

It covers every file the source's reader may open and the folders holding them. A folder's mtime
changes when an entry is added, removed or renamed in it, so a file that appears late (a
``reward.txt`` written after the agent finished) changes the fingerprint as surely as a file
rewritten in place.
"""

from __future__ import annotations

import os

from .discover import TrialSource

# What a trial folder is read from (see read.read_trial_dir), relative to it ("" = the folder itself).
TRIAL_ENTRIES = (
    "",
    "result.json",
    "agent",
    "agent/trajectory.json",
    "agent/claude-code.txt",
    "agent/sessions",
    "agent/sessions/codecanvas",
    "agent/sessions/codecanvas/state.json",
    "verifier",
    "verifier/ctrf.json",
    "verifier/reward.txt",
    "verifier/reward.json",
    "task_metrics.json",
)


def fingerprint(src: TrialSource) -> str:
    """``name:size:mtime_ns|...`` of every entry ``src`` is read from that exists (missing ones are left out)."""
    parts = []
    for name, path in _entries(src):
        try:
            st = os.stat(path)
        except OSError:
            continue
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _entries(src: TrialSource) -> list[tuple[str, str]]:
    """(name in the fingerprint, path) of what ``src`` is read from."""
    if src.kind == "trial_dir":
        return [(rel, os.path.join(src.path, rel) if rel else src.path) for rel in TRIAL_ENTRIES]
    if src.kind == "tb1_run":
        return [(rel, os.path.join(src.path, rel) if rel else src.path) for rel in _tb1_entries(src.path)]
    # A file holding trials, and its folder: segments and subagent files it refers to sit beside it;
    # a Claude Code session's subagent files (found by discovery), and the folder new ones appear in.
    entries = [("", src.path), ("..", os.path.dirname(src.path))]
    if src.kind == "transcript":
        entries.append(("subagents/", os.path.join(os.path.splitext(src.path)[0], "subagents")))
        entries += [(f"subagent:{os.path.basename(f)}", f) for f in src.meta.get("subagents") or []]
    return entries


def _tb1_entries(path: str) -> list[str]:
    """A TB1 run: its files, and two levels of task and trial folders with their results.json."""
    rels = ["", "run_metadata.json", "results.json"]
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        return rels
    # Timestamped run-level results files (<timestamp>_results.json) are read too.
    rels += sorted(e.name for e in entries if e.name.endswith("_results.json") and e.is_file(follow_symlinks=False))
    for task in sorted(e.name for e in entries if e.is_dir(follow_symlinks=False)):
        rels.append(task)
        try:
            with os.scandir(os.path.join(path, task)) as it:
                trials = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        for name in trials:
            rels += [f"{task}/{name}", f"{task}/{name}/results.json"]
    return rels
