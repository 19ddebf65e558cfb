"""Run one program so that nothing it starts outlives it: the supervisor of an agent or evaluator (Linux).

``python -P supervise.py --parent PID --grace SEC --status-fd FD -- PROGRAM ARGS...`` starts PROGRAM
in a session (and process group) of its own and waits for it. The supervisor is a child subreaper
(``PR_SET_CHILD_SUBREAPER``): whatever PROGRAM starts and abandons (a server sent to the background,
a daemon that forks twice and calls ``setsid``) is re-parented to the supervisor rather than to init,
so it can still be found and ended. It ends them all

- when PROGRAM exits: the trial is over, and a leftover must not run (and load the machine) into
  the next trial of the pair;
- on SIGTERM, SIGINT or SIGHUP: the runner's time limit, or the runner stopping;
- when the runner dies, even by SIGKILL: ``PR_SET_PDEATHSIG`` turns its death into a SIGTERM here;

each time with SIGTERM to PROGRAM's process group and to every descendant, then SIGKILL after
``--grace`` seconds to whatever is left, until nothing is. PROGRAM gets SIGKILL should the supervisor
itself be killed. At the end one JSON line goes to ``--status-fd``: how PROGRAM ended and how many of
its processes were still running when it did,
``{"exit": N|null, "signal": N|null, "seconds": S, "leftovers": K, "stopped_by": N|null}``, or
``{"error": "not_found"|"permission"|"oserror", "message": ...}`` when it could not start.

This file is run by path (``-P``: its folder is not put on ``sys.path``) and imports only the
standard library and psutil, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_LIBC = ctypes.CDLL(None, use_errno=True)
_SUPERVISOR_PID = os.getpid()


class _Stop(Exception):
    """A stop signal arrived (the runner's timeout, Ctrl-C, or the runner's death)."""


def _on_stop(signum, frame):
    raise _Stop(signum)


def _in_program_before_exec() -> None:
    """In PROGRAM's process before exec: default signal mask, and SIGKILL should the supervisor die."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != _SUPERVISOR_PID:  # the supervisor died before the line above
        os._exit(1)


def _reap() -> dict[int, int]:
    """Collect every child that has ended (PROGRAM and re-parented orphans alike); {pid: wait status}."""
    ended = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended[pid] = status


def _alive_descendants(me: psutil.Process) -> list[psutil.Process]:
    out = []
    try:
        children = me.children(recursive=True)
    except psutil.Error:
        return out
    for p in children:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:  # ended meanwhile, or not ours to look at (a setuid program)
            pass
    return out


def _signal_all(me: psutil.Process, pgid: int, sig: int) -> int:
    """Send ``sig`` to PROGRAM's process group and to every living descendant; returns how many descendants."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    procs = _alive_descendants(me)
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:  # ended meanwhile, or not ours to signal (a setuid program)
            pass
    return len(procs)


def _end_everything(pgid: int, grace: float, ended: dict[int, int]) -> None:
    """SIGTERM to all, SIGKILL after ``grace`` seconds, until no descendant is left; exit statuses go to ``ended``."""
    me = psutil.Process()
    if not _signal_all(me, pgid, signal.SIGTERM):
        ended.update(_reap())
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        ended.update(_reap())
        if not _alive_descendants(me):
            return
        time.sleep(0.05)
    # A process may fork while it is being killed: sweep until a round finds nothing left.
    for _ in range(200):
        n = _signal_all(me, pgid, signal.SIGKILL)
        time.sleep(0.02)
        ended.update(_reap())
        if not n and not _alive_descendants(me):
            return


def _status_of(wait_status: int | None) -> dict:
    if wait_status is None:
        return {"exit": None, "signal": None}
    if os.WIFSIGNALED(wait_status):
        return {"exit": None, "signal": os.WTERMSIG(wait_status)}
    return {"exit": os.waitstatus_to_exitcode(wait_status), "signal": None}


def _report(fd: int | None, obj: dict) -> None:
    if fd is None:
        return
    try:
        os.write(fd, (json.dumps(obj) + "\n").encode())
        os.close(fd)
    except OSError:
        pass


def _parse(argv: list[str]) -> tuple[int, float, int | None, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: supervise.py --parent PID --grace SEC [--status-fd FD] -- PROGRAM [ARGS...]")
    i = argv.index("--")
    opts, program = argv[:i], argv[i + 1:]
    values = dict(zip(opts[::2], opts[1::2], strict=False))
    fd = values.get("--status-fd")
    if not program:
        raise SystemExit("supervise.py: no program given")
    return int(values["--parent"]), float(values.get("--grace", "3")), int(fd) if fd is not None else None, program


def main(argv: list[str]) -> int:
    parent, grace, status_fd, program = _parse(argv)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop)
    _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the runner died before the line above could arm it
        _report(status_fd, {"error": "oserror", "message": "the runner ended before the program started"})
        return 1
    # A stop signal between fork and the handle being kept would lose PROGRAM: hold them while it starts.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    start = time.monotonic()
    try:
        child = subprocess.Popen(program, start_new_session=True, preexec_fn=_in_program_before_exec)
    except FileNotFoundError:
        _report(status_fd, {"error": "not_found", "message": program[0]})
        return 127
    except PermissionError:
        _report(status_fd, {"error": "permission", "message": program[0]})
        return 126
    except OSError as exc:
        _report(status_fd, {"error": "oserror", "message": exc.strerror or str(exc)})
        return 126
    ended: dict[int, int] = {}
    stopped_by = None
    leftovers = 0
    seconds = None
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        while child.pid not in ended:
            try:
                pid, status = os.waitpid(-1, 0)  # any child: orphans re-parented here are reaped as they end
            except ChildProcessError:
                break
            ended[pid] = status
        seconds = time.monotonic() - start
        ended.update(_reap())
        leftovers = len(_alive_descendants(psutil.Process()))
    except _Stop as stop:
        stopped_by = stop.args[0]
    # What PROGRAM left running (or PROGRAM itself, when stopped) ends now; stop signals are held meanwhile.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    _end_everything(child.pid, grace, ended)
    if seconds is None:
        seconds = time.monotonic() - start
    status = _status_of(ended.get(child.pid))
    _report(status_fd, {**status, "seconds": round(seconds, 3), "leftovers": leftovers, "stopped_by": stopped_by})
    if stopped_by is not None:
        return 128 + int(stopped_by)
    if status["signal"] is not None:
        return 128 + status["signal"]
    return status["exit"] if status["exit"] is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
