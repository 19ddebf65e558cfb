"""Helpers for the benchmark-runner tests: a scratch git repo, a scripted ``claude``, evaluators.

The scripted agent is a real executable (Python, shebang = this interpreter) that behaves like
``claude -p ... --output-format stream-json --verbose``: it edits the checkout and prints
stream-json events (system init, assistant tool_use with usage, user tool_result, final result
with total_cost_usd). Its behaviour is steered by environment variables, and every invocation is
appended to ``$FAKE_CLAUDE_LOG`` so that tests can count which trials really ran.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from analysis_lib.bench import environment as bench_env

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}

FAKE_CLAUDE = r'''#!{python}
"""Scripted stand-in for the Claude Code CLI (stream-json mode)."""
import json, os, sys, time, uuid

args = sys.argv[1:]
if args == ["--version"]:
    print(os.environ.get("FAKE_CLAUDE_VERSION", "9.9.9 (Claude Code)"))
    sys.exit(0)

def opt(name):
    return args[args.index(name) + 1] if name in args else None

prompt, model, mcp = opt("-p"), opt("--model"), opt("--mcp-config")
assert opt("--output-format") == "stream-json" and "--verbose" in args, args
log = os.environ.get("FAKE_CLAUDE_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(json.dumps({"task": os.environ.get("BENCH_TASK_ID"), "condition": os.environ.get("BENCH_CONDITION"),
                             "run": os.environ.get("BENCH_RUN"), "mcp": mcp is not None, "model": model,
                             "strict": "--strict-mcp-config" in args, "argv": args, "pid": os.getpid()}) + "\n")
bg = os.environ.get("FAKE_CLAUDE_BACKGROUND")
if bg:
    # Two processes left behind, each writing its pid to <bg>.<condition>.{child,daemon} and, should it outlive its
    # 60 s sleep, a .woke marker: a child in the agent's process group, and a daemon that escapes the group
    # (fork, setsid, fork: re-parented when the middle process exits).
    import subprocess
    code = ("import os, sys, time; p = sys.argv[1]; open(p + '.tmp', 'w').write(str(os.getpid())); os.replace(p + '.tmp', p); "
            "time.sleep(60); open(p + '.woke', 'w').close()")
    stem = f"{bg}.{os.environ.get('BENCH_CONDITION')}"
    subprocess.Popen([sys.executable, "-c", code, stem + ".child"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", code, stem + ".daemon"])
        os._exit(0)
    os.waitpid(middle, 0)
    while not (os.path.exists(stem + ".child") and os.path.exists(stem + ".daemon")):
        time.sleep(0.02)
fill_once = os.environ.get("FAKE_CLAUDE_FILL_DISK_ONCE")
if fill_once and not os.path.exists(fill_once) and log and sum(1 for _ in open(log)) >= int(os.environ.get("FAKE_CLAUDE_FILL_AT", "1")):
    # Fill the disk holding the trial folder (a runaway log), once: the marker lives outside that disk.
    open(fill_once, "w").close()
    try:
        with open(os.path.join(os.environ["BENCH_TRIAL_DIR"], "agent", "runaway.log"), "wb") as fh:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
    except OSError:
        pass
time.sleep(float(os.environ.get("FAKE_CLAUDE_SLEEP", "0")))
if os.environ.get("FAKE_CLAUDE_WOKE"):  # the agent outlived its sleep (a test that stops it checks this never appears)
    open(os.environ["FAKE_CLAUDE_WOKE"], "w").close()
reported = os.environ.get("FAKE_CLAUDE_REPORT_MODEL_MCP") if mcp else None
reported = reported or model
sid = str(uuid.uuid4())
cwd = os.getcwd()
cost = float(os.environ.get("FAKE_CLAUDE_COST", "0.25"))

def emit(obj):
    print(json.dumps(obj), flush=True)

emit({"type": "system", "subtype": "init", "session_id": sid, "cwd": cwd, "model": reported,
      "tools": ["Read", "Edit", "Bash"] + (["mcp__codegraph__search_code"] if mcp else []),
      "mcp_servers": [{"name": "codegraph", "status": os.environ.get("FAKE_CLAUDE_MCP_STATUS", "connected")}] if mcp else [], "claude_code_version": "9.9.9"})
usage = {"input_tokens": 12, "output_tokens": 40, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200}
if os.environ.get("FAKE_CLAUDE_MCP_TOKEN_SCALE"):
    # Tokens that differ by task and run (a stable jitter) and, with MCP, by this factor.
    import zlib
    # (keyed on whether MCP is on, not on the config's path, which names the test's temporary folder)
    jitter = 1 + (zlib.crc32(f"{os.environ.get('BENCH_TASK_ID')}/{os.environ.get('BENCH_RUN')}/{mcp is not None}".encode()) % 100) / 500
    f = jitter * (float(os.environ["FAKE_CLAUDE_MCP_TOKEN_SCALE"]) if mcp else 1.0)
    usage = {k: int(v * f) for k, v in usage.items()}
first = ("mcp__codegraph__search_code", {"query": "main"}) if mcp else ("Read", {"file_path": os.path.join(cwd, "src/app.py")})
emit({"type": "assistant", "session_id": sid, "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": reported,
      "content": [{"type": "tool_use", "id": "toolu_1", "name": first[0], "input": first[1]}], "stop_reason": "tool_use", "usage": usage}})
emit({"type": "user", "session_id": sid, "message": {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def main(): return 1"}]}})
if "do nothing" not in (prompt or "") and not (os.environ.get("FAKE_CLAUDE_ONLY_MCP_SOLVES") and not mcp):
    with open("solution.txt", "w") as fh:
        fh.write("solved\n")
    with open(os.path.join("src", "app.py"), "a") as fh:
        fh.write("# fixed\n")
emit({"type": "assistant", "session_id": sid, "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": reported,
      "content": [{"type": "tool_use", "id": "toolu_2", "name": "Edit",
                   "input": {"file_path": os.path.join(cwd, "src/app.py"), "old_string": "x", "new_string": "y"}}],
      "stop_reason": "tool_use", "usage": usage}})
emit({"type": "user", "session_id": sid, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}]}})
emit({"type": "assistant", "session_id": sid, "message": {"id": "msg_3", "type": "message", "role": "assistant", "model": reported,
      "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn", "usage": usage}})
emit({"type": "result", "subtype": "success", "is_error": False, "session_id": sid, "num_turns": 3, "duration_ms": 1234,
      "total_cost_usd": cost, "usage": {k: 3 * v for k, v in usage.items()},
      "result": "Done."})
if os.environ.get("FAKE_CLAUDE_EXIT", "0") != "0":
    sys.stderr.write("starting\nError: scripted failure " + cwd + "\n")
sys.exit(int(os.environ.get("FAKE_CLAUDE_EXIT", "0")))
'''

EVALUATOR = r'''#!{python}
"""Evaluator in every flavour: solved (checks the agent's edit), fail, hang, garbage, crash, notok."""
import json, os, subprocess, sys, time
mode = sys.argv[1]
log = os.environ.get("EVAL_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(json.dumps({"argv": sys.argv[1:], "cwd_has_solution": os.path.exists("solution.txt")}) + "\n")
if mode == "solved":
    passed = os.path.exists("solution.txt")
    with open("report.json", "w") as fh:
        json.dump({"results": {"tool": {"name": "pytest"}, "summary": {"tests": 1, "passed": int(passed), "failed": int(not passed)},
                   "tests": [{"name": "test_x.py::test_solved", "status": "passed" if passed else "failed", "duration": 0.01}]}}, fh)
    print("checking...")
    print(json.dumps({"status": "ok", "passed": passed, "details_path": "report.json"}))
elif mode == "fail":
    print(json.dumps({"status": "ok", "passed": False}))
elif mode == "hang":
    # a grandchild that must be killed too: its pid in hang.pid; it leaves hang.woke if it outlives its sleep
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60); open('hang.woke', 'w').close()"])
    with open("hang.pid", "w") as fh:
        fh.write(str(child.pid))
    time.sleep(60)
elif mode == "garbage":
    print("<html>definitely not json</html>")
elif mode == "crash":
    raise SystemExit("evaluator crashed: Traceback (most recent call last)")
elif mode == "notok":
    print(json.dumps({"status": "error", "error": "docker not running"}))
'''

FAKE_HARBOR = r'''#!{python}
"""Scripted stand-in for `harbor run`: writes a one-trial job directory like Harbor 0.25."""
import json, os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("0.25.0"); sys.exit(0)
def opt(n):
    return args[args.index(n) + 1] if n in args else None
assert args[0] == "run", args
job = os.path.join(opt("--jobs-dir"), opt("--job-name"))
task = os.path.basename(opt("--path") or opt("--include-task-name"))
trial = os.path.join(job, task[:32] + "__AbC1234")
os.makedirs(os.path.join(trial, "agent"), exist_ok=True)
os.makedirs(os.path.join(trial, "verifier"), exist_ok=True)
reward = 1.0 if "--ak" in args else 0.0
with open(os.path.join(trial, "verifier", "reward.txt"), "w") as fh:
    fh.write(f"{int(reward)}\n")
traj = {"schema_version": "ATIF-v1.6", "session_id": "s", "agent": {"name": "claude-code", "version": "2.0.0", "model_name": opt("--model")},
        "steps": [{"step_id": 1, "source": "user", "message": "do it"}, {"step_id": 2, "source": "agent", "message": "done",
                  "metrics": {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.5}}],
        "final_metrics": {"total_prompt_tokens": 100, "total_completion_tokens": 10, "total_cost_usd": 0.5}}
with open(os.path.join(trial, "agent", "trajectory.json"), "w") as fh:
    json.dump(traj, fh)
res = {"id": "0000", "task_name": task, "trial_name": os.path.basename(trial), "trial_uri": "file://" + os.path.abspath(trial),
       "config": {"task": {"path": os.path.abspath(opt("--path") or ".")}, "trials_dir": os.path.abspath(job)},
       "agent_info": {"name": "claude-code", "version": "2.0.0",
       "model_info": {"name": opt("--model"), "provider": "anthropic"}},
       "agent_result": {"n_input_tokens": 100, "n_cache_tokens": 0, "n_output_tokens": 10, "cost_usd": 0.5},
       "verifier_result": {"rewards": {"reward": reward}}, "exception_info": None}
with open(os.path.join(trial, "result.json"), "w") as fh:
    json.dump(res, fh)
'''


def write_exe(path: Path, text: str) -> Path:
    path.write_text(text.replace("{python}", sys.executable, 1))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def make_repo(path: Path) -> str:
    """A scratch git repository with one commit; returns the commit id."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("def main():\n    return 1\n")
    (path / "README.md").write_text("scratch\n")
    env = {**os.environ, **GIT_ENV}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *cmd], cwd=path, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True, text=True).stdout.strip()


def setup_bench(tmp: Path) -> dict:
    """Scratch repo, bin/ with the scripted claude and harbor, the evaluator; returns paths and an env."""
    repo = tmp / "target"
    commit = make_repo(repo)
    bindir = tmp / "bin"
    bindir.mkdir()
    write_exe(bindir / "claude", FAKE_CLAUDE)
    write_exe(bindir / "harbor", FAKE_HARBOR)
    evaluator = write_exe(tmp / "evaluator.py", EVALUATOR)
    env = {
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_CLAUDE_LOG": str(tmp / "claude.log"),
        "EVAL_LOG": str(tmp / "eval.log"),
    }
    return {"repo": repo, "commit": commit, "bin": bindir, "evaluator": evaluator, "env": env, "tmp": tmp}


def use_bench(b: dict, mp: pytest.MonkeyPatch) -> None:
    """Run the runner in this process on ``setup_bench``'s programs: its environment set, and no
    program version (``claude --version``) left cached from another test."""
    for k, v in b["env"].items():
        mp.setenv(k, v)
    mp.setattr(bench_env, "_version_cache", {})


def manifest_obj(
    b: dict, task_modes: dict[str, str], *, cost_prior: float = 0.25, conditions: list | None = None, timeout: float = 10
) -> dict:
    """A manifest over the scratch repo: one task per (id -> evaluator mode), text vs codegraph."""
    mcp = b["tmp"] / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"codegraph": {"command": "codegraph-mcp"}}}))
    tasks = []
    for tid, mode in task_modes.items():
        t = {"id": tid, "repo": "target", "commit": b["commit"], "instruction": f"Fix task {tid}.", "timeout_seconds": 30}
        if mode:
            t["evaluation"] = {
                "type": "command_json",
                "command": [str(b["evaluator"]), mode, "{task_id}", "{condition}"],
                "timeout_seconds": timeout,
            }
        tasks.append(t)
    return {
        "manifest_version": 2,
        "name": "scripted",
        "environment": {"model": "claude-test-model-20260101", "tool_commit": "abc1234"},
        "budget": {"estimated_cost_per_trial_usd": cost_prior},
        "conditions": conditions
        or [
            {"name": "text", "adapter": "claude_code"},
            {"name": "codegraph", "adapter": "claude_code", "settings": {"mcp_config": "mcp.json"}},
        ],
        "tasks": tasks,
    }


def write_manifest(b: dict, obj: dict) -> Path:
    p = b["tmp"] / "manifest.json"
    p.write_text(json.dumps(obj, indent=1))
    return p


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
