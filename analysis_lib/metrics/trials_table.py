"""The trials table: one row of Layer 1 metrics per trial, the table written as ``metrics_detail.csv``.

The path from a runs folder to the table:

1. discovery finds the sources (trial folders, files holding trials): :func:`analysis_lib.ingest.discover.discover`;
2. each source is read into trials (:func:`analysis_lib.ingest.read.read_source`) and each trial
   becomes its row (:func:`trial_row`: the Layer 1 metrics and the CodeCanvas columns), in a pool
   of processes that send back rows, never parsed trajectories, so that memory stays flat in the
   number of trials;
3. the rows of each source are cached (:class:`TrialCache`), valid while the source's fingerprint
   (:mod:`analysis_lib.ingest.fingerprint`), the code and the metrics configuration are unchanged:
   a changed trial is read again alone, an unchanged re-run reads nothing;
4. :func:`table_of_rows` numbers repetitions, sorts and types the columns; :func:`trials_table`
   then applies the selection (profiles, tasks, outcome, a seeded sample).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import random
import signal
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd
from tqdm.auto import tqdm

from ..codecanvas.metrics import codecanvas_metrics
from ..core import outputs as files
from ..core.fileio import atomic_write_bytes
from ..core.parent_death import die_with_parent
from ..core.trial import IngestError, Trial, trial_record
from ..core.version import __version__
from ..ingest.discover import TrialSource, discover
from ..ingest.fingerprint import fingerprint, runs_fingerprint
from ..ingest.load import repetition_numbers
from ..ingest.provenance import is_simulated
from ..ingest.read import read_source
from .actions import actions, encode_actions
from .trial_metrics import DEFAULT_CONFIG, MetricsConfig, column_kind, metrics_frame, trial_metrics

SORT_COLUMNS = ["profile", "task_id", "repetition", "run_id"]
# Sources that hold exactly one trial: a --limit sample of them is drawn before anything is read.
ONE_TRIAL_KINDS = frozenset({"trial_dir", "atif_file", "transcript", "mini_swe_agent", "swe_agent"})
CACHE_FILE = files.TRIALS_CACHE
# Below this many sources to read, starting processes costs more than it saves.
MIN_PARALLEL = 8

Rows = tuple[list[dict[str, Any]], list[IngestError]]  # the rows of one source's trials, and its errors
# Rows and the runs folder in; the placed rows, a warning per row left out, and the reruns met out.
Placement = Callable[[list[dict[str, Any]], str], tuple[list[dict[str, Any]], list[IngestError], list[dict[str, Any]]]]


@dataclass
class TrialsTable:
    """The trials table and what was met building it (errors name files as found, not relative)."""

    frame: pd.DataFrame
    errors: list[IngestError]
    n_sources: int = 0
    cache_hits: int = 0
    simulated: bool = False
    # Trials of one arm, task and repetition run more than once, and which were kept, as the placement listed them
    # (trial paths relative to the runs folder); empty without a placement.
    reruns: list[dict[str, Any]] = field(default_factory=list)
    # The runs folder's fingerprint, taken before reading (ingest.fingerprint.runs_fingerprint).
    inputs: dict[str, str] = field(default_factory=dict)


def trial_row(trial: Trial, config: MetricsConfig = DEFAULT_CONFIG) -> dict[str, Any]:
    """The row of one trial: every Layer 1 metric, the CodeCanvas columns (empty without CodeCanvas state),
    what the study design and its audit read (:data:`RECORD_COLUMNS`), and its actions (:data:`ACTIONS_COLUMN`,
    kept in memory for the divergence table, not written to ``metrics_detail.csv``)."""
    row = trial_metrics(trial, config)
    row.update(codecanvas_metrics(trial))
    row.update(record_columns(trial))
    row[ACTIONS_COLUMN] = encode_actions(actions(trial.trajectory, frozenset(config.mcp_tools)))
    return row


# A trial's action sequence (analysis_lib.metrics.actions), carried with its row so that nothing reads the runs twice.
ACTIONS_COLUMN = "actions"
# The trial as its source names and configures it, before any study design relabels it.
RECORD_COLUMNS = ["task_name", "trial_name", "run_config", "dataset_version", "finished_at", "never_reached_model",
                  "instruction_chars", "agent_timeout_sec"]


def record_columns(trial: Trial) -> dict[str, Any]:
    """The source's own task and trial names, the configuration the trial shares with its arm (JSON of dotted
    keys, :func:`analysis_lib.ingest.harbor.run_config`), its dataset, its end, why it never reached a model, and
    what the design audit compares between arms beyond the configuration: the length of the instruction the agent
    was given and the agent's time limit (:mod:`analysis_lib.ingest.read`)."""
    meta = trial.metadata
    record = trial_record(meta.get("config"), agent_name=meta.get("agent_name"), model_name=meta.get("model_name"))
    finished = trial.timing.finished_at
    return {
        "task_name": meta.get("task_name") or trial.task_id,
        "trial_name": meta.get("trial_name"),
        "run_config": orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode(),
        "dataset_version": meta.get("dataset") or meta.get("task_dataset"),
        "finished_at": finished.isoformat() if finished else None,
        "never_reached_model": meta.get("never_reached_model"),
        "instruction_chars": meta.get("instruction_chars"),
        "agent_timeout_sec": meta.get("agent_timeout_sec"),
    }


def source_rows(src: TrialSource, config: MetricsConfig = DEFAULT_CONFIG) -> Rows:
    """Read one source and return the rows of its trials with the errors met (run in a worker process)."""
    trials, errors = read_source(src)
    rows = []
    for t in trials:
        try:
            rows.append(trial_row(t, config))
        except Exception as exc:  # one bad trial must not stop the rest
            errors.append(IngestError(t.trial_path, "metrics", f"{type(exc).__name__}: {str(exc)[:200]}"))
    return rows, errors


def trials_table(
    runs_dir: str | os.PathLike,
    *,
    tasks: list[str] | None = None,
    profiles: list[str] | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    config: MetricsConfig = DEFAULT_CONFIG,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = False,
    place: Placement | None = None,
) -> TrialsTable:
    """The trials table of ``runs_dir``: one row per trial, trial paths relative to the runs folder.

    ``outcome`` is ``"succeeded"``, ``"failed"`` or None; ``limit`` draws a seeded random sample of
    that many trials. ``cache_dir``: where the per-source cache lives (None: no cache).
    ``workers``: processes reading in parallel (default: one per CPU; 1 reads in this process).
    ``place``: puts the rows in the arms of a study (``profile`` is then the arm; see
    :func:`analysis_lib.study.placement.placement`); the study's success rule must be the one of ``config``.
    """
    if outcome not in (None, "succeeded", "failed"):
        raise ValueError(f"outcome must be 'succeeded', 'failed' or None, not {outcome!r}")
    runs_dir = os.fspath(runs_dir)
    cache = TrialCache(cache_dir, config) if cache_dir is not None else None
    # Loose files unchanged since the last run are not opened again to tell their kind.
    sources, errors = discover(runs_dir, kinds=cache.kinds if cache is not None else None)
    # Under a placement, profiles and tasks are known only after reading: no selection of sources by them.
    placed = place is not None
    selected = _select(sources, None if placed else tasks, None if placed else profiles, outcome,
                       None if placed else limit, seed)
    results, hits, taken = _read_sources(selected, config, cache, workers, progress)
    # Each source's taken before it was read: the analysis compares the whole again before it commits its outputs.
    inputs = runs_fingerprint(runs_dir, sources, known=taken)
    rows = [row for rows_of_source, _ in results for row in rows_of_source]
    errors += [e for _, errs in results for e in errs]
    reruns: list[dict[str, Any]] = []
    if place is not None:
        # A study file that cannot work raises here, before the cache (or anything else) is written.
        rows, place_errors, reruns = place(rows, _root_dir(runs_dir))
        errors += place_errors
        reruns = [{**r, "trial_path": relative_path(r["trial_path"], _root_dir(runs_dir))} for r in reruns]
    if cache is not None:
        cache.save(keep={source_key(s) for s in sources})  # what a narrower selection skipped stays cached
    df = table_of_rows(rows, root_dir=_root_dir(runs_dir))
    if profiles:
        df = df[df["profile"].isin(profiles)]
    if tasks:
        df = df[df["task_id"].isin(tasks)]
    if outcome == "succeeded":
        df = df[df["success"] == True]  # noqa: E712 (nullable column)
    elif outcome == "failed":
        df = df[df["success"] == False]  # noqa: E712
    if limit is not None and len(df) > limit:
        idx = np.sort(np.random.default_rng(seed).choice(len(df), size=limit, replace=False))
        df = df.iloc[idx]
    df = df.reset_index(drop=True)
    simulated = is_simulated(runs_dir, [s.path for s in sources if s.kind == "trial_dir"])
    df["simulated"] = simulated  # every table made from simulated runs says so, row by row
    return TrialsTable(df, errors, len(selected), hits, simulated, reruns, inputs)


def table_of_rows(rows: list[dict[str, Any]], root_dir: str | None = None) -> pd.DataFrame:
    """The trials table of metric rows: repetitions numbered, sorted by profile, task, repetition and run
    (ties in the given order), trial paths relative to ``root_dir`` when given."""
    keys = [(r["profile"], r["task_id"], r["repetition"], r["run_id"], r["started_at"], r["trial_path"]) for r in rows]
    rows = [{**r, "repetition": rep, "trial_path": relative_path(r["trial_path"], root_dir) if root_dir is not None else r["trial_path"]}
            for r, rep in zip(rows, repetition_numbers(keys), strict=True)]
    rows.sort(key=lambda r: tuple((1, "") if r[c] is None else (0, r[c]) for c in SORT_COLUMNS))  # missing last
    return metrics_frame(rows, sort=False)


def table_of_trials(trials: Iterable[Trial], config: MetricsConfig = DEFAULT_CONFIG) -> pd.DataFrame:
    """The trials table of trials already loaded (paths as the trials give them, no ``simulated`` column)."""
    return table_of_rows([trial_row(t, config) for t in trials])


def _select(sources: list[TrialSource], tasks, profiles, outcome, limit, seed) -> list[TrialSource]:
    """The sources that may hold selected trials (profile and task are known before reading for some)."""
    keep = [
        s for s in sources
        if (not profiles or s.profile is None or s.profile in profiles)
        and (not tasks or s.task_id is None or s.task_id in tasks)
    ]
    # A sample of one-trial sources is drawn before reading; otherwise from the rows, after.
    single = all(s.kind in ONE_TRIAL_KINDS for s in keep)
    if limit is not None and single and outcome is None and len(keep) > limit:
        keep = sorted(random.Random(seed).sample(keep, limit), key=lambda s: (s.run_id, s.task_id or "", s.path))
    return keep


def _read_sources(sources: list[TrialSource], config: MetricsConfig, cache: TrialCache | None, workers: int | None,
                  progress: bool) -> tuple[list[Rows], int, dict[tuple[str, str], str]]:
    """The rows and errors of every source, in order, from the cache or read; the number of cache hits; and each
    source's fingerprint (by kind and path), taken before it was read."""
    results: list[Rows | None] = [None] * len(sources)
    taken: dict[tuple[str, str], str] = {}
    if cache is not None:
        # Only what the cache holds is fingerprinted here; the others are fingerprinted by their reader, in parallel.
        for i, s in enumerate(sources):
            key = source_key(s)
            if key in cache.entries:
                taken[s.kind, s.path] = fp = fingerprint(s)
                results[i] = cache.get(key, fp)
    todo = [i for i, res in enumerate(results) if res is None]
    for i, (fp, res) in zip(todo, _read_all([sources[i] for i in todo], config, workers, progress), strict=True):
        results[i] = res
        taken[sources[i].kind, sources[i].path] = fp
        if cache is not None:
            cache.put(source_key(sources[i]), fp, res)
    return [res for res in results if res is not None], len(sources) - len(todo), taken


def _read_one(src: TrialSource, config: MetricsConfig) -> tuple[str, Rows]:
    """:func:`source_rows` of ``src`` with its fingerprint, taken before reading (a file changed while it is read
    leaves a fingerprint that no longer matches)."""
    return fingerprint(src), source_rows(src, config)


def _read_all(sources: list[TrialSource], config: MetricsConfig, workers: int | None, progress: bool
              ) -> list[tuple[str, Rows]]:
    """:func:`_read_one` of every source, in order: in this process, or in a process pool when there are enough.

    A worker that dies (killed, out of memory) costs time, not trials: what it left is read here.
    """
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    read = functools.partial(_read_one, config=config)
    out: list[tuple[str, Rows]] = []
    if n_workers <= 1 or len(sources) < MIN_PARALLEL:
        return _collect(map(read, sources), len(sources), progress, out)
    n_workers = min(n_workers, len(sources))
    # Chunks of a few dozen sources: few round trips, yet the work stays balanced to the end.
    chunksize = max(1, min(32, len(sources) // (4 * n_workers)))
    # Forked workers inherit this process's objects (pandas...). Frozen, they are not walked by the workers'
    # garbage collector: measured, the workers then spend a quarter less CPU time (0.31 s against 0.40 s for
    # 300 trials of 200 KB).
    gc.freeze()
    try:
        # Workers die with this process, even when it is killed (kill -9): none is left reading for minutes.
        with ProcessPoolExecutor(n_workers, initializer=_reader_worker, initargs=(os.getpid(),)) as pool:
            # map() starts the workers before the progress bar starts its thread (forking a threaded process is unsafe).
            return _collect(pool.map(read, sources, chunksize=chunksize), len(sources), progress, out)
    except BrokenProcessPool as exc:
        print(f"warning: a worker process died ({exc}); reading the remaining {len(sources) - len(out)} sources "
              "in this process", file=sys.stderr)
        return _collect(map(read, sources[len(out):]), len(sources) - len(out), progress, out)
    finally:
        gc.unfreeze()


def _reader_worker(parent_pid: int) -> None:
    """Set up a reader worker: it dies with the analysis, even by kill -9, and leaves Ctrl-C to it. A terminal's
    Ctrl-C reaches every process of the group; a worker interrupted inside the pool's protocol left the analysis
    waiting for it forever, while the analysis, interrupted alone, lets the workers end their chunk and stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(signal.SIGKILL, parent_pid)
    # A trajectory allocates some 100,000 short-lived objects: collecting the young generation every 50,000
    # allocations instead of 700 saves 4-5 % of a reader's CPU (1.40 -> 1.33 ms a trial, measured); cycles are still
    # collected.
    gc.set_threshold(50_000, 20, 20)


def _collect(results: Iterable[tuple[str, Rows]], total: int, progress: bool, out: list[tuple[str, Rows]]
             ) -> list[tuple[str, Rows]]:
    """Append ``results`` to ``out`` as they come, with a progress bar when asked and worth it."""
    bar = None
    if progress and total >= 2:
        bar = tqdm(total=total, desc="reading trials", unit="trial", file=sys.stderr, leave=False)
    try:
        for res in results:
            out.append(res)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out


# --------------------------------------------------------------------------- the per-source cache

def source_key(src: TrialSource) -> str:
    """What identifies a source in the cache: its kind, path and what discovery said of it."""
    return f"{src.kind}|{src.path}|{src.profile}|{src.repetition}|{src.run_id}"


class TrialCache:
    """The rows and errors of each source read before, valid while its fingerprint, the code and the
    metrics configuration are those of this run. One JSON file; a damaged or foreign one is empty."""

    def __init__(self, cache_dir: str | os.PathLike, config: MetricsConfig) -> None:
        self.path = os.path.join(os.fspath(cache_dir), CACHE_FILE)
        self.tag = cache_tag(config)
        self.entries: dict[str, list] = {}  # source key -> [fingerprint, rows, errors as lists]
        # Discovery's answers: loose file -> [size, mtime_ns, kind, detail] (see ingest.discover.discover).
        self.kinds: dict[str, list] = {}
        self.changed = False
        try:
            with open(self.path, "rb") as fh:
                doc = orjson.loads(fh.read())
            if doc["tag"] == self.tag and isinstance(doc["sources"], dict):
                self.entries = doc["sources"]
                self.kinds = doc["kinds"] if isinstance(doc.get("kinds"), dict) else {}
        except (OSError, ValueError, KeyError, TypeError):
            pass  # no cache yet, or one this run cannot use: every source is read
        self._kinds_read = dict(self.kinds)

    def get(self, key: str, fp: str) -> Rows | None:
        """The cached rows and errors of a source whose fingerprint is ``fp``, else None."""
        try:
            cached_fp, rows, errors = self.entries[key]
            return (rows, [IngestError(*e) for e in errors]) if cached_fp == fp else None
        except (KeyError, TypeError, ValueError):
            return None  # not cached, or a damaged entry: the source is read again

    def put(self, key: str, fp: str, result: Rows) -> None:
        rows, errors = result
        self.entries[key] = [fp, rows, [[e.path, e.stage, e.message, e.severity] for e in errors]]
        self.changed = True

    def save(self, keep: set[str]) -> None:
        """Write the cache when it changed, without the sources no longer found (a cache that cannot be
        written only makes the next run slower: one warning line)."""
        gone = set(self.entries) - keep
        if not (self.changed or gone or self.kinds != self._kinds_read):
            return
        for key in gone:
            del self.entries[key]
        try:
            data = orjson.dumps({"tag": self.tag, "sources": self.entries, "kinds": self.kinds}, option=orjson.OPT_SERIALIZE_NUMPY)
            atomic_write_bytes(self.path, data, durable=False)
        except Exception as exc:
            print(f"warning: {os.path.dirname(self.path)}: trials cache not written ({type(exc).__name__}: {str(exc)[:120]})",
                  file=sys.stderr)


def cache_tag(config: MetricsConfig) -> str:
    """The code version and the metrics configuration: cached rows of another tag are read again."""
    return orjson.dumps([__version__, code_version(), sorted(config.mcp_tools), config.tool_misuse_error_rate,
                         config.infinite_loop_streak, config.budget_exhaustion_tokens, config.premature_stop_steps,
                         config.success_rule]).decode()


# The stages whose code computes a row (the unplaced row: placing it in an arm happens after the cache).
ROW_STAGES = ("core", "ingest", "metrics", "codecanvas")


def code_files() -> list[str]:
    """Every source file of :data:`ROW_STAGES`, in a fixed order."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return sorted(os.path.join(d, f) for stage in ROW_STAGES for d, _, fs in os.walk(os.path.join(root, stage))
                  for f in fs if f.endswith(".py"))


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the code that computes a row: a changed reader or metric definition invalidates cached rows."""
    h = hashlib.sha256()
    for f in code_files():
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- paths in outputs

def _root_dir(runs_dir: str) -> str:
    return runs_dir if os.path.isdir(runs_dir) else os.path.dirname(runs_dir)


def relative_path(path: str, root_dir: str) -> str:
    """A path relative to the runs folder, so that no machine path leaks into outputs."""
    prefix = root_dir.rstrip(os.sep) + os.sep
    if path.startswith(prefix):
        return path[len(prefix):]
    try:
        rel = os.path.relpath(path, root_dir)
    except ValueError:
        return os.path.basename(path)
    return os.path.basename(path) if rel.startswith("..") else rel


def relative_to_runs(path: str, runs_dir: str | os.PathLike) -> str:
    """:func:`relative_path` to the folder of ``runs_dir`` (itself when it is a folder)."""
    return relative_path(path, _root_dir(os.fspath(runs_dir)))


# --------------------------------------------------------------------------- the table as a file

def read_trials_table(path: str | os.PathLike) -> pd.DataFrame:
    """``metrics_detail.csv`` back as the frame it was written from: every column typed as the registry says
    (pass/fail and flags as nullable booleans, metrics as floats, repetitions as integers, names as text), so
    that no reader interprets a ``True`` cell on its own."""
    header = pd.read_csv(path, nrows=0).columns
    dtypes = {c: column_dtype(c) for c in header}
    return pd.read_csv(path, dtype={c: d for c, d in dtypes.items() if d is not None})


# Identity and naming columns read as text (a task id "007" must not become 7).
TEXT_COLUMNS = frozenset({"profile", "task_id", "run_id", "trial_path", "task_name", "trial_name", "source_format",
                          "agent_name", "model_name", "task_dataset", "exception", "token_source", "other_token_source",
                          "dataset_version", "started_at", "finished_at", "run_config", "never_reached_model",
                          "elapsed_source", "configuration", "arm"})


def column_dtype(name: str) -> str | None:
    """The dtype of a column of the trials table (``metrics_detail.csv``) as :func:`metrics_frame` types it; None:
    left to the reader (counts carried beside the metrics)."""
    if name in TEXT_COLUMNS:
        return "object"
    if name in ("simulated", "has_trajectory"):
        return "bool"
    kind = column_kind(name)
    return None if kind == "object" else kind
