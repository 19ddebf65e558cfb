"""Running one external program (agent, evaluator, git) without a shell, under a wall-clock limit.

Each program gets its own process group so that a timeout or a Ctrl-C also stops the children it
spawned (an agent's shell commands, an evaluator's test runner), not only the direct child.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

# Grace period between SIGTERM and SIGKILL when a program must stop.
KILL_GRACE_SEC = 3.0
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


@dataclass(slots=True)
class ProcessResult:
    argv: list[str]
    returncode: int | None  # None when it was killed on timeout
    timed_out: bool
    duration_sec: float
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None  # could not start (missing program, permission)


def substitute(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Replace ``{name}`` placeholders inside each argument, in one pass.

    Values land inside a single argv element and no shell ever parses the result, so a task id such
    as ``a;touch pwned$(id)`` stays one literal argument. Unknown ``{...}`` are left as they are
    (JSON in an argument stays intact), and substituted text is never substituted again.
    """
    def repl(m: re.Match) -> str:
        return str(values[m.group(1)]) if m.group(1) in values else m.group(0)

    return [_PLACEHOLDER.sub(repl, str(arg)) for arg in argv]


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_SEC), (signal.SIGKILL, 5.0)):
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


def _die_with_parent() -> None:
    """In the child (Linux): get SIGKILL when the runner dies, even by SIGKILL.

    Otherwise an agent started by a runner that was killed keeps running, and spending, as an
    orphan, and may finish after the resumed run has already re-run its trial.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
    stdin_devnull: bool = True,
) -> ProcessResult:
    """Run ``argv`` (never through a shell); capture stdout/stderr unless files are given.

    On timeout the whole process group is terminated and ``timed_out`` is set. A
    ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM turned into one by the CLI) also stops the group,
    then propagates.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL if stdin_devnull else None,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    except FileNotFoundError:
        return ProcessResult(argv, None, False, 0.0, error=f"program not found: {argv[0]}")
    except PermissionError:
        return ProcessResult(argv, None, False, 0.0, error=f"permission denied: {argv[0]}")
    except OSError as exc:
        return ProcessResult(argv, None, False, 0.0, error=f"cannot start {argv[0]}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=timeout)
        return ProcessResult(argv, proc.returncode, False, time.monotonic() - start, out or b"", err or b"")
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        # Grandchildren may still hold the pipes; the group kill closed them, so this returns.
        try:
            out, err = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return ProcessResult(argv, None, True, time.monotonic() - start, out or b"", err or b"")
    except BaseException:
        _kill_group(proc)
        raise


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
