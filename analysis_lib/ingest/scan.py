"""What is under a runs folder, and whether it changed since the last look.

A scan is discovery plus a fingerprint per source: size and mtime of every file the source is
read from and the mtime of every folder holding them, so that a file that appears (a late
``reward.txt``) changes the fingerprint as surely as a file rewritten in place. The record of a
scan is kept beside the metrics cache. A re-run checks it with one ``stat`` per recorded entry
instead of walking and listing every folder again, which is what makes an unchanged re-run cheap;
any difference in what discovery looked at sends it back to a full walk.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat as _stat
import zlib
from array import array
from dataclasses import dataclass
from typing import Callable, Collection, NamedTuple, Sequence

import orjson

from .._gc import paused
from ..fileio import atomic_write_bytes
from ..trial import IngestError
from .discover import Looked, TrialSource, discover, fingerprint_file

# Entries of a trial folder that its trial is read from, parents before children ("" = the folder).
# A folder's mtime changes when an entry is added, removed or renamed in it: that covers new files.
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
)
_PARENT = {rel: rel.rpartition("/")[0] for rel in TRIAL_ENTRIES if rel}
# Fallbacks the trial reader opens only when the first choice is not a regular file (its folder's
# mtime still shows one appearing): not asked for when it is, two failed stats a trial fewer.
_FALLBACK_OF = {"agent/claude-code.txt": "agent/trajectory.json", "verifier/reward.json": "verifier/reward.txt"}
RECORD_FILE = "scan_record.json"
RECORD_FORMAT = 9


@dataclass(slots=True)
class Fingerprint:
    """The entries a source is read from that exist, their size and mtime (flat: size, mtime, ...),
    and which of them are regular files."""

    entries: Sequence[str]
    values: list[int]
    files: Collection[str] = ()

    @property
    def text(self) -> str:
        """``rel:size:mtime_ns|...`` (or ``missing``): the form kept in the metrics cache."""
        v = self.values
        return "|".join(f"{rel}:{v[2 * i]}:{v[2 * i + 1]}" for i, rel in enumerate(self.entries)) or "missing"

    def isfile(self, rel: str) -> bool:
        return rel in self.files

    def isdir(self, rel: str) -> bool:
        return rel in self.entries and rel not in self.files

    def size(self, rel: str) -> int | None:
        """The recorded size of a regular file, None for anything else."""
        return self.values[2 * self.entries.index(rel)] if rel in self.files else None


def fingerprint(src: TrialSource) -> Fingerprint:
    """Stat every entry ``src`` may be read from (children of a missing folder are skipped)."""
    if src.kind == "trial_dir":
        rels = TRIAL_ENTRIES
    elif src.kind == "tb1_run":
        rels = _tb1_entries(src.path)
    else:
        rels = ("",)
    base = src.path
    values: list[int] = []
    present: list[str] = []
    files: set[str] = set()
    dirs: set[str] = set()
    trial_dir = src.kind == "trial_dir"
    for rel in rels:
        if trial_dir:
            parent = _PARENT.get(rel)
            if parent is not None and parent not in dirs:
                continue
            if _FALLBACK_OF.get(rel) in files:
                continue
        try:
            st = os.stat(base + "/" + rel if rel else base)
        except OSError:
            continue
        values += (st.st_size, st.st_mtime_ns)
        present.append(rel)
        if _stat.S_ISDIR(st.st_mode):
            dirs.add(rel)
        elif _stat.S_ISREG(st.st_mode):
            files.add(rel)
    return Fingerprint(tuple(present), values, frozenset(files))


def recheck(path: str, entries: Sequence[str]) -> list[int] | None:
    """Size and mtime of exactly ``entries`` again (flat), or None when one of them is gone."""
    values: list[int] = []
    for rel in entries:
        try:
            st = os.stat(path + "/" + rel if rel else path)
        except OSError:
            return None
        values += (st.st_size, st.st_mtime_ns)
    return values


class _Folders:
    """Open parent folders, so that each stat walks a path relative to one (two components shorter
    than from the root: about 0.2 µs each of the ~2.5 µs a stat costs, 10,000 times)."""

    def __init__(self) -> None:
        self.fds: dict[str, int | None] = {}
        self.usable = os.stat in os.supports_dir_fd

    def open(self, folder: str) -> int | None:
        """A descriptor of ``folder`` to stat relative to, or None (then stat the whole path)."""
        fd = self.fds.get(folder, -1)
        if fd == -1:
            fd = None
            if self.usable and folder:
                try:
                    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
                except OSError:
                    pass
            self.fds[folder] = fd
        return fd

    def close(self) -> None:
        for fd in self.fds.values():
            if fd is not None:
                os.close(fd)
        self.fds.clear()


def _tb1_entries(path: str) -> tuple[str, ...]:
    """A TB1 run: its files, and two levels of task and trial folders with their results.json."""
    rels = ["", "run_metadata.json", "results.json"]
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        return tuple(rels)
    # Timestamped run-level results files (<timestamp>_results.json) are read too.
    rels += sorted(e.name for e in entries if e.name.endswith("_results.json") and e.is_file(follow_symlinks=False))
    tasks = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    for t in tasks:
        rels.append(t)
        try:
            with os.scandir(os.path.join(path, t)) as it:
                trials = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        for name in trials:
            rels += [f"{t}/{name}", f"{t}/{name}/results.json"]
    return tuple(rels)


def source_key(src: TrialSource) -> str:
    return f"{src.kind}|{src.path}|{src.profile}|{src.repetition}|{src.run_id}"


class _Unchanged(NamedTuple):
    """A recorded scan whose every entry is unchanged, in the record's own form."""

    lists: list[tuple[str, ...]]  # the distinct entry and file lists
    recorded: list[tuple[int, int]]  # per source: its entries' list, its files' list
    values: bytes  # every size and mtime, int64, in record order
    static_digest: str  # see _static_digest


@dataclass
class Scan:
    """Discovered sources, their cache keys and fingerprints (None: not taken yet), and discovery errors.

    A scan read back from its record builds its :class:`TrialSource` and :class:`Fingerprint`
    objects only when asked for them: an unchanged re-run needs the keys and its digest alone.
    """

    runs_dir: str
    _sources: list[TrialSource] | None
    _keys: list[str] | None
    _fps: list[Fingerprint | None] | None
    errors: list[IngestError]
    looked: Looked | None = None
    # True when this scan differs from the recorded one (it must be recorded again).
    changed: bool = True
    _all_fps: list[Fingerprint | None] | None = None
    # A recorded scan that has not built its objects yet: its sources' paths (relative to the runs
    # folder) and the rest of its sources and keys, still as JSON text (parsed when asked for).
    _paths: list[str] | None = None
    _listing: str | None = None
    _all: list[TrialSource] | None = None
    # An unchanged recorded scan, as recorded (fingerprints built only when asked for).
    _flat: _Unchanged | None = None

    def _parse_listing(self) -> tuple[list, list[str]]:
        listing = orjson.loads(self._listing)
        return listing["rows"], listing["keys"]

    @property
    def keys(self) -> list[str]:
        """The cache key of every source (see :func:`source_key`)."""
        if self._keys is None:
            self._keys = self._parse_listing()[1]
        return self._keys

    @keys.setter
    def keys(self, keys: list[str]) -> None:
        self._keys = keys

    @property
    def n_sources(self) -> int:
        """The number of (selected) sources, without building them."""
        return len(self._keys) if self._keys is not None else len(self._flat.recorded)

    @property
    def sources(self) -> list[TrialSource]:
        if self._sources is None:
            prefix = self.runs_dir.rstrip(os.sep) + os.sep
            self._sources = [TrialSource(k, prefix + p[2:] if p.startswith("./") else p, r, pr, t, rep, f, m)
                             for p, (k, r, pr, t, rep, f, m) in zip(self._paths, self._parse_listing()[0])]
        return self._sources

    @property
    def fingerprints(self) -> list[Fingerprint | None]:
        if self._fps is None:
            lists, recorded = self._flat.lists, self._flat.recorded
            flat = array("q", self._flat.values).tolist()
            fps, at = [], 0
            for entries_at, files_at in recorded:
                entries = lists[entries_at]
                end = at + 2 * len(entries)
                fps.append(Fingerprint(entries, flat[at:end], lists[files_at]))
                at = end
            self._fps = fps
        return self._fps

    @fingerprints.setter
    def fingerprints(self, fps: list[Fingerprint | None]) -> None:
        self._fps, self._flat = fps, None

    @property
    def all_fingerprints(self) -> list[Fingerprint | None]:
        """The fingerprints of :attr:`all_sources`."""
        return self._all_fps if self._all_fps is not None else self.fingerprints

    @property
    def all_sources(self) -> list[TrialSource]:
        """Every discovered source, before a selection (--profiles, --tasks, --limit) narrowed them."""
        return self._all if self._all is not None else self.sources

    @property
    def complete(self) -> bool:
        return self._fps is None or all(fp is not None for fp in self._fps)

    def digest(self, *extra: object) -> str:
        """One hash of every source's key and fingerprint (plus ``extra``): equal means unchanged inputs."""
        if self._fps is None:
            values, static = self._flat.values, self._flat.static_digest
        else:
            seen: dict[tuple, int] = {}
            index, flat = [], []
            for fp in self._fps:
                if fp is None:
                    index.append(-1)
                else:
                    index.append(seen.setdefault(tuple(fp.entries), len(seen)))
                    flat += fp.values
            static = _static_digest(self.keys, list(seen), index, self.errors)
            values = array("q", flat).tobytes()
        h = hashlib.sha256(static.encode())
        h.update(values)
        h.update(repr(extra).encode())
        return h.hexdigest()

    def set_fingerprint(self, i: int, fp: Fingerprint) -> None:
        self.fingerprints[i] = fp
        self.changed = True


def _static_digest(keys: list[str], lists: list[tuple[str, ...]], index: list[int], errors: list[IngestError]) -> str:
    """Hash of what a scan found apart from sizes and mtimes: keys, each source's entries, errors.

    Entry lists are renumbered in order of first use, so a scan read back from its record (whose
    lists are numbered together with the file lists) hashes like the scan that wrote it. Kept in
    the record, it spares an unchanged re-run hashing 2,000 keys again.
    """
    order: dict[int, int] = {}
    for e in index:
        if e >= 0:
            order.setdefault(e, len(order))
    return hashlib.sha256(orjson.dumps([
        keys,
        [lists[e] for e in order],
        [order.get(e, -1) for e in index],
        [[e.path, e.message] for e in errors],
    ])).hexdigest()


def scan(
    runs_dir: str | os.PathLike,
    select: Callable[[list[TrialSource]], list[TrialSource]] | None = None,
    *,
    record_dir: str | os.PathLike | None = None,
    fingerprints: bool = True,
) -> Scan:
    """Discover the sources under ``runs_dir`` and fingerprint them (no parsing).

    With ``record_dir`` the record of the last scan is tried first: when every folder and file
    it looked at is unchanged, discovery is not run again. ``fingerprints=False`` leaves the
    fingerprints of a fresh discovery to be taken later (by the workers that read the sources).
    """
    runs_dir = os.fspath(runs_dir)
    found = _from_record(runs_dir, record_dir) if record_dir is not None else None
    if found is None:
        looked = Looked()
        sources, errors = discover(runs_dir, looked)
        fps: list[Fingerprint | None] = [fingerprint(s) if fingerprints else None for s in sources]
        result = Scan(runs_dir, sources, [source_key(s) for s in sources], fps, errors, looked=looked, changed=True)
    else:
        result = found
    if select is not None:
        every = result.sources
        result._all_fps = result.fingerprints
        keep = select(every)
        position = {id(s): i for i, s in enumerate(every)}
        result.fingerprints = [result.fingerprints[position[id(s)]] for s in keep]
        result._all, result._sources = every, keep
        result.keys = [source_key(s) for s in keep]
    return result


def save_record(record_dir: str | os.PathLike, scanned: Scan) -> None:
    """Keep what this scan looked at and found, for the next run to check instead of walking again."""
    if scanned.looked is None or not scanned.changed:
        return
    # The fingerprints of the selected sources were filled in place of the full list's.
    by_id = {id(s): fp for s, fp in zip(scanned.sources, scanned.fingerprints)}
    fps = [by_id.get(id(s), fp) for s, fp in zip(scanned.all_sources, scanned.all_fingerprints)]
    if any(fp is None for fp in fps):
        return
    every = scanned.all_sources
    shorts = [_short(s.path, scanned.runs_dir) for s in every]
    keys = [source_key(s) for s in every]
    # Most sources share one set of entries: each distinct list is stored once and referred to.
    lists: dict[tuple, int] = {}
    entries_at = [lists.setdefault(tuple(fp.entries), len(lists)) for fp in fps]
    files_at = [lists.setdefault(tuple(sorted(fp.files)), len(lists)) for fp in fps]
    listing = orjson.dumps({
        "rows": [[s.kind, s.run_id, s.profile, s.task_id, s.repetition, s.source_format, s.meta] for s in every],
        "keys": keys,
    }).decode()
    rec = {
        "format": RECORD_FORMAT,
        "code": _code_version(),
        "runs_dir": scanned.runs_dir,
        "folders": scanned.looked.folders,
        "files": scanned.looked.files,
        "paths": shorts,
        # What only a changed run needs, kept as JSON text: an unchanged re-run neither parses nor frees it
        # (its checksum stands in for the parse that would otherwise show it damaged).
        "listing": listing,
        "listing_crc": zlib.crc32(listing.encode()),
        # Numbers as base64 arrays (int32 indices, int64 sizes and mtimes): parsing 10,000 JSON numbers costs more.
        "entries_at": _pack("i", entries_at),
        "files_at": _pack("i", files_at),
        "values": _pack("q", [v for fp in fps for v in fp.values]),
        "errors": [[e.path, e.stage, e.message, e.severity] for e in scanned.errors],
        "entry_lists": [list(t) for t in lists],
        "static_digest": _static_digest(keys, list(lists), entries_at, scanned.errors),
    }
    atomic_write_bytes(os.path.join(os.fspath(record_dir), RECORD_FILE), orjson.dumps(rec), durable=False)


def _pack(typecode: str, values: list[int]) -> str:
    return base64.b64encode(array(typecode, values).tobytes()).decode()


def _unpack(typecode: str, text: str) -> list[int]:
    return array(typecode, base64.b64decode(text)).tolist()


def _from_record(runs_dir: str, record_dir: str | os.PathLike) -> Scan | None:
    """The recorded scan when nothing it looked at changed; None means: walk again."""
    with paused():  # thousands of small objects, no cycles (see analysis_lib._gc)
        return _read_record(runs_dir, record_dir)


def _read_record(runs_dir: str, record_dir: str | os.PathLike) -> Scan | None:
    path = os.path.join(os.fspath(record_dir), RECORD_FILE)
    try:
        with open(path, "rb") as fh:
            rec = orjson.loads(fh.read())
        if rec.get("format") != RECORD_FORMAT or rec.get("code") != _code_version() or rec.get("runs_dir") != runs_dir:
            return None
        for folder, mtime in rec["folders"]:
            if os.stat(folder).st_mtime_ns != mtime:
                return None
        for file, fp in rec["files"]:
            if fingerprint_file(file) != fp:
                return None
        prefix = runs_dir.rstrip(os.sep) + os.sep
        shorts, entries_at = rec["paths"], _unpack("i", rec["entries_at"])
        lists = [tuple(x) for x in rec["entry_lists"]]
        values = base64.b64decode(rec["values"])
        errors = [IngestError(*e) for e in rec["errors"]]
        looked = Looked([tuple(f) for f in rec["folders"]], [tuple(f) for f in rec["files"]])
        if zlib.crc32(rec["listing"].encode()) != rec["listing_crc"]:
            return None
        recorded = list(zip(entries_at, _unpack("i", rec["files_at"])))
        if not len(recorded) == len(entries_at) == len(shorts):
            return None
        now = _restat(prefix, shorts, entries_at, lists)
        if now is not None and array("q", now).tobytes() == values:
            # The common case, nothing changed: sources and keys stay unparsed text.
            return Scan(runs_dir, None, None, None, errors, looked=looked, changed=False, _paths=shorts, _listing=rec["listing"],
                        _flat=_Unchanged(lists, recorded, values, rec["static_digest"]))
        flat = array("q", values).tolist()
        listing = orjson.loads(rec["listing"])
        rows, keys = listing["rows"], listing["keys"]
        if not len(rows) == len(keys) == len(shorts):
            return None
        if len(flat) != 2 * sum(len(lists[e]) for e in entries_at):
            return None
        fps, changed = _changed_fingerprints(prefix, shorts, rows, recorded, lists, flat, now)
        if fps is None:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None  # no record, or a damaged one, or one this version cannot use: walk again
    return Scan(runs_dir, None, keys, fps, errors, looked=looked, changed=changed, _paths=shorts, _listing=rec["listing"])


def _restat(prefix: str, shorts: list[str], entries_at: list[int], lists: list[tuple[str, ...]]) -> list[int] | None:
    """Size and mtime of every recorded entry now, flat in record order; None when one is gone.

    The hot loop of an unchanged re-run (10,000 stats at 2,000 trials): each stat relative to its
    open run folder, and nothing compared or built until the end.
    """
    suffixes = [tuple("/" + rel if rel else "" for rel in entries) for entries in lists]
    now: list[int] = []
    put = now.append
    stat = os.stat
    folders = _Folders()
    last = fd = None
    try:
        for short, at in zip(shorts, entries_at):
            path = prefix + short[2:] if short[:2] == "./" else short
            parent, _, name = path.rpartition("/")
            if parent != last:
                last = parent
                fd = folders.open(parent)
            if fd is None:
                name = path
            for suffix in suffixes[at]:
                st = stat(name + suffix, dir_fd=fd)
                put(st.st_size)
                put(st.st_mtime_ns)
    except OSError:
        return None
    finally:
        folders.close()
    return now


def _changed_fingerprints(prefix: str, shorts: list[str], rows: list, recorded: list, lists: list[tuple[str, ...]],
                          flat: list[int], restat: list[int] | None) -> tuple[list[Fingerprint] | None, bool]:
    """Per source, the recorded fingerprint or, for a trial folder whose own listing is unchanged,
    a new one; None when discovery must run again. ``restat``: every entry's size and mtime as
    :func:`_restat` just took them (None when one was gone: then each source is asked again)."""
    fps: list[Fingerprint] = []
    changed = False
    at = 0
    for short, row, (entries_at, files_at) in zip(shorts, rows, recorded):
        path = prefix + short[2:] if short[:2] == "./" else short
        entries = lists[entries_at]
        end = at + 2 * len(entries)
        values = flat[at:end]
        now = restat[at:end] if restat is not None else recheck(path, entries)
        if now == values:
            fps.append(Fingerprint(entries, values, lists[files_at]))
        else:
            # A trial folder whose own listing is unchanged is still the same source: only its files changed.
            k, r, pr, t, rep, f, m = row
            if k != "trial_dir" or now is None or now[:2] != values[:2]:
                return None, changed
            fps.append(fingerprint(TrialSource(k, path, r, pr, t, rep, f, m)))
            changed = True
        at = end
    return fps, changed


def _short(path: str, runs_dir: str) -> str:
    """A source path relative to the runs folder ("./..."), which keeps the record small."""
    prefix = runs_dir.rstrip(os.sep) + os.sep
    return "./" + path[len(prefix):] if path.startswith(prefix) else path


def _code_version() -> str:
    from .load import code_version

    return code_version()
