"""An output folder holds one analysis: a run writes into a staging folder, then its files replace the previous set in
one commit, named by a manifest that every later reader checks.

A run (the analysis, the paper pipeline, RESULTS.md with its plots) holds the lock of every folder it writes
(:func:`locked`), then :func:`prepare` opens ``<home>/.staging/``, the home folder being the one that keeps the
manifest. The staging folder mirrors the run's *base* (the folder holding all the folders it writes): a file bound
for ``<base>/figures/rates.png`` is written to ``<home>/.staging/figures/rates.png``, so relative paths between the
run's files are the same staged and in place. :meth:`Staging.commit` hashes every staged file into the new manifest,
marks the run ``committing`` (the commit point), then moves each file to its place, installs the manifest
(``<home>/output_manifest.json``) and removes the files of the previous set that the new one does not hold.

Every step of the commit can be done twice: a commit cut short (kill -9) is finished by the next command that opens
the folder (:func:`recover`, a roll forward), so the folder holds the previous complete set or the new complete one.
A run that did not commit leaves its staging folder and its record (``.run.json``: which step it was in, why it
ended) until the next whole run, so that a partial run (``paper --only``) can refuse to build on it. Files the user
put in the folders are never touched, and a name starting with a dot (caches, locks, temporary files) is never part
of a set.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from . import outputs as files
from .fileio import atomic_write_bytes, atomic_write_json, read_json
from .lock import HOLDER_SUFFIX, LOCK_NAME, FolderBusy, folder_lock
from .trial import InputError

__all__ = ["OutputSetError", "FileEntry", "Manifest", "RunRecord", "Staging", "locked", "settle", "prepare", "recover",
           "read_manifest", "check_set", "check_space", "sha256_file", "os_reason"]

FORMAT = "analysis_lib.output_set/1"
# In the staging folder: the run writing it and how far it got; once it commits, the set it installs and the one
# it replaces (what a roll forward needs).
RUN_RECORD = ".run.json"
NEW_MANIFEST = ".manifest.json"
OLD_MANIFEST = ".previous.json"


class OutputSetError(RuntimeError):
    """An output folder that cannot be written, or a set that cannot be read or built on; one line."""


class FileEntry(BaseModel):
    """One file of a set: its SHA-256, its size and the step (notebook, stage of the analysis) that wrote it."""

    model_config = ConfigDict(extra="forbid")

    sha256: str
    bytes: int
    step: str


class Manifest(BaseModel):
    """``output_manifest.json``: the one analysis an output folder holds, file by file."""

    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    run_id: str
    command: str
    started_at: str
    committed_at: str
    folders: list[str]  # the folders the run writes, relative to the manifest's folder
    steps: list[str]  # the steps whose files the set holds, in order
    carried: dict[str, str] = {}  # steps not run again but kept from an earlier set of the same inputs -> its run
    inputs: dict[str, Any]  # what the set was made from: runs, study file, plan, their hashes, parameters
    files: dict[str, FileEntry]  # path relative to the manifest's folder -> the file

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files.values())

    def line(self) -> str:
        return f"run {self.run_id} ({self.command}, committed {self.committed_at})"


class RunRecord(BaseModel):
    """``.staging/.run.json``: the run writing the staging folder, the step it is in, and how it ended."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    command: str
    started_at: str
    pid: int
    host: str
    status: Literal["running", "failed", "interrupted", "committing"] = "running"
    step: str | None = None
    error: str | None = None
    base: str  # the folder the staging folder mirrors, relative to the home folder (as every path here)
    folders: list[str]
    keep: list[str] = []

    def ending(self) -> str:
        """How the run ended, for a later run that finds it unfinished (its lock is free, so it is not running)."""
        where = f" during {self.step}" if self.step else ""
        if self.status == "failed":
            return f"failed{where}" + (f" ({self.error})" if self.error else "")
        if self.status == "interrupted":
            return f"was interrupted{where}"
        return f"was stopped{where} (killed, or its machine stopped)"


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    """A run's id: when it started (UTC) and six random hex digits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def os_reason(exc: OSError) -> str:
    """An OS error in words, without the path it names (messages name folders as the user did)."""
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return "a file stands where a folder is needed"
    return exc.strerror or type(exc).__name__


def _rel(path: str | os.PathLike, start: str | os.PathLike) -> str:
    return Path(os.path.relpath(path, start)).as_posix()


def _at(home: Path, key: str) -> Path:
    """The file a set's path (relative to its home folder, maybe through ``..``) names."""
    return Path(os.path.normpath(home / key))


def _hidden(rel: str) -> bool:
    """Names starting with a dot (caches, locks, temporary files of atomic writes) are never part of a set."""
    return any(part.startswith(".") for part in rel.split("/"))


def _inside(rel: str, folders: list[str]) -> bool:
    return any(f in ("", ".") or rel.startswith(f.rstrip("/") + "/") for f in folders)


# --------------------------------------------------------------------------- the folders a run writes


@contextmanager
def locked(folders: list[tuple[Path, str]], command: str, warn: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lock of every folder a run writes, ``(path, label)`` each, the home folder (the one keeping the
    manifest) first, for the ``with`` block; a folder inside the home folder is covered by its lock.

    Refused before any work, in one line naming the folder as ``label``: a folder another process writes
    (:class:`~analysis_lib.core.lock.FolderBusy`), and a folder that is a file, read-only, on a full disk or
    cannot be created (:class:`OutputSetError`). Locks left by a run that died are taken over with one warning line.
    """
    seen: dict[Path, str] = {}
    for path, label in folders:
        seen.setdefault(Path(os.path.abspath(path)), label)
    home = next(iter(seen), None)
    seen = {p: label for p, label in seen.items() if p == home or home is None or not p.is_relative_to(home)}
    taken: list[tuple[str, str]] = []  # (folder, the warning of its lock's takeover)
    with ExitStack() as stack:
        for path in sorted(seen):  # one order for every run: two runs never hold one lock each and wait
            label = seen[path]
            if path.exists() and not path.is_dir():
                raise OutputSetError(f"output folder {label} is a file, not a folder; nothing was run or written")
            created = [p for p in (path, *path.parents) if not p.exists()]
            try:
                stack.enter_context(folder_lock(path, what="output folder", command=command, label=label,
                                                warn=functools.partial(_took_over, taken, label)))
            except FolderBusy:
                raise
            except OSError as exc:
                raise OutputSetError(f"output folder {label} cannot be written ({os_reason(exc)}); nothing was run "
                                     "or written") from None
            if created:
                stack.push(functools.partial(_drop_if_unused, path, created))
        if taken:
            # One line for the locks one dead run left on each of its folders.
            who = taken[0][1].split("took over the lock left by ", 1)[-1].replace(
                "holds it (it ended without releasing it)", "holds them (it ended without releasing them)")
            line = taken[0][1] if len(taken) == 1 else (f"warning: output folders {', '.join(f for f, _ in taken)}: took "
                                                        f"over the locks left by {who}")
            (warn or _stderr)(line)
        yield


def _drop_if_unused(path: Path, created: list[Path], *exc_info: object) -> bool:
    """A run that ended without writing anything (refused, or nothing committed) leaves no folder it created only to
    lock it (done still under the lock: nobody can have started writing in it)."""
    try:
        if {e.name for e in os.scandir(path)} <= {LOCK_NAME, LOCK_NAME + HOLDER_SUFFIX}:
            for name in (LOCK_NAME + HOLDER_SUFFIX, LOCK_NAME):
                (path / name).unlink(missing_ok=True)
            for folder in created:  # deepest first
                folder.rmdir()
    except OSError:
        pass  # something else is in it now: it stays
    return False


def _took_over(taken: list[tuple[str, str]], label: str, line: str) -> None:
    taken.append((label, line))


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def check_space(home: Path, label: str, previous: Manifest | None) -> None:
    """Refuse a run before any work when the disk cannot hold a second copy of the set the folder holds (the new
    set is staged beside the previous one until it commits)."""
    if previous is None:
        return
    need = previous.total_bytes
    free = shutil.disk_usage(home).free
    if free < need:
        raise OutputSetError(f"output folder {label}: {free / 1e6:.1f} MB free on its disk, and its previous set "
                             f"takes {need / 1e6:.1f} MB (the new one is written beside it first): make room; nothing "
                             "was run or written")


def read_manifest(home: Path, label: str | None = None) -> Manifest | None:
    """The manifest of the set ``home`` holds; None when it holds none; :class:`OutputSetError` when unreadable."""
    path = home / files.OUTPUT_MANIFEST
    if not path.exists():
        return None
    try:
        return Manifest.model_validate(read_json(path, stage="output set"))
    except InputError as exc:
        raise OutputSetError(str(exc)) from None
    except ValidationError as exc:
        where = f"{label}/{files.OUTPUT_MANIFEST}" if label else str(path)
        raise OutputSetError(f"{where}: not an output manifest ({str(exc).splitlines()[0]})") from None


def holds(home: Path, label: str) -> str:
    """What the output folder holds now, in words, for the line that ends a run that did not commit."""
    try:
        manifest = read_manifest(home, label)
    except OutputSetError:
        manifest = None
    return f"{label} still holds {manifest.line()}" if manifest else f"{label} holds no complete output set"


def read_run_record(home: Path) -> RunRecord | None:
    """The record of the run that left a staging folder in ``home``; None when there is none or it is unreadable."""
    path = home / files.STAGING_DIR / RUN_RECORD
    try:
        return RunRecord.model_validate(read_json(path, stage="output set"))
    except (InputError, ValidationError):
        return None


# --------------------------------------------------------------------------- the commit and its roll forward


def _move(src: Path, dst: Path) -> None:
    """Put ``src`` at ``dst`` in one step (a rename; across file systems an atomic copy, then the source goes)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        atomic_write_bytes(dst, src.read_bytes())
        src.unlink()


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold back Ctrl-C, SIGTERM and SIGHUP while a commit moves files: it ends with the new set complete."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def recover(home: Path) -> bool:
    """Finish a commit that was cut short (the caller holds the folder's lock); True when there was one.

    Idempotent: the files still staged are moved, the new manifest installed, the previous set's files that the
    new one does not hold removed (only when unchanged since that set wrote them), the staging folder removed.
    """
    stage = home / files.STAGING_DIR
    record = read_run_record(home)
    if record is None or record.status != "committing":
        return False
    new = Manifest.model_validate(read_json(stage / NEW_MANIFEST, stage="output set"))
    old_path = stage / OLD_MANIFEST
    old = Manifest.model_validate(read_json(old_path, stage="output set")) if old_path.exists() else None
    base = _at(home, record.base)
    staged = lambda key: stage / os.path.relpath(_at(home, key), base)  # noqa: E731
    with _signals_deferred():
        for key in new.files:
            if staged(key).exists():
                _move(staged(key), _at(home, key))
        for key in record.keep:
            # Records of the folder, not of a set (the plan recorded by the first analysis): written once.
            if staged(key).is_file():
                if _at(home, key).exists():
                    staged(key).unlink()
                else:
                    _move(staged(key), _at(home, key))
        atomic_write_json(home / files.OUTPUT_MANIFEST, new.model_dump(mode="json"))
        gone = {k: e for k, e in old.files.items() if k not in new.files and _inside(k, old.folders)} if old else {}
        for key, entry in gone.items():
            # Only inside the set's folders, whatever a damaged manifest says; a file changed since its set wrote it
            # is the user's now: kept.
            target = _at(home, key)
            if not _hidden(key) and target.is_file() and sha256_file(target) == entry.sha256:
                target.unlink()
        shutil.rmtree(stage, ignore_errors=True)
    return True


# --------------------------------------------------------------------------- a run


class Staging:
    """Where one run writes, and the set it commits (module docstring). Made by :func:`prepare`."""

    def __init__(self, home: Path, label: str, record: RunRecord) -> None:
        self.home = home
        self.label = label
        self.record = record
        self.stage = home / files.STAGING_DIR  # mirrors the base
        self.base = _at(home, record.base)
        self.step_of: dict[str, str] = {}  # staged file -> the step that wrote it
        self._seen: dict[str, tuple[int, int, int]] = {}
        self.committed: Manifest | None = None

    # ------------------------------------------------------------- paths

    @property
    def root(self) -> Path:
        """The staged image of the base: write ``<base>/x`` to ``<root>/x``."""
        return self.stage

    def path(self, final: str | os.PathLike) -> Path:
        """Where this run writes the file or folder bound for ``final``."""
        return self.stage / os.path.relpath(os.path.abspath(final), self.base)

    def final(self, staged: str | os.PathLike) -> Path:
        """Where a staged file or folder lands when the run commits."""
        return Path(os.path.normpath(self.base / os.path.relpath(os.path.abspath(staged), self.stage)))

    # ------------------------------------------------------------- steps

    def _write_record(self) -> None:
        atomic_write_json(self.stage / RUN_RECORD, self.record.model_dump(mode="json"))

    def _scan(self) -> dict[str, tuple[int, int, int]]:
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.stage):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith("."):
                    continue
                full = os.path.join(dirpath, name)
                key = _rel(self.final(full), self.home)
                if key in self.record.keep:
                    continue
                st = os.stat(full)
                out[key] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return out

    def begin(self, step: str) -> None:
        """Record that ``step`` starts (a run stopped in it is named so by the next one); the step before it ends."""
        if self.record.step is not None:
            self.end(self.record.step)
        self.record.step = step
        self._write_record()

    def end(self, step: str) -> None:
        """Attribute to ``step`` every staged file it wrote or changed (named relative to the home folder, as in the
        manifest); forget the ones it removed."""
        now = self._scan()
        for rel, sig in now.items():
            if self._seen.get(rel) != sig:
                self.step_of[rel] = step
        for rel in set(self.step_of) - set(now):
            del self.step_of[rel]
        self._seen = now

    def carry(self, previous: Manifest, replaced: set[str]) -> dict[str, str]:
        """Copy the previous set's files into the staging folder, but those of the steps in ``replaced`` (run again,
        they write their files anew) and those this run wrote: a partial run builds on the set it checked. Each copy
        is checked by hash. Returns the steps carried, each with the run that wrote it."""
        for key, entry in previous.files.items():
            dst = self.path(_at(self.home, key))
            if entry.step in replaced or dst.exists():
                continue  # written anew by this run
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(_at(self.home, key), dst)
            if sha256_file(dst) != entry.sha256:
                raise OutputSetError(f"{self.label}: {key} changed while it was read (it is not the file {previous.line()} "
                                     "wrote); nothing was run")
            self.step_of[key] = entry.step
        self._seen = self._scan()
        return {step: previous.carried.get(step, previous.run_id) for step in previous.steps if step not in replaced}

    # ------------------------------------------------------------- endings

    def fail(self, error: str, status: Literal["failed", "interrupted"] = "failed") -> None:
        """Record why the run ended without committing; its staging folder stays for inspection until the next run."""
        if self.record.status == "committing":
            return  # committed, or to be finished by the next command: nothing to record
        self.record.status, self.record.error = status, error
        try:
            self._write_record()
        except OSError:
            pass  # a full disk: the record still says "running", which the next run reads as stopped

    def discard(self) -> None:
        """Remove the staging folder of a run that will not commit."""
        if self.record.status == "committing":
            return
        shutil.rmtree(self.stage, ignore_errors=True)

    def commit(self, *, steps: list[str], inputs: dict[str, Any], carried: dict[str, str] | None = None) -> Manifest:
        """Hash every staged file into the new manifest and replace the previous set with it (module docstring)."""
        if self.record.step is not None:
            self.end(self.record.step)
        entries: dict[str, FileEntry] = {}
        for key, (size, _, _) in sorted(self._scan().items()):
            if not _inside(key, self.record.folders):
                raise OutputSetError(f"{self.label}: {key} was written outside the folders of the run "
                                     f"({', '.join(self.record.folders)}); nothing was committed")
            entries[key] = FileEntry(sha256=sha256_file(self.path(_at(self.home, key))), bytes=size,
                                     step=self.step_of.get(key, self.record.step or self.record.command))
        manifest = Manifest(run_id=self.record.run_id, command=self.record.command, started_at=self.record.started_at,
                            committed_at=now_stamp(), folders=self.record.folders, steps=steps,
                            carried=carried or {}, inputs=inputs, files=entries)
        previous = self.home / files.OUTPUT_MANIFEST
        if previous.exists():
            shutil.copyfile(previous, self.stage / OLD_MANIFEST)
        atomic_write_json(self.stage / NEW_MANIFEST, manifest.model_dump(mode="json"))
        with _signals_deferred():
            self.record.status = "committing"
            self._write_record()  # the commit point: from here on, the next command finishes it
            recover(self.home)
            self.committed = manifest
        return manifest


def settle(home: str | os.PathLike, *, label: str, partial: bool = False, warn: Callable[[str], None] | None = None
           ) -> RunRecord | None:
    """Before a run writes into ``home`` (the caller holds its lock): finish a commit that was cut short, and return
    the record of a run that did not commit, if one is left. ``partial`` (a run that builds on the previous set,
    ``paper --only``) refuses, in one line naming that run and where it stopped, to build on such a folder."""
    home = Path(os.path.abspath(home))
    try:
        if recover(home) and warn is not None:
            warn(f"note: output folder {label}: finished the commit of the run that was stopped while committing")
    except (InputError, ValidationError, OSError) as exc:
        raise OutputSetError(f"output folder {label}: a commit cut short cannot be finished ({exc}); move "
                             f"{label}/{files.STAGING_DIR} away to drop it") from None
    left = read_run_record(home)
    if partial and (home / files.STAGING_DIR).exists():
        kept = read_manifest(home, label)
        holds = f"it still holds {kept.line()}" if kept else "it holds no complete set"
        last = (f"its last run ({left.command}, run {left.run_id}, started {left.started_at}) {left.ending()}"
                if left is not None else "its last run stopped before it recorded itself")
        raise OutputSetError(f"output folder {label}: {last} and was not committed; {holds}; run the whole pipeline "
                             "(without --only)")
    return left


def prepare(home: str | os.PathLike, *, label: str, command: str, base: str | os.PathLike | None = None,
            folders: list[str | os.PathLike] | None = None, keep: list[str | os.PathLike] | None = None, partial: bool = False,
            warn: Callable[[str], None] | None = None) -> Staging:
    """Open a fresh staging folder in ``home`` for a run (the caller holds the locks of its folders).

    ``base``: the folder holding every folder the run writes (default ``home``); ``folders``: those folders (default
    ``[home]``); ``keep``: records of a folder that outlive sets (copied in when present, moved back only where
    missing, never part of a set). :func:`settle` first; what a run that did not commit left is then removed, with
    a note to ``warn``.
    """
    home = Path(os.path.abspath(home))
    base = Path(os.path.abspath(base)) if base is not None else home
    folders = [Path(os.path.abspath(f)) for f in (folders or [home])]
    left = settle(home, label=label, partial=partial, warn=warn)
    stage = home / files.STAGING_DIR
    if stage.exists():
        if left is not None and warn is not None:
            warn(f"note: output folder {label}: removed what run {left.run_id} left; it {left.ending()}")
        shutil.rmtree(stage)
    record = RunRecord(run_id=new_run_id(), command=command, started_at=now_stamp(), pid=os.getpid(),
                       host=socket.gethostname(), base=_rel(base, home), folders=[_rel(f, home) for f in folders],
                       keep=[_rel(os.path.abspath(k), home) for k in keep or []])
    staging = Staging(home, label, record)
    try:
        stage.mkdir(parents=True)
        staging._write_record()
        for key in record.keep:
            if _at(home, key).is_file():
                staging.path(_at(home, key)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(_at(home, key), staging.path(_at(home, key)))
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise OutputSetError(f"output folder {label} cannot be written ({os_reason(exc)}); nothing was run or "
                             "written") from None
    return staging


def check_set(home: str | os.PathLike, *, label: str, command: str = "reading") -> Manifest:
    """The complete set ``home`` holds, checked file by file before anything reads it.

    A commit cut short is finished first (taking the folder's lock for that moment). :class:`OutputSetError` in one
    line when the folder holds no set, a file of it is missing or changed, or another process is replacing it.
    """
    home = Path(os.path.abspath(home))
    record = read_run_record(home)
    if record is not None and record.status == "committing":
        try:
            with folder_lock(home, what="output folder", command=command, label=label, warn=lambda _: None):
                recover(home)
        except FolderBusy as exc:
            raise OutputSetError(f"{exc} (its set is being replaced)") from None
    manifest = read_manifest(home, label)
    if manifest is None:
        raise OutputSetError(f"output folder {label} holds no complete output set (no {files.OUTPUT_MANIFEST}); "
                             "run the analysis into it first")
    for key, entry in manifest.files.items():
        path = _at(home, key)
        shown = os.path.normpath(os.path.join(label, key))
        if not path.is_file():
            raise OutputSetError(f"output folder {label}: {shown} of {manifest.line()} is missing: the set is "
                                 "incomplete; run the command that made it again")
        if path.stat().st_size != entry.bytes or sha256_file(path) != entry.sha256:
            raise OutputSetError(f"output folder {label}: {shown} changed since {manifest.line()} wrote it: the set is "
                                 "not that run's any more; run the command that made it again")
    return manifest
