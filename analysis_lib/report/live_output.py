"""Output widgets of the interactive notebooks, drawn by replacing their ``outputs`` rather than by capturing
``display()`` inside ``with out:``.

Both look the same in JupyterLab. Headless, they differ: nbclient (papermill's executor) stands in for the
front end of every Output widget that captures, and answers each captured output on the kernel's shell channel
while it waits on that channel for the cell's reply. On a busy machine the reply's wake-up is then lost and the
run waits forever for a cell that has finished (jupyter/nbclient#312). An Output whose ``outputs`` are set is
never captured, so nothing is answered and nothing can be lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
from IPython.core.interactiveshell import InteractiveShell

__all__ = ["set_outputs", "live_output"]


def set_outputs(out: widgets.Output, *objects: Any) -> None:
    """Show ``objects`` (anything ``display()`` takes: HTML, Markdown, a figure, a widget) in ``out``, replacing
    what it showed, in one update (no flicker, as ``clear_output(wait=True)``)."""
    formatter = InteractiveShell.instance().display_formatter
    shown = []
    for obj in objects:
        data, metadata = formatter.format(obj)
        shown.append({"output_type": "display_data", "data": data, "metadata": metadata})
    out.outputs = tuple(shown)


def live_output(render: Callable[..., Any], controls: Mapping[str, widgets.ValueWidget]) -> widgets.Output:
    """An Output showing ``render(**values of controls)``, drawn again whenever a control changes: ipywidgets'
    ``interactive_output``, with ``render`` returning what to show instead of displaying it."""
    out = widgets.Output()

    def redraw(_change: Any = None) -> None:
        set_outputs(out, render(**{name: w.value for name, w in controls.items()}))

    for w in controls.values():
        w.observe(redraw, "value")
    redraw()
    return out
