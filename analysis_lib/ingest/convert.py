"""Agent transcripts -> ATIF documents: format detection and dispatch (the command is :mod:`analysis_lib.cli.convert`).

Runs made without Harbor (plain ``claude`` / ``claude -p`` / ``codex`` sessions, mcpbr logs)
become analysable: each transcript is converted to an ATIF trajectory JSON that the ingest
readers take like any other. Formats are detected by content, never by file name.
"""

from __future__ import annotations

import os
from typing import Any

from ..core.fileio import loads_lenient, read_bytes
from ..core.trial import InputError
from . import claude_code, codex

KINDS = ("claude_code_jsonl", "claude_stream_json", "claude_export", "codex_rollout")
STAGE = "convert"
# Detection looks at the first lines only: a kind shows itself early in every format seen.
DETECT_LINES = 200


def _kind_of_lines(objs: list[dict[str, Any]]) -> str | None:
    types = {o.get("type") for o in objs}
    if any(o.get("type") in codex.ENVELOPE_TYPES and isinstance(o.get("payload"), dict) for o in objs):
        return "codex_rollout"
    if types & {"message", "function_call", "function_call_output", "reasoning"} or (
        objs and "instructions" in objs[0] and "id" in objs[0] and "type" not in objs[0]
    ):
        return "codex_rollout"  # older rollouts: bare response items after a session header
    for o in objs:
        kind = o.get("type")
        if kind == "system" and o.get("subtype") == "init" and "session_id" in o:
            return "claude_stream_json"
        if kind == "result" and ("total_cost_usd" in o or "num_turns" in o or "duration_ms" in o):
            return "claude_stream_json"
        if kind in ("assistant", "user") and "parent_tool_use_id" in o:
            return "claude_stream_json"
    for o in objs:
        kind, msg = o.get("type"), o.get("message")
        if kind in ("summary", "file-history-snapshot", "progress", "queue-operation"):
            return "claude_code_jsonl"
        if isinstance(msg, dict) and (kind in ("user", "assistant") or msg.get("role") in ("user", "assistant")):
            return "claude_code_jsonl"
    return None


def detect_transcript_kind(path: str | os.PathLike, head_bytes: int | None = None) -> str | None:
    """The transcript kind of a file (one of :data:`KINDS`), or None when it is none of them.

    With ``head_bytes``, only the file's first bytes are read (their last, cut line left out; the
    whole file when its first line is longer): discovery needs no more to tell a kind.
    Raises :class:`InputError` only when the file cannot be read.
    """
    data = read_bytes(path, STAGE) if head_bytes is None else _head(path, head_bytes)
    if not data.strip():
        return None
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            doc = loads_lenient(data, path, STAGE)
        except InputError:
            doc = None  # several lines, or a truncated document: look at lines below
        if isinstance(doc, dict):
            if isinstance(doc.get("loglines"), list):
                return "claude_export"
            if isinstance(doc.get("events"), list):
                events = [e for e in doc["events"][:DETECT_LINES] if isinstance(e, dict)]
                if "instance_id" in doc or "run_type" in doc or _kind_of_lines(events) == "claude_stream_json":
                    return "claude_stream_json"
            if str(doc.get("schema_version", "")).startswith("ATIF-"):
                return None
            return _kind_of_lines([doc])
        if doc is not None:
            return None
    objs = []
    for raw in data.splitlines()[:DETECT_LINES]:
        if not raw.strip():
            continue
        try:
            obj = loads_lenient(raw, path, STAGE)
        except InputError:
            continue
        if isinstance(obj, dict):
            objs.append(obj)
    return _kind_of_lines(objs)


def _head(path: str | os.PathLike, n: int) -> bytes:
    """The first ``n`` bytes of a file up to its last complete line (the whole file when the first line is longer)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(n)
    except OSError:
        return read_bytes(path, STAGE)  # raises the one-line InputError naming the problem
    if len(data) < n:
        return data
    cut = data.rfind(b"\n")
    return data[:cut] if cut > 0 else read_bytes(path, STAGE)


def is_subagent_transcript(path: str | os.PathLike) -> bool:
    """True for a Claude Code subagent file whose session transcript is there, in either layout
    (``<session>/subagents/agent-*.jsonl``, or ``agent-*.jsonl`` beside ``<session>.jsonl``).

    Such a file is converted with its session (embedded subagent); read on its own as well, its
    API calls would be counted twice and the session would lose them.
    """
    return claude_code.parent_session(path) is not None


def convert_file(path: str | os.PathLike, kind: str | None = None, *, include_subagents: bool = True,
                 subagents: list[str] | None = None) -> dict[str, Any]:
    """Convert one transcript to an ATIF trajectory dict (``kind`` detected when not given; a Claude Code
    session's subagent files found, or ``subagents`` when given).

    Raises :class:`InputError` naming the file when it is unreadable or not a known transcript.
    """
    if kind is None:
        kind = detect_transcript_kind(path)
    if kind is None:
        if not read_bytes(path, STAGE).strip():
            raise InputError(str(path), STAGE, "empty file")
        raise InputError(str(path), STAGE, "not a recognised transcript (Claude Code JSONL, stream-json, JSON export or Codex rollout)")
    if kind == "claude_code_jsonl":
        return claude_code.transcript_to_atif(path, include_subagents=include_subagents, subagents=subagents)
    if kind == "claude_stream_json":
        return claude_code.stream_json_to_atif(path)
    if kind == "claude_export":
        return claude_code.claude_export_to_atif(path)
    if kind == "codex_rollout":
        return codex.rollout_to_atif(path)
    raise ValueError(f"kind must be one of {', '.join(KINDS)} or None, not {kind!r}")
