"""What the package logged on one run's thread, for an error row's "details".

In a notebook the analyst is the operator: the raw provider error or a tool's
traceback, which a service keeps for its log, can be shown on demand.
"""

from __future__ import annotations

import logging
import threading

DETAILS_CHARS = 8000


class RunLog(logging.Handler):
    """Warnings and errors logged under ``tahrix_lab`` on the thread that started it, until ``stop()``."""

    def __init__(self, thread_id: int) -> None:
        super().__init__(logging.WARNING)
        self.thread_id = thread_id
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    @classmethod
    def start(cls) -> RunLog:
        run_log = cls(threading.get_ident())
        logging.getLogger("tahrix_lab").addHandler(run_log)
        return run_log

    def stop(self) -> None:
        logging.getLogger("tahrix_lab").removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread_id:
            try:
                self.lines.append(self.format(record))
            except Exception:  # a record that cannot be formatted is not worth a crash
                self.lines.append(str(record.msg))

    def text(self) -> str:
        text = "\n".join(self.lines)
        return text if len(text) <= DETAILS_CHARS else text[: DETAILS_CHARS - 1] + "…"
