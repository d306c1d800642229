"""Stop during a blocking ``chat.ask`` in a real ipykernel (no browser).

A kernel from this venv runs a cell that blocks in ``ask`` on a slow answer;
a Stop arrives as a comm message, exactly as the widget's button sends it.
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec

SETUP = """
import time
from tahrix_lab.agent import FakeBackend, TranscriptStore
from tahrix_lab.agent.backends.fake import text
from tahrix_lab.lab.widget import ChatWidget

def slow(messages, specs):
    for i in range(400):
        time.sleep(0.05)
        yield text(f"w{i} ")

chat = ChatWidget(store=TranscriptStore(":memory:"), backend=FakeBackend([slow]), model="fake-model")
print("COMM", chat.comm.comm_id)
"""


@pytest.fixture
def kernel() -> Iterator[Any]:
    km = KernelManager()
    km._kernel_spec = KernelSpec(  # this venv's python, whatever kernelspecs the machine has
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        display_name="tahrix test",
        language="python",
    )
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def output(kc: Any, prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "stream" and msg["content"]["text"].startswith(prefix):
            return str(msg["content"]["text"])
    raise AssertionError(f"no output starting with {prefix!r} within {timeout} s")


def test_stop_ends_a_blocking_ask(kernel: Any) -> None:
    kernel.execute(SETUP)
    comm_id = output(kernel, "COMM", 60).split()[1]
    kernel.execute(
        'answer = chat.ask("write a long answer")\nprint("ANSWER", answer.split()[-1], chat.history()[-1])'
    )
    time.sleep(1.5)  # the cell is blocked in ask, the answer streaming (20 s in all)
    stop = {"comm_id": comm_id, "data": {"method": "custom", "content": {"type": "stop"}}}
    kernel.shell_channel.send(kernel.session.msg("comm_msg", stop))
    line = output(kernel, "ANSWER", 10)  # long before the 20 s the full answer takes
    last_word, end = line.split(maxsplit=2)[1:]
    assert last_word.startswith("w") and int(last_word[1:]) < 200
    assert "'stop_reason': 'cancelled'" in end
