"""Every notebook is its own source: each .ipynb in notebooks/ has a py:percent pair that jupytext reads as the
same cells, syncing or opening and saving the committed pairs changes no byte, and recording keeps them paired."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from analysis_lib.cli import notebook_pairs, pipeline
from analysis_lib.cli.notebook_pairs import KERNELSPEC, pair_problems

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ALL = [*pipeline.PIPELINE_NOTEBOOKS, *pipeline.INTERACTIVE_NOTEBOOKS]


def _copy_notebooks(dest: Path, names: list[str] | None = None) -> Path:
    """The committed pairs (and the pairing config) in a throwaway notebooks/ folder."""
    nb_dir = dest / "notebooks"
    nb_dir.mkdir(parents=True)
    shutil.copyfile(NOTEBOOKS / "jupytext.toml", nb_dir / "jupytext.toml")
    for name in names or ALL:
        for ext in (".ipynb", ".py"):
            shutil.copy2(NOTEBOOKS / f"{name}{ext}", nb_dir / f"{name}{ext}")
    return nb_dir


def _snapshot(nb_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(nb_dir.iterdir()) if p.is_file()}


def test_every_notebook_agrees_with_its_py_pair():
    assert notebook_pairs.notebook_names(NOTEBOOKS) == sorted(ALL), \
        "notebooks/ holds a notebook that `paper --record-notebooks` does not record (pipeline.py lists them)"
    problems = pair_problems(NOTEBOOKS)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)  # the lines alone: notebook, cell, what differs
    assert 'formats = "ipynb,py:percent"' in (NOTEBOOKS / "jupytext.toml").read_text()


def test_a_one_sided_edit_is_reported_naming_notebook_and_cell(tmp_path):
    nb_dir = _copy_notebooks(tmp_path, ["01_metrics", "02_stats"])
    assert pair_problems(nb_dir) == []
    py = nb_dir / "01_metrics.py"
    py.write_text(py.read_text().replace("workers: int = 1", "workers: int = 2"))
    [line] = pair_problems(nb_dir)
    assert line.startswith("notebooks/01_metrics: cell 3 (code `project_root: str = \"\"")
    assert "source line 5 is 'workers: int = 2" in line and "in the .py, 'workers: int = 1" in line
    assert line.endswith("run `make notebooks-sync`")

    # The other side: a cell added to the .ipynb only, and the parameters tag dropped from it.
    nb = nbformat.read(nb_dir / "02_stats.ipynb", as_version=4)
    nb.cells.append(new_markdown_cell("A conclusion written in JupyterLab without jupytext."))
    nbformat.write(nb, nb_dir / "02_stats.ipynb")
    problems = pair_problems(nb_dir)
    assert problems[1].startswith(f"notebooks/02_stats: cell {len(nb.cells)} (`A conclusion written in JupyterLab")
    assert f"is only in the .ipynb ({len(nb.cells) - 1} cells in the .py, {len(nb.cells)} in the .ipynb)" in problems[1]
    nb.cells.pop()
    nb.cells[2].metadata.pop("tags")
    nbformat.write(nb, nb_dir / "02_stats.ipynb")
    [_, line] = pair_problems(nb_dir)
    assert "cell 3 (code" in line and "metadata {'tags': ['parameters']} in the .py, {} in the .ipynb" in line


def test_missing_orphan_and_metadata_problems_are_reported(tmp_path):
    nb_dir = _copy_notebooks(tmp_path, ["explore", "label"])
    (nb_dir / "explore.py").unlink()
    (nb_dir / "label.ipynb").rename(nb_dir / "label_old.ipynb")
    (nb_dir / "conftest.py").write_text("")  # pytest's, not a notebook
    problems = pair_problems(nb_dir)
    assert problems == [
        "notebooks/explore.ipynb has no paired notebooks/explore.py; run `make notebooks-sync`",
        "notebooks/label.py has no notebooks/label.ipynb beside it (an orphan pair file); run `make notebooks-sync` "
        "to create the notebook, or delete the .py",
        "notebooks/label_old.ipynb has no paired notebooks/label_old.py; run `make notebooks-sync`",
    ]
    # What pairing a notebook from JupyterLab's menu would write, and another kernel's name.
    shutil.copyfile(NOTEBOOKS / "explore.py", nb_dir / "explore.py")
    (nb_dir / "label_old.ipynb").rename(nb_dir / "label.ipynb")
    nb = nbformat.read(nb_dir / "explore.ipynb", as_version=4)
    nb.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nbformat.write(nb, nb_dir / "explore.ipynb")
    problems = pair_problems(nb_dir)
    assert len(problems) == 2
    assert problems[0].startswith("notebooks/explore.ipynb holds jupytext metadata {'formats': 'ipynb,py:percent'}")
    assert problems[1].startswith("notebooks/explore.ipynb: kernelspec {'display_name': 'Python 3'")
    assert pair_problems(nb_dir, ipynb_metadata=False) == []


@pytest.mark.slow  # jupytext --sync over every pair, twice (~10 s of CPU)
def test_jupytext_sync_leaves_the_committed_pairs_unchanged(tmp_path):
    """`make notebooks-sync` on agreeing pairs is a no-op, whichever file of a pair is newer."""
    nb_dir = _copy_notebooks(tmp_path)
    before = _snapshot(nb_dir)
    for newer in (".ipynb", ".py"):
        for name in ALL:
            os.utime(nb_dir / f"{name}{newer}", (os.stat(nb_dir / f"{name}{newer}").st_atime, 2e9))
        sync = subprocess.run([sys.executable, "-m", "jupytext", "--sync", *sorted(p.name for p in nb_dir.glob("*.ipynb"))],
                              cwd=nb_dir, capture_output=True, text=True, timeout=300)
        assert sync.returncode == 0, sync.stderr[-2000:]
        assert _snapshot(nb_dir) == before, f"jupytext --sync with the {newer} newer changed a committed file"


def test_opening_and_saving_in_jupyterlab_writes_the_same_bytes(tmp_path):
    """JupyterLab's contents manager with jupytext (as `make lab` serves it): open and save each pair, byte for byte."""
    from jupytext import AsyncTextFileContentsManager

    nb_dir = _copy_notebooks(tmp_path)
    before = _snapshot(nb_dir)
    cm = AsyncTextFileContentsManager(root_dir=str(tmp_path))

    async def open_and_save(path: str) -> dict:
        model = await cm.get(path, content=True)
        await cm.save({"type": "notebook", "content": model["content"]}, path)
        return model["content"]

    for name in ALL:
        content = asyncio.run(open_and_save(f"notebooks/{name}.ipynb"))
        assert content["metadata"]["kernelspec"] == KERNELSPEC
    assert _snapshot(nb_dir) == before
    assert not any("jupytext" in json.loads(before[f"{n}.ipynb"])["metadata"] for n in ALL)


def _tiny_project(tmp_path: Path) -> Path:
    """A project whose notebooks/ holds one small pair named like the first pipeline notebook."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    shutil.copyfile(NOTEBOOKS / "jupytext.toml", nb_dir / "jupytext.toml")
    params = new_code_cell('project_root: str = ""  # project')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# Tiny"), params, new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.write(nb, nb_dir / "00_run_benchmark.ipynb")
    sync = subprocess.run([sys.executable, "-m", "jupytext", "--sync", "00_run_benchmark.ipynb"], cwd=nb_dir,
                          capture_output=True, text=True, timeout=120)
    assert sync.returncode == 0, sync.stderr
    return tmp_path


def test_recording_refuses_a_disagreeing_pair_and_keeps_an_agreeing_one(tmp_path):
    root = _tiny_project(tmp_path)
    nb_dir = root / "notebooks"
    py = nb_dir / "00_run_benchmark.py"
    text = py.read_bytes()
    py.write_text(py.read_text().replace("6 * 7", "6 * 8"))
    with pytest.raises(RuntimeError) as err:
        pipeline.record_notebooks(root, ["00_run_benchmark"], quiet=True)
    assert str(err.value).splitlines() == [
        "notebook pairs disagree, nothing recorded:",
        "notebooks/00_run_benchmark: cell 3 (code `print(6 * 7)`) differs: source line 1 is 'print(6 * 8)' in the .py, "
        "'print(6 * 7)' in the .ipynb (3 cells in the .py, 3 in the .ipynb); run `make notebooks-sync`"]
    assert not nbformat.read(nb_dir / "00_run_benchmark.ipynb", as_version=4).cells[2].outputs

    py.write_bytes(text)
    pipeline.record_notebooks(root, ["00_run_benchmark"], quiet=True)
    recorded = nbformat.read(nb_dir / "00_run_benchmark.ipynb", as_version=4)
    assert recorded.cells[2].outputs[0]["text"] == "42\n"
    assert recorded.metadata["kernelspec"] == KERNELSPEC and "jupytext" not in recorded.metadata
    assert py.read_bytes() == text  # the text pair is untouched, and still agrees
    assert pair_problems(nb_dir) == []
    assert py.stat().st_mtime >= (nb_dir / "00_run_benchmark.ipynb").stat().st_mtime
