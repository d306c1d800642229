"""Waiting in a notebook cell without deafening the kernel.

A cell that blocks (``ChatWidget.ask``) keeps the kernel's main thread busy,
so the widget's own messages (Stop, the text box) would wait until the cell
ends. Two mechanisms, whichever the kernel supports:

* ipykernel >= 7 reads every shell message on its shell-channel thread first
  and asks the target comm where to route it (``Comm._reply_subshell_for``,
  the hook ipykernel uses for subshells). ``route_early`` wraps that hook: a
  Stop is acted on right there, on the shell-channel thread, while the main
  thread is still blocked; the message then goes on as usual.
* older ipykernels have ``Kernel.do_one_iteration``: ``wait_for_thread``
  then uses ``jupyter_ui_poll.ui_events()``, which handles the queued UI
  messages while the cell waits (and holds any other cell until it ends).

A question typed while the main thread is blocked waits for it; the front end
shows it at once, "waiting for the kernel".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def _kernel() -> Any | None:
    """The running ipykernel, or ``None`` outside a Jupyter kernel."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with ipywidgets
        return None
    return getattr(get_ipython(), "kernel", None)


def route_early(comm: Any, on_message: Callable[[Any], None]) -> bool:
    """Call ``on_message(data)`` for each message to ``comm`` as soon as the kernel receives it.

    ``on_message`` must be quick and thread-safe (it runs on the shell-channel
    thread, while the main thread may be blocked); the message then goes on
    as usual. The widget acts there on a Stop, and on a view's resync request
    (a view that rendered late). Returns whether the kernel offers the hook.
    """
    route = getattr(comm, "_reply_subshell_for", None)
    if route is None:
        return False

    def routed(data: Any, default: Any) -> Any:
        try:
            on_message(data)
        except Exception:  # routing must go on whatever happens here
            log.exception("the early message hook failed")
        return route(data, default)

    comm._reply_subshell_for = routed
    return True


def wait_for_thread(thread: threading.Thread, timeout: float | None = None) -> None:
    """Join ``thread``; in an older kernel's main thread, keep handling UI messages meanwhile."""
    kernel = _kernel()
    if (
        kernel is None
        or not hasattr(kernel, "do_one_iteration")  # ipykernel 7: route_early does the work
        or threading.current_thread() is not threading.main_thread()
    ):
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
