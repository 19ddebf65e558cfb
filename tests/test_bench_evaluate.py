"""The command_json contract with real evaluator subprocesses: pass, fail, hang, garbage, crash."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from bench_support import EVALUATOR, write_exe

from analysis_lib.bench.evaluate import parse_verdict, run_evaluation
from analysis_lib.bench.manifest import EvaluationSpec
from analysis_lib.bench.process import substitute


@pytest.fixture()
def evaluator(tmp_path):
    return write_exe(tmp_path / "evaluator.py", EVALUATOR)


def _spec(evaluator: Path, mode: str, timeout: float = 10.0) -> EvaluationSpec:
    return EvaluationSpec(type="command_json", command=[str(evaluator), mode, "{task_id}", "{condition}"], timeout_seconds=timeout)


def _run(tmp_path, evaluator, mode, timeout=10.0, task_id="t1"):
    env = {**os.environ, "EVAL_LOG": str(tmp_path / "eval.log")}
    return run_evaluation(_spec(evaluator, mode, timeout), {"task_id": task_id, "condition": "text"}, cwd=tmp_path, env=env)


def test_pass_and_fail_are_verdicts(tmp_path, evaluator):
    (tmp_path / "solution.txt").write_text("solved\n")
    ok = _run(tmp_path, evaluator, "solved")
    assert (ok.status, ok.passed, ok.details_path) == ("ok", True, "report.json")
    (tmp_path / "solution.txt").unlink()
    assert _run(tmp_path, evaluator, "solved").passed is False
    fail = _run(tmp_path, evaluator, "fail")
    assert (fail.status, fail.passed, fail.error) == ("ok", False, None)


@pytest.mark.parametrize(
    "mode, error",
    [
        ("garbage", "stdout is not JSON"),
        ("crash", "exited with code 1"),
        ("notok", "verdict status is 'error', not 'ok': docker not running"),
    ],
)
def test_garbage_crash_and_not_ok_are_evaluation_errors_not_failures(tmp_path, evaluator, mode, error):
    res = _run(tmp_path, evaluator, mode)
    assert res.status == "error" and res.passed is None
    assert error in res.error
    assert res.to_json()["passed"] is None


def test_hanging_evaluator_times_out_and_its_children_die(tmp_path, evaluator):
    res = _run(tmp_path, evaluator, "hang", timeout=1.0)
    assert res.status == "error" and res.passed is None and res.error == "timed out after 1 s"
    # The grandchild (sleep 60) holds the pipes: waiting for them would let it wake and leave hang.woke.
    # Killing the whole group ends it before that.
    grandchild = int((tmp_path / "hang.pid").read_text())
    assert _gone(grandchild) and not (tmp_path / "hang.woke").exists()


def _gone(pid: int) -> bool:
    """The process has exited (reaped, or a zombie waiting for its new parent to reap it); waits up to 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def test_missing_program_is_an_evaluation_error(tmp_path):
    spec = EvaluationSpec(type="command_json", command=[str(tmp_path / "nope")])
    res = run_evaluation(spec, {}, cwd=tmp_path)
    assert res.status == "error" and "program not found" in res.error


def test_missing_program_error_names_the_command(tmp_path):
    spec = EvaluationSpec(type="command_json", command=[str(tmp_path / "nope"), "--flag"])
    res = run_evaluation(spec, {}, cwd=tmp_path)
    assert "could not start" in res.error and "nope --flag" in res.error


def test_python_is_the_runners_own_interpreter(tmp_path):
    """No activated venv needed: `python -m analysis_lib...` and `{python}` run with sys.executable."""
    from analysis_lib.bench.evaluate import evaluator_argv

    assert evaluator_argv(["python", "-m", "x"], {})[0] == sys.executable
    assert evaluator_argv(["python3", "-V"], {})[0] == sys.executable
    assert evaluator_argv(["env", "{python}", "-V"], {}) == ["env", sys.executable, "-V"]
    assert evaluator_argv(["/usr/bin/python", "-V"], {})[0] == "/usr/bin/python"  # an explicit path is kept
    code = "import analysis_lib, json; print(json.dumps({'status': 'ok', 'passed': True}))"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    res = run_evaluation(EvaluationSpec(type="command_json", command=["python", "-c", code]), {}, cwd=tmp_path, env=env)
    assert res.status == "ok" and res.passed is True, res.error


def test_task_id_with_shell_metacharacters_is_one_literal_argument(tmp_path, evaluator):
    evil = "a;touch pwned$(id)"
    res = _run(tmp_path, evaluator, "fail", task_id=evil)
    assert res.status == "ok"
    logged = json.loads((tmp_path / "eval.log").read_text().splitlines()[-1])
    assert logged["argv"] == ["fail", evil, "text"]
    assert not list(tmp_path.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))


def test_substitute_is_single_pass_and_keeps_unknown_braces():
    out = substitute(["--x={task_id}", '{"json": 1}', "{condition}{task_id}"], {"task_id": "{condition}", "condition": "c"})
    assert out == ["--x={condition}", '{"json": 1}', "c{condition}"]


@pytest.mark.parametrize(
    "stdout, ok",
    [
        (b'{"status": "ok", "passed": true}', True),
        (b'log line\n{"status": "ok", "passed": false, "details_path": "r.json"}\n', True),
        (b'{\n "status": "ok",\n "passed": true\n}\n', True),
        (b'{"status": "ok", "passed": "yes"}', False),
        (b'{"status": "ok"}', False),
        (b"[1, 2]", False),
        (b"", False),
        (b'{"status": "ok", "passed": true, "details_path": 3}', False),
    ],
)
def test_parse_verdict(stdout, ok):
    if ok:
        parse_verdict(stdout)
    else:
        with pytest.raises(ValueError):
            parse_verdict(stdout)


def test_pytest_verdict_helper_on_a_real_test_file(tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_a():\n    assert True\n\ndef test_b():\n    assert 1 == 2\n")
    spec = EvaluationSpec(
        type="command_json",
        command=[sys.executable, "-m", "analysis_lib.bench.pytest_verdict", "--python", sys.executable, "--", "test_ok.py"],
    )
    # plugin autoload off: the venv's jupyter/nbval plugins cost seconds per pytest start
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    res = run_evaluation(spec, {}, cwd=tmp_path, env=env)
    assert (res.status, res.passed, res.details_path) == ("ok", False, ".bench-ctrf.json")
    ctrf = json.loads((tmp_path / ".bench-ctrf.json").read_text())
    assert ctrf["results"]["summary"]["passed"] == 1 and ctrf["results"]["summary"]["failed"] == 1
    assert {t["status"] for t in ctrf["results"]["tests"]} == {"passed", "failed"}
    # no tests collected -> pytest exit 5 -> an evaluation error, not a failed task
    (tmp_path / "empty").mkdir()
    spec2 = EvaluationSpec(type="command_json", command=[sys.executable, "-m", "analysis_lib.bench.pytest_verdict", "--", "empty"])
    res2 = run_evaluation(spec2, {}, cwd=tmp_path, env=env)
    assert res2.status == "error" and "tests did not run" in res2.error
