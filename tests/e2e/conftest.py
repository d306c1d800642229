"""Shared end-to-end fixtures: a real headless Chromium, a loopback static
server for ``widgets/``, and a throw-away JupyterLab server.

Reuse them from any test under ``tests/e2e`` (pytest picks this file up):

``browser``
    A Playwright ``Browser`` (sync API) on the system Chromium
    (``/usr/bin/chromium``, never a downloaded one), launched headless with the
    flags this machine needs (no background networking, no sandbox as root) and a fresh user-data dir. Session
    scoped: one browser for the whole run.

``page``
    A fresh ``Page`` in its own browser context (1280x900), closed after the
    test. Console errors are collected in ``page.console_errors`` (a list of
    strings) so a test can assert none happened.

``widgets_url``
    ``http://127.0.0.1:<port>`` serving the repository's ``widgets/`` folder
    (``.js``/``.mjs`` as ``text/javascript``, so ES module imports work) plus
    ``/blank.html``, an empty page for mounting the renderer. A page can do
    ``await import(widgets_url + "/flow.js")`` or ``page.goto(widgets_url +
    "/blank.html")`` then ``<script type="module">``.

``mount_flow(page, options=None)``  (fixture returning a function)
    Opens ``/blank.html``, imports ``flow.js`` and ``flow.css``, and creates a
    flow on ``#root`` as ``window.flow`` (options as in ``createFlow``;
    ``onSend``/``onStop`` record into ``window.sent`` / ``window.stops``).

``jupyter_lab``
    A JupyterLab server on a free 127.0.0.1 port with a random token, run as
    ``jupyter lab --allow-root --no-browser`` from this venv with throw-away
    ``JUPYTER_CONFIG_DIR``/``JUPYTER_DATA_DIR``/``JUPYTER_RUNTIME_DIR``, its own
    ``tahrix-test`` kernelspec pointing at this venv's python, Jupyter news and
    update checks off and notebook windowing off. Yields a ``JupyterLab`` with
    ``url``, ``token``, ``root`` (the served folder, a tmp dir), ``kernel_name``,
    ``lab_url(path)`` (a URL that opens a notebook with ``?reset``),
    ``write_notebook(name, cells)`` and ``shutdown_kernels()``. Module scoped;
    on teardown every kernel is shut down through the server's API before the
    server is stopped (kernels live in their own process session, so stopping
    the server alone would leave them running).

``notebook7``
    The same, for the Notebook 7 app (``python -m notebook``); its ``lab_url``
    opens ``/notebooks/<path>``. ``start_jupyter(base, app)`` is the context
    manager behind both (the widget bench uses it too).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

REPO = Path(__file__).resolve().parents[2]
WIDGETS = REPO / "widgets"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

BLANK = b"""<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>tahrix test</title></head>
<body><div id="root"></div></body></html>"""


# -- the browser ------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Per module: Playwright's sync API keeps an event loop running in the main
    thread while it lives, which would break later tests that call asyncio.run."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/system-deps.sh (apt-get install chromium)")
    with sync_playwright() as pw:
        # launch() gives every run a fresh temporary profile (it refuses --user-data-dir).
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.console_errors = errors
    try:
        yield pg
    finally:
        context.close()


# -- a static server for widgets/ -------------------------------------------------
class _WidgetsHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".css": "text/css",
    }

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/blank.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(BLANK)))
            self.end_headers()
            self.wfile.write(BLANK)
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


@pytest.fixture(scope="session")
def widgets_url() -> Iterator[str]:
    handler = functools.partial(_WidgetsHandler, directory=str(WIDGETS))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="widgets-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


MOUNT_JS = """async ([base, options]) => {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = base + '/flow.css';
  document.head.appendChild(link);
  await new Promise((resolve) => { link.onload = resolve; link.onerror = resolve; });
  const mod = await import(base + '/flow.js');
  window.flowModule = mod;
  window.sent = [];
  window.stops = 0;
  window.flow = mod.createFlow(document.getElementById('root'), {
    ...(options || {}),
    onSend: (text) => window.sent.push(text),
    onStop: () => { window.stops += 1; },
  });
  return true;
}"""


@pytest.fixture
def mount_flow(widgets_url: str) -> Callable[..., Any]:
    def mount(pg: Any, options: dict[str, Any] | None = None) -> Any:
        pg.goto(widgets_url + "/blank.html")
        pg.evaluate(MOUNT_JS, [widgets_url, options or {}])
        return pg

    return mount


# -- JupyterLab -------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class JupyterLab:
    url: str
    token: str
    root: Path
    kernel_name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    notebooks: list[str] = field(default_factory=list)
    app: str = "jupyterlab"

    def lab_url(self, path: str) -> str:
        if self.app == "notebook":
            return f"{self.url}/notebooks/{path}?token={self.token}"
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            data = resp.read()
        return json.loads(data) if data else None

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        """A notebook of code cells with this server's kernelspec in its metadata."""
        nb = {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {
                "kernelspec": {"name": self.kernel_name, "display_name": "Tahrix test", "language": "python"},
                "language_info": {"name": "python"},
            },
            "cells": [
                {
                    "cell_type": "code",
                    "id": f"cell-{i}",
                    "metadata": {},
                    "execution_count": None,
                    "outputs": [],
                    "source": src,
                }
                for i, src in enumerate(cells)
            ],
        }
        path = self.root / name
        path.write_text(json.dumps(nb, indent=1))
        return path

    def shutdown_kernels(self) -> None:
        """Shut every kernel down through the server and wait until they are gone."""
        for session in self.api("GET", "/api/sessions") or []:
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self.api("GET", "/api/kernels") or []:
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.api("GET", "/api/kernels"):
            time.sleep(0.2)


def _write_settings(config_dir: Path, data_dir: Path, kernel_name: str) -> None:
    settings = config_dir / "lab" / "user-settings" / "@jupyterlab"
    files = {
        "apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
        "notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }
    for rel, value in files.items():
        target = settings / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))
    spec = data_dir / "kernels" / kernel_name
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Tahrix test",
                "language": "python",
            }
        )
    )


@contextlib.contextmanager
def start_jupyter(base: Path, app: str = "jupyterlab") -> Iterator[JupyterLab]:
    """A throw-away Jupyter server (``app`` is ``jupyterlab`` or ``notebook``, i.e. Notebook 7) under ``base``.

    Used by the fixtures below and by ``bench/bench_widget_jupyterlab.py``.
    """
    root, config, data, runtime = (base / n for n in ("root", "config", "data", "runtime"))
    for d in (root, config, data, runtime):
        d.mkdir(parents=True)
    kernel_name = "tahrix-test"
    _write_settings(config, data, kernel_name)
    # The server needs the venv's labextensions (anywidget, jupyterlab_widgets)
    # but nothing else from the machine.
    venv_share = Path(sys.prefix) / "share" / "jupyter"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(data),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_PATH": f"{data}{os.pathsep}{venv_share}",
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYTHONPATH": str(REPO),
    }
    env.pop("JUPYTER_PREFER_ENV_PATH", None)
    port = free_port()
    token = secrets.token_hex(16)
    log_path = base / "server.log"
    log = log_path.open("wb")
    extra = ["--LabApp.news_url="] if app == "jupyterlab" else []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            app,
            "--allow-root",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            *extra,
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    lab = JupyterLab(f"http://127.0.0.1:{port}", token, root, kernel_name, proc, log_path, app=app)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{app} exited early:\n{log_path.read_text()[-3000:]}")
            try:
                lab.api("GET", "/api/status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{app} did not start:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.3)
        yield lab
    finally:
        try:
            if proc.poll() is None:
                lab.shutdown_kernels()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
            log.close()
            shutil.rmtree(runtime, ignore_errors=True)


def _serve(tmp_path_factory: pytest.TempPathFactory, app: str) -> Iterator[JupyterLab]:
    try:
        with start_jupyter(tmp_path_factory.mktemp(app), app) as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def jupyter_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    yield from _serve(tmp_path_factory, "jupyterlab")


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """Like ``jupyter_lab``, but the Notebook 7 app (``python -m notebook``); ``lab_url`` opens ``/notebooks/``."""
    yield from _serve(tmp_path_factory, "notebook")
