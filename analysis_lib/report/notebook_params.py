"""What every notebook's setup cell does with its parameters: find the project folder, check the types.

Notebooks run from JupyterLab (cwd ``notebooks/``), nbval, the pipeline and plain papermill (cwd
wherever it was started): the project root is found, not assumed. Parameters are declared
``name: type = default`` so their types are in the kernel's ``__annotations__``; a value papermill
injected with the wrong type fails here in one line that names the parameter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["ROOT_MARKER", "find_project_root", "check_parameters"]

ROOT_MARKER = "pyproject.toml"


def _has_marker(folder: Path) -> bool:
    return (folder / ROOT_MARKER).is_file() and (folder / "notebooks").is_dir()


def find_project_root(given: str = "", start: str | os.PathLike | None = None) -> str:
    """The project folder, relative to ``start`` (default: the working directory) when it lies below or beside it.

    ``given`` (the ``project_root`` parameter) wins when not empty. Otherwise the nearest folder
    upward from ``start`` holding ``pyproject.toml`` and ``notebooks/``, else the parent of a
    ``notebooks/`` working directory (a bare copy of the notebooks), else the checkout this package
    was installed from (an editable install). The path stays relative so executed notebooks hold
    no path of this machine.
    """
    if given:
        if not Path(given).is_dir():
            raise ValueError(f"project_root={given!r} is not a folder (seen from {os.getcwd()!r})")
        return given
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if _has_marker(folder):
            return os.path.relpath(folder, here)
    if here.name == "notebooks":
        return ".."
    installed = Path(__file__).resolve().parents[2]
    if _has_marker(installed):
        return os.path.relpath(installed, here)
    raise ValueError(f"project_root: no folder with {ROOT_MARKER} and notebooks/ above {str(here)!r}; "
                     f"pass -p project_root PATH")


def _matches(value: Any, expected: Any) -> bool:
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(expected, type):
        return isinstance(value, expected)
    return True  # a typing construct (list[str], X | None): not checked here


def check_parameters(namespace: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` naming the first parameter whose value is not of its declared type.

    ``namespace`` is the notebook's ``globals()``: the annotations of its ``parameters`` cell
    and the values after papermill's injected cell.
    """
    for name, expected in namespace.get("__annotations__", {}).items():
        if name not in namespace:
            continue
        value = namespace[name]
        if not _matches(value, expected):
            type_name = getattr(expected, "__name__", str(expected))
            raise TypeError(f"parameter {name}: expected {type_name}, got {type(value).__name__} {value!r}")
