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
import ast
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

from ..core import output_set
from ..core import outputs as files
from ..core.fileio import atomic_write_text
from ..core.lock import BUSY_EXIT_CODE, FolderBusy
from ..ingest.discover import discover
from ..report.outputs import output_paths
from ..study.study import Study, StudyError, open_study
from ..study.study_file import DesignError
from . import notebook_pairs
from .analyse import analysis_inputs

__all__ = ["PIPELINE_NOTEBOOKS", "ParamsError", "NotebookFailed", "InputsChanged", "Interrupted", "pipeline_notebooks",
           "allowed_parameters", "load_params", "kernel_env", "run_notebook", "preflight", "run_pipeline", "check_partial",
           "compile_paper", "record_notebooks", "cli"]

# Numbered notebooks run by the pipeline; explore.ipynb is interactive and is not part of it.
PIPELINE_NOTEBOOKS = ("00_run_benchmark", "01_metrics", "02_stats", "03_llm_analysis", "04_codecanvas", "05_paper")
# Notebooks people use by hand in JupyterLab; recorded and guarded by nbval, not part of `paper`.
INTERACTIVE_NOTEBOOKS = ("explore", "label")
# The first line of the paper skeleton's copy beside an own run's snippets.
SKELETON_COPY_NOTE = "% A copy of paper/main.tex, made anew by every `make paper`: edit paper/main.tex, not this file.\n"
# Set by the driver itself, not by a parameter file: the project folder as seen from notebooks/, and the staged image
# of it the run writes into (analysis_lib.core.output_set).
INTERNAL_PARAMETERS = ("project_root", "staging_dir")
# The folders a run writes, by the parameter naming each; output_dir keeps the manifest and the staging folder.
FOLDER_PARAMETERS = ("output_dir", "figures_dir", "paper_dir")
# What each notebook cannot do without of the others' outputs: a partial run (--only) must find it run now or in
# the set. The paper reads the LLM analyses and the CodeCanvas tables when the set holds them, and says so when not.
NEEDS = {"02_stats": ("01_metrics",), "03_llm_analysis": ("01_metrics",), "04_codecanvas": ("01_metrics",),
         "05_paper": ("01_metrics", "02_stats")}
# pdflatex's own files beside main.pdf: not part of an output set (main.log is: its warnings are the paper's).
LATEX_BYPRODUCTS = (".aux", ".out", ".toc", ".lof", ".lot", ".fls", ".fdb_latexmk", ".synctex.gz")
# The kernel's own log (a loopback-TCP notice at start, a shutdown interrupt) is not the user's business.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]
_TYPES = {"bool": bool, "int": int, "float": (int, float), "str": str}


class ParamsError(ValueError):
    """A parameter file that cannot be used; the message names the file and the problem."""


@dataclass
class NotebookFailed(RuntimeError):
    """A notebook raised: which notebook, which cell, what error, where the executed copy is, and what the output
    folder still holds."""

    notebook: str
    cell_index: int | None
    exec_count: int | None
    ename: str
    evalue: str
    first_line: str
    executed_copy: str
    kept: str = ""

    def __str__(self) -> str:
        where = f"cell {self.cell_index}" if self.cell_index is not None else "an unknown cell"
        if self.exec_count is not None:
            where += f" (In [{self.exec_count}])"
        line = f" `{self.first_line}`" if self.first_line else ""
        return (f"notebook {self.notebook} failed in {where}{line}: {self.ename}: {self.evalue}"
                f" (executed copy with the traceback: {self.executed_copy})"
                + (f"; nothing was committed: {self.kept}" if self.kept else ""))


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


def _relative_papermill_paths(executed: Path, root: Path, final: Path | None = None) -> None:
    """papermill records its input and output paths as given (absolute): store them relative to the project, the
    output as ``final`` (where the copy lands when the run commits) when given."""
    if not executed.exists():
        return
    nb = nbformat.read(executed, as_version=4)
    meta = nb.metadata.get("papermill", {})
    if final is not None and isinstance(meta.get("output_path"), str):
        meta["output_path"] = str(final)
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


def preflight(params_file: str | Path, params: dict[str, Any], root: Path, allowed: dict[str, dict[str, Any]]
              ) -> Study | None:
    """What would make the notebooks fail, or compare nothing, checked before any of them runs (so that no earlier
    output is overwritten): the runs folder exists and holds trials of at least two arms with a baseline, under the
    study file when one is given. This opens the study (the one full read of the runs); its per-trial rows are
    handed to notebook 01 through the trials cache, written only when the study can be compared. Returns the study
    (its fingerprint of the runs is checked again after each notebook), None for notebooks that read no runs."""
    if "runs_dir" not in allowed:
        return None  # notebooks that read no runs
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
        untestable = study.untestable()  # no arm pair the plan could test (the command line's rule)
        if untestable:
            raise ParamsError(f"{params_file}: the design cannot support the planned comparisons: {untestable}; "
                              "nothing was run or written")
        cache = output_paths(root, str(value("output_dir"))).cache
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / files.TRIALS_CACHE, cache / files.TRIALS_CACHE)
    return study


def _default(allowed: dict[str, dict[str, Any]], name: str) -> str:
    """A notebook parameter's default as papermill reports it (a Python literal, quotes stripped)."""
    return str(allowed[name]["default"]).strip("'\"")


def _literal(allowed: dict[str, dict[str, Any]], name: str) -> Any:
    """A notebook parameter's default as the value it is (papermill reports its source text)."""
    try:
        return ast.literal_eval(str(allowed[name]["default"]))
    except (ValueError, SyntaxError):
        return _default(allowed, name)


class InputsChanged(RuntimeError):
    """The runs folder changed (or went) while the pipeline ran; one line, nothing committed."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped the pipeline; the message says where and what the output folder still holds."""


def run_pipeline(params_file: str | Path, root: str | Path = ".", out_dir: str | Path | None = None,
                 quiet: bool = False, latex: bool = True, only: list[str] | None = None) -> dict[str, float]:
    """Validate ``params_file``, run the pipeline notebooks in order, compile the paper, commit the outputs.

    The executed notebooks go to ``out_dir`` (default: ``notebooks/`` inside the parameters' ``output_dir``,
    so that two studies never overwrite each other's). The run holds the lock of every folder it writes
    (``output_dir``, ``figures_dir``, ``paper_dir``, ``out_dir``), writes into ``output_dir``'s staging folder and
    replaces the set the folders held in one commit (:mod:`analysis_lib.core.output_set`) when every notebook and
    LaTeX succeeded and the runs did not change meanwhile; ``only`` builds on the set it checked
    (:func:`check_partial`). Returns seconds per notebook (plus ``pdflatex`` when compiled). Raises
    :class:`ParamsError`, :class:`~analysis_lib.core.output_set.OutputSetError` or ``FolderBusy`` before any work,
    :class:`NotebookFailed`, :class:`InputsChanged` or RuntimeError (LaTeX) after, :class:`Interrupted` on Ctrl-C;
    each with a one-line message.
    """
    root = Path(root).resolve()
    nb_dir = root / "notebooks"
    notebooks = pipeline_notebooks(nb_dir)
    allowed = allowed_parameters(notebooks)
    params = load_params(params_file, allowed)
    if only:
        unknown = sorted(set(only) - set(PIPELINE_NOTEBOOKS))
        if unknown:
            raise ParamsError(f"--only: unknown notebook(s) {', '.join(unknown)}; allowed: {', '.join(PIPELINE_NOTEBOOKS)}")
        notebooks = [nb for nb in notebooks if nb.stem in only]
    value = lambda name: params[name] if name in params else _literal(allowed, name)  # noqa: E731
    folders = {name: str(value(name)) for name in FOLDER_PARAMETERS if name in allowed}
    if out_dir is None:
        out_dir = Path(folders.get("output_dir") or _default(allowed, "output_dir")) / "notebooks"
    if "output_dir" not in folders:
        # Notebooks that declare no output folder (a project of other notebooks): they write in place, unstaged.
        study = preflight(params_file, params, root, allowed)
        return _execute(notebooks, params, allowed, root, Path(out_dir), None, study, quiet, latex, folders)
    home_label = folders["output_dir"]
    home = root / home_label
    labels = list(dict.fromkeys([*folders.values(), Path(out_dir).as_posix()]))
    with output_set.locked([(root / label, label) for label in labels], f"paper --params {Path(params_file).name}"):
        output_set.settle(home, label=home_label, partial=bool(only), warn=_note)
        previous = output_set.read_manifest(home, home_label)
        if only and previous is not None:
            previous = output_set.check_set(home, label=home_label, command="paper --only")
        output_set.check_space(home, home_label, previous)
        study = preflight(params_file, params, root, allowed)
        inputs = {**(analysis_inputs(study) if study is not None else {}),
                  "parameters": {n: value(n) for n in sorted(allowed) if n not in INTERNAL_PARAMETERS}}
        if only:
            check_partial(previous, inputs, [nb.stem for nb in notebooks], allowed, home_label)
        keep = [home / files.ANALYTICS_DIR / files.PLAN_RECORD] + ([root / folders["paper_dir"] / "main.tex"]
                                                                    if "paper_dir" in folders else [])
        base = Path(os.path.commonpath([root, *(Path(os.path.normpath(root / label)) for label in labels)]))
        staging = output_set.prepare(home, label=home_label, command="paper", base=base,
                                     folders=[root / label for label in labels], keep=keep, warn=_note)
        try:
            carried = staging.carry(previous, {nb.stem for nb in notebooks}) if only and previous is not None else {}
            timings = _execute(notebooks, params, allowed, root, Path(out_dir), staging, study, quiet, latex, folders)
            ran = {nb.stem for nb in notebooks}
            manifest = staging.commit(steps=[n for n in PIPELINE_NOTEBOOKS if n in ran or n in carried], inputs=inputs,
                                      carried=carried)
        except KeyboardInterrupt:
            staging.fail("interrupted", status="interrupted")
            where = f" during {staging.record.step}" if staging.record.step else ""
            raise Interrupted(f"interrupted{where}: nothing was committed; {output_set.holds(home, home_label)}") from None
        except NotebookFailed as exc:
            staging.fail(f"{exc.ename}: {exc.evalue}")
            exc.kept = output_set.holds(home, home_label)
            raise
        except (RuntimeError, OSError) as exc:
            line = f"cannot write ({output_set.os_reason(exc)})" if isinstance(exc, OSError) else str(exc)
            staging.fail(line)
            ended = f"{line}: nothing was committed; {output_set.holds(home, home_label)}"
            raise (OSError(ended) if isinstance(exc, OSError) else
                   type(exc)(ended) if type(exc) in (InputsChanged, RuntimeError, output_set.OutputSetError) else
                   RuntimeError(ended)) from None
        except BaseException:
            staging.fail("stopped by an unexpected error")
            raise
    if not quiet:
        print(f"committed run {manifest.run_id}: {len(manifest.files)} files in {', '.join(labels)}")
    return timings


def check_partial(previous: output_set.Manifest | None, inputs: dict[str, Any], selected: list[str],
                  allowed: dict[str, dict[str, Any]], label: str) -> None:
    """A partial run (``--only``) builds on the set the output folder holds only where that set is sound for it: each
    notebook it runs finds what it reads (:data:`NEEDS`) run now or in the set; no notebook of the set it keeps read
    what this run replaces; and what the kept notebooks were made from (their parameters, and the runs, study file and
    plan when notebook 01 is kept) is what this run has. Else :class:`~analysis_lib.core.output_set.OutputSetError`
    in one line."""
    held = set(previous.steps) if previous is not None else set()
    where = f"the set in {label} ({previous.line()})" if previous is not None else f"{label} (it holds no set)"
    for nb in selected:
        for need in NEEDS.get(nb, ()):
            if need not in selected and need not in held:
                raise output_set.OutputSetError(f"--only {' '.join(selected)}: {nb} reads the outputs of {need}, which "
                                                f"{where} does not hold; add {need} to --only or run the whole pipeline")
    kept = [nb for nb in PIPELINE_NOTEBOOKS if nb in held and nb not in selected]
    for nb in kept:
        for need in NEEDS.get(nb, ()):
            if need in selected:
                raise output_set.OutputSetError(f"--only {' '.join(selected)}: {where} keeps the outputs of {nb}, made "
                                                f"from the {need} this run replaces; add {nb} to --only or run the whole "
                                                "pipeline")
    if previous is None:
        return
    was, now = previous.inputs, inputs
    for name in sorted(now.get("parameters", {})):
        users = [nb for nb in kept if nb in allowed[name]["notebooks"]]
        old = was.get("parameters", {}).get(name)
        if users and old != now["parameters"][name]:
            raise output_set.OutputSetError(f"--only {' '.join(selected)}: parameter {name} is {now['parameters'][name]!r}, "
                                            f"but {where} made {', '.join(users)} with {old!r}; run the whole pipeline")
    if "01_metrics" in kept:
        for key, what in (("runs_sha256", f"the runs folder {now.get('runs_dir')} changed"),
                          ("design_sha256", "the study file changed"), ("plan_sha256", "the analysis plan changed")):
            if was.get(key) != now.get(key):
                raise output_set.OutputSetError(f"--only {' '.join(selected)}: {what} since {where} was made; run the "
                                                "whole pipeline")


def _note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _execute(notebooks: list[Path], params: dict[str, Any], allowed: dict[str, dict[str, Any]], root: Path, out_dir: Path,
             staging: output_set.Staging | None, study: Study | None, quiet: bool, latex: bool, folders: dict[str, str]
             ) -> dict[str, float]:
    """Run ``notebooks`` in order, writing into ``staging`` (in place without), then compile the paper; the runs
    folder's fingerprint is checked after each notebook."""
    nb_dir = root / "notebooks"
    at = staging.path if staging is not None else (lambda p: Path(p))
    out = at(root / out_dir)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(kernel_env(root))  # the kernel inherits the driver's environment
    # Paths in the executed copies stay relative: the notebooks see the project as "..", and its staged image.
    internal = {"project_root": os.path.relpath(root, nb_dir),
                "staging_dir": os.path.relpath(at(root), root) if staging is not None else ""}
    timings: dict[str, float] = {}
    for i, nb in enumerate(notebooks, start=1):
        declared = {n for n, info in allowed.items() if nb.stem in info["notebooks"]}
        parameters = {k: v for k, v in {**params, **internal}.items() if k in declared}
        if "use_cache" in declared and "runs_dir" in allowed:
            parameters["use_cache"] = True  # the rows preflight measured: notebook 01 does not parse the runs again
        if not quiet:
            print(f"[{i}/{len(notebooks)}] {nb.name} ...", flush=True)
        t0 = time.perf_counter()
        if staging is not None:
            staging.begin(nb.stem)
        try:
            run_notebook(nb, out / nb.name, parameters, nb_dir, progress=not quiet)
        except NotebookFailed as exc:
            # Name the executed copy relative to the project: messages hold no machine path.
            exc.executed_copy = os.path.relpath(exc.executed_copy, root)
            raise
        finally:
            _relative_papermill_paths(out / nb.name, root, root / out_dir / nb.name)
        if staging is not None:
            staging.end(nb.stem)
        changed = study.inputs_changed() if study is not None else None
        if changed is not None:
            # Never a paper with sections silently missing: the notebooks of this run read other runs than 01 did.
            raise InputsChanged(f"{changed} (seen after notebook {nb.stem})")
        timings[nb.stem] = time.perf_counter() - t0
        if not quiet:
            print(f"[{i}/{len(notebooks)}] {nb.name} done in {timings[nb.stem]:.1f} s", flush=True)
    if latex and "05_paper" in {nb.stem for nb in notebooks}:
        t0 = time.perf_counter()
        final_paper = root / folders.get("paper_dir", "paper")
        paper_dir = at(final_paper)
        skeleton = root / "paper" / "main.tex"
        if final_paper.resolve() != skeleton.parent.resolve() and skeleton.exists():
            # Own runs write their snippets elsewhere; they get a copy of the paper skeleton beside them, made anew on
            # every run so that it never falls behind the snippets it inputs (its first line says so).
            atomic_write_text(paper_dir / "main.tex", SKELETON_COPY_NOTE + skeleton.read_text(encoding="utf-8"))
        elif not (paper_dir / "main.tex").exists() and skeleton.exists():
            paper_dir.mkdir(parents=True, exist_ok=True)  # the staged image of paper/ compiles the skeleton itself
            shutil.copyfile(skeleton, paper_dir / "main.tex")
        before = set(os.listdir(paper_dir))
        try:
            pdf = compile_paper(paper_dir, quiet)
        except RuntimeError as exc:
            raise RuntimeError(str(exc).replace(str(root) + os.sep, "")) from None
        if staging is not None:
            # pdflatex's own files are not outputs of the set (main.pdf is).
            for name in set(os.listdir(paper_dir)) - before:
                if name.endswith(LATEX_BYPRODUCTS):
                    (paper_dir / name).unlink()
        if pdf is None:
            print("pdflatex not found: paper/main.tex not compiled (install TeX, see docs/notebooks.md)")
        else:
            timings["pdflatex"] = time.perf_counter() - t0
            if staging is not None:
                staging.end("05_paper")
                pdf = staging.final(pdf)
            if not quiet:
                print(f"compiled {os.path.relpath(pdf, root)} in {timings['pdflatex']:.1f} s")
        changed = study.inputs_changed() if study is not None else None
        if changed is not None:
            raise InputsChanged(f"{changed} (seen after pdflatex)")
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
    except FolderBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BUSY_EXIT_CODE
    except (ParamsError, FileNotFoundError, StudyError, output_set.OutputSetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (NotebookFailed, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(str(exc) if isinstance(exc, Interrupted) else "interrupted: nothing was committed", file=sys.stderr)
        return 130
    total = time.perf_counter() - t0
    per = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    print(f"paper pipeline done in {total:.1f} s ({per})")
    return 0
