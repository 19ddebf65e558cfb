"""Agent transcripts -> ATIF files: format detection, dispatch and ``python -m analysis_lib convert``.

Runs made without Harbor (plain ``claude`` / ``claude -p`` / ``codex`` sessions, mcpbr logs)
become analysable: each transcript is converted to an ATIF trajectory JSON that the ingest
readers take like any other. Formats are detected by content, never by file name.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..fileio import atomic_write_json, loads_lenient, read_bytes
from ..trial import InputError
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


def detect_transcript_kind(path: str | os.PathLike) -> str | None:
    """The transcript kind of a file (one of :data:`KINDS`), or None when it is none of them.

    Raises :class:`InputError` only when the file cannot be read.
    """
    data = read_bytes(path, STAGE)
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


def is_subagent_transcript(path: str | os.PathLike) -> bool:
    """True for ``<session>/subagents/agent-*.jsonl`` beside its ``<session>.jsonl``.

    Such a file is converted with its session (embedded subagent); read on its own as well, its
    API calls would be counted twice.
    """
    p = Path(path)
    if p.parent.name != "subagents" or not p.name.startswith("agent-") or p.suffix != ".jsonl":
        return False
    session_dir = p.parent.parent
    return (session_dir.parent / f"{session_dir.name}.jsonl").is_file()


def convert_file(path: str | os.PathLike, kind: str | None = None, *, include_subagents: bool = True) -> dict[str, Any]:
    """Convert one transcript to an ATIF trajectory dict (``kind`` detected when not given).

    Raises :class:`InputError` naming the file when it is unreadable or not a known transcript.
    """
    if kind is None:
        kind = detect_transcript_kind(path)
    if kind is None:
        if not read_bytes(path, STAGE).strip():
            raise InputError(str(path), STAGE, "empty file")
        raise InputError(str(path), STAGE, "not a recognised transcript (Claude Code JSONL, stream-json, JSON export or Codex rollout)")
    if kind == "claude_code_jsonl":
        return claude_code.transcript_to_atif(path, include_subagents=include_subagents)
    if kind == "claude_stream_json":
        return claude_code.stream_json_to_atif(path)
    if kind == "claude_export":
        return claude_code.claude_export_to_atif(path)
    if kind == "codex_rollout":
        return codex.rollout_to_atif(path)
    raise ValueError(f"kind must be one of {', '.join(KINDS)} or None, not {kind!r}")


def _sources(srcs: list[str]) -> tuple[list[Path], list[str]]:
    """Expand SRC arguments: files as given; folders to their *.jsonl / *.json files.

    In a folder, subagent files beside their session are left out (they are part of it), an empty
    file gives a warning line, and files of another kind are passed over; an explicitly named file
    must convert. Returns the files and the error or warning lines met.
    """
    files: list[Path] = []
    errors: list[str] = []
    for s in srcs:
        p = Path(s)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.suffix in (".jsonl", ".json") and f.is_file() and not is_subagent_transcript(f):
                    try:
                        if detect_transcript_kind(f) is not None:
                            files.append(f)
                        elif not read_bytes(f, STAGE).strip():
                            errors.append(f"warning: {f}: {STAGE}: empty file; skipped")
                    except InputError as exc:
                        errors.append(exc.error.line())
        else:
            files.append(p)
    return files, errors


def _out_name(src: Path, taken: set[str]) -> str:
    stem = src.name
    for suffix in (".jsonl", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    name, n = f"{stem}.trajectory.json", 2
    while name in taken:
        name, n = f"{stem}-{n}.trajectory.json", n + 1
    taken.add(name)
    return name


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis_lib convert",
        description=(
            "Convert Claude Code session transcripts (JSONL, with their subagent files), "
            "`claude -p --output-format stream-json` output, mcpbr logs, Claude JSON exports and "
            "Codex CLI rollouts to ATIF trajectory JSON. Formats are detected by content."
        ),
    )
    p.add_argument("src", nargs="+", metavar="SRC", help="transcript files, or folders to search for them")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("-o", "--output", metavar="OUT", help="output file (only with a single source)")
    out.add_argument("--out-dir", metavar="DIR", help="folder for <name>.trajectory.json files")
    p.add_argument("--kind", choices=KINDS, help="skip detection and read every source as this kind")
    p.add_argument("--no-subagents", action="store_true", help="leave subagent transcripts out (main session only)")
    p.add_argument("-q", "--quiet", action="store_true", help="only errors and the summary line")
    return p


def cli(argv: list[str] | None = None) -> int:
    """``python -m analysis_lib convert SRC... (-o OUT | --out-dir DIR)``; 0 when at least one converted."""
    args = build_parser().parse_args(argv)
    files, errors = _sources(args.src)
    for line in errors:
        print(line, file=sys.stderr)
    if args.output and len(files) != 1:
        print(f"error: -o takes exactly one source, got {len(files)}; use --out-dir", file=sys.stderr)
        return 2
    warned = sum(line.startswith("warning:") for line in errors)
    converted, failed = 0, len(errors) - warned
    taken: set[str] = set()
    for src in files:
        try:
            traj = convert_file(src, args.kind, include_subagents=not args.no_subagents)
        except InputError as exc:
            print(exc.error.line(), file=sys.stderr)
            failed += 1
            continue
        target = Path(args.output) if args.output else Path(args.out_dir) / _out_name(src, taken)
        try:
            atomic_write_json(target, traj)
        except OSError as exc:
            print(f"{target}: write: {exc.strerror or exc}", file=sys.stderr)
            failed += 1
            continue
        converted += 1
        # A cut last line, skipped lines or replaced bytes: converted, with the loss said per file.
        for w in traj.get("extra", {}).get("converter", {}).get("warnings") or []:
            print(f"warning: {src}: {STAGE}: {w}", file=sys.stderr)
            warned += 1
        if not args.quiet:
            kind = traj.get("extra", {}).get("converter", {}).get("source_format", "?")
            print(f"{src} -> {target} ({kind}, {len(traj['steps'])} steps)")
    tail = f", {warned} warning{'' if warned == 1 else 's'}" if warned else ""
    print(f"converted {converted}, failed {failed}{tail}")
    return 0 if converted else 1
