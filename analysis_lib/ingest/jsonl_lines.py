"""Reading a JSONL transcript line by line, counting what had to be skipped.

Transcripts are written live: a session may end in a truncated line, and test fixtures hold
lines that are valid JSON but not objects. Such lines are skipped, never fatal, but the
converters report how many (``LineStats``) so that a reader can judge the file.
Built on :mod:`analysis_lib.core.fileio` (one-line :class:`InputError` for unreadable files).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from ..core.fileio import loads_lenient, read_bytes
from ..core.trial import InputError


@dataclass(slots=True)
class LineStats:
    """Counts of the lines of one JSONL file that were not usable objects."""

    lines: int = 0
    objects: int = 0
    blank: int = 0
    unparsable: int = 0
    non_object: int = 0
    truncated_last_line: bool = False
    # Lines whose invalid UTF-8 bytes (or lone surrogates) were replaced with U+FFFD to be read.
    replaced: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def warnings(self) -> list[str]:
        """One line per loss a reader should know of: a cut last line, unparsable lines, replaced bytes."""
        out = []
        if self.truncated_last_line:
            out.append("last line truncated (session still being written?); skipped")
        other = self.unparsable - (1 if self.truncated_last_line else 0)
        if other > 0:
            out.append(f"{other} unparsable line{'s' if other > 1 else ''} skipped")
        if self.replaced:
            out.append(f"invalid UTF-8 bytes replaced with U+FFFD on {self.replaced} line{'s' if self.replaced > 1 else ''}")
        return out


def read_jsonl_objects(path: str | os.PathLike, stage: str = "convert") -> tuple[list[tuple[int, dict]], LineStats]:
    """Return ``[(line_number, object), ...]`` of the file's JSON-object lines and the skip counts.

    Raises :class:`InputError` (naming the file) when it cannot be read, is empty, or holds no
    JSON object line at all. Invalid UTF-8 bytes are replaced rather than fatal.
    """
    data = read_bytes(path, stage)
    if not data.strip():
        raise InputError(str(path), stage, "empty file")
    return lines_to_objects(data.splitlines(), path, stage)


def lines_to_objects(
    raw_lines: list[bytes | str], path: str | os.PathLike = "<memory>", stage: str = "convert"
) -> tuple[list[tuple[int, dict]], LineStats]:
    """Parse already-split lines (see :func:`read_jsonl_objects`)."""
    stats = LineStats()
    out: list[tuple[int, dict]] = []
    last_nonblank = 0
    last_failed = 0
    for lineno, raw in enumerate(raw_lines, start=1):
        stats.lines += 1
        if not raw.strip():
            stats.blank += 1
            continue
        last_nonblank = lineno
        notes: list[str] = []
        try:
            obj = loads_lenient(raw, path, stage, notes)
        except InputError:
            stats.unparsable += 1
            last_failed = lineno
            continue
        if notes:
            stats.replaced += 1
        if not isinstance(obj, dict):
            stats.non_object += 1
            continue
        out.append((lineno, obj))
    # A live session cut mid-write leaves exactly its last line unparsable.
    stats.truncated_last_line = last_failed != 0 and last_failed == last_nonblank
    stats.objects = len(out)
    if not out:
        what = "no JSON object line in file" if stats.lines > stats.blank else "empty file"
        raise InputError(str(path), stage, what)
    return out, stats
