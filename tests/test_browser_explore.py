"""The explorer notebook in a real browser: Debian's Chromium driven by Playwright against JupyterLab on
127.0.0.1. Runs explore.ipynb, changes each explorer widget and checks the rendered output follows,
opens a step, and asserts the console shows no error. Screenshots go to results/browser/."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ci_rule import skip_or_fail_in_ci

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "results" / "browser"
# No first-run work, no network of its own: the test only talks to 127.0.0.1.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _require_browser():
    """Playwright's API and the system Chromium (skip_or_fail_in_ci when missing)."""
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "the playwright package is not installed (pip install -e '.[test]')"
    if reason is None and not CHROMIUM.exists():
        reason = f"{CHROMIUM} not found (Debian: apt-get install chromium)"
    if reason:
        skip_or_fail_in_ci(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def lab(tmp_path, sample_runs):
    """JupyterLab with a token on a copy of the project's notebooks (the runs linked read-only)."""
    _require_browser()
    (tmp_path / "notebooks").mkdir()
    for name in ("explore.ipynb", "explore.py", "jupytext.toml"):  # the notebook, its text pair, the pairing
        shutil.copyfile(ROOT / "notebooks" / name, tmp_path / "notebooks" / name)
    shutil.copyfile(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")  # the root marker notebooks look for
    (tmp_path / "params").mkdir()  # the plan whose baseline the explorer opens on
    shutil.copyfile(ROOT / "params" / "analysis_plan.yaml", tmp_path / "params" / "analysis_plan.yaml")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "sample").symlink_to(sample_runs, target_is_directory=True)
    port, token = _free_port(), "explorer-test-token"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}", "--LabApp.expose_app_in_browser=True",
           f"--LabApp.app_settings_dir={ROOT / 'lab-settings'}"]  # what `make lab` passes: no news prompt
    if os.getuid() == 0:
        cmd.append("--allow-root")
    env = dict(os.environ, PYTHONPATH=str(ROOT), LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR",
               JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"), JUPYTER_RUNTIME_DIR=str(tmp_path / ".runtime"))
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start: {(tmp_path / 'lab.log').read_text()[-1500:]}")
                time.sleep(0.5)
        yield base, token, tmp_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _raw_metric_ids(text: str) -> list[str]:
    """Metric ids (the registry's that differ from their label, and the CodeCanvas columns) shown as words in ``text``."""
    from analysis_lib.codecanvas.metrics import METRIC_COLUMNS
    from analysis_lib.core import registry

    ids = [m.id for m in list(registry.METRICS.values()) + list(registry.DERIVED.values()) if m.id != m.label]
    return [i for i in [*ids, *METRIC_COLUMNS] if re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", text)]


def _output_text(page) -> str:
    """The visible text of the notebook's outputs (what a reader sees; code cells hold ids on purpose)."""
    return "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())


def _header(page) -> str:
    return page.locator(".pv-explorer .pv-pair h4").first.inner_text()


@pytest.mark.slow
def test_explorer_in_chromium(lab):
    from playwright.sync_api import expect, sync_playwright

    base, token, _ = lab
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    t0 = time.monotonic()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto(f"{base}/lab/tree/notebooks/explore.ipynb?token={token}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
        page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget"
                               " && window.jupyterapp.shell.currentWidget.sessionContext.session", timeout=90_000)
        page.wait_for_function("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                               timeout=90_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        explorer = page.locator(".pv-explorer")
        expect(explorer.locator(".pv-pair h4")).to_be_visible(timeout=120_000)
        expect(page.locator(".jp-OutputArea-output").filter(has_text="B − A is").first).to_be_visible(timeout=60_000)

        # The grid explains itself: colours, the repetition x arm headers, B−A.
        legend = explorer.locator(".pv-legend")
        expect(legend).to_be_visible()
        for words in ("succeeded", "failed", "infrastructure error", "no trial", "repetition × arm", "B−A",
                      "percentage points"):
            expect(legend).to_contain_text(words)
        # Every metric by its label: no raw id anywhere a reader looks; no news prompt over the notebook.
        assert _raw_metric_ids(_output_text(page)) == []
        assert page.get_by_text("Jupyter news").count() == 0

        # Task dropdown: another task, another paired view.
        first = _header(page)
        task = explorer.locator(".widget-dropdown", has=page.locator("label", has_text="task")).locator("select")
        task.select_option(index=3)
        chosen = task.input_value()
        assert chosen not in first
        expect(explorer.locator(".pv-pair h4").first).to_contain_text(f"{chosen}, repetition", timeout=30_000)

        # Repetition dropdown: the same task, another repetition.
        rep = explorer.locator(".widget-dropdown", has=page.locator("label", has_text="repetition")).locator("select")
        rep.select_option(index=1)
        expect(explorer.locator(".pv-pair h4").first).to_contain_text(f"{chosen}, repetition 2", timeout=30_000)

        # A grid cell opens its task and repetition.
        cell = explorer.locator(".pv-cell").nth(13)  # 14th cell: 3rd task row, 2nd repetition... whatever it is
        tip = cell.get_attribute("title")
        cell.click()
        picked_task, picked_rep = tip.split(", ")[1], tip.split("repetition ")[1].split(":")[0]
        expect(explorer.locator(".pv-pair h4").first).to_contain_text(f"{picked_task}, repetition {picked_rep}",
                                                                      timeout=30_000)

        # Grid sort: by task puts the alphabetically first task on top.
        sort = explorer.locator(".widget-dropdown", has=page.locator("label", has_text="sort grid")).locator("select")
        first_row = explorer.locator(".widget-gridbox .widget-html").nth(8)  # after 8 header labels (3 repetitions)
        before = first_row.inner_text()
        sort.select_option(label="by task")
        expect(first_row).not_to_have_text(before, timeout=30_000)
        expect(first_row).to_have_text("fix-async-retry-backoff")

        # Clicking a step shows its tool call, arguments and result.
        step = explorer.locator("details.pv-step").nth(3)
        expect(step.locator(".pv-detail")).to_be_hidden()
        step.locator("summary").click()
        expect(step.locator(".pv-detail")).to_be_visible()
        expect(step.locator(".pv-detail")).to_contain_text("result")
        step.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "explore_pair_step.png"))
        explorer.locator(".pv-pair h4").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "explore_pair_header.png"))
        explorer.locator(".widget-gridbox").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "explore_grid.png"))

        # The same profile for A and B: a message, not a traceback.
        def dropdown(label: str, scope=explorer):
            return scope.locator(".widget-dropdown", has=page.locator("label", has_text=re.compile(f"^{label}$")))

        a_value = dropdown("A").first.locator("select").input_value()
        dropdown("B").first.locator("select").select_option(a_value)
        expect(explorer.locator(".pv-message")).to_contain_text("pick two different profiles", timeout=30_000)
        expect(explorer.locator(".pv-legend")).to_have_count(0)  # no grid, and the message once
        expect(explorer.get_by_text("A and B are both")).to_have_count(1)
        # The side-by-side table below (the last A/B pickers of the page) answers the same way, once.
        side = page.locator(".jp-Cell").filter(has=dropdown("B", page)).last
        dropdown("B", page).last.locator("select").select_option(dropdown("A", page).last.locator("select").input_value())
        expect(side.get_by_text("A and B are both")).to_have_count(1, timeout=30_000)
        expect(page.get_by_text("A and B are both")).to_have_count(2)
        assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
        assert page.get_by_text("Traceback").count() == 0
        assert page.get_by_text("<function").count() == 0
        browser.close()
    elapsed = time.monotonic() - t0
    print(f"browser session: {elapsed:.1f} s")
    assert not problems, "\n".join(problems)


def _open(pw, base: str, token: str, path: str, problems: list[str]):
    browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.goto(f"{base}/lab/tree/{path}?token={token}")
    page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                           timeout=90_000)
    return browser, page


@pytest.mark.slow
def test_recorded_notebook_opened_and_saved_is_unchanged(lab):
    """A notebook as `make nbval-record` stores it, opened in JupyterLab and saved, stays byte for byte, its pair too."""
    from playwright.sync_api import sync_playwright

    base, token, project = lab
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rec = subprocess.run([sys.executable, "-m", "analysis_lib", "paper", "--root", str(project), "--record-notebooks",
                          "--only", "explore", "-q"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert rec.returncode == 0, rec.stderr[-2000:]
    path, pair = project / "notebooks" / "explore.ipynb", project / "notebooks" / "explore.py"
    before, pair_before, pair_written = path.read_bytes(), pair.read_bytes(), pair.stat().st_mtime_ns
    problems: list[str] = []
    with sync_playwright() as pw:
        browser, page = _open(pw, base, token, "notebooks/explore.ipynb", problems)
        # The static fallback, not widget text, is what a reader sees before running.
        assert page.locator(".jp-OutputArea .pv-pair h4").first.is_visible()
        assert page.get_by_text("interactive(children=").count() == 0
        assert page.locator(".jp-OutputArea .pv-legend").count() == 1  # the static grid explains itself too
        assert page.locator(".jp-OutputArea .pv-pair").count() == 1  # the paired view once, no static copy after it
        assert _raw_metric_ids(_output_text(page)) == []
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("!window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
        page.wait_for_timeout(500)
        browser.close()
    after = path.read_bytes()
    assert after == before, "saving changed the notebook on disk"
    assert pair.stat().st_mtime_ns > pair_written, "JupyterLab did not save the .py pair (is jupytext installed?)"
    assert pair.read_bytes() == pair_before, "saving changed the notebook's .py pair on disk"
    assert not problems, "\n".join(problems)
