"""Reading untrusted JSON leniently and writing outputs atomically.

Every reader goes through :func:`read_json` / :func:`iter_jsonl` so that a bad file always
fails the same way: an :class:`~analysis_lib.core.trial.InputError` whose message names the file and
the problem in one line. Every output goes through :func:`atomic_write_bytes` (temp file in the
same folder, fsync, rename), so that a crash never leaves half a CSV.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .trial import InputError

# Files larger than this are refused rather than parsed (a runaway log, not a trajectory).
MAX_JSON_BYTES = 1 << 30


def _decode_error(exc: Exception, data: bytes) -> str:
    msg = str(exc)
    if not data.strip():
        return "empty file"
    if "unexpected end of data" in msg or "EOF" in msg or "unexpected end" in msg.lower():
        return f"truncated JSON ({msg})"
    return f"malformed JSON ({msg})"


def loads_lenient(data: bytes | str, path: str | os.PathLike = "<memory>", stage: str = "read",
                  notes: list[str] | None = None) -> Any:
    """Parse JSON; invalid UTF-8 bytes and lone surrogates are replaced instead of failing.

    When a replacement happened, a one-line note is appended to ``notes`` (if given) so that the
    caller can report the loss as a warning.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        msg = str(exc).lower()
        raw = data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogatepass")
        if "utf-8" in msg or "surrogate" in msg:
            text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
            try:
                # json (not orjson) accepts lone surrogate escapes such as "\ud800".
                value = json.loads(text)
            except json.JSONDecodeError as exc2:
                raise InputError(str(path), stage, _decode_error(exc2, raw)) from None
            if notes is not None:
                notes.append("invalid UTF-8 bytes or lone surrogates replaced with U+FFFD")
            return value
        raise InputError(str(path), stage, _decode_error(exc, raw)) from None


def read_bytes(path: str | os.PathLike, stage: str = "read", max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """Read a whole file, turning OS errors into one-line :class:`InputError`s."""
    p = str(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > max_bytes:
                raise InputError(p, stage, f"file of {size / 1e6:.0f} MB exceeds the {max_bytes / 1e6:.0f} MB limit")
            data = fh.read()  # to its end, even when it grew since the stat (or st_size is 0, as in /proc)
        if len(data) > max_bytes:
            raise InputError(p, stage, f"file exceeds the {max_bytes / 1e6:.0f} MB limit")
        return data
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(p, stage, "file not found") from None
    except IsADirectoryError:
        raise InputError(p, stage, "is a directory, expected a file") from None
    except PermissionError:
        raise InputError(p, stage, "permission denied") from None
    except OSError as exc:
        raise InputError(p, stage, f"cannot read ({exc.strerror or exc})") from None


def read_json(path: str | os.PathLike, stage: str = "read") -> Any:
    """Read and parse one JSON file (see :func:`loads_lenient`)."""
    return loads_lenient(read_bytes(path, stage), path, stage)


def iter_jsonl(path: str | os.PathLike, stage: str = "read") -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each parsable line; blank and broken lines are skipped.

    A live session may end in a truncated line; a line that is not JSON is skipped, not fatal.
    Raises :class:`InputError` only when the file cannot be read or holds no JSON line at all.
    """
    data = read_bytes(path, stage)
    seen = 0
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = loads_lenient(raw, path, stage)
        except InputError:
            continue
        seen += 1
        yield lineno, obj
    if seen == 0:
        raise InputError(str(path), stage, "no JSON line in file" if data.strip() else "empty file")


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _file_mode()


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename).

    ``durable=False`` skips the fsync: for caches, which a crash may leave damaged (a damaged
    cache is read as a miss) but which must not cost a flush to disk on every run.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600; outputs are ordinary files
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write JSON with sorted keys and 2-space indent, so outputs diff cleanly."""
    data = orjson.dumps(
        obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=_json_default
    )
    return atomic_write_bytes(path, data + b"\n")


def atomic_write_csv(path: str | os.PathLike, df, **kwargs) -> Path:
    """Write a DataFrame as CSV atomically (index off unless asked)."""
    kwargs.setdefault("index", False)
    return atomic_write_text(path, df.to_csv(**kwargs))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, float):
        return None
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
