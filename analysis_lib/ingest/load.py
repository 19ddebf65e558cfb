"""Load many trials fast: scan, read in parallel, compute metrics, cache per trial.

The hot path never keeps parsed trajectories: this process and its forked helpers each read
one source at a time, compute its metric rows and keep only those (a few hundred bytes per
trial), so memory stays flat as the number of runs grows. A parquet cache keyed by each
trial's path and the size and mtime of its files and folders (see :mod:`.scan`) makes an
unchanged re-run skip parsing altogether, and a changed trial be read again alone.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import multiprocessing as mp
import operator
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import orjson
import pandas as pd

from .. import __version__
from ..metrics import MCP_TOOL_PREFIX, MetricsConfig, metrics_frame, packed_metrics_frame, trial_metrics
from ..trial import IngestError, Trial
from .discover import TrialSource, discover
from .read import read_source
from .scan import Fingerprint, Scan, fingerprint, save_record, scan

CACHE_FILE = "metrics_cache.parquet"
KEY_COLUMN = "_source_key"
# Bump when a metric definition changes: cached rows of another version are recomputed.
CACHE_SCHEMA = f"{__version__}-1"


@dataclass
class LoadResult:
    """The metrics table of every trial read (raw paths, repetitions as read; sorted by profile, task,
    repetition and run, ties in discovery order), errors, cache statistics."""

    frame: pd.DataFrame
    errors: list[IngestError]
    n_sources: int
    cache_hits: int = 0


def rows_for_source(src: TrialSource, config: MetricsConfig = MetricsConfig()) -> tuple[list[dict], list[tuple], tuple]:
    """Fingerprint one source, read it and compute its metric rows (in this process or a forked helper).

    The fingerprint is taken before reading: a file changed while it is read leaves a
    fingerprint that no longer matches, so the next run reads it again.
    """
    fp = fingerprint(src)
    trials, errors = read_source(src, fp, light=True)
    # A trial folder's fingerprint already says whether it has a CodeCanvas session: no need to look again.
    no_canvas = src.kind == "trial_dir" and not fp.isdir("agent/sessions/codecanvas")
    rows = []
    for t in trials:
        try:
            row = trial_metrics(t, config)
            row.update(_empty_extension_columns() if no_canvas else _extension_columns(t))
            rows.append(row)
        except Exception as exc:  # one bad trial must not stop the rest
            errors.append(IngestError(t.trial_path, "metrics", f"{type(exc).__name__}: {str(exc)[:200]}"))
    return rows, [(e.path, e.stage, e.message, e.severity) for e in errors], (fp.entries, fp.values, fp.files)


def _extension_columns(trial: Trial) -> dict[str, Any]:
    """Columns contributed by optional modules (CodeCanvas), empty when they are absent."""
    fn = _codecanvas_metrics()
    return fn(trial) if fn is not None else {}


@functools.lru_cache(maxsize=1)
def _empty_extension_columns() -> dict[str, Any]:
    """The extension columns of a trial without CodeCanvas state (shared: callers only copy from it)."""
    try:
        from ..codecanvas import empty_metrics
    except ImportError:
        return {}
    return empty_metrics()


@functools.lru_cache(maxsize=1)
def _codecanvas_metrics():
    try:
        from ..codecanvas import codecanvas_metrics
    except ImportError:
        return None
    return codecanvas_metrics


def _work(args: tuple[TrialSource, MetricsConfig]) -> tuple[list[dict], list[tuple], tuple]:
    return _packed(rows_for_source(*args))


# Rows cross the pipe as (columns, values) pairs whose column tuples are shared objects: pickle
# then writes each layout once per batch, and the parent unpickles tuples instead of dicts.
# Per row's keys: its layout and the getter of its values (a few distinct key sets per run).
_LAYOUTS: dict[tuple, tuple[tuple, Callable[[dict], tuple]]] = {}


def _layout(keys: tuple) -> tuple[tuple, Callable[[dict], tuple]]:
    # Per-tool MCP columns vary by trial; metrics_frame derives them from mcp_calls_by_tool, and
    # without them every trial of a run shares one layout.
    cols = tuple(k for k in keys if not k.startswith(MCP_TOOL_PREFIX))
    for layout, _ in _LAYOUTS.values():
        if layout == cols:
            cols = layout  # one shared object per layout
            break
    found = (cols, operator.itemgetter(*cols) if len(cols) > 1 else lambda r: tuple(r[k] for k in cols))
    if len(_LAYOUTS) < 1024:
        _LAYOUTS[keys] = found
    return found


def _packed(result: tuple[list[dict], list[tuple], tuple]) -> tuple:
    rows, errors, fp = result
    packed = []
    for r in rows:
        keys = tuple(r)
        layout, getter = _LAYOUTS.get(keys) or _layout(keys)
        packed.append((layout, getter(r)))
    return packed, errors, fp


# The sources and configuration of the current parallel read. Forked helpers inherit them, so a
# task is just an index: pickling 2,000 sources for a pipe cost the parent ~0.05 s of CPU.
_JOBS: tuple[list[TrialSource], MetricsConfig] | None = None


def load_rows(
    runs_dir: str | os.PathLike,
    *,
    config: MetricsConfig = MetricsConfig(),
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = False,
    select: Callable[[list[TrialSource]], list[TrialSource]] | None = None,
    scanned: Scan | None = None,
) -> LoadResult:
    """Discover and read every trial under ``runs_dir`` into the metrics table (cached, in parallel).

    With an unchanged runs folder the whole table comes back from the parquet cache without
    parsing anything; otherwise only the sources whose files changed are read again. The
    fingerprints ``scanned`` lacks are filled in (the workers take them while reading).
    """
    if scanned is None:
        scanned = scan(runs_dir, select, record_dir=cache_dir, fingerprints=has_metrics_cache(cache_dir))
    errors = list(scanned.errors)
    keys = scanned.keys
    cached_frame, cached_meta = _read_cache(cache_dir, config)
    if cached_meta:  # validating cached rows needs every fingerprint now
        for i, fp in enumerate(scanned.fingerprints):
            if fp is None:
                scanned.set_fingerprint(i, fingerprint(scanned.sources[i]))
    fps = scanned.fingerprints
    valid = {k for k, fp in zip(keys, fps) if fp is not None and cached_meta.get(k, (None,))[0] == fp.text}
    todo = [i for i, k in enumerate(keys) if k not in valid]
    computed = _compute([scanned.sources[i] for i in todo], config, workers, progress)
    meta: dict[str, tuple[str, list]] = {k: cached_meta[k] for k in valid}
    new_rows: list[tuple[tuple, tuple, str]] = []  # (layout, values, source key)
    for i, (packed, errs, (entries, values, files)) in zip(todo, computed):
        key = keys[i]
        new_rows.extend((layout, vals, key) for layout, vals in packed)
        fp = Fingerprint(entries, values, files)
        scanned.set_fingerprint(i, fp)
        meta[key] = (fp.text, [list(e) for e in errs])
    parts = []
    if cached_frame is not None and valid:
        parts.append(cached_frame if len(valid) == len(cached_meta) else cached_frame[cached_frame[KEY_COLUMN].isin(valid)])
    if new_rows or not parts:
        parts.append(_fresh_frame(new_rows))
    order = {k: i for i, k in enumerate(keys)}
    if len(parts) == 1 and not valid:
        frame = parts[0]  # new rows only: already in the final order
    else:
        # Discovery order first, so that ties of the sort below fall as in a cold run.
        frame = parts[0] if len(parts) == 1 else _concat(parts)
        frame = frame.iloc[frame[KEY_COLUMN].map(order).argsort(kind="stable")]
        frame = frame.sort_values(SORT_COLUMNS, kind="stable")
    for key in keys:
        errors.extend(IngestError(*e) for e in meta[key][1])
    if cache_dir is not None:
        to_write = None
        if todo:
            # Keep what a narrower selection (--profiles, --tasks) did not look at, for the next full run.
            others = set(cached_meta) - set(order)
            to_write = frame
            if others and cached_frame is not None:
                to_write = _concat([frame, cached_frame[cached_frame[KEY_COLUMN].isin(others)]])
                meta.update({k: cached_meta[k] for k in others})
        # Written here, not on a background thread: converting the table holds the GIL, and a thread
        # contending for it slowed the caller's own work by more than the write costs (~15 ms).
        _write_caches(cache_dir, config, to_write, meta, scanned)
    frame = frame.drop(columns=[KEY_COLUMN]).reset_index(drop=True)
    return LoadResult(frame=frame, errors=errors, n_sources=len(scanned.sources), cache_hits=len(valid))


def _write_caches(cache_dir, config, frame: pd.DataFrame | None, meta: dict, scanned: Scan) -> None:
    try:
        if frame is not None:
            _write_cache(cache_dir, config, frame, meta)
        save_record(cache_dir, scanned)
    except Exception as exc:  # a cache that cannot be written only makes the next run slower
        print(f"warning: {cache_dir}: metrics cache not written ({type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)


SORT_COLUMNS = ["profile", "task_id", "repetition", "run_id"]


def _sort_key(values: tuple) -> tuple:
    # pandas' order: values ascending, missing last.
    return tuple((1, "") if v is None else (0, v) for v in values)


def _fresh_frame(rows: list[tuple[tuple, tuple, str]]) -> pd.DataFrame:
    """The metrics table of newly read rows, sorted as analyse() wants it (ties in discovery order).

    Rows are sorted as tuples before the table is built: sorting a wide pandas frame of Arrow
    strings afterwards costs ~13 ms at 2,000 rows, sorting 2,000 tuples well under one.
    """
    layouts = {layout for layout, _, _ in rows}
    if len(layouts) == 1:
        layout = next(iter(layouts))
        at = [layout.index(c) for c in SORT_COLUMNS]
        rows = sorted(rows, key=lambda r: _sort_key(tuple(r[1][i] for i in at)))
        frame = packed_metrics_frame(layout, [vals for _, vals, _ in rows])
    else:  # formats of different shapes in one folder: the general path
        dicts = [dict(zip(layout, vals)) for layout, vals, _ in rows]
        order = sorted(range(len(rows)), key=lambda i: _sort_key(tuple(dicts[i].get(c) for c in SORT_COLUMNS)))
        rows = [rows[i] for i in order]
        frame = metrics_frame([dicts[i] for i in order], sort=False)
    frame[KEY_COLUMN] = pd.Series([key for _, _, key in rows], dtype=object)
    return frame


def has_metrics_cache(cache_dir: str | os.PathLike | None) -> bool:
    return cache_dir is not None and os.path.isfile(os.path.join(os.fspath(cache_dir), CACHE_FILE))


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    cols = list(dict.fromkeys(c for p in parts for c in p.columns))
    return metrics_frame(pd.concat([p.reindex(columns=cols) for p in parts], ignore_index=True).to_dict("records"), sort=False)


def _compute(todo: list[TrialSource], config, workers, progress) -> list[tuple]:
    """The packed rows, errors and fingerprint of every source, in order (in parallel when it pays)."""
    if not todo:
        return []
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    bar = _progress(len(todo), progress)
    try:
        if n_workers <= 1 or len(todo) < 8:
            out = []
            for src in todo:
                out.append(_packed(rows_for_source(src, config)))
                bar.update(1)
        elif sys.platform != "win32":
            out = _read_forked(todo, config, n_workers, bar)
        else:  # no fork: a pool of spawned workers, each task pickled
            with mp.get_context().Pool(n_workers, initializer=gc.disable) as pool:
                out = []
                for res in pool.imap(_work, [(src, config) for src in todo], chunksize=max(1, len(todo) // (n_workers * 8))):
                    out.append(res)
                    bar.update(1)
    finally:
        bar.close()
    return out


def _read_forked(todo: list[TrialSource], config: MetricsConfig, n_workers: int, bar) -> list[tuple]:
    """Read ``todo`` with ``n_workers - 1`` forked helpers and this process, all taking batches of
    indices from one shared counter.

    The parent reads too, instead of only waiting: with a pool of as many workers as cores, its
    bookkeeping competed with both workers. A helper that dies leaves its batch to the parent.
    """
    global _JOBS
    n = len(todo)
    chunk = max(1, min(64, n // (n_workers * 8)))
    ctx = mp.get_context("fork")
    counter = ctx.Value("q", 0)
    out: list = [None] * n
    helpers: list = []
    # Forked helpers inherit every object of the parent (pandas...). Freezing them keeps the
    # cyclic collector from walking (and copying) those pages; parsed trials hold no cycles.
    gc.freeze()
    _JOBS = (todo, config)
    try:
        for _ in range(n_workers - 1):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_helper, args=(send, counter, n, chunk, n_workers), daemon=True)
            proc.start()
            send.close()
            helpers.append((proc, recv))
        open_conns = [conn for _, conn in helpers]

        def drain(block: bool) -> None:
            for conn in list(open_conns):
                while open_conns and (block or conn.poll()):
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        msg = None  # the helper died: its missing batches are read below
                    if msg is None:
                        open_conns.remove(conn)
                        break
                    start, results = msg
                    out[start:start + len(results)] = results
                    bar.update(len(results))
                    block = False

        while True:
            start, size = _take(counter, n, chunk, n_workers)
            if start >= n:
                break
            for i in range(start, start + size):
                out[i] = _packed(rows_for_source(todo[i], config))
                bar.update(1)
                if i % 4 == 0 and open_conns:  # keep the helpers' pipes from filling up
                    drain(block=False)
        while open_conns:
            drain(block=True)
    except BaseException:  # Ctrl-C or a bug here: the helpers stop now rather than finish their work
        for proc, _ in helpers:
            proc.terminate()
        raise
    finally:
        _JOBS = None
        for proc, conn in helpers:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
            conn.close()
        gc.unfreeze()
    for i, res in enumerate(out):
        if res is None:
            out[i] = _packed(rows_for_source(todo[i], config))
    return out


def _take(counter, n: int, chunk: int, n_workers: int) -> tuple[int, int]:
    """Claim the next batch of indices: its first index and its size.

    Batches shrink towards the end (a quarter of each worker's share of what is left), so that
    no process still reads a full batch while the others have run out.
    """
    with counter.get_lock():
        start = counter.value
        size = max(1, min(chunk, (n - start) // (4 * n_workers)))
        counter.value = start + size
    return start, size


def _helper(conn, counter, n: int, chunk: int, n_workers: int) -> None:
    """A forked helper: read batches until none is left, send each batch's rows to the parent."""
    gc.disable()
    todo, config = _JOBS
    try:
        while True:
            start, size = _take(counter, n, chunk, n_workers)
            if start >= n:
                break
            conn.send((start, [_packed(rows_for_source(todo[i], config)) for i in range(start, start + size)]))
        conn.send(None)
    finally:
        conn.close()


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    if not enabled or total < 2:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="reading trials", unit="trial", file=sys.stderr, leave=False)


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the code that computes a row: a changed metric definition invalidates cached rows."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for rel in ("trial.py", "tools.py", "metrics.py", "pricing.py", "fileio.py", "ingest", "codecanvas"):
        path = os.path.join(root, rel)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".py"))
        for f in files:
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()[:16]


def config_tag(config: MetricsConfig) -> str:
    return orjson.dumps(
        [CACHE_SCHEMA, code_version(), sorted(config.mcp_tools), config.tool_misuse_error_rate, config.infinite_loop_streak,
         config.budget_exhaustion_tokens, config.premature_stop_steps]
    ).decode()


def _read_cache(cache_dir, config) -> tuple[pd.DataFrame | None, dict[str, tuple[str, list]]]:
    """The cached metrics table and, per source key, (fingerprint, errors); empty when unusable."""
    if cache_dir is None:
        return None, {}
    path = os.path.join(os.fspath(cache_dir), CACHE_FILE)
    if not os.path.isfile(path):
        return None, {}
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        if meta.get(b"config", b"").decode() != config_tag(config):
            return None, {}
        sources = {k: (fp, errs) for k, fp, errs in orjson.loads(meta[b"sources"])}
        frame = table.to_pandas()
    except Exception:
        return None, {}  # a damaged cache only makes the run slower
    return frame, sources


def _write_cache(cache_dir, config, frame: pd.DataFrame, meta: dict[str, tuple[str, list]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..fileio import atomic_write_bytes

    table = pa.Table.from_pandas(frame, preserve_index=False)
    sources = [[k, fp, errs] for k, (fp, errs) in sorted(meta.items())]
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), "config": config_tag(config), "sources": orjson.dumps(sources)}
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")  # written every cold run: half zstd's time, 1.3x its size
    atomic_write_bytes(os.path.join(os.fspath(cache_dir), CACHE_FILE), sink.getvalue().to_pybytes(), durable=False)


def load_trials(runs_dir: str | os.PathLike) -> tuple[list[Trial], list[IngestError]]:
    """Every trial under ``runs_dir`` with its full trajectory (for the LLM layer and notebooks).

    Unlike :func:`load_rows` this keeps parsed trajectories in memory; use it for hundreds of
    trials, not tens of thousands.
    """
    sources, errors = discover(runs_dir)
    trials: list[Trial] = []
    for src in sources:
        ts, es = read_source(src)
        trials.extend(ts)
        errors.extend(es)
    number_repetitions(trials)
    return trials, errors


def number_repetitions(items: list[Trial]) -> None:
    """Give trials without a repetition (Harbor) 1..n per (profile, task), in start-time order; then
    renumber the tasks whose repetitions collide across runs (see :func:`_separate_runs`)."""
    groups: dict[tuple[str, str], list[Trial]] = {}
    for t in items:
        if not t.repetition:
            groups.setdefault((t.profile, t.task_id), []).append(t)
    for group in groups.values():
        group.sort(key=lambda t: (str(t.timing.started_at or ""), t.trial_path))
        for i, t in enumerate(group, start=1):
            t.repetition = i
    rows = [(t.profile, t.task_id, t.repetition, t.run_id, str(t.timing.started_at or ""), t.trial_path) for t in items]
    for i, rep in _separate_runs(rows).items():
        items[i].repetition = rep


def _separate_runs(rows: list[tuple]) -> dict[int, int]:
    """New repetitions where one (profile, task, repetition) comes from several runs.

    Several runs of one profile each numbering their attempts from 1 (TB1 submissions of
    ``run1/``, ``run2/``... with ``<task>.1-of-1`` trials, two mcpbr result files) would otherwise
    give one task the same repetition twice. Such a task's trials are numbered 1..n in the order
    of their run (its earliest trial start, then its id), then their own repetition.
    ``rows``: (profile, task, repetition, run_id, started_at, trial_path); returns index -> repetition.
    """
    runs_of: dict[tuple, set] = {}
    for profile, task, rep, run, _, _ in rows:
        runs_of.setdefault((profile, task, rep), set()).add(run)
    clashing = {(p, t) for (p, t, _), runs in runs_of.items() if len(runs) > 1}
    if not clashing:
        return {}
    run_start: dict[tuple, str] = {}
    for profile, task, _, run, started, _ in rows:
        if started:
            key = (profile, run)
            run_start[key] = min(run_start.get(key, started), started)
    groups: dict[tuple, list[int]] = {}
    for i, (profile, task, *_rest) in enumerate(rows):
        if (profile, task) in clashing:
            groups.setdefault((profile, task), []).append(i)
    out: dict[int, int] = {}
    for (profile, _), idx in groups.items():
        idx.sort(key=lambda i: (run_start.get((profile, rows[i][3]), "~"), str(rows[i][3]), rows[i][2] or 0, rows[i][5]))
        out.update({i: n for n, i in enumerate(idx, start=1)})
    return out


def number_repetitions_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The same numbering on a metrics table (rows whose repetition is 0 or missing, then the tasks
    whose repetitions collide across runs)."""
    missing = df["repetition"].isna() | (df["repetition"] == 0)
    if missing.any():
        sub = df.loc[missing, ["profile", "task_id", "started_at", "trial_path"]].copy()
        sub["started_at"] = sub["started_at"].fillna("")
        sub = sub.sort_values(["profile", "task_id", "started_at", "trial_path"], kind="stable")
        sub["rep"] = sub.groupby(["profile", "task_id"], sort=False).cumcount() + 1
        df = df.copy()
        df.loc[sub.index, "repetition"] = sub["rep"].astype("Int64")
    # Cheap test first: most tables have one run per (profile, task, repetition).
    keys = df[["profile", "task_id", "repetition", "run_id"]]
    if not keys.drop_duplicates().duplicated(["profile", "task_id", "repetition"]).any():
        return df
    cols = ["profile", "task_id", "repetition", "run_id", "started_at", "trial_path"]
    rows = [tuple(None if v is pd.NA else v for v in r) for r in df[cols].astype(object).where(df[cols].notna(), None).itertuples(index=False)]
    rows = [(p, t, int(rep) if rep is not None else 0, run, started or "", path) for p, t, rep, run, started, path in rows]
    new = _separate_runs(rows)
    df = df.copy()
    reps = df["repetition"].astype("Int64").to_numpy(dtype=object)
    for i, rep in new.items():
        reps[i] = rep
    df["repetition"] = pd.array(reps, dtype="Int64")
    return df
