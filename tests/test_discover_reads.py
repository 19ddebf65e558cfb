"""What discovery and a sample read: a loose file's first bytes (and nothing, when an earlier run's answer
for it still holds), and under ``--limit`` only the sampled trials, for the metrics and the LLM analyses."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path

import pytest

from analysis_lib.ingest import discover as disc
from analysis_lib.ingest import load
from analysis_lib.metrics import trials_table as tt

PATCH = "x" * 2_000_000  # a 2 MB patch in the trajectory: what a full parse would have to read


def _mini(i: int) -> dict:
    return {"info": {"exit_status": "Submitted", "submission": PATCH, "mini_version": "1.13.4",
                     "model_stats": {"instance_cost": 0.01, "api_calls": 1},
                     "config": {"model": {"model_name": "claude-sonnet-4-5-20250929"}}},
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": f"task {i}"},
                         {"role": "assistant", "content": "```bash\ncat a.py\n```"},
                         {"role": "user", "content": "<returncode>0</returncode>\n<output></output>"}],
            "trajectory_format": "mini-swe-agent-1"}


def _swe(i: int) -> dict:
    return {"environment": "swe_main",
            "trajectory": [{"response": "r", "thought": "t", "action": "ls", "observation": "a.py", "state": "{}"}],
            "history": [{"role": "user", "content": f"task {i}"}], "info": {"submission": PATCH, "model_stats": {}}}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    for i in range(6):
        (root / f"task-{i}.traj.json").write_text(json.dumps(_mini(i)))
        (root / f"inst-{i}.traj").write_text(json.dumps(_swe(i)))
    return root


@pytest.fixture
def bytes_read(monkeypatch) -> dict[str, int]:
    """Bytes read per file name while the test runs (every ``open`` in this process)."""
    counts: dict[str, int] = {}
    real_open = builtins.open

    class Counting:
        def __init__(self, fh, name):
            self._fh, self._name = fh, name

        def read(self, *a):
            data = self._fh.read(*a)
            counts[self._name] = counts.get(self._name, 0) + len(data)
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

        def __getattr__(self, name):
            return getattr(self._fh, name)

    def counting_open(file, mode="r", *a, **kw):
        fh = real_open(file, mode, *a, **kw)
        return Counting(fh, os.path.basename(str(file))) if "b" in mode and isinstance(file, (str, os.PathLike)) else fh

    monkeypatch.setattr(builtins, "open", counting_open)
    return counts


def test_discovery_tells_a_trajectory_from_its_first_and_last_bytes(runs, bytes_read):
    sources, errors = disc.discover(runs)
    assert not errors
    assert sorted((s.kind, Path(s.path).name) for s in sources)[:2] == [("mini_swe_agent", "task-0.traj.json"),
                                                                         ("mini_swe_agent", "task-1.traj.json")]
    assert [s.kind for s in sources].count("swe_agent") == 6
    size = (runs / "task-0.traj.json").stat().st_size
    assert size > 2_000_000
    assert max(bytes_read.values()) <= disc.HEAD_BYTES + disc.TAIL_BYTES  # of 2 MB files, first and last bytes only


def test_an_unchanged_file_is_not_opened_again_to_tell_its_kind(runs, bytes_read):
    kinds: dict = {}
    first, _ = disc.discover(runs, kinds=kinds)
    assert len(kinds) == 12
    bytes_read.clear()
    again, _ = disc.discover(runs, kinds=kinds)
    assert [(s.kind, s.path) for s in again] == [(s.kind, s.path) for s in first]
    assert bytes_read == {}  # every answer came from the earlier run's, sizes and mtimes unchanged
    (runs / "inst-3.traj").write_text(json.dumps({"trajectory": "not a list"}))  # no longer a SWE-agent file
    third, errors = disc.discover(runs, kinds=kinds)
    assert set(bytes_read) == {"inst-3.traj"}
    assert len(third) == 11 and [Path(e.path).name for e in errors] == ["inst-3.traj"]  # a warning row names it


def test_the_trials_cache_keeps_discovery_answers_for_the_next_run(runs, tmp_path, bytes_read):
    tt.trials_table(runs, cache_dir=tmp_path / "cache", workers=1)
    bytes_read.clear()
    warm = tt.trials_table(runs, cache_dir=tmp_path / "cache", workers=1)
    assert warm.cache_hits == 12 and len(warm.frame) == 12
    assert set(bytes_read) <= {"trials_cache.json"}  # no run file opened at all


def test_limit_samples_mini_swe_agent_and_swe_agent_files_before_reading_them(runs, monkeypatch):
    read: list[str] = []
    real = tt.source_rows

    def counting(src, config=tt.DEFAULT_CONFIG):
        read.append(src.path)
        return real(src, config)

    monkeypatch.setattr(tt, "source_rows", counting)
    table = tt.trials_table(runs, limit=3, seed=1, workers=1)
    assert len(table.frame) == 3 and len(read) == 3  # 3 of 12 files read, not 12
    again = tt.trials_table(runs, limit=3, seed=1, workers=1)
    assert list(again.frame["trial_path"]) == list(table.frame["trial_path"])  # the same seeded sample


def test_the_llm_analyses_read_only_the_sampled_trials(runs, monkeypatch):
    read: list[str] = []
    real = load.read_source

    def counting(src):
        read.append(Path(src.path).name)
        return real(src)

    monkeypatch.setattr(load, "read_source", counting)
    wanted = [str(runs / "task-2.traj.json"), str(runs / "inst-4.traj")]
    trials, errors = load.load_trials(runs, wanted)
    assert not errors
    assert sorted(read) == ["inst-4.traj", "task-2.traj.json"]
    assert sorted(Path(t.trial_path).name for t in trials) == ["inst-4.traj", "task-2.traj.json"]


@pytest.mark.slow  # the LLM layer imports litellm and counts the prompts' tokens (about 20 s)
def test_the_command_line_reads_a_limited_sample_once_for_each_layer(tmp_path, monkeypatch, run_cli):
    """``--limit 2`` with the LLM analyses (``--estimate-cost``: priced offline, nothing sent): the metrics read the
    2 sampled trials, and the LLM analyses those 2 again, not the 6 of the runs folder."""
    from builders import small_runs

    runs = small_runs(tmp_path / "runs")  # 2 profiles x 3 tasks
    layer2: list[str] = []
    real = load.read_source

    def counting(src):
        layer2.append(src.path)
        return real(src)

    monkeypatch.setattr(load, "read_source", counting)
    proc = run_cli(runs, "--limit", "2", "--seed", "3", "--estimate-cost", "--model", "openai/gpt-4o-mini", "-q",
                   "-o", tmp_path / "out", env={"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""})
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "out" / "metrics_detail.csv").exists()  # an estimate writes only the estimate
    listed = run_cli(runs, "--limit", "2", "--seed", "3", "--list", "-q")  # the same seeded sample, printed
    assert listed.returncode == 0, listed.stderr
    sampled = [line.split()[-1] for line in listed.stdout.splitlines() if "__" in line]  # the path column
    assert len(sampled) == 2, listed.stdout
    assert len(layer2) == 2 and sorted(any(s in p for s in sampled) for p in layer2) == [True, True]
    assert len({s for s in sampled for p in layer2 if s in p}) == 2  # each sampled trial read once
