"""The papermill driver: parameter validation, failure reporting, and the committed notebooks' hygiene."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill
import pytest
from builders import small_runs
from nbformat.v4 import new_code_cell, new_notebook

from analysis_lib.cli import pipeline

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ALL = [*pipeline.PIPELINE_NOTEBOOKS, *pipeline.INTERACTIVE_NOTEBOOKS]


@pytest.fixture(scope="module")
def allowed():
    return pipeline.allowed_parameters(pipeline.pipeline_notebooks(NOTEBOOKS))


def test_shipped_parameter_files_validate(allowed):
    default = pipeline.load_params(ROOT / "params" / "default.yaml", allowed)
    # No baseline here: the one rule picks it (the plan's, else the runs' index.json: text).
    assert default["runs_dir"] == "runs/sample" and "baseline" not in default
    own = pipeline.load_params(ROOT / "params" / "example_own_runs.yaml", allowed)
    assert own["runs_dir"] != "runs/sample"


def test_unknown_parameter_is_rejected_with_the_allowed_list(tmp_path, allowed):
    bad = tmp_path / "bad.yaml"
    bad.write_text("runs_dir: runs/sample\nrun_dir: typo\n")
    with pytest.raises(pipeline.ParamsError) as err:
        pipeline.load_params(bad, allowed)
    msg = str(err.value)
    assert msg.startswith(f"{bad}: unknown parameter(s) run_dir; allowed: ") and "runs_dir" in msg and "workers" in msg
    assert "project_root" not in msg  # set by the driver, not by users


@pytest.mark.parametrize("text, match", [
    ("workers: many\n", "workers must be int"),
    ("run_llm: 1\n", "run_llm must be bool"),
    ("workers: true\n", "workers must be int"),
    ("- a\n- b\n", "expected a mapping"),
    ("runs_dir: [unclosed\n", "not valid YAML"),
    ("project_root: /elsewhere\n", "unknown parameter"),
])
def test_bad_parameter_files_fail_clearly(tmp_path, allowed, text, match):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(pipeline.ParamsError, match=match):
        pipeline.load_params(p, allowed)


@pytest.mark.slow  # the paper command as a real subprocess (papermill imports): ~4 s
def test_cli_exit_codes_and_messages(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("colour: blue\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "analysis_lib", "paper", "--params", str(bad)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {bad}: unknown parameter(s) colour; allowed:")
    missing = tmp_path / "missing.yaml"
    missing.write_text("runs_dir: runs/does-not-exist\n")
    assert pipeline.cli(["--params", str(missing), "--root", str(ROOT)]) == 2
    assert "runs_dir 'runs/does-not-exist' is not a folder" in capsys.readouterr().err


def test_every_parameter_line_is_parsed_by_papermill():
    # A help comment papermill cannot parse silently drops the parameter (and --help-notebook with it).
    for name in ALL:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, name
        lines = [ln for ln in cells[0].source.splitlines() if ln.strip() and not ln.startswith("#")]
        assert all(re.match(r"^\w+: (str|int|float|bool) = .+  # .+", ln) for ln in lines), (name, lines)
        assert len(papermill.inspect_notebook(str(NOTEBOOKS / f"{name}.ipynb"))) == len(lines), name


def test_committed_notebooks_are_executed_and_hold_no_machine_paths_or_keys():
    for name in ALL:
        raw = (NOTEBOOKS / f"{name}.ipynb").read_text()
        nb = nbformat.reads(raw, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name}: not executed (run make nbval-record)"
        assert not any(o.output_type == "error" for c in code for o in c.outputs), name
        assert not any(o.get("name") == "stderr" for c in code for o in c.outputs), f"{name}: stderr output"
        assert not re.search(r"(/(?:work|home|root|tmp|Users)/|[A-Z]:\\\\)", raw), f"{name}: machine path"
        assert not re.search(r"(?<![A-Za-z0-9-])sk-[A-Za-z0-9]{8}|api_key\s*[=:]\s*['\"][^'\"]+", raw), f"{name}: key-like text"
        md = [c.source for c in nb.cells if c.cell_type == "markdown"]
        assert len(md) >= 2, f"{name}: needs markdown explaining its steps"


def _project(tmp_path: Path, sources: dict[str, str]) -> Path:
    """A throwaway project: every pipeline notebook with a parameters cell and the given code."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    for name in pipeline.PIPELINE_NOTEBOOKS:
        params = new_code_cell('project_root: str = ".."  # project\nout: str = "o.txt"  # output file')
        params.metadata["tags"] = ["parameters"]
        body = sources.get(name, "pass")
        nb = new_notebook(cells=[params, new_code_cell(body)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, nb_dir / f"{name}.ipynb")
    return tmp_path


def test_failing_notebook_stops_the_pipeline_naming_notebook_and_cell(tmp_path):
    root = _project(tmp_path, {
        # 00 hands a file to 01 (results travel through files, not kernel globals).
        "00_run_benchmark": 'from pathlib import Path\nPath(project_root, out).write_text("42")',
        "01_metrics": 'from pathlib import Path\nvalue = int(Path(project_root, out).read_text())\n'
                      'raise ValueError(f"metric broken at {value}")',
    })
    params = tmp_path / "p.yaml"
    params.write_text("out: handoff.txt\n")
    with pytest.raises(pipeline.NotebookFailed) as err:
        pipeline.run_pipeline(params, root, "results/notebooks", quiet=True, latex=False,
                              only=["00_run_benchmark", "01_metrics", "02_stats"])
    msg = str(err.value)
    assert msg.startswith("notebook 01_metrics.ipynb failed in cell ")
    assert "ValueError: metric broken at 42" in msg and "`from pathlib import Path`" in msg
    assert msg.endswith("(executed copy with the traceback: results/notebooks/01_metrics.ipynb)")
    assert (root / "handoff.txt").read_text() == "42"
    assert (root / "results/notebooks/00_run_benchmark.ipynb").exists()
    assert not (root / "results/notebooks/02_stats.ipynb").exists()  # stopped at the failure
    executed = json.loads((root / "results/notebooks/01_metrics.ipynb").read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    # No machine path in the executed copies: papermill's own metadata is made relative too.
    assert executed["metadata"]["papermill"]["input_path"] == "notebooks/01_metrics.ipynb"
    for name in ("00_run_benchmark", "01_metrics"):
        assert str(tmp_path) not in (root / "results/notebooks" / f"{name}.ipynb").read_text()


def test_sanitizers_touch_no_stored_output():
    # A sanitizer that matched a stored number would hide its regression; today none matches anything.
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "nbval_sanitize.cfg")
    rules = {name: re.compile(cfg[name]["regex"]) for name in cfg.sections()}
    assert set(rules) == {"timestamps", "absolute-paths", "durations", "memory-addresses", "inline-png"}
    assert rules["inline-png"].fullmatch("data:image/png;base64,iVBORw0KGgo=")
    # inline-png masks the explorer's inlined figures by design: base64 image data, never a number that is compared
    # (the table beside each figure is); every other rule must match nothing stored.
    png = rules.pop("inline-png")
    assert rules["durations"].search("done in 3.2 s") and rules["memory-addresses"].search("at 0x7f3a2b1c9d00")
    assert rules["timestamps"].search("2026-11-21T23:49:15Z") and rules["absolute-paths"].search("/home/u/x.csv")
    for name in ALL:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                texts = [out.get("text", "")] + [v for k, v in out.get("data", {}).items() if k.startswith("text/")]
                for text in (png.sub("", t) for t in texts):
                    for rule, rx in rules.items():
                        assert not rx.search(text), f"{name}: sanitizer {rule} matches {rx.search(text).group()!r}"


def _one_profile(runs: Path) -> None:
    small_runs(runs)
    shutil.rmtree(next(runs.glob("*__mcp")))


def _sample_outputs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in (root / "results").rglob("*") if p.is_file()}


@pytest.mark.parametrize(("make_runs", "message"), [
    (lambda runs: None, "holds no trial this project reads (no trials found (empty folder or unknown layout))"),
    (lambda runs: (runs / "notes.txt").write_text("not a run"), "holds no trial this project reads"),
    (lambda runs: _one_profile(runs), "holds one profile (base, 3 trials)"),
])
def test_a_runs_folder_that_cannot_be_compared_stops_before_any_notebook(tmp_path, make_runs, message):
    """Empty, unrecognised or one-profile: one line naming the folder, and nothing run or written."""
    root = tmp_path / "project"
    (root / "results" / "mine").mkdir(parents=True)
    (root / "results" / "mine" / "run_info.json").write_text('{"earlier": true}')
    runs = root / "runs" / "mine"
    runs.mkdir(parents=True)
    make_runs(runs)
    params = root / "mine.yaml"
    params.write_text("runs_dir: runs/mine\noutput_dir: results/mine\n")
    before = _sample_outputs(root)
    allowed = pipeline.allowed_parameters(pipeline.pipeline_notebooks(NOTEBOOKS))
    with pytest.raises(pipeline.ParamsError) as err:
        pipeline.preflight(params, pipeline.load_params(params, allowed), root, allowed)
    line = str(err.value)
    assert "\n" not in line and "runs_dir 'runs/mine'" in line and message in line and "nothing was run or written" in line
    assert _sample_outputs(root) == before


def test_the_paper_command_stops_on_an_empty_runs_folder_with_exit_code_2(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    params = tmp_path / "p.yaml"
    params.write_text(f"runs_dir: {os.path.relpath(tmp_path / 'runs', ROOT)}\noutput_dir: results/never\n")
    assert pipeline.cli(["--params", str(params), "--root", str(ROOT), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "holds no trial" in err[0]
    assert not (ROOT / "results" / "never").exists()
