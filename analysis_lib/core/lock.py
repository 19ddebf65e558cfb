"""One writer per folder: a lock that names its holder, and is taken over when its holder died.

``with folder_lock(path, what="runs folder"): ...`` holds an exclusive lock on ``path`` (an
``flock`` through :mod:`filelock`, so the kernel releases it when the holder dies, even by
``kill -9``). A second process gets :class:`FolderBusy` at once, whose one-line message names
the folder and the holder (pid, host, start time), read from a small JSON record kept beside
the lock. A record left behind by a holder that died means the lock is stale: it is taken
over, with a warning naming the dead holder.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
from filelock import FileLock, Timeout

from .fileio import atomic_write_json, read_json
from .trial import InputError

LOCK_NAME = ".lock"
HOLDER_SUFFIX = ".holder.json"
# Exit code of a command refused because its folder is in use (sysexits' EX_TEMPFAIL: try again later).
BUSY_EXIT_CODE = 75


class FolderBusy(RuntimeError):
    """Another live process holds the folder's lock; the message is one line naming the folder and the holder."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a folder lock: process id, host name, start time (UTC, ISO 8601) and the command."""

    pid: int
    host: str
    started_at: str
    command: str = ""

    def line(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started_at}" + (f" ({self.command})" if self.command else "")

    def alive(self) -> bool | None:
        """Whether the holder process still runs; None when it ran on another host (it cannot be told from here)."""
        if self.host != socket.gethostname():
            return None
        return psutil.pid_exists(self.pid)


def holder_path(lock_file: str | os.PathLike) -> Path:
    """The holder record beside a lock file (``<lock>.holder.json``)."""
    p = Path(lock_file)
    return p.with_name(p.name + HOLDER_SUFFIX)


def read_holder(lock_file: str | os.PathLike) -> LockHolder | None:
    """The recorded holder of a lock, or None when there is no readable record."""
    try:
        obj = read_json(holder_path(lock_file), stage="lock")
        return LockHolder(int(obj["pid"]), str(obj["host"]), str(obj["started_at"]), str(obj.get("command") or ""))
    except (InputError, KeyError, TypeError, ValueError):
        return None


def _warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@contextmanager
def folder_lock(
    folder: str | os.PathLike,
    *,
    what: str = "folder",
    lock_file: str | os.PathLike | None = None,
    command: str = "",
    warn: Callable[[str], None] = _warn,
    label: str | None = None,
) -> Iterator[LockHolder]:
    """Hold the exclusive lock of ``folder`` (created if missing) for the ``with`` block; yields this holder.

    ``lock_file`` defaults to ``<folder>/.lock``; the holder record is ``<lock_file>.holder.json``.
    Raises :class:`FolderBusy` at once when another process holds it. ``what`` names the folder in
    messages ("runs folder", "output folder"), ``label`` how they name it (default: the path as given);
    ``command`` says what the holder is doing.
    """
    root = Path(folder)
    name = label if label is not None else str(root)
    lock_path = Path(lock_file) if lock_file is not None else root / LOCK_NAME
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise FolderBusy(_busy_line(name, what, read_holder(lock_path))) from None
    try:
        previous = read_holder(lock_path)
        if previous is not None:
            # The record is removed on every clean release: one still there was left by a holder that died.
            warn(f"warning: {what} {name}: took over the lock left by {previous.line()}, which no longer holds it "
                 "(it ended without releasing it)")
        me = LockHolder(os.getpid(), socket.gethostname(), datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), command)
        atomic_write_json(holder_path(lock_path), asdict(me))
        try:
            yield me
        finally:
            holder_path(lock_path).unlink(missing_ok=True)
    finally:
        lock.release()


def busy_line(lock_file: str | os.PathLike, *, what: str, label: str) -> str | None:
    """The one-line :class:`FolderBusy` message of a lock another process holds, found without taking the lock or
    writing anything (a runs folder is read-only input to the analysis); None when nobody holds it."""
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except OSError:
        return None  # no lock file: nobody ever held it
    try:
        try:
            # filelock holds an exclusive flock: a shared one is refused exactly while it is held.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _busy_line(label, what, read_holder(lock_file))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _busy_line(folder: str, what: str, holder: LockHolder | None) -> str:
    if holder is None:
        return f"{what} {folder} is in use by another process (its holder record is not written yet); try again shortly"
    if holder.alive() is False:
        # The record of a dead holder, read while a new holder has the lock but has not yet written its own.
        return (f"{what} {folder} is in use by another process (the record beside the lock still names {holder.line()}, "
                "which is no longer running); try again shortly")
    return f"{what} {folder} is in use by {holder.line()}; wait for it to finish or stop it, then retry"
