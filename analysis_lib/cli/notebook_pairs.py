"""Each notebook in ``notebooks/`` is paired with a ``py:percent`` text file; this says where a pair disagrees.

The ``.ipynb`` carries the recorded outputs nbval compares; its ``.py`` pair (jupytext, configured by
``notebooks/jupytext.toml``) is the same notebook as reviewable text. Editing one side only, or a
notebook without its pair, is caught here (``tests/test_notebook_pairs.py``, and before
``paper --record-notebooks``) with one line per problem naming the notebook and the cell;
``make notebooks-sync`` (``jupytext --sync``) repairs it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jupytext
from jupytext.config import load_jupytext_config

__all__ = [
    "KERNELSPEC", "TEXT_FORMAT", "NOT_NOTEBOOKS", "notebook_names", "pair_problems", "normalise_metadata", "main",
]

# As ipykernel names its kernel: JupyterLab rewrites any other display name when a notebook is saved.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
TEXT_FORMAT = "py:percent"
# Python files in notebooks/ that are not notebook pairs (nbval's conftest).
NOT_NOTEBOOKS = frozenset({"conftest.py"})
SYNC_HINT = "run `make notebooks-sync`"


def notebook_names(nb_dir: Path) -> list[str]:
    """Names (without extension) of every notebook or notebook pair file in ``nb_dir``, sorted."""
    files = [*nb_dir.glob("*.ipynb"), *(p for p in nb_dir.glob("*.py") if p.name not in NOT_NOTEBOOKS)]
    return sorted({p.stem for p in files})


def _clip(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")


def _first_line(source: str) -> str:
    return next((ln.strip() for ln in source.splitlines() if ln.strip()), "")


def _cell_key(cell: Any) -> tuple[str, str, dict]:
    return cell.cell_type, cell.source, dict(cell.metadata)


def _cell_difference(py_cell: Any, nb_cell: Any) -> str:
    """What differs between two cells, in a few words (type, the first differing source line, metadata)."""
    if py_cell.cell_type != nb_cell.cell_type:
        return f"{py_cell.cell_type} in the .py, {nb_cell.cell_type} in the .ipynb"
    if py_cell.source != nb_cell.source:
        a, b = py_cell.source.splitlines(), nb_cell.source.splitlines()
        i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        x, y = (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
        if x is None and y is None:
            return f"the sources differ only in trailing line breaks ({py_cell.source[-5:]!r} in the .py, " \
                   f"{nb_cell.source[-5:]!r} in the .ipynb)"
        # Both lines shown from a little before their first differing character, so a late change stays visible.
        col = next((j for j, (u, v) in enumerate(zip(x or "", y or "", strict=False)) if u != v), min(len(x or ""), len(y or "")))
        start = max(0, col - 20)

        def shown(line: str | None) -> str:
            return "(no line)" if line is None else _clip(("..." if start else "") + line[start:])

        return f"source line {i + 1} is {shown(x)} in the .py, {shown(y)} in the .ipynb"
    return f"metadata {dict(py_cell.metadata)} in the .py, {dict(nb_cell.metadata)} in the .ipynb"


def _compare_cells(label: str, py_cells: list, nb_cells: list) -> str | None:
    """The first cell where the pair differs, as one line; None when every cell agrees."""
    counts = f"{len(py_cells)} cells in the .py, {len(nb_cells)} in the .ipynb"
    for i, (a, b) in enumerate(zip(py_cells, nb_cells, strict=False)):
        if _cell_key(a) != _cell_key(b):
            return (f"{label}: cell {i + 1} ({a.cell_type} `{_clip(_first_line(b.source), 40)[1:-1]}`) differs: "
                    f"{_cell_difference(a, b)} ({counts}); {SYNC_HINT}")
    if len(py_cells) != len(nb_cells):
        longer, side = (py_cells, ".py") if len(py_cells) > len(nb_cells) else (nb_cells, ".ipynb")
        extra = longer[min(len(py_cells), len(nb_cells))]
        return (f"{label}: cell {min(len(py_cells), len(nb_cells)) + 1} (`{_clip(_first_line(extra.source), 40)[1:-1]}`) "
                f"is only in the {side} ({counts}); {SYNC_HINT}")
    return None


def normalise_metadata(nb: Any) -> None:
    """The notebook-level metadata every committed notebook keeps: ipykernel's kernelspec, no jupytext entry."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("jupytext", None)


def pair_problems(nb_dir: Path, names: list[str] | None = None, ipynb_metadata: bool = True) -> list[str]:
    """One line per problem of the notebook pairs in ``nb_dir`` (all notebooks, or ``names``); empty when all agree.

    A pair agrees when jupytext reads the same cells (type, source, the cell metadata the text keeps,
    such as the ``parameters`` tag) from both files, both declare :data:`KERNELSPEC`, and the
    ``.ipynb`` holds no jupytext metadata (pairing comes from ``jupytext.toml``, not the notebook).
    ``ipynb_metadata=False`` leaves out the last two for the ``.ipynb``, which recording rewrites anyway.
    """
    config = load_jupytext_config(str(nb_dir))
    rel = nb_dir.name
    problems = []
    for name in names or notebook_names(nb_dir):
        ipynb, py = nb_dir / f"{name}.ipynb", nb_dir / f"{name}.py"
        label = f"{rel}/{name}"
        if not ipynb.exists() and not py.exists():
            problems.append(f"{label}: no such notebook in {rel}/")
            continue
        if not py.exists():
            problems.append(f"{label}.ipynb has no paired {rel}/{name}.py; {SYNC_HINT}")
            continue
        if not ipynb.exists():
            problems.append(f"{label}.py has no {rel}/{name}.ipynb beside it (an orphan pair file); {SYNC_HINT} "
                            f"to create the notebook, or delete the .py")
            continue
        try:
            nb = jupytext.read(ipynb)
            text = jupytext.read(py, fmt=TEXT_FORMAT, config=config)
        except Exception as exc:  # nbformat/jupytext parse errors: name the pair, keep checking the others
            problems.append(f"{label}: cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            continue
        if ipynb_metadata and "jupytext" in nb.metadata:
            problems.append(f"{label}.ipynb holds jupytext metadata {dict(nb.metadata['jupytext'])}: pairing comes from "
                            f"{rel}/jupytext.toml; delete that entry (`make nbval-record` does)")
        for side, meta in ((".ipynb", nb.metadata), (".py", text.metadata)):
            if (ipynb_metadata or side == ".py") and meta.get("kernelspec") != KERNELSPEC:
                fix = "`make nbval-record` writes it" if side == ".ipynb" else "its header sets it"
                problems.append(f"{label}{side}: kernelspec {meta.get('kernelspec')}, expected {KERNELSPEC} ({fix})")
        # The .ipynb as its pair would show it: jupytext's own text round trip drops what the text does not keep
        # (outputs, execution counts, cell ids, UI metadata such as `scrolled`).
        as_text = jupytext.reads(jupytext.writes(nb, fmt=TEXT_FORMAT, config=config), fmt=TEXT_FORMAT, config=config)
        difference = _compare_cells(label, text.cells, as_text.cells)
        if difference:
            problems.append(difference)
    return problems


def main(argv: list[str] | None = None) -> int:
    """``python -m analysis_lib.cli.notebook_pairs [NOTEBOOKS_DIR]``: print each problem, exit 1 if any."""
    args = sys.argv[1:] if argv is None else argv
    nb_dir = Path(args[0] if args else "notebooks")
    if not nb_dir.is_dir():
        print(f"error: {nb_dir} is not a folder", file=sys.stderr)
        return 2
    problems = pair_problems(nb_dir)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print(f"{len(notebook_names(nb_dir))} notebooks agree with their .py pairs")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
