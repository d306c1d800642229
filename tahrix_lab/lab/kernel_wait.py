"""Waiting in a notebook cell without deafening the kernel.

A cell that blocks (``ChatWidget.ask``) keeps the kernel's shell busy, so the
widget's own messages (Stop, the text box) would wait until the cell ends.
``jupyter_ui_poll`` processes the queued UI messages while the cell waits and
defers any other cell's execution until this one is done.
"""

from __future__ import annotations

import threading
import time


def _kernel_shell() -> object | None:
    """The IPython shell when running inside a Jupyter kernel, else ``None``."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with ipywidgets
        return None
    shell = get_ipython()
    return shell if getattr(shell, "kernel", None) is not None else None


def wait_for_thread(thread: threading.Thread, timeout: float | None = None) -> None:
    """Join ``thread``; inside a kernel's main thread, keep handling UI messages meanwhile."""
    if _kernel_shell() is None or threading.current_thread() is not threading.main_thread():
        thread.join(timeout)
        return
    from jupyter_ui_poll import ui_events

    deadline = None if timeout is None else time.monotonic() + timeout
    with ui_events() as poll:
        while thread.is_alive():
            if deadline is not None and time.monotonic() >= deadline:
                return
            poll(20)  # handle up to 20 queued UI messages (Stop, Send, resync)
            thread.join(0.02)
