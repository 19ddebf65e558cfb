"""``python -m analysis_lib convert SRC... (-o OUT | --out-dir DIR)``: transcripts to ATIF trajectory files.

Runs made without Harbor (plain ``claude`` / ``claude -p`` / ``codex`` sessions, mcpbr logs)
become analysable files; the detection and conversion are :mod:`analysis_lib.ingest.convert`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.fileio import atomic_write_json, read_bytes
from ..core.trial import InputError
from ..ingest.convert import KINDS, STAGE, convert_file, detect_transcript_kind, is_subagent_transcript


def _sources(srcs: list[str]) -> tuple[list[tuple[Path, str | None]], list[str]]:
    """Expand SRC arguments: files as given; folders to their *.jsonl / *.json files.

    In a folder, subagent files beside their session are left out (they are part of it), an empty
    file gives a warning line, and files of another kind are passed over; an explicitly named file
    must convert. Returns the files with the kind detected in a folder (None for a named file: detected
    when converted) and the error or warning lines met.
    """
    files: list[tuple[Path, str | None]] = []
    errors: list[str] = []
    for s in srcs:
        p = Path(s)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.suffix in (".jsonl", ".json") and f.is_file() and not is_subagent_transcript(f):
                    try:
                        kind = detect_transcript_kind(f)
                        if kind is not None:
                            files.append((f, kind))
                        elif not read_bytes(f, STAGE).strip():
                            errors.append(f"warning: {f}: {STAGE}: empty file; skipped")
                    except InputError as exc:
                        errors.append(exc.error.line())
        else:
            files.append((p, None))
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
    for src, detected in files:
        try:
            traj = convert_file(src, args.kind or detected, include_subagents=not args.no_subagents)
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
