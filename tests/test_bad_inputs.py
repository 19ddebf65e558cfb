"""Bad input: each problem gives one errors.csv row and one stderr line naming the file; the rest completes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import agent_step, small_runs, trajectory, write_trial

from analysis_lib.core.fileio import atomic_write_text, read_json
from analysis_lib.core.trial import InputError

GOOD_TRIALS = 6  # small_runs: 2 profiles x 3 tasks


def _subprocess(runs: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``python -m analysis_lib`` as a user runs it (the huge-observation test: its memory goes with the process)."""
    return subprocess.run([sys.executable, "-m", "analysis_lib", str(runs), "--no-llm", "-q", "-o", str(out), *extra],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def analyse_cli(run_cli):
    """``python -m analysis_lib RUNS --no-llm -q -o OUT ...`` in this process (the conftest's ``run_cli``)."""
    return lambda runs, out, *extra: run_cli(runs, "--no-llm", "-q", "-o", out, *extra)


def _errors(out: Path) -> list[dict]:
    with open(out / "errors.csv", newline="") as fh:
        return list(csv.DictReader(fh))


BAD_TRAJECTORIES = {
    "malformed": (b'{"schema_version": "ATIF-v1.6", "steps": [ oops ]}', "malformed JSON"),
    "truncated": (json.dumps(trajectory([agent_step(1)])).encode()[:-25], "truncated JSON"),
    "unknown-major": (json.dumps(trajectory([agent_step(1)], version="ATIF-v2.0")).encode(), "unknown ATIF major version"),
    "not-atif": (json.dumps([{"episode": 1, "prompt": "p", "response": "r"}]).encode(), "not ATIF"),
    "empty": (b"", "empty file"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAJECTORIES))
def test_bad_trajectory_gives_one_error_row_and_the_rest_completes(tmp_path, case, analyse_cli):
    runs = small_runs(tmp_path / "runs")
    raw, words = BAD_TRAJECTORIES[case]
    write_trial(runs, "2026-01-01__10-00-00__base", "broken-task", raw_trajectory=raw)
    proc = analyse_cli(runs, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in _errors(tmp_path / "out") if r["severity"] == "error"]
    assert len(rows) == 1 and words in rows[0]["message"]
    assert rows[0]["path"] == os.path.join("2026-01-01__10-00-00__base", "broken-task", "agent", "trajectory.json")
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "broken-task" in lines[0] and words in lines[0]
    # The good trials and the broken trial's outcome (reward.txt) are still analysed.
    with open(tmp_path / "out" / "metrics_detail.csv") as fh:
        assert len(list(csv.DictReader(fh))) == GOOD_TRIALS + 1
    assert "analysed 7 trials" in proc.stderr


def test_non_utf8_bytes_are_replaced_not_fatal(tmp_path):
    doc = json.dumps(trajectory([agent_step(1, [("Bash", {"command": "cat x"})], results=[{"content": "OUT"}])]))
    raw = doc.encode().replace(b"OUT", b"\xff\xfe bad \xc3")
    p = tmp_path / "t.json"
    p.write_bytes(raw)
    obj = read_json(p)
    assert "\ufffd" in obj["steps"][1]["observation"]["results"][0]["content"]


def test_non_utf8_trajectory_is_read_with_a_warning_row(tmp_path, analyse_cli):
    runs = small_runs(tmp_path / "runs")
    doc = json.dumps(trajectory([agent_step(1, [("Bash", {"command": "cat x"})], results=[{"content": "OUT"}])]))
    write_trial(runs, "2026-01-01__10-00-00__base", "latin1-task", raw_trajectory=doc.encode().replace(b"OUT", b"caf\xe9"))
    proc = analyse_cli(runs, tmp_path / "out")
    assert proc.returncode == 0
    rows = [r for r in _errors(tmp_path / "out") if "latin1-task" in r["path"]]
    assert len(rows) == 1 and rows[0]["severity"] == "warning" and "invalid UTF-8" in rows[0]["message"]
    assert any("latin1-task" in line and "invalid UTF-8" in line for line in proc.stderr.splitlines())
    assert "analysed 7 trials" in proc.stderr


def test_missing_files_and_empty_folders(tmp_path, analyse_cli):
    runs = small_runs(tmp_path / "runs")
    (runs / "2026-01-01__10-00-00__base" / "empty-task" / "agent").mkdir(parents=True)
    (runs / "empty-run-folder").mkdir()
    proc = analyse_cli(runs, tmp_path / "out")
    assert proc.returncode == 0
    rows = _errors(tmp_path / "out")
    assert any("empty-task" in r["path"] and "holds no result.json" in r["message"] for r in rows)
    empty = analyse_cli(tmp_path / "nothing-here", tmp_path / "out2")
    assert empty.returncode == 1 and "no such file or folder" in empty.stderr
    (tmp_path / "empty").mkdir()
    assert "no trials found" in analyse_cli(tmp_path / "empty", tmp_path / "out3").stderr


def test_symlink_loop_is_reported_once(tmp_path, analyse_cli):
    runs = small_runs(tmp_path / "runs")
    loop = runs / "2026-01-01__10-00-00__base" / "loop"
    loop.mkdir()
    os.symlink("..", loop / "up")
    proc = analyse_cli(runs, tmp_path / "out")
    assert proc.returncode == 0
    rows = [r for r in _errors(tmp_path / "out") if "symlink loop" in r["message"]]
    assert len(rows) == 1
    assert "analysed 6 trials" in proc.stderr


@pytest.mark.slow
def test_200mb_observation_is_truncated_with_a_warning(tmp_path):
    runs = small_runs(tmp_path / "runs")
    huge = "x" * (200 * 1024 * 1024)
    doc = trajectory([agent_step(1, [("Bash", {"command": "cat big.log"})], results=[{"content": huge}])])
    write_trial(runs, "2026-01-01__10-00-00__base", "huge-task", raw_trajectory=json.dumps(doc).encode())
    del huge, doc
    proc = _subprocess(runs, tmp_path / "out", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    rows = _errors(tmp_path / "out")
    assert any(r["severity"] == "warning" and "huge-task" in r["path"] and "truncated" in r["message"] for r in rows)
    assert "analysed 7 trials" in proc.stderr


def test_outputs_are_atomic(tmp_path):
    target = tmp_path / "metrics_detail.csv"
    atomic_write_text(target, "old\n")

    class Boom(str):
        def encode(self, *a, **k):
            raise RuntimeError("crash while writing")

    with pytest.raises(RuntimeError):
        atomic_write_text(target, Boom("new"))
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics_detail.csv"]  # no temp file left behind


def test_read_json_errors_name_the_file(tmp_path):
    with pytest.raises(InputError) as exc:
        read_json(tmp_path / "missing.json")
    assert "missing.json" in str(exc.value) and "file not found" in str(exc.value)
