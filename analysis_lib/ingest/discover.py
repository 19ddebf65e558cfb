"""Find the trials under a runs folder, whatever layout it uses.

Recognised (by content and shape, not by file name alone):

- the run layout ``<runs>/<timestamp>__<profile>/<task_id>/{agent,verifier,result.json}``,
  with an optional ``<runs>/index.json`` naming profile and repetition of each run folder;
  several timestamped folders of one profile are its repetitions, in time order;
- Harbor job folders ``<job>/<trial>/...`` (profile from the trial's agent configuration);
- legacy Terminal-Bench 1 run folders, Inspect AI logs, mcpbr result files;
- published per-task results tables (a results CSV, SkillsBench's results registry);
- loose ATIF files and Claude Code / Codex transcripts (converted to ATIF).

Discovery only looks at names, at the first bytes of loose files (and the last ones of an agent
trajectory) and, where a folder is ambiguous, at one small JSON file; the reading happens later
(:mod:`analysis_lib.ingest.read`). Given the answers of an earlier run (``kinds``, kept in the
trials cache), a file whose size and mtime are unchanged is not opened at all.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..core import outputs as files
from ..core.fileio import read_json
from ..core.trial import IngestError, InputError
from .claude_code import parent_session
from .convert import detect_transcript_kind, is_subagent_transcript
from .harbor import is_job_result, is_trial_result
from .inspect_log import is_inspect_log
from .mcpbr import is_mcpbr_results
from .results_table import is_results_csv, is_skillsbench_registry
from .tb1 import is_tb1_run

# How much of a loose file discovery reads: a kind shows itself early in every format seen (and a
# mini-swe-agent trajectory names its format at the end, after a patch that may be long).
HEAD_BYTES = 65536
TAIL_BYTES = 4096
_MINI_FORMAT = re.compile(rb'"trajectory_format"\s*:\s*"mini-swe-agent')
_SWE_TURNS = re.compile(rb'"trajectory"\s*:\s*\[\s*(\]|\{)')
_RUN_DIR = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}(?:__|T|_)\d{2}[-:]\d{2}[-:]\d{2})__(?P<profile>.+)$")
_JOB_LEVEL = {files.RUN_INDEX, "config.json", "result.json", "lock.json"}
# What a trial folder holds beside its result.json when nothing else was written (Harbor: the sandbox never started).
_TRIAL_SIDE_FILES = {"result.json", "config.json", "trial.log", "exception.txt"}


@dataclass(slots=True)
class TrialSource:
    """Something that yields trials when read: a trial folder, or a file holding one or many."""

    # trial_dir | atif_file | transcript | tb1_run | inspect_log | mcpbr | mini_swe_agent | swe_agent | results_csv
    # | skillsbench_registry
    kind: str
    path: str
    run_id: str
    profile: str | None = None
    task_id: str | None = None
    repetition: int | None = None
    source_format: str = "run_layout"
    meta: dict[str, Any] = field(default_factory=dict)


def _is_trial_dir(path: str, names: set[str]) -> bool | str:
    """Whether a folder is a trial: True, False, or the reason its ``result.json`` makes it none (a warning row).

    A folder with an ``agent`` or ``verifier`` folder is a trial. So is one whose ``result.json`` is a trial's
    result: a TrialResult, or any result carrying ``exception_info`` (what Harbor leaves when the sandbox never
    started: a trial of its arm lost to an infrastructure error), or one that cannot be read while nothing else is
    in the folder (read as a trial, its error row says why). A job's ``result.json`` is no trial; any other one is
    named in a warning row.
    """
    if "agent" in names or "verifier" in names:
        return True
    if "result.json" not in names:
        return False
    try:
        obj = read_json(os.path.join(path, "result.json"), "discover")
    except InputError:
        # An errored Harbor trial may hold only result.json/config.json, with its log beside them.
        return "trial.log" in names or "exception.txt" in names or not (names - _TRIAL_SIDE_FILES)
    if is_trial_result(obj) or (isinstance(obj, dict) and "exception_info" in obj):
        return True
    if is_job_result(obj):
        return False
    return ("result.json is neither a trial's result (trial_name, agent_result, verifier_result or exception_info) "
            "nor a job's; the folder is not read as a trial")


def _read_index(root: str, errors: list[IngestError]) -> dict[str, dict]:
    p = os.path.join(root, files.RUN_INDEX)
    if not os.path.isfile(p):
        return {}
    try:
        idx = read_json(p, "discover")
    except InputError as exc:
        errors.append(exc.error)
        return {}
    runs = idx.get("runs") if isinstance(idx, dict) else None
    out = {}
    for r in runs or []:
        if isinstance(r, dict) and isinstance(r.get("run_id"), str):
            out[r["run_id"]] = r
    return out


def _sniff_file(path: str) -> str | None:
    """Kind of a loose file, from its first bytes (and its extension for JSONL and trajectories)."""
    if path.endswith((".traj", ".traj.json")):
        # SWE-agent (.traj) and mini-swe-agent (.traj.json): the reader confirms it from the whole document.
        return _agent_trajectory_kind(path)
    if path.endswith(".eval"):
        return "inspect_log" if is_inspect_log(path) else None
    if path.endswith(".csv"):
        return "results_csv" if is_results_csv(path) else None
    if path.endswith(".jsonl"):
        if is_mcpbr_results(path):  # mcpbr's incremental_results.jsonl
            return "mcpbr"
    if path.endswith((".jsonl", ".txt")):
        if is_subagent_transcript(path):
            return None  # converted with its session; alone it would count its calls twice
        return "transcript" if detect_transcript_kind(path, head_bytes=HEAD_BYTES) else None
    if not path.endswith(".json"):
        return None
    try:
        with open(path, "rb") as fh:
            text = fh.read(8192).decode("utf-8", errors="replace")
    except OSError:
        return None
    if text.lstrip("\ufeff \t\r\n").startswith("[") and is_skillsbench_registry(path):
        return "skillsbench_registry"
    if '"schema_version"' in text and "ATIF-" in text:
        # Subagent and continuation segments are read through the trajectory that refers to them.
        if '"parent_session_id"' in text or '"continuation_index"' in text:
            return None
        return "atif_file"
    if '"eval"' in text and '"version"' in text and ('"samples"' in text or '"results"' in text or '"plan"' in text):
        return "inspect_log"
    if '"metadata"' in text and ('"tasks"' in text or '"summary"' in text) and ('"mcp' in text or '"baseline"' in text):
        return "mcpbr"
    if '"loglines"' in text:
        return "transcript"
    if '"mini_version"' in text or '"trajectory_format": "mini-swe-agent' in text:
        return _agent_trajectory_kind(path)
    return None


def _agent_trajectory_kind(path: str) -> str | None:
    """``mini_swe_agent`` or ``swe_agent`` when the file's first and last bytes show one, else None.

    A mini-swe-agent document is ``{info: {.., mini_version, ..}, messages, trajectory_format}``; a
    SWE-agent one opens its ``trajectory`` list of turns (``action``, ``observation``) near its start.
    The reader checks the whole document (:func:`.mini_swe_agent.is_mini_swe_agent`, :func:`.swe_agent.is_swe_agent`).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
            size = os.fstat(fh.fileno()).st_size
            tail = b""
            if size > HEAD_BYTES:
                fh.seek(max(HEAD_BYTES, size - TAIL_BYTES))
                tail = fh.read(TAIL_BYTES)
    except OSError:
        return None
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return None
    ends = head + tail
    if _MINI_FORMAT.search(ends) or (b'"mini_version"' in head and b'"messages"' in ends):
        return "mini_swe_agent"
    turns = _SWE_TURNS.search(head)
    if turns and (b'"history"' in ends or b'"info"' in ends) and (turns.group(1) == b"]" or b'"action"' in head[turns.end():]):
        return "swe_agent"
    return None


# Keys whose presence near the top of a JSON or JSONL file marks an agent's log (what it said and did).
_LOG_MARKERS = (
    ('"sessionId"', '"messages"', "a gemini-cli session"),
    ('"conversations"', '"trial_name"', "a Harbor traces export"),
    ('"spans"', '"span_id"', "an OpenTelemetry trace"),
    ('"history"', '"role"', "an agent message history"),
    ('"messages"', '"role"', "a chat message log"),
    ('"action"', '"observation"', "an action/observation event list"),
    ('"trajectory"', '"action"', "an agent trajectory"),
    ('"steps"', '"tool_calls"', "an agent trajectory"),
    ('"role"', '"content"', "a chat message log"),
)
_LOG_NAMES = ("trajectory", "transcript", "rollout-", ".traj", "session")


def agent_log_hint(path: str) -> str | None:
    """Why an unread ``.json``/``.jsonl``/``.traj`` file looks like an agent's log (None when it does not).

    Such a file gets a warning row naming it: nothing that may be a trial is dropped silently.
    """
    name = os.path.basename(path).lower()
    if not name.endswith((".json", ".jsonl", ".traj")):
        return None
    try:
        with open(path, "rb") as fh:
            text = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return None
    for a, b, what in _LOG_MARKERS:
        if a in text and b in text:
            return what
    if any(n in name for n in _LOG_NAMES) and text.strip():
        return "a file named like an agent log"
    return None


def classify_file(path: str) -> tuple[str, str | None]:
    """What a loose file is to discovery, from its name and first bytes: ``(kind, None)`` for a source,
    ``("subagent", session)`` for a Claude Code subagent transcript, ``("part", None)`` for a file read
    through another, ``("log", why)`` for what looks like an agent's log in no format read here,
    ``("none", None)`` otherwise, ``("error", message)`` when it cannot be read."""
    name = os.path.basename(path)
    if name.startswith("agent-") and name.endswith(".jsonl"):
        session = parent_session(path)
        if session is not None:
            return "subagent", str(session)
    try:
        kind = _sniff_file(path)
    except InputError as exc:
        return "error", exc.error.message
    if kind:
        return kind, None
    if _read_through_another(path):
        return "part", None
    hint = agent_log_hint(path)
    return ("log", hint) if hint else ("none", None)


def _classified(entry: os.DirEntry, kinds: dict | None, fresh: dict) -> tuple[str, str | None]:
    """:func:`classify_file` of a folder entry, or the earlier run's answer when its size and mtime are unchanged."""
    try:
        st = entry.stat()
    except OSError:
        st = None
    if kinds is not None and st is not None:
        hit = kinds.get(entry.path)
        if isinstance(hit, list) and len(hit) == 4 and hit[:2] == [st.st_size, st.st_mtime_ns]:
            # A subagent file is one while its session is there (that file is another's to change).
            if hit[2] != "subagent" or os.path.isfile(hit[3]):
                fresh[entry.path] = hit
                return hit[2], hit[3]
    verdict, detail = classify_file(entry.path)
    if verdict != "error" and st is not None:
        fresh[entry.path] = [st.st_size, st.st_mtime_ns, verdict, detail]
    return verdict, detail


def discover(root: str | os.PathLike, kinds: dict[str, list] | None = None) -> tuple[list[TrialSource], list[IngestError]]:
    """All trial sources under ``root`` (a folder or a single file), and the problems met.

    ``kinds``: what an earlier run found each loose file to be (path -> [size, mtime_ns, kind, detail]);
    used for the files that did not change, then replaced in place by this run's answers.
    """
    root = os.fspath(root)
    errors: list[IngestError] = []
    sources: list[TrialSource] = []
    if not os.path.exists(root):
        return [], [IngestError(root, "discover", "no such file or folder")]
    if os.path.isfile(root):
        kind = _sniff_file(root)
        if kind is None:
            return [], [IngestError(root, "discover", "not a recognised run format (ATIF, transcript, Inspect log, mcpbr results, "
                                    "mini-swe-agent or SWE-agent trajectory, results table)")]
        return [_file_source(root, kind)], []
    index = _read_index(root, errors)
    visited: set = set()
    subagents: dict[str, list[str]] = {}
    fresh: dict[str, list] = {}
    _walk(root, root, index, sources, errors, visited, depth=0, subagents=subagents, kinds=(kinds, fresh))
    if kinds is not None:
        kinds.clear()
        kinds.update(fresh)
    for s in sources:
        if s.kind == "transcript":
            # The session's subagent files, found on the way: its reader needs not look for them again.
            s.meta["subagents"] = sorted(subagents.get(os.path.normpath(s.path), []))
    _number_run_layout_repetitions(sources, index)
    sources.sort(key=lambda s: (s.run_id, s.task_id or "", s.path))
    if not sources and not errors:
        errors.append(IngestError(root, "discover", "no trials found (empty folder or unknown layout)"))
    return sources, errors


def _file_source(path: str, kind: str) -> TrialSource:
    fmt = {"atif_file": "atif", "transcript": "transcript", "inspect_log": "inspect", "mcpbr": "mcpbr",
           "mini_swe_agent": "mini_swe_agent", "swe_agent": "swe_agent", "results_csv": "results_csv",
           "skillsbench_registry": "skillsbench_registry"}[kind]
    return TrialSource(kind=kind, path=path, run_id=os.path.basename(os.path.dirname(path)) or ".", source_format=fmt)


def _walk(root: str, path: str, index: dict, sources: list, errors: list, visited: set, depth: int,
          ident: tuple[int, int] | None = None, subagents: dict[str, list[str]] | None = None,
          kinds: tuple[dict | None, dict] = (None, {})) -> None:
    # Folders are identified by (device, inode): a symlink back to a visited folder is a loop.
    if ident is None:
        try:
            st = os.stat(path)
        except OSError as exc:
            errors.append(IngestError(path, "discover", f"cannot read folder ({exc.strerror or exc})"))
            return
        ident = (st.st_dev, st.st_ino)
    if ident in visited:
        errors.append(IngestError(path, "discover", "symlink loop (folder already visited); skipped"))
        return
    visited.add(ident)
    if depth > 12:
        errors.append(IngestError(path, "discover", "folders nested too deep (> 12 levels); skipped"))
        return
    # The common case, a trial folder, is told by one lstat without listing it (thousands of them).
    if path != root and (_has_entry(path, "agent") or _has_entry(path, "verifier")):
        sources.append(_trial_dir_source(root, path, index))
        return
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError as exc:
        errors.append(IngestError(path, "discover", f"cannot list folder ({exc.strerror or exc})"))
        return
    names = {e.name for e in entries}
    trial = _is_trial_dir(path, names) if path != root else False
    if trial is True:
        sources.append(_trial_dir_source(root, path, index))
        return
    if isinstance(trial, str):
        errors.append(IngestError(os.path.join(path, "result.json"), "discover", trial, "warning"))
    # A TB1 run may have lost its run_metadata.json and kept only run-level results files (results[]),
    # results.json or <timestamp>_results.json.
    run_results = any(n == "results.json" or n.endswith("_results.json") for n in names)
    if "run_metadata.json" in names or (run_results and is_tb1_run(path)):
        sources.append(TrialSource(kind="tb1_run", path=path, run_id=os.path.basename(path), source_format="tb1"))
        return
    for e in sorted(entries, key=lambda e: e.name):
        if e.name.startswith("."):
            continue
        try:
            is_dir = e.is_dir()  # follows symlinks; loops are caught by the visited set
        except OSError:
            errors.append(IngestError(e.path, "discover", "unreadable entry (broken symlink?)"))
            continue
        if is_dir:
            # DirEntry.inode() costs no system call; symlinked folders need a stat of their target.
            child = None if e.is_symlink() else (ident[0], e.inode())
            _walk(root, e.path, index, sources, errors, visited, depth + 1, child, subagents, kinds)
        elif e.name not in _JOB_LEVEL:
            verdict, detail = _classified(e, *kinds)
            if verdict == "subagent":  # a Claude Code subagent: read with its session
                if subagents is not None and detail is not None:
                    subagents.setdefault(os.path.normpath(detail), []).append(e.path)
            elif verdict == "error":
                errors.append(IngestError(e.path, "discover", detail or "unreadable"))
            elif verdict == "log":
                errors.append(IngestError(e.path, "discover", f"looks like {detail} but is in no format this version reads; "
                                          "not analysed", "warning"))
            elif verdict not in ("part", "none"):
                sources.append(_file_source(e.path, verdict))


def _read_through_another(path: str) -> bool:
    """Files read with the trajectory or results file that refers to them: ATIF subagent and
    continuation segments, Claude Code subagent transcripts beside their session, mcpbr task logs."""
    name = os.path.basename(path)
    if ".trajectory." in name and (".cont-" in name or ".summarization-" in name):
        return True
    if name.endswith(".json"):
        try:
            with open(path, "rb") as fh:
                head = fh.read(8192)
        except OSError:
            return False
        if b'"schema_version"' in head and (b'"parent_session_id"' in head or b'"continuation_index"' in head):
            return True
        if b'"instance_id"' in head and b'"run_type"' in head and b'"events"' in head:
            return True  # an mcpbr per-task log: its task is read from the run's results file
    return is_subagent_transcript(path)


def _has_entry(folder: str, name: str) -> bool:
    try:
        os.lstat(folder + os.sep + name)
    except OSError:
        return False
    return True


def _trial_dir_source(root: str, path: str, index: dict) -> TrialSource:
    parent, _, task_id = path.rpartition(os.sep)
    run_id = parent.rpartition(os.sep)[2]
    run = _run_folder(run_id, index)
    if run is not None:
        profile, rep, started = run
        return TrialSource(kind="trial_dir", path=path, run_id=run_id, profile=profile, task_id=task_id, repetition=rep,
                           source_format="run_layout", meta={"run_started": started})
    # Harbor job folder: profile and task come from the trial's result.json when read.
    return TrialSource(kind="trial_dir", path=path, run_id=run_id, task_id=None, source_format="harbor")


def _run_folder(run_id: str, index: dict) -> tuple[str | None, int | None, str | None] | None:
    """(profile, repetition, start) of a run-layout folder name (with its index.json entry), else None."""
    entry = index.get(run_id)
    m = _RUN_DIR.match(run_id)
    if not (entry or m):
        return None
    rep = (entry or {}).get("repetition")
    return ((entry or {}).get("profile") or (m.group("profile") if m else None),
            int(rep) if isinstance(rep, int) else None,
            (entry or {}).get("started_at") or (m.group("ts") if m else None))


def _number_run_layout_repetitions(sources: list[TrialSource], index: dict) -> None:
    """Repetition = rank of the run folder's timestamp among the folders of its profile."""
    runs_by_profile: dict[str, set[tuple[str, str]]] = {}
    for s in sources:
        if s.source_format == "run_layout" and s.repetition is None and s.profile:
            runs_by_profile.setdefault(s.profile, set()).add((str(s.meta.get("run_started") or ""), s.run_id))
    rank = {}
    for profile, runs in runs_by_profile.items():
        for i, (_, run_id) in enumerate(sorted(runs), start=1):
            rank[(profile, run_id)] = i
    for s in sources:
        if s.source_format == "run_layout" and s.repetition is None and s.profile:
            s.repetition = rank[(s.profile, s.run_id)]
