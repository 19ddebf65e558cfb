"""The fingerprint of a source, and of a whole runs folder: size and mtime of what it is read from, to tell that it
changed.

It covers every file the source's reader may open and the folders holding them. A folder's mtime
changes when an entry is added, removed or renamed in it, so a file that appears late (a
``reward.txt`` written after the agent finished) changes the fingerprint as surely as a file
rewritten in place. The per-trial cache keys rows by a source's fingerprint; an analysis takes the runs
folder's before it reads and compares it again before its outputs are committed (:func:`runs_changes`).
"""

from __future__ import annotations

import hashlib
import os

from ..core import outputs as files
from .discover import TrialSource, discover

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


# What a runs folder is read from beside its sources: the folder itself (an entry added or removed at its top), the
# manifest of its runs, the benchmark runner's record and its pre-registration of the plan.
RUNS_ENTRIES = ("", files.RUN_INDEX, files.FULL_RUN, files.PLAN_RECORD)


def runs_fingerprint(runs_dir: str | os.PathLike, sources: list[TrialSource],
                     known: dict[tuple[str, str], str] | None = None) -> dict[str, str]:
    """The fingerprint of a whole runs folder: each source's (:func:`fingerprint`, or as ``known`` by kind and path,
    taken by whoever read it), keyed by its kind and its path relative to the runs folder, and the folder's own files
    (:data:`RUNS_ENTRIES`)."""
    root = os.fspath(runs_dir)
    folder = root if os.path.isdir(root) else os.path.dirname(root)
    known = known or {}
    out = {f"{s.kind}:{os.path.relpath(s.path, folder)}": known.get((s.kind, s.path)) or fingerprint(s) for s in sources}
    for rel in RUNS_ENTRIES if os.path.isdir(root) else ("",):
        path = os.path.join(root, rel) if rel else root
        try:
            st = os.stat(path)
        except OSError:
            continue
        out[f"runs:{rel or '.'}"] = f"{st.st_size}:{st.st_mtime_ns}"
    return out


def runs_fingerprint_sha256(fp: dict[str, str]) -> str:
    """One hash of a runs folder's fingerprint (for a manifest: the runs an output set was made from)."""
    h = hashlib.sha256()
    for key in sorted(fp):
        h.update(f"{key}\t{fp[key]}\n".encode())
    return h.hexdigest()


def runs_changes(runs_dir: str | os.PathLike, before: dict[str, str], label: str) -> str | None:
    """How the runs folder changed since ``before`` was taken, in one line naming the folder as ``label``; None when
    it did not. Discovery runs again, so that trials added since are seen too."""
    root = os.fspath(runs_dir)
    if not os.path.exists(root):
        return f"the runs folder {label} is gone"
    sources, _ = discover(root)
    now = runs_fingerprint(root, sources)
    added = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    changed = sorted(k for k in before.keys() & now.keys() if before[k] != now[k])
    if not (added or removed or changed):
        return None
    parts = [f"{len(keys)} {what} (first: {_shown(keys[0])})"
             for what, keys in (("changed", changed), ("added", added), ("removed", removed)) if keys]
    return f"the runs folder {label} changed while it was analysed: {', '.join(parts)}"


def _shown(key: str) -> str:
    kind, rel = key.split(":", 1)
    return "the folder's own entries" if kind == "runs" and rel == "." else rel
