"""The paper pipeline: run the numbered notebooks with papermill, then compile the paper.

``python -m analysis_lib paper --params params/default.yaml`` (``make paper``) validates the
parameter file against the notebooks' ``parameters`` cells, executes ``notebooks/00_*.ipynb`` ..
``05_*.ipynb`` in order (kernel ``python3``, working folder ``notebooks/``), saves the executed
copies under ``<output_dir>/notebooks/`` and finally runs ``pdflatex`` on ``paper/main.tex`` when it is
installed. Notebooks hand results to each other through files in ``output_dir``, never through
kernel globals, so any notebook can be re-run alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import papermill
import yaml
from nbclient import NotebookClient
from papermill.exceptions import PapermillExecutionError

from ..core import outputs as files
from ..core.fileio import atomic_write_text
from ..ingest.discover import discover
from ..report.outputs import output_paths
from ..study.study import StudyError, open_study
from ..study.study_file import DesignError
from . import notebook_pairs

__all__ = ["PIPELINE_NOTEBOOKS", "ParamsError", "NotebookFailed", "pipeline_notebooks", "allowed_parameters",
           "load_params", "kernel_env", "run_notebook", "run_pipeline", "compile_paper", "record_notebooks", "cli"]

# Numbered notebooks run by the pipeline; explore.ipynb is interactive and is not part of it.
PIPELINE_NOTEBOOKS = ("00_run_benchmark", "01_metrics", "02_stats", "03_llm_analysis", "04_codecanvas", "05_paper")
# Notebooks people use by hand in JupyterLab; recorded and guarded by nbval, not part of `paper`.
INTERACTIVE_NOTEBOOKS = ("explore", "label")
# The first line of the paper skeleton's copy beside an own run's snippets.
SKELETON_COPY_NOTE = "% A copy of paper/main.tex, made anew by every `make paper`: edit paper/main.tex, not this file.\n"
# Set by the driver itself (the project folder as seen from notebooks/), not by a parameter file.
INTERNAL_PARAMETERS = ("project_root",)
# The kernel's own log (a loopback-TCP notice at start, a shutdown interrupt) is not the user's business.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]
_TYPES = {"bool": bool, "int": int, "float": (int, float), "str": str}


class ParamsError(ValueError):
    """A parameter file that cannot be used; the message names the file and the problem."""


@dataclass
class NotebookFailed(RuntimeError):
    """A notebook raised: which notebook, which cell, what error, where the executed copy is."""

    notebook: str
    cell_index: int | None
    exec_count: int | None
    ename: str
    evalue: str
    first_line: str
    executed_copy: str

    def __str__(self) -> str:
        where = f"cell {self.cell_index}" if self.cell_index is not None else "an unknown cell"
        if self.exec_count is not None:
            where += f" (In [{self.exec_count}])"
        line = f" `{self.first_line}`" if self.first_line else ""
        return (f"notebook {self.notebook} failed in {where}{line}: {self.ename}: {self.evalue}"
                f" (executed copy with the traceback: {self.executed_copy})")


def pipeline_notebooks(notebooks_dir: Path) -> list[Path]:
    """The pipeline's notebooks in run order; a missing one is an error naming it."""
    paths = [notebooks_dir / f"{name}.ipynb" for name in PIPELINE_NOTEBOOKS]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{notebooks_dir}: missing notebook(s) {', '.join(missing)}")
    return paths


def allowed_parameters(notebooks: list[Path]) -> dict[str, dict[str, Any]]:
    """Every parameter declared in the notebooks' ``parameters`` cells: name -> papermill's inferred info
    plus ``notebooks`` (which notebooks declare it)."""
    out: dict[str, dict[str, Any]] = {}
    for nb in notebooks:
        for name, info in papermill.inspect_notebook(str(nb)).items():
            entry = out.setdefault(name, dict(info, notebooks=[]))
            entry["notebooks"].append(nb.stem)
    return out


def load_params(path: str | Path, allowed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Read a YAML parameter file and check every key against the notebooks' parameters.

    Unknown names, internal names and values of the wrong type are refused with a message naming
    the file and listing the allowed parameters.
    """
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(f"{p}: parameter file not found") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParamsError(f"{p}: expected a mapping of parameter names to values, got {type(data).__name__}")
    names = sorted(n for n in allowed if n not in INTERNAL_PARAMETERS)
    unknown = sorted(str(k) for k in data if k not in names)
    if unknown:
        raise ParamsError(f"{p}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(names)}")
    for key, value in data.items():
        expected = _TYPES.get(str(allowed[key].get("inferred_type_name", "")).split("[")[0].strip())
        if value is None or expected is None:
            continue
        # bool is an int subclass; `runs: 3` must not pass for a bool or `true` for an int.
        bad = (isinstance(value, bool) and bool not in (expected if isinstance(expected, tuple) else (expected,)))
        if bad or not isinstance(value, expected):
            raise ParamsError(f"{p}: parameter {key} must be {allowed[key]['inferred_type_name']}, "
                              f"got {type(value).__name__} ({value!r})")
    return dict(data)


def kernel_env(root: Path) -> dict[str, str]:
    """Environment for the notebook kernels: this project's ``analysis_lib`` first, litellm offline and quiet."""
    env = {
        "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    return env


def run_notebook(nb: Path, out: Path, parameters: dict[str, Any], cwd: Path, progress: bool) -> None:
    """Execute one notebook with papermill; a failing cell becomes :class:`NotebookFailed`."""
    try:
        papermill.execute_notebook(str(nb), str(out), parameters=parameters, kernel_name="python3", cwd=str(cwd),
                                   progress_bar=progress, log_output=False, extra_arguments=KERNEL_ARGS)
    except PapermillExecutionError as exc:
        first = next((ln.strip() for ln in (exc.source or "").splitlines() if ln.strip() and not ln.startswith("#")), "")
        raise NotebookFailed(nb.name, exc.cell_index, exc.exec_count, exc.ename, str(exc.evalue).splitlines()[0]
                             if exc.evalue else "", first[:80], str(out)) from None


def _relative_papermill_paths(executed: Path, root: Path) -> None:
    """papermill records its input and output paths as given (absolute): store them relative to the project."""
    if not executed.exists():
        return
    nb = nbformat.read(executed, as_version=4)
    meta = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if isinstance(meta.get(key), str) and os.path.isabs(meta[key]):
            meta[key] = Path(os.path.relpath(meta[key], root)).as_posix()
    nbformat.write(nb, executed)


def compile_paper(paper_dir: Path, quiet: bool = False) -> Path | None:
    """Run pdflatex twice on ``paper_dir/main.tex`` (references settle on the second pass).

    Returns the PDF path, or None when pdflatex is not installed. Raises RuntimeError with the
    first TeX error line when the compile fails.
    """
    exe = shutil.which("pdflatex")
    if exe is None:
        return None
    for _ in range(2):
        proc = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "main.tex"], cwd=paper_dir,
                              capture_output=True, text=True, errors="replace", timeout=300)
        if proc.returncode != 0:
            errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("!")]
            raise RuntimeError(f"{paper_dir / 'main.tex'}: pdflatex failed: {errors[0] if errors else proc.stdout[-300:]}"
                               f" (see {paper_dir / 'main.log'})")
    return paper_dir / "main.pdf"


def preflight(params_file: str | Path, params: dict[str, Any], root: Path, allowed: dict[str, dict[str, Any]]) -> None:
    """What would make the notebooks fail, or compare nothing, checked before any of them runs (so that no earlier
    output is overwritten): the runs folder exists and holds trials of at least two arms with a baseline, under the
    study file when one is given. This opens the study (the one full read of the runs); its per-trial rows are
    handed to notebook 01 through the trials cache, written only when the study can be compared."""
    if "runs_dir" not in allowed:
        return  # notebooks that read no runs
    value = lambda name: params.get(name, _default(allowed, name) if name in allowed else None)  # noqa: E731
    runs_dir = value("runs_dir")
    folder = root / str(runs_dir)
    if not folder.is_dir():
        raise ParamsError(f"{params_file}: runs_dir {runs_dir!r} is not a folder (paths are relative to the project root)")
    sources, errors = discover(folder)
    if not sources:
        why = errors[0].message if errors else "no trials found"
        raise ParamsError(f"{params_file}: runs_dir {runs_dir!r} holds no trial this project reads ({why}); "
                          "nothing was run or written")
    study_file = value("study_file")
    plan_file = value("plan_file")
    with tempfile.TemporaryDirectory(prefix="analysis_lib_preflight_") as tmp:
        try:
            study = open_study(folder, root / study_file if study_file else None, root / plan_file if plan_file else None,
                               value("baseline") or None, cache_dir=tmp, runs_label=str(runs_dir))
        except DesignError as exc:
            # a study file that cannot be used, or arms that overlap or select nothing: stop before any notebook runs
            raise ParamsError(f"{params_file}: study_file: {str(exc).replace(str(root) + os.sep, '')}; nothing was run "
                              "or written") from None
        arms = study.arms
        if len(arms) < 2:
            found = f"one profile ({arms[0]}, {len(study.metrics)} trials)" if arms else "no readable trial"
            hint = " or declare its arms in a study file (study_file: ...; docs/studies.md)" if study.design is None else ""
            raise ParamsError(f"{params_file}: runs_dir {runs_dir!r} holds {found}: the paper compares profiles; add "
                              f"the runs of another profile{hint}; nothing was run or written")
        if study.baseline.name is None:
            raise ParamsError(f"{params_file}: {study.baseline_error}; nothing was run or written")
        problems = study.audit.problems() if study.audit is not None else []
        if problems and len(problems) >= len(arms) - 1:  # no arm pair the plan could test (the command line's rule)
            raise ParamsError(f"{params_file}: the design cannot support the planned comparisons: {problems[0].message}; "
                              "nothing was run or written")
        cache = output_paths(root, str(value("output_dir"))).analytics / ".cache"
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / files.TRIALS_CACHE, cache / files.TRIALS_CACHE)


def _default(allowed: dict[str, dict[str, Any]], name: str) -> str:
    """A notebook parameter's default as papermill reports it (a Python literal, quotes stripped)."""
    return str(allowed[name]["default"]).strip("'\"")


def run_pipeline(params_file: str | Path, root: str | Path = ".", out_dir: str | Path | None = None,
                 quiet: bool = False, latex: bool = True, only: list[str] | None = None) -> dict[str, float]:
    """Validate ``params_file``, run the pipeline notebooks in order, compile the paper.

    The executed notebooks go to ``out_dir`` (default: ``notebooks/`` inside the parameters' ``output_dir``,
    so that two studies never overwrite each other's). Returns seconds per notebook (plus ``pdflatex``
    when compiled). Raises :class:`ParamsError`, :class:`NotebookFailed` or RuntimeError (LaTeX) with a
    one-line message.
    """
    root = Path(root).resolve()
    nb_dir = root / "notebooks"
    notebooks = pipeline_notebooks(nb_dir)
    allowed = allowed_parameters(notebooks)
    params = load_params(params_file, allowed)
    preflight(params_file, params, root, allowed)
    if out_dir is None:
        out_dir = Path(str(params.get("output_dir") or _default(allowed, "output_dir"))) / "notebooks"
    if only:
        unknown = sorted(set(only) - set(PIPELINE_NOTEBOOKS))
        if unknown:
            raise ParamsError(f"--only: unknown notebook(s) {', '.join(unknown)}; allowed: {', '.join(PIPELINE_NOTEBOOKS)}")
        notebooks = [nb for nb in notebooks if nb.stem in only]
    out = root / out_dir
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(kernel_env(root))  # the kernel inherits the driver's environment
    # Paths in the executed copies stay relative: the notebooks see the project as "..".
    internal = {"project_root": os.path.relpath(root, nb_dir)}
    timings: dict[str, float] = {}
    for i, nb in enumerate(notebooks, start=1):
        declared = {n for n, info in allowed.items() if nb.stem in info["notebooks"]}
        parameters = {k: v for k, v in {**params, **internal}.items() if k in declared}
        if "use_cache" in declared and "runs_dir" in allowed:
            parameters["use_cache"] = True  # the rows preflight measured: notebook 01 does not parse the runs again
        if not quiet:
            print(f"[{i}/{len(notebooks)}] {nb.name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            run_notebook(nb, out / nb.name, parameters, nb_dir, progress=not quiet)
        except NotebookFailed as exc:
            # Name the executed copy relative to the project: messages hold no machine path.
            exc.executed_copy = os.path.relpath(exc.executed_copy, root)
            raise
        finally:
            _relative_papermill_paths(out / nb.name, root)
        timings[nb.stem] = time.perf_counter() - t0
        if not quiet:
            print(f"[{i}/{len(notebooks)}] {nb.name} done in {timings[nb.stem]:.1f} s", flush=True)
    if latex and (only is None or "05_paper" in only):
        t0 = time.perf_counter()
        paper_dir = root / str(params.get("paper_dir") or "paper")
        skeleton = root / "paper" / "main.tex"
        if paper_dir.resolve() != skeleton.parent.resolve() and skeleton.exists():
            # Own runs write their snippets elsewhere; they get a copy of the paper skeleton beside them, made anew on
            # every run so that it never falls behind the snippets it inputs (its first line says so).
            atomic_write_text(paper_dir / "main.tex", SKELETON_COPY_NOTE + skeleton.read_text(encoding="utf-8"))
        try:
            pdf = compile_paper(paper_dir, quiet)
        except RuntimeError as exc:
            raise RuntimeError(str(exc).replace(str(root) + os.sep, "")) from None
        if pdf is None:
            print("pdflatex not found: paper/main.tex not compiled (install TeX, see docs/notebooks.md)")
        else:
            timings["pdflatex"] = time.perf_counter() - t0
            if not quiet:
                print(f"compiled {os.path.relpath(pdf, root)} in {timings['pdflatex']:.1f} s")
    return timings


def record_notebooks(root: str | Path = ".", names: list[str] | None = None, quiet: bool = False) -> dict[str, float]:
    """Execute the committed notebooks in place with their default parameters (``make nbval-record``).

    This is what nbval re-executes and compares, so it is the deliberate way to change the stored
    outputs: run it, review the diff, commit. Pipeline notebooks run in order (later ones read the
    files of earlier ones), then the interactive ones (``explore``, ``label``). No timing metadata is
    stored, so only outputs diff. Each notebook must agree with its ``.py`` pair first (else run
    ``make notebooks-sync``); only outputs change, so the pairs still agree afterwards.
    """
    root = Path(root).resolve()
    nb_dir = root / "notebooks"
    order = list(PIPELINE_NOTEBOOKS) + list(INTERACTIVE_NOTEBOOKS)
    names = names or order
    unknown = sorted(set(names) - set(order))
    if unknown:
        raise ParamsError(f"unknown notebook(s) {', '.join(unknown)}; allowed: {', '.join(order)}")
    selected = [n for n in order if n in names]
    # Recording an .ipynb whose .py says otherwise would store outputs of a source nobody reviews.
    problems = notebook_pairs.pair_problems(nb_dir, selected, ipynb_metadata=False)
    if problems:
        raise RuntimeError("notebook pairs disagree, nothing recorded:\n" + "\n".join(problems))
    os.environ.update(kernel_env(root))
    timings: dict[str, float] = {}
    for name in selected:
        path = nb_dir / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        # No timing metadata: only outputs should diff.
        client = NotebookClient(nb, kernel_name="python3", timeout=900, record_timing=False, extra_arguments=KERNEL_ARGS,
                                resources={"metadata": {"path": str(nb_dir)}})
        try:
            client.execute()
        except Exception as exc:  # nbclient raises CellExecutionError with the traceback text
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]  # a dead kernel's error has no text
            raise RuntimeError(f"notebooks/{name}.ipynb failed while recording: {last}") from None
        # Widget state and views hold random model ids and are rebuilt when the notebook runs: not stored
        # (the widget's text repr stays).
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                out.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        notebook_pairs.normalise_metadata(nb)
        nbformat.write(nb, path)
        # The text pair stays the newer file, as jupytext keeps it: JupyterLab then opens the pair without a warning.
        os.utime(nb_dir / f"{name}.py")
        problems = notebook_pairs.pair_problems(nb_dir, [name])
        if problems:
            raise RuntimeError(f"notebooks/{name}.ipynb changed more than its outputs while recording: {problems[0]}")
        timings[name] = time.perf_counter() - t0
        if not quiet:
            print(f"recorded notebooks/{name}.ipynb in {timings[name]:.1f} s", flush=True)
    return timings


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m analysis_lib paper",
                                description="Run notebooks 00-05 with papermill and compile paper/main.tex.")
    p.add_argument("--params", default="params/default.yaml", help="YAML parameter file (default params/default.yaml)")
    p.add_argument("--root", default=".", help="project folder holding notebooks/, paper/ (default: current folder)")
    p.add_argument("--out", default=None, help="folder for the executed notebooks (relative to --root; default: "
                   "<output_dir>/notebooks of the parameter file)")
    p.add_argument("--only", nargs="+", metavar="NOTEBOOK", help="run only these notebooks (names without .ipynb)")
    p.add_argument("--no-latex", action="store_true", help="do not run pdflatex")
    p.add_argument("--list-params", action="store_true", help="print the allowed parameters with their help and exit")
    p.add_argument("--record-notebooks", action="store_true",
                   help="execute notebooks/*.ipynb in place with their defaults (the outputs nbval compares) and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, only the summary line")
    return p


def cli(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m analysis_lib paper``; returns the exit code."""
    args = build_parser().parse_args(argv)
    root = Path(args.root)
    if args.list_params:
        allowed = allowed_parameters(pipeline_notebooks(root.resolve() / "notebooks"))
        for name, info in sorted(allowed.items()):
            if name not in INTERNAL_PARAMETERS:
                print(f"{name}: {info['inferred_type_name']} = {info['default']}  # {info['help']} "
                      f"[{', '.join(info['notebooks'])}]")
        return 0
    if args.record_notebooks:
        try:
            record_notebooks(root, args.only, quiet=args.quiet)
        except (ParamsError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    t0 = time.perf_counter()
    try:
        timings = run_pipeline(args.params, root, args.out, quiet=args.quiet, latex=not args.no_latex, only=args.only)
    except (ParamsError, FileNotFoundError, StudyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NotebookFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    total = time.perf_counter() - t0
    per = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    print(f"paper pipeline done in {total:.1f} s ({per})")
    return 0
