"""Running one external program (agent, evaluator, git) without a shell, under a wall-clock limit.

Each program gets its own process group so that a timeout or a Ctrl-C also stops the children it
spawned (an agent's shell commands, an evaluator's test runner), not only the direct child. Agents
and evaluators are also *supervised* on Linux (``supervise=True``, :mod:`.supervise`): a small
supervisor process, a child subreaper, ends everything the program left running when it exits,
on a time limit or a stop, and when the runner dies, even by ``kill -9``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..core.parent_death import die_with_parent

# Grace period between SIGTERM and SIGKILL when a program must stop.
KILL_GRACE_SEC = 3.0
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
SUPERVISOR = Path(__file__).with_name("supervise.py")
# The supervisor needs the subreaper and parent-death options of Linux's prctl.
CAN_SUPERVISE = sys.platform.startswith("linux")


@dataclass(slots=True)
class ProcessResult:
    argv: list[str]
    returncode: int | None  # None when it was killed on timeout
    timed_out: bool
    duration_sec: float
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None  # could not start (missing program, permission)
    leftovers: int = 0  # supervised: processes it left running when it exited (they were ended)


def substitute(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Replace ``{name}`` placeholders inside each argument, in one pass.

    Values land inside a single argv element and no shell ever parses the result, so a task id such
    as ``a;touch pwned$(id)`` stays one literal argument. Unknown ``{...}`` are left as they are
    (JSON in an argument stays intact), and substituted text is never substituted again.
    """
    def repl(m: re.Match) -> str:
        return str(values[m.group(1)]) if m.group(1) in values else m.group(0)

    return [_PLACEHOLDER.sub(repl, str(arg)) for arg in argv]


def _kill_group(proc: subprocess.Popen, first_wait: float = KILL_GRACE_SEC) -> None:
    for sig, wait in ((signal.SIGTERM, first_wait), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# Set when the user asked the runner to stop (SIGTERM, Ctrl-C). The signal handler also raises
# KeyboardInterrupt, but Python drops an exception raised while a finalizer (__del__) runs, so the
# run loop checks this too between trials and a stop can never be lost.
STOP_REQUESTED = threading.Event()


def check_stop() -> None:
    """Raise KeyboardInterrupt when a stop was requested (even if the signal's own raise was lost)."""
    if STOP_REQUESTED.is_set():
        raise KeyboardInterrupt("stop requested")


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
    stdin_devnull: bool = True,
    supervise: bool = False,
) -> ProcessResult:
    """Run ``argv`` (never through a shell); capture stdout/stderr unless files are given.

    On timeout the whole process group is terminated and ``timed_out`` is set. A
    ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM turned into one by the CLI) also stops the group,
    then propagates. ``supervise`` (agents, evaluators; Linux): run it under :mod:`.supervise`, so
    that what it leaves running is ended when it exits (counted in ``leftovers``) and everything
    ends with the runner, even when the runner is killed.
    """
    argv = [str(a) for a in argv]
    supervised = supervise and CAN_SUPERVISE
    status_r = status_w = None
    cmd = argv
    if supervised:
        status_r, status_w = os.pipe()
        cmd = [sys.executable, "-P", str(SUPERVISOR), "--parent", str(os.getpid()), "--grace", str(KILL_GRACE_SEC),
               "--status-fd", str(status_w), "--", *argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL if stdin_devnull else None,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.PIPE,
            start_new_session=True,
            # SIGKILL when the runner dies, even by SIGKILL: otherwise an agent started by a killed runner keeps
            # running, and spending, as an orphan, and may finish after the resumed run re-ran its trial.
            preexec_fn=functools.partial(die_with_parent, signal.SIGKILL, os.getpid()),
            pass_fds=(status_w,) if status_w is not None else (),
        )
    except OSError as exc:
        if status_r is not None:
            os.close(status_r)
        why = {FileNotFoundError: "program not found", PermissionError: "permission denied"}.get(type(exc))
        return ProcessResult(argv, None, False, 0.0, error=f"{why}: {argv[0]}" if why else f"cannot start {argv[0]}: {exc.strerror or exc}")
    finally:
        if status_w is not None:
            os.close(status_w)  # the supervisor holds the only writing end now
    # A supervisor needs its grace period to end the program's processes before it is killed itself.
    first_wait = KILL_GRACE_SEC + 5.0 if supervised else KILL_GRACE_SEC
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
            res = ProcessResult(argv, proc.returncode, False, time.monotonic() - start, out or b"", err or b"")
        except subprocess.TimeoutExpired:
            _kill_group(proc, first_wait)
            # Grandchildren may still hold the pipes; the group kill closed them, so this returns.
            try:
                out, err = proc.communicate(timeout=5.0)
            except subprocess.TimeoutExpired:
                out, err = b"", b""
            res = ProcessResult(argv, None, True, time.monotonic() - start, out or b"", err or b"")
        except BaseException:
            _kill_group(proc, first_wait)
            raise
        if status_r is not None:
            _apply_status(res, _read_status(status_r))
        return res
    finally:
        if status_r is not None:
            os.close(status_r)


def _read_status(fd: int) -> dict:
    """The supervisor's status line ({} when it was killed before writing one)."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    try:
        obj = json.loads(b"".join(chunks).decode("utf-8", "replace").strip() or "{}")
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def _apply_status(res: ProcessResult, status: dict) -> None:
    """The program's own ending, as the supervisor saw it, in place of the supervisor's."""
    error = status.get("error")
    if error:
        res.returncode = None
        res.error = {"not_found": f"program not found: {res.argv[0]}",
                     "permission": f"permission denied: {res.argv[0]}"}.get(error, f"cannot start {res.argv[0]}: {status.get('message')}")
        return
    if not status or res.timed_out:
        return
    if isinstance(status.get("seconds"), (int, float)):
        res.duration_sec = float(status["seconds"])  # the program's own wall time, without the clean-up after it
    res.leftovers = int(status.get("leftovers") or 0)
    if status.get("signal") is not None:
        res.returncode = -int(status["signal"])
    elif status.get("exit") is not None:
        res.returncode = int(status["exit"])


def git(args: Sequence[str], cwd: str | os.PathLike | None = None, timeout: float = 300.0) -> str:
    """Run git and return its stripped stdout; raise ``RuntimeError`` with git's message on failure."""
    res = run_process(["git", *args], cwd=cwd, timeout=timeout)
    if res.error or res.timed_out or res.returncode != 0:
        lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
        why = res.error or ("timed out" if res.timed_out else (lines[-1] if lines else f"exit code {res.returncode}"))
        # name the subcommand, skipping `-c key=value` options
        words = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c")]
        raise RuntimeError(f"git {words[0] if words else ''} failed: {why}")
    return res.stdout.decode("utf-8", "replace").strip()
