"""The scan record: an unchanged re-run skips the folder walk, and every kind of change is still seen."""

from __future__ import annotations

import json
import os
import time

import pytest

from analysis_lib.ingest import scan as scan_mod
from analysis_lib.ingest.scan import RECORD_FILE, fingerprint, scan
from analysis_lib.layer1 import analyse

from builders import agent_step, small_runs, trajectory, write_trial


@pytest.fixture
def runs(tmp_path):
    return small_runs(tmp_path / "runs")


def _bump(path):
    """Move a file's or folder's mtime on by a second (same-tick writes must not hide a change here)."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _recorded_scan(runs, cache):
    first = scan(runs, record_dir=cache)
    scan_mod.save_record(cache, first)
    return scan(runs, record_dir=cache)


def test_unchanged_runs_are_rescanned_from_the_record_without_walking(runs, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    fresh = scan(runs, record_dir=cache)
    scan_mod.save_record(cache, fresh)
    assert (cache / RECORD_FILE).is_file()

    def no_walk(*a, **k):
        raise AssertionError("discovery ran although nothing changed")

    monkeypatch.setattr(scan_mod, "discover", no_walk)
    again = scan(runs, record_dir=cache)
    assert not again.changed and again.complete
    assert again.keys == fresh.keys
    assert [fp.text for fp in again.fingerprints] == [fp.text for fp in fresh.fingerprints]
    assert again.digest("x") == fresh.digest("x")


def test_each_kind_of_change_is_seen(runs, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    base = _recorded_scan(runs, cache)
    trial = next(runs.glob("*__base/task-1"))

    # A file rewritten in place (same size): its mtime moves, that trial's fingerprint changes, no walk.
    reward = trial / "verifier" / "reward.txt"
    reward.write_text("1\n")
    _bump(reward)
    s = scan(runs, record_dir=cache)
    changed = [k for k, a, b in zip(s.keys, s.fingerprints, base.fingerprints) if a.text != b.text]
    assert changed == [k for k in s.keys if str(trial) in k] and s.changed

    # A file that appears in a folder the trial already had (a late CTRF report).
    scan_mod.save_record(cache, s)
    (trial / "verifier" / "ctrf.json").write_text(json.dumps({"results": {"tests": []}}))
    _bump(trial / "verifier")
    s2 = scan(runs, record_dir=cache)
    fp = s2.fingerprints[s2.keys.index(changed[0])]
    assert fp.isfile("verifier/ctrf.json") and fp.text != s.fingerprints[s.keys.index(changed[0])].text

    # A new trial folder: its run folder's listing changed, so discovery walks again and finds it.
    scan_mod.save_record(cache, s2)
    write_trial(runs, trial.parent.name, "task-new", traj=trajectory([agent_step(1)]))
    _bump(trial.parent)
    s3 = scan(runs, record_dir=cache)
    assert len(s3.sources) == len(s2.sources) + 1 and s3.looked is not None

    # A trial folder removed.
    scan_mod.save_record(cache, s3)
    for p in sorted((runs / trial.parent.name / "task-new").rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    (runs / trial.parent.name / "task-new").rmdir()
    _bump(trial.parent)
    assert len(scan(runs, record_dir=cache).sources) == len(s2.sources)


def test_a_loose_file_that_changes_kind_is_rediscovered(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    loose = runs / "session.json"
    loose.write_text(json.dumps(trajectory([agent_step(1)])))
    cache = tmp_path / "cache"
    cache.mkdir()
    first = _recorded_scan(runs, cache)
    assert [s.kind for s in first.sources] == ["atif_file"]
    loose.write_text(json.dumps({"not": "a trajectory"}))
    _bump(loose)
    assert scan(runs, record_dir=cache).sources == []


def test_a_damaged_or_foreign_record_only_means_a_walk(runs, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    good = _recorded_scan(runs, cache)
    (cache / RECORD_FILE).write_bytes(b'{"format": 1, "truncat')
    assert scan(runs, record_dir=cache).keys == good.keys
    other = small_runs(tmp_path / "other", n_tasks=1)
    scan_mod.save_record(cache, scan(other, record_dir=cache))
    assert scan(runs, record_dir=cache).keys == good.keys  # a record of another folder is not used


def test_fingerprint_of_a_trial_folder_covers_its_folders_and_files(runs):
    trial = next(runs.glob("*__mcp/task-0"))
    from analysis_lib.ingest.discover import discover

    src = next(s for s in discover(runs)[0] if s.path == str(trial))
    fp = fingerprint(src)
    assert fp.entries == ("", "agent", "agent/trajectory.json", "verifier", "verifier/reward.txt")
    assert fp.isfile("agent/trajectory.json") and fp.isdir("verifier") and not fp.isfile("verifier")


def test_warm_analysis_after_an_edit_reads_only_the_changed_trial(runs, tmp_path):
    out = tmp_path / "out"
    analyse(runs, out)
    warm = analyse(runs, out)
    assert warm.cache_hits == 6
    traj = next(runs.glob("*__mcp/task-2/agent/trajectory.json"))
    doc = json.loads(traj.read_text())
    doc["steps"][1]["tool_calls"].append({"tool_call_id": "extra", "function_name": "Grep", "arguments": {"pattern": "x"}})
    time.sleep(0.01)
    traj.write_text(json.dumps(doc))
    again = analyse(runs, out)
    assert again.cache_hits == 5
    row = again.metrics[(again.metrics.profile == "mcp") & (again.metrics.task_id == "task-2")].iloc[0]
    assert row["tool_calls_count"] == 4


def test_partly_cached_analysis_equals_a_cold_one(runs, tmp_path):
    """Rows from the per-trial cache and newly read rows make the same table, in the same order, as a cold run."""
    import pandas as pd

    out = tmp_path / "out"
    analyse(runs, out)
    reward = next(runs.glob("*__base/task-0/verifier/reward.txt"))
    reward.write_text("0\n" if reward.read_text().strip() == "1" else "1\n")
    _bump(reward)
    partial = analyse(runs, out)
    assert partial.cache_hits == 5
    cold = analyse(runs, tmp_path / "cold", cache=False)
    pd.testing.assert_frame_equal(partial.metrics, cold.metrics)
    pd.testing.assert_frame_equal(partial.summary, cold.summary)


@pytest.mark.parametrize("content", [b"[1, 2, 3]", b'{"format": 5, "code": null}', b"\xff\xfe not json", b""])
def test_any_damaged_record_means_a_walk_not_an_error(runs, tmp_path, content):
    cache = tmp_path / "cache"
    cache.mkdir()
    good = _recorded_scan(runs, cache)
    (cache / RECORD_FILE).write_bytes(content)
    assert scan(runs, record_dir=cache).keys == good.keys


def test_a_fallback_file_is_skipped_while_its_first_choice_exists_and_read_once_it_is_gone(tmp_path):
    """reward.json is read only without reward.txt (and claude-code.txt only without trajectory.json):
    the fingerprint leaves it out then, and removing the first choice still brings it in."""
    runs = tmp_path / "runs"
    trial = write_trial(runs, "2026-01-01__10-00-00__base", "task-a", traj=trajectory([agent_step(1)]), reward="0\n")
    (trial / "verifier" / "reward.json").write_text('{"reward": 1.0}')
    (trial / "agent" / "claude-code.txt").write_text("")
    src = next(s for s in scan(runs).sources)
    assert fingerprint(src).entries == ("", "agent", "agent/trajectory.json", "verifier", "verifier/reward.txt")
    out = tmp_path / "out"
    assert analyse(runs, out).metrics["reward"].tolist() == [0.0]
    (trial / "verifier" / "reward.txt").unlink()
    _bump(trial / "verifier")
    assert "verifier/reward.json" in fingerprint(src).entries
    again = analyse(runs, out)
    assert again.metrics["reward"].tolist() == [1.0] and again.cache_hits == 0


def test_a_record_whose_listing_was_altered_means_a_walk(runs, tmp_path):
    """An unchanged re-run leaves the record's list of sources unparsed; its checksum still catches damage."""
    cache = tmp_path / "cache"
    cache.mkdir()
    good = _recorded_scan(runs, cache)
    rec = json.loads((cache / RECORD_FILE).read_text())
    rec["listing"] = rec["listing"].replace("task-1", "task-9")
    (cache / RECORD_FILE).write_text(json.dumps(rec))
    again = scan(runs, record_dir=cache)
    assert again.looked is not None and again.changed  # walked again, not read from the record
    assert again.keys == good.keys
