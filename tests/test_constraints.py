"""constraints.txt pins every package of the environment the tests run in, at the version installed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins(text: str) -> dict[str, str]:
    """``name==version`` lines, names normalised as PyPI does (``Foo_bar.baz`` -> ``foo-bar-baz``)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            out[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return out


def test_constraints_pin_every_installed_package_at_its_version():
    # -I: neither PYTHONPATH nor the working folder (whose agent_ab_analytics.egg-info would list the project) counts.
    frozen = subprocess.run([sys.executable, "-I", "-m", "pip", "freeze", "--all", "--exclude-editable", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True, timeout=120).stdout
    installed, pinned = _pins(frozen), _pins((ROOT / "constraints.txt").read_text())
    unpinned = sorted(f"{n}=={v}" for n, v in installed.items() if n not in pinned)
    stale = sorted(f"{n}=={v}" for n, v in pinned.items() if n not in installed)
    moved = sorted(f"{n}: pinned {pinned[n]}, installed {v}" for n, v in installed.items() if n in pinned and pinned[n] != v)
    assert (unpinned, moved, stale) == ([], [], []), (
        f"constraints.txt and pip freeze --all differ: installed but not pinned {unpinned}; other version installed {moved}; "
        f"pinned but not installed {stale} (regenerate as its header says, or uninstall what is not the project's)"
    )
