"""Each trial's scratch folder (its checkout, the agent's config folder and copied login), private to the user.

Scratch folders live in the system temp folder, never in the runs folder (a runs folder is shared and
published; a copied ``.credentials.json`` must never land there): ``<tmp>/analysis-lib-bench-<uid>/
<runs folder id>/<trial key>/``, every level mode 0700. The path is a function of the runs folder, so
a runner that holds the runs folder's lock owns them all: a resumed run removes what a killed one
left behind (checkouts and copied credentials) before its first trial. Names hold only letters,
digits and ``-``: Claude Code names its project folder after the checkout's path with every other
character as ``-``, and the runner rewrites both forms out of saved traces.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path


def _private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can enter (created 0700; refused when another user owns it)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        raise RuntimeError(f"{path}: exists but is not a folder of this user; remove it (trial scratch folders go there)")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def scratch_root(runs_dir: str | os.PathLike) -> Path:
    """The folder holding the scratch folders of one runs folder's trials (not created)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    runs_id = hashlib.sha256(os.path.realpath(runs_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"analysis-lib-bench-{uid}" / runs_id


def new_scratch(runs_dir: str | os.PathLike, key: str) -> Path:
    """A fresh, empty, private scratch folder for the trial ``key`` (a leftover of the same trial is removed)."""
    root = scratch_root(runs_dir)
    _private_dir(root.parent)
    _private_dir(root)
    path = root / key
    shutil.rmtree(path, ignore_errors=True)
    return _private_dir(path)


def clear_scratch(runs_dir: str | os.PathLike) -> int:
    """Remove every scratch folder of ``runs_dir``'s trials (the caller holds its lock); returns how many there were."""
    root = scratch_root(runs_dir)
    if not root.is_dir():
        return 0
    n = sum(1 for _ in root.iterdir())
    shutil.rmtree(root, ignore_errors=True)
    return n
