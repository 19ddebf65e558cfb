"""Side environments for the external reference checks: a virtual environment of their own under ``.cache/``, built once.

A reference package often needs what the project does not use (irrCAC pins pandas < 3 and scipy 1.12; Harbor needs
Python >= 3.12). Installed into ``.venv`` it would downgrade the project's packages; in a side environment it cannot.
Each is installed from an exact lock in ``tests/locks/`` (every package pinned), under the install lock so that
parallel workers build it once, and rebuilt when its lock changes. Tests talk to it through a subprocess and JSON.

Refresh a lock (then commit it):  ``.venv/bin/python tests/side_envs.py lock irrCAC irrCAC==0.4.4``
(``--python 3.12`` for a package that needs a newer interpreter than this one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ci_rule import skip_or_fail_in_ci
from install_lock import exclusive

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"
LOCKS = Path(__file__).with_name("locks")
PIP = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input"]


def _probe(exe: str | Path) -> tuple[tuple[int, int], str] | None:
    """The (major, minor) and real path of a runnable interpreter that can make a venv with pip; None otherwise
    (a pyenv shim of a version that is not active fails to start)."""
    try:
        proc = subprocess.run([str(exe), "-c", "import sys, venv, ensurepip; print(*sys.version_info[:2], sys.executable)"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    major, minor, real = proc.stdout.split(maxsplit=2)
    return (int(major), int(minor)), real.strip()


def pyenv_root() -> Path:
    """``$PYENV_ROOT``, else ``pyenv root``, else ``~/.pyenv``."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    exe = shutil.which("pyenv")
    if exe:
        proc = subprocess.run([exe, "root"], capture_output=True, text=True, timeout=30)
        if proc.returncode == 0 and proc.stdout.strip():
            return Path(proc.stdout.strip())
    return Path.home() / ".pyenv"


def python_candidates(minimum: tuple[int, int]) -> list[str]:
    """Where an interpreter >= ``minimum`` may be, in order: PATH (``python3.12``, ``python3.13``, ``python3``), then
    pyenv's installed versions, oldest first (pyenv's own ``python3.12`` shim fails while 3.12 is not active)."""
    names = [f"python3.{minor}" for minor in range(minimum[1], minimum[1] + 3)] + ["python3"]
    found = [exe for exe in map(shutil.which, names) if exe]
    versions = pyenv_root() / "versions"
    if versions.is_dir():
        plain = [p for p in versions.iterdir() if re.fullmatch(r"\d+\.\d+\.\d+", p.name)]
        for folder in sorted(plain, key=lambda p: tuple(int(x) for x in p.name.split("."))):
            if tuple(int(x) for x in folder.name.split(".")[:2]) >= minimum and (folder / "bin" / "python3").exists():
                found.append(str(folder / "bin" / "python3"))
    return found


def find_python(minimum: tuple[int, int]) -> str | None:
    """The real path of the first runnable interpreter >= ``minimum`` of :func:`python_candidates`, or None."""
    for exe in python_candidates(minimum):
        found = _probe(exe)
        if found is not None and found[0] >= minimum:
            return found[1]
    return None


def _size_mb(folder: Path) -> int:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6)


def side_env(name: str, requirements: list[str], *, minimum: tuple[int, int] = (3, 11)) -> Path:
    """The interpreter of ``.cache/<name>``: a venv with ``requirements`` (pip arguments, e.g. ``["-r", lock]``).

    Built on first use with the first Python >= ``minimum`` (:func:`find_python`), then reused while the requirements
    (and the lock files they name) are unchanged. ``.cache/<name>/side-env.json`` records the build time and size.
    Skips locally, fails under CI=true, when no interpreter is found or pip fails.
    """
    venv = CACHE / name
    python = venv / "bin" / "python"
    key = hashlib.sha256(json.dumps(requirements).encode())
    for arg in requirements:
        if arg.endswith(".txt") and Path(arg).is_file():
            key.update(Path(arg).read_bytes())
    stamp = venv / "side-env.json"
    with exclusive(CACHE / f"{name}.lock"):  # a parallel worker waits for this build, then reuses it
        if stamp.exists() and json.loads(stamp.read_text()).get("key") == key.hexdigest() and python.exists():
            return python
        base = find_python(minimum)
        if base is None:
            places = ", ".join(python_candidates(minimum)) or "none"
            skip_or_fail_in_ci(
                f"no Python >= {minimum[0]}.{minimum[1]} for the {name} side environment (tried PATH and "
                f"{pyenv_root() / 'versions'}; candidates: {places})"
            )
        t0 = time.monotonic()
        shutil.rmtree(venv, ignore_errors=True)
        for argv, timeout in (([base, "-m", "venv", str(venv)], 300), ([str(python), *PIP, *requirements], 1800)):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                skip_or_fail_in_ci(f"could not build the {name} side environment ({' '.join(argv[1:4])} ...): {proc.stderr.strip()[-600:]}")
        stamp.write_text(json.dumps({"key": key.hexdigest(), "python": base, "seconds": round(time.monotonic() - t0),
                                     "mb": _size_mb(venv)}))
    return python


def locked_env(lock: str, *, minimum: tuple[int, int] = (3, 11)) -> Path:
    """:func:`side_env` of ``tests/locks/<lock>.txt``, in ``.cache/<lock>``."""
    return side_env(lock, ["-r", str(LOCKS / f"{lock}.txt")], minimum=minimum)


# The Harbor release the adapter is tested against (tests/locks/harbor-<version>.txt). Checked 2026-11: 0.26.0, the
# newest on PyPI, passes the same tests (HARBOR_TEST_VERSION=0.26.0 builds .cache/harbor-0.26.0 from PyPI, unlocked).
HARBOR_VERSION = "0.25.0"


def harbor_version() -> str:
    """The Harbor release under test: :data:`HARBOR_VERSION`, or ``$HARBOR_TEST_VERSION``."""
    return os.environ.get("HARBOR_TEST_VERSION", HARBOR_VERSION)


def harbor_env() -> Path:
    """The interpreter of Harbor's side environment: Python >= 3.12 (Harbor's requirement), ``harbor`` beside it."""
    version = harbor_version()
    if (LOCKS / f"harbor-{version}.txt").exists():
        return locked_env(f"harbor-{version}", minimum=(3, 12))
    return side_env(f"harbor-{version}", [f"harbor=={version}"], minimum=(3, 12))


def run_json(python: Path, code: str, payload: Any = None, *, timeout: float = 300, env: dict[str, str] | None = None) -> Any:
    """Run ``code`` in a side environment's interpreter with ``payload`` as JSON on stdin; its stdout, parsed as JSON.

    Isolated (``-I``): nothing of this checkout (PYTHONPATH, the working folder) reaches the reference's imports."""
    proc = subprocess.run([str(python), "-I", "-c", code], input=json.dumps(payload), capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"{python} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def write_lock(name: str, requirement: str, minimum: tuple[int, int]) -> Path:
    """Install ``requirement`` into a scratch venv and write its ``pip freeze`` to ``tests/locks/<name>.txt``."""
    base = find_python(minimum)
    if base is None:
        raise SystemExit(f"no Python >= {minimum[0]}.{minimum[1]} found")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([base, "-m", "venv", tmp], check=True)
        subprocess.run([f"{tmp}/bin/python", *PIP, requirement], check=True)
        frozen = subprocess.run([f"{tmp}/bin/python", "-m", "pip", "freeze", "--all", "--exclude", "pip"],
                                check=True, capture_output=True, text=True).stdout
        version = subprocess.run([f"{tmp}/bin/python", "-c", "import sys; print(*sys.version_info[:3], sep='.')"],
                                 check=True, capture_output=True, text=True).stdout.strip()
    out = LOCKS / f"{name}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(f"# {requirement} and everything it installs, on Python {version} (python tests/side_envs.py lock).\n{frozen}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Write the exact lock of a side environment into tests/locks/.")
    sub = parser.add_subparsers(dest="command", required=True)
    lock = sub.add_parser("lock")
    lock.add_argument("name")
    lock.add_argument("requirement")
    lock.add_argument("--python", default="3.11", help="minimum Python version (default 3.11)")
    args = parser.parse_args()
    major, minor = map(int, args.python.split("."))
    print(write_lock(args.name, args.requirement, (major, minor)))
