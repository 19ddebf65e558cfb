"""CodeCanvas metrics: hand-built states with hand-computed values, broken states, the sample runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analysis_lib import codecanvas as cc
from analysis_lib.core.trial import IngestError, InputError, Step, ToolCall, Trajectory, Trial
from analysis_lib.core.trial import TestResult as _TestResult

# ---------------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------------

HAND_STATE = {
    "version": 1,
    "symbol_files": {
        "pkg.a:f": "src/pkg/a.py",
        "pkg.b:g": "./src/pkg/b.py",  # "./" prefix: same file as the agent's "src/pkg/b.py"
        "pkg.c:h": "/app/src/pkg/c.py",  # absolute container path
        "pkg.d:k": "src/pkg/d.py",
        "tests.test_a:test_f": "tests/test_a.py",
    },
    "evidence": [
        {"id": "E1", "kind": "search", "text": "grep f", "step": 2},
        {"id": "E2", "kind": "read", "text": "read a.py", "step": 3},
        {"id": "E3", "kind": "impact", "text": "impact of f", "step": 4, "png_path": "impact_A1.png"},
        {"id": "E4", "kind": "test", "text": "ran tests", "step": 9},
    ],
    "claims": [
        {"id": "C1", "kind": "hypothesis", "text": "f mishandles None", "evidence_ids": ["E1", "E2"]},
        {"id": "C2", "kind": "finding", "text": "g calls f", "evidence_ids": ["E3"]},
        {"id": "C3", "kind": "question", "text": "does h too?", "evidence_ids": ["E9"]},  # dangling E9
    ],
    "decisions": [
        {"id": "D1", "kind": "plan", "text": "fix f, then check g", "symbol_ids": ["pkg.a:f"], "claim_ids": ["C1"]},
        {"id": "D2", "kind": "mark", "text": "g handled", "symbol_ids": ["pkg.b:g"], "claim_ids": ["C2"]},
        {"id": "D3", "kind": "skip", "text": "h unaffected", "symbol_ids": ["pkg.c:h"], "claim_ids": []},
        {"id": "D4", "kind": "edit", "text": "edit f", "symbol_ids": ["pkg.a:f"], "claim_ids": ["C1"]},
        {"id": "D5", "kind": "plan", "text": "run tests", "symbol_ids": [], "claim_ids": []},
    ],
    "analyses": [
        {"id": "A1", "target": "pkg.a:f", "affected": ["pkg.b:g", "pkg.c:h"], "addressed": ["pkg.b:g"],
         "skipped": ["pkg.c:h"], "png_path": "impact_A1.png"},
        {"id": "A2", "target": "pkg.b:g", "affected": ["pkg.a:f", "ghost:x"], "addressed": ["pkg.a:f"],
         "skipped": [], "png_path": "impact_A2.png"},  # ghost:x has no file: a warning, not a crash
    ],
    "images": {"architecture": "architecture.png", "board": "board.png"},
}


def _call(step: int, name: str, **args) -> ToolCall:
    return ToolCall(step_id=step, name=name, arguments=args)


def _trial(tmp_path: Path, state: dict | str | None, calls: list[ToolCall], tests=None, name="t1", profile="codecanvas") -> Trial:
    tdir = tmp_path / name
    sdir = tdir / "agent" / "sessions" / "codecanvas"
    sdir.mkdir(parents=True)
    if state is not None:
        (sdir / "state.json").write_text(state if isinstance(state, str) else json.dumps(state))
    steps = [Step(step_id=1, source="user", message="fix f")]
    steps += [Step(step_id=c.step_id, source="agent", tool_calls=[c]) for c in calls]
    traj = Trajectory(schema_version="ATIF-v1.6", steps=steps)
    return Trial(profile=profile, task_id="fix-f", repetition=1, run_id="r1", trial_path=str(tdir),
                 source_format="run_layout", trajectory=traj, tests=tests)


HAND_CALLS = [
    _call(2, "Grep", pattern="def f", path="src"),
    _call(3, "Read", file_path="src/pkg/e.py"),  # a read, not an edit
    _call(5, "Edit", file_path="/app/src/pkg/a.py", old_string="x", new_string="y"),
    _call(6, "Write", file_path="./src/pkg/b.py", content="..."),
    _call(7, "Edit", file_path="src/pkg/a.py", old_string="y", new_string="z"),  # same file as step 5
    _call(8, "Bash", command="sed -i 's/x/y/' src/pkg/c.py && pytest -q"),
    _call(9, "Edit", file_path="src/pkg/d.py", old_string="a", new_string="b"),
    _call(10, "Write", file_path="README.md", content="notes"),
]
HAND_TESTS = [
    _TestResult(name="tests/test_a.py::test_f", status="failed"),  # test_a.py -> a.py: in the blast radius
    _TestResult(name="tests/test_d.py::test_k", status="failed"),  # d.py: outside
    _TestResult(name="tests/test_b.py::test_g", status="passed"),  # passed: ignored
    _TestResult(name="test_inline", status="failed", file_path="/app/src/pkg/b.py"),  # b.py: in
]


# ---------------------------------------------------------------------------------------------
# hand-computed metrics
# ---------------------------------------------------------------------------------------------


def test_hand_built_state_metrics(tmp_path):
    trial = _trial(tmp_path, HAND_STATE, HAND_CALLS, HAND_TESTS)
    m = cc.codecanvas_metrics(trial)
    assert list(m) == list(cc.METRIC_COLUMNS)
    # board: 4 evidence, 3 claims (1 hypothesis, 1 finding, 1 question), 5 decisions
    # (2 plans, 1 mark, 1 skip, 1 edit), 2 analyses
    assert (m["evidence_count"], m["claims_count"], m["decisions_count"], m["impact_analyses_count"]) == (4, 3, 5, 2)
    assert (m["hypotheses_count"], m["findings_count"], m["questions_count"]) == (1, 1, 1)
    assert (m["marks_count"], m["skips_count"], m["plans_count"], m["edits_count"]) == (1, 1, 2, 1)
    # blast radius = files of A1 {a (target), b, c} and A2 {b (target), a, ghost: no file}
    #   = {src/pkg/a.py, src/pkg/b.py, /app/src/pkg/c.py}
    # distinct edited files: a (steps 5 and 7), b, c (sed -i), d, README.md = 5
    # in: a, b, c = 3; out: d, README.md = 2; rate 3/5 = 0.6
    assert (m["edits_in_blast_radius"], m["edits_outside_blast_radius"]) == (3, 2)
    assert m["blast_radius_edit_rate"] == pytest.approx(0.6)
    # affected 2 + 2 = 4; addressed 1 + 1 = 2; skipped 1 + 0 = 1; progress (2 + 1) / 4 = 0.75
    assert (m["total_affected_symbols"], m["total_addressed_symbols"], m["total_skipped_symbols"]) == (4, 2, 1)
    assert m["systematic_progress"] == pytest.approx(0.75)
    # failed tests: test_a.py (-> a.py, in), test_d.py (-> d.py, out), test_inline (b.py, in): 2 / 3
    assert (m["failed_tests_in_blast_radius"], m["failed_tests_outside_blast_radius"]) == (2, 1)
    assert m["anticipated_failure_rate"] == pytest.approx(2 / 3)
    # deliberation = 3 claims + 2 plans = 5; density = 3 claims / 4 evidence = 0.75
    assert m["deliberation_depth"] == 5
    assert m["reasoning_density"] == pytest.approx(0.75)
    # score = 0.4 * 0.6 + 0.3 * 2/3 + 0.3 * min(1, 5/3) = 0.24 + 0.2 + 0.3 = 0.74
    assert m["informed_editing_score"] == pytest.approx(0.74)


def test_undefined_rates_are_none_and_count_zero_in_the_score(tmp_path):
    state = {"symbol_files": {"s": "a.py"}, "evidence": [{"id": "E1", "kind": "read"}, {"id": "E2", "kind": "read"}],
             "claims": [{"id": "C1", "kind": "finding", "evidence_ids": ["E1"]}], "decisions": [], "analyses": []}
    trial = _trial(tmp_path, state, [_call(2, "Read", file_path="a.py")], tests=None)
    m = cc.codecanvas_metrics(trial)
    assert m["blast_radius_edit_rate"] is None and (m["edits_in_blast_radius"], m["edits_outside_blast_radius"]) == (0, 0)
    assert m["systematic_progress"] is None  # no affected symbols
    assert m["anticipated_failure_rate"] is None and m["failed_tests_in_blast_radius"] is None  # no test report
    assert m["reasoning_density"] == pytest.approx(0.5)  # 1 claim / 2 evidence
    # only the deliberation term: 0.3 * min(1, 1/3) = 0.1
    assert m["informed_editing_score"] == pytest.approx(0.1)


def test_no_failed_test_gives_zero_counts_and_no_rate(tmp_path):
    trial = _trial(tmp_path, HAND_STATE, HAND_CALLS, [_TestResult(name="tests/test_a.py::t", status="passed")])
    m = cc.codecanvas_metrics(trial)
    assert (m["failed_tests_in_blast_radius"], m["failed_tests_outside_blast_radius"]) == (0, 0)
    assert m["anticipated_failure_rate"] is None
    # 0.4 * 0.6 + 0 + 0.3 * 1 = 0.54
    assert m["informed_editing_score"] == pytest.approx(0.54)


def test_failed_tests_map_by_name_when_the_file_says_nothing(tmp_path):
    # Harbor-style: every test in test_outputs.py; the function name carries the module or symbol
    tests = [
        _TestResult(name="test_outputs.py::test_values_b[2]", status="failed", file_path="test_outputs.py"),  # b.py: in
        _TestResult(name="test_outputs.py::test_h_returns_none", status="failed"),  # symbol pkg.c:h: in
        _TestResult(name="test_outputs.py::test_k_default", status="failed"),  # pkg.d:k is not analysed: out
        _TestResult(name="test_outputs.py::test_outputs_exist", status="failed"),  # "outputs" names nothing: out
    ]
    m = cc.codecanvas_metrics(_trial(tmp_path, HAND_STATE, HAND_CALLS, tests))
    # 2 in, 2 out -> 0.5; score = 0.4 * 0.6 + 0.3 * 0.5 + 0.3 * 1 = 0.24 + 0.15 + 0.3 = 0.69
    assert (m["failed_tests_in_blast_radius"], m["failed_tests_outside_blast_radius"]) == (2, 2)
    assert m["anticipated_failure_rate"] == pytest.approx(0.5)
    assert m["informed_editing_score"] == pytest.approx(0.69)


def test_deliberation_term_is_capped_at_one():
    assert cc.informed_editing_score(1.0, 1.0, 3) == pytest.approx(1.0)
    assert cc.informed_editing_score(1.0, 1.0, 30) == pytest.approx(1.0)
    assert cc.informed_editing_score(None, None, 2) == pytest.approx(0.2)  # 0.3 * 2/3


def test_trial_without_state_gives_all_none(tmp_path):
    trial = _trial(tmp_path, None, HAND_CALLS, HAND_TESTS, profile="text")
    m = cc.codecanvas_metrics(trial)
    assert set(m) == set(cc.METRIC_COLUMNS) and all(v is None for v in m.values())


def test_explicit_state_overrides_the_file(tmp_path):
    trial = _trial(tmp_path, None, HAND_CALLS, HAND_TESTS)
    state = cc.parse_state(HAND_STATE, "mem/state.json")
    assert cc.codecanvas_metrics(trial, state)["informed_editing_score"] == pytest.approx(0.74)


# ---------------------------------------------------------------------------------------------
# paths
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written, expected",
    [
        ("/app/src/pkg/a.py", "src/pkg/a.py"),  # absolute container path -> relative symbol path
        ("./src/pkg/b.py", "src/pkg/b.py"),  # "./" stripped on both sides
        ("src/pkg/../pkg/b.py", "src/pkg/b.py"),
        ("src/pkg/c.py", "/app/src/pkg/c.py"),  # relative names an absolute symbol path
        ("pkg/d.py", "src/pkg/d.py"),  # agent worked inside src/
        ("a.py", "a.py"),  # ambiguous: src/pkg/a.py and tests/a.py
        ("/other/pkg/d.py", "/other/pkg/d.py"),  # the shorter symbol path src/pkg/d.py is not a suffix
        ("/app/src/pkg/zzz.py", "/app/src/pkg/zzz.py"),  # unknown file keeps its normalised form
    ],
)
def test_path_matching_rule(written, expected):
    matcher = cc.PathMatcher(["src/pkg/a.py", "./src/pkg/b.py", "/app/src/pkg/c.py", "src/pkg/d.py", "tests/a.py"])
    assert matcher.canonical(written) == expected


def test_absolute_symbol_path_folds_onto_relative_one():
    matcher = cc.PathMatcher(["src/a.py", "/app/src/a.py"])
    assert matcher.symbol_file("/app/src/a.py") == "src/a.py"
    assert matcher.canonical("a.py") == "src/a.py"  # both candidates are the same file


def test_unmatched_edit_paths_fold_onto_each_other():
    matcher = cc.PathMatcher(["src/a.py"])
    files = cc.distinct_files(["/app/lib/b.py", "lib/b.py", "./lib/b.py", "/app/src/a.py", "/x/c.py", "/y/c.py"], matcher)
    assert files == {"lib/b.py", "src/a.py", "/x/c.py", "/y/c.py"}


def test_shell_edits_are_edits(tmp_path):
    calls = [
        _call(2, "Bash", command="sed -E -i.bak -e 's/a/b/' src/x.py | cat"),
        _call(3, "Bash", command="echo hi > notes.txt 2>&1; sed -n 1p src/y.py; cat src/z.py >/dev/null"),
        _call(4, "Bash", command="printf x | tee -a log.txt"),
    ]
    trial = _trial(tmp_path, None, calls)
    assert sorted(cc.edited_paths(trial)) == ["log.txt", "notes.txt", "src/x.py"]


# ---------------------------------------------------------------------------------------------
# broken states
# ---------------------------------------------------------------------------------------------


def test_missing_keys_default_to_empty(tmp_path):
    trial = _trial(tmp_path, {}, HAND_CALLS, HAND_TESTS)
    m = cc.codecanvas_metrics(trial)
    assert m["evidence_count"] == 0 and m["impact_analyses_count"] == 0
    # nothing is in an empty blast radius: 5 distinct edited files (/app/src/pkg/a.py and
    # src/pkg/a.py fold onto one by the suffix rule even without symbol_files), all outside
    assert (m["edits_in_blast_radius"], m["edits_outside_blast_radius"]) == (0, 5)
    assert m["blast_radius_edit_rate"] == 0.0
    assert m["informed_editing_score"] == 0.0


def test_dangling_ids_are_warnings(tmp_path):
    state = cc.parse_state(HAND_STATE, tmp_path / "state.json")
    joined = "\n".join(state.warnings)
    assert "claim C3 cites evidence E9, which does not exist" in joined
    assert "analysis A2 affected symbol ghost:x has no entry in symbol_files" in joined
    assert len(state.warnings) == 2


def test_odd_items_are_skipped_with_warnings():
    state = cc.parse_state(
        {"evidence": [1, {"kind": "read"}], "claims": "nope", "decisions": [{"id": "D1", "symbol_ids": "s"}],
         "analyses": {"A9": {"target": None, "affected": [None, "s", "s"]}}, "symbol_files": {"s": 3, "t": None}},
        "x/state.json",
    )
    assert [e.id for e in state.evidence] == ["E?2"]
    assert state.claims == []
    assert state.decisions[0].symbol_ids == ["s"]
    assert state.analyses[0].id == "A9" and state.analyses[0].affected == ["s"]  # None dropped, duplicate once
    assert state.symbol_files == {"s": "3"}
    text = "\n".join(state.warnings)
    for fragment in ("evidence[0]: not an object", "claims: expected a list", "analysis A9 has no target", "symbol_files['t']"):
        assert fragment in text


def test_the_codecanvas_servers_own_field_names_are_read_too():
    # the CodeCanvas server keys analyses by target and names the fields *_ids
    state = cc.parse_state(
        {"symbol_files": {"m.f": "m.py", "m.g": "g.py"},
         "analyses": {"m.f": {"target_id": "m.f", "target_label": "f", "affected_ids": ["m.g"],
                              "addressed_ids": ["m.g"], "skipped_ids": []}},
         "decisions": [{"id": "D1", "kind": "mark", "target": "m.g", "evidence_ids": []}]},
        "x/state.json",
    )
    a = state.analyses[0]
    assert (a.id, a.target, a.affected, a.addressed, a.skipped) == ("m.f", "m.f", ["m.g"], ["m.g"], [])
    assert state.decisions[0].symbol_ids == ["m.g"]
    assert state.warnings == []


@pytest.mark.parametrize(
    "content, fragment",
    [("{not json", "malformed JSON"), ("", "empty file"), ('{"evidence": [', "truncated JSON"), ("[1, 2]", "root is list")],
)
def test_broken_file_raises_one_line_input_error_naming_it(tmp_path, content, fragment):
    (tmp_path / "state.json").write_text(content)
    with pytest.raises(InputError) as info:
        cc.read_state(tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "state.json") in msg and fragment in msg and "\n" not in msg
    assert info.value.error.stage == "codecanvas"


def test_broken_state_does_not_stop_the_table(tmp_path):
    good = _trial(tmp_path, HAND_STATE, HAND_CALLS, HAND_TESTS, name="good")
    bad = _trial(tmp_path, "{oops", HAND_CALLS, HAND_TESTS, name="bad")
    none = _trial(tmp_path, None, HAND_CALLS, HAND_TESTS, name="plain", profile="text")
    errors: list[IngestError] = []
    df = cc.codecanvas_table([good, bad, none], errors)
    assert list(df.columns) == list(cc.IDENTITY_COLUMNS + cc.METRIC_COLUMNS)
    assert len(df) == 3
    assert df.loc[0, "informed_editing_score"] == pytest.approx(0.74)
    assert df.loc[1, "evidence_count"] is pd_na() and df.loc[2, "evidence_count"] is pd_na()
    assert len(errors) == 1 and errors[0].stage == "codecanvas" and errors[0].path.endswith("bad/agent/sessions/codecanvas/state.json")
    # the per-trial call used by the metrics job does not raise either: the message lands in warnings
    assert all(v is None for v in cc.codecanvas_metrics(bad).values())
    assert any("malformed JSON" in w for w in bad.warnings)


def pd_na():
    import pandas as pd

    return pd.NA


# ---------------------------------------------------------------------------------------------
# images
# ---------------------------------------------------------------------------------------------


def _png(path: Path, size=(40, 20)):
    from PIL import Image

    Image.new("RGB", size, (200, 30, 30)).save(path)


def test_list_images_names_and_order(tmp_path):
    sdir = tmp_path / "s"
    sdir.mkdir()
    for name in ("architecture", "board", "impact_A2", "impact_A10", "impact_A1", "other"):
        _png(sdir / f"{name}.png")
    state = cc.parse_state({"analyses": [{"id": "A1", "png_path": "impact_A1.png"}], "images": {"board": "board.png"}}, sdir / "state.json")
    images = cc.list_images(sdir, state)
    assert list(images) == ["architecture", "impact_A1", "impact_A2", "impact_A10", "board"]
    assert all(p.is_file() for p in images.values())
    assert cc.list_images(sdir)["board"].name == "board.png"  # works without a state too


def test_image_paths_outside_the_session_are_refused(tmp_path, caplog):
    sdir = tmp_path / "trial" / "agent" / "sessions" / "codecanvas"
    sdir.mkdir(parents=True)
    outside = tmp_path / "secret.png"
    _png(outside)
    _png(sdir / "board.png")
    os.symlink(outside, sdir / "impact_A3.png")  # symlink pointing out
    os.symlink(sdir / "board.png", sdir / "impact_A4.png")  # symlink that stays inside: fine
    state = cc.parse_state(
        {
            "analyses": [
                {"id": "A1", "png_path": "../../etc/passwd"},
                {"id": "A2", "png_path": str(outside)},
                {"id": "A3", "png_path": "impact_A3.png"},
                {"id": "A4", "png_path": "impact_A4.png"},
                {"id": "A5", "png_path": "impact_A5.png"},  # listed, missing
            ],
            "images": {"board": "board.png", "architecture": "../../../../secret.png"},
        },
        sdir / "state.json",
    )
    with caplog.at_level("WARNING"):
        images = cc.list_images(sdir, state)
    assert set(images) == {"board", "impact_A4"}
    text = "\n".join(state.warnings)
    assert "'../../etc/passwd' points outside the session folder; refused" in text
    assert f"{str(outside)!r} is absolute; refused" in text
    assert "'impact_A3.png' points outside the session folder; refused" in text
    assert "'../../../../secret.png' points outside" in text
    assert "'impact_A5.png' is listed but missing" in text
    assert "refused" in caplog.text


# ---------------------------------------------------------------------------------------------
# outputs
# ---------------------------------------------------------------------------------------------


def test_outputs_comparison_and_json(tmp_path):
    trials = [
        _trial(tmp_path, HAND_STATE, HAND_CALLS, HAND_TESTS, name="c1"),
        _trial(tmp_path, {"claims": [{"id": "C1", "kind": "finding"}]}, [], [], name="c2"),
        _trial(tmp_path, None, HAND_CALLS, HAND_TESTS, name="t1", profile="text"),
        _trial(tmp_path, "[]", [], [], name="c3"),  # broken: root is a list
    ]
    out = tmp_path / "out"
    vision = {trials[0].trial_path: {"board_quality": {"board_quality_score": 0.5}}}
    paths = cc.write_codecanvas_outputs(trials, None, out, simulated=True, vision=vision)
    md = paths["codecanvas_comparison.md"].read_text()
    assert "SIMULATED DATA" in md
    # codecanvas: scores 0.74 and 0.1 (1 claim -> 0.3 * 1/3) -> mean 0.42, median 0.42
    # (the broken c3 has no data); edit rate only c1: 0.6; depth 5 and 1 -> mean 3.0
    row = next(line for line in md.splitlines() if line.startswith("| codecanvas |"))
    assert row == "| codecanvas | 3 | 2 | 0.420 | 0.420 | 0.600 | 0.600 | 3.0 | 3.0 |"
    text_row = next(line for line in md.splitlines() if line.startswith("| text |"))
    assert text_row == "| text | 1 | 0 | N/A | N/A | N/A | N/A | N/A | N/A |"
    doc = json.loads(paths["codecanvas_analysis.json"].read_text())
    assert doc["simulated"] is True and len(doc["runs"]) == 4
    run0 = doc["runs"][0]
    assert run0["metrics"]["informed_editing_score"] == pytest.approx(0.74)
    assert run0["vision"] == {"board_quality": {"board_quality_score": 0.5}}
    assert doc["runs"][2]["has_codecanvas"] is False and doc["runs"][2]["metrics"]["evidence_count"] is None
    assert len(doc["errors"]) == 1 and "root is list" in doc["errors"][0]["message"]
    # not simulated: no banner; same bytes when written again (reproducible)
    paths2 = cc.write_codecanvas_outputs(trials, cc.codecanvas_table(trials), tmp_path / "o2", simulated=False)
    assert "SIMULATED" not in paths2["codecanvas_comparison.md"].read_text()
    again = cc.write_codecanvas_outputs(trials, None, tmp_path / "o3", simulated=False)
    assert again["codecanvas_comparison.md"].read_bytes() == paths2["codecanvas_comparison.md"].read_bytes()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp file left
    # the notebooks read it back as tidy frames
    back = cc.load_codecanvas_outputs(out)
    assert back["simulated"] is True and len(back["runs"]) == 4
    assert back["runs"].loc[0, "informed_editing_score"] == pytest.approx(0.74)
    assert back["runs"].loc[0, "edits_in_blast_radius"] == 3 and str(back["runs"]["edits_in_blast_radius"].dtype) == "Int64"
    assert back["vision"]["board_quality_score"].tolist() == [0.5]
    assert list(back["by_profile"]["profile"]) == ["codecanvas", "text"]
    assert len(back["errors"]) == 1
    with pytest.raises(InputError, match="codecanvas_analysis.json"):
        cc.load_codecanvas_outputs(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# sample runs
# ---------------------------------------------------------------------------------------------


def _sample_trials(sample_runs):
    from analysis_lib.ingest.load import load_trials

    trials, errors = load_trials(sample_runs)
    return trials, errors


def test_sample_runs(sample_runs, tmp_path):
    trials, _errors = _sample_trials(sample_runs)
    errors: list[IngestError] = []
    df = cc.codecanvas_table(trials, errors)
    assert errors == []
    has = df["evidence_count"].notna()
    # CodeCanvas data exactly for the codecanvas profile (the infra-error trial may lack it)
    assert set(df.loc[has, "profile"]) == {"codecanvas"}
    assert has[df["profile"] == "codecanvas"].mean() > 0.8  # some codecanvas trials never opened the canvas
    cc_rows = df[has]
    assert ((cc_rows["informed_editing_score"] >= 0) & (cc_rows["informed_editing_score"] <= 1)).all()
    # the simulator puts most (not all) edits inside the blast radius
    rate = cc_rows["blast_radius_edit_rate"].dropna()
    assert 0.5 < rate.mean() < 1.0
    assert cc_rows["edits_outside_blast_radius"].sum() > 0
    # ./ and /app/ variants were matched: the distinct edited files are the simulator's container
    # paths with "/app/" and "./" removed, counted once each (an independent count)
    by_path = {t.trial_path: t for t in trials}
    for rec in cc_rows.itertuples():
        raw = cc.edited_paths(by_path[rec.trial_path])
        independent = {cc.normalize_path(p).removeprefix("/app/") for p in raw}
        assert rec.edits_in_blast_radius + rec.edits_outside_blast_radius == len(independent), rec.trial_path
    # failed tests are Harbor-style (test_outputs.py): some map into the blast radius by name
    assert cc_rows["failed_tests_in_blast_radius"].sum() > 0
    paths = cc.write_codecanvas_outputs(trials, df, tmp_path, simulated=True)
    md = paths["codecanvas_comparison.md"].read_text()
    assert "SIMULATED DATA" in md and "| text | 72 | 0 | N/A |" in md
    checked = 0
    for trial in trials:
        if trial.profile == "codecanvas" and (cc.session_dir_of(trial) / "state.json").exists():
            state = cc.load_trial_state(trial)
            assert state.warnings == [], (trial.trial_path, state.warnings)
            images = cc.list_images(cc.session_dir_of(trial), state)
            on_disk = {p.stem for p in cc.session_dir_of(trial).glob("*.png")}
            assert set(images) == on_disk and "architecture" in images
            assert {f"impact_{a.id}" for a in state.analyses if a.png_path} <= set(images)
            checked += 1
    assert checked == int(has.sum())


def test_layer1_metrics_carry_the_codecanvas_columns(sample_runs, tmp_path):
    """The metrics job joins the columns by trial; the comparison renders from its frame alone."""
    from analysis_lib.ingest.load import load_trials
    from analysis_lib.study.layer1 import analyse

    sample = sample_runs
    result = analyse(sample, None, cache=False, workers=1)
    assert set(cc.METRIC_COLUMNS) <= set(result.metrics.columns)
    trials, _ = load_trials(sample)
    table = cc.codecanvas_table(trials)
    table["trial_path"] = [cc.relative_path(p, sample) for p in table["trial_path"]]
    joined = result.metrics.set_index("trial_path")[list(cc.METRIC_COLUMNS)].sort_index()
    mine = table.set_index("trial_path")[list(cc.METRIC_COLUMNS)].sort_index()
    assert list(joined.index) == list(mine.index)
    for col in cc.METRIC_COLUMNS:
        a, b = joined[col].astype("float64"), mine[col].astype("float64")
        assert ((a - b).abs().fillna(0) < 1e-12).all() and (a.isna() == b.isna()).all(), col
    paths = cc.write_codecanvas_outputs([], result.metrics, tmp_path, simulated=result.simulated)
    from_trials = cc.write_codecanvas_outputs(trials, None, tmp_path / "t", simulated=True)
    assert paths["codecanvas_comparison.md"].read_text() == from_trials["codecanvas_comparison.md"].read_text()
