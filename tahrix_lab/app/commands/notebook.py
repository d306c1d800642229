"""`tahrix lab`: JupyterLab on the notebooks with the project's kernel."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KERNEL_NAME = "tahrix-lab"
KERNEL_DISPLAY_NAME = "Tahrix Lab (project venv)"
_REPO = Path(__file__).resolve().parents[3]


def add_commands(sub: Any) -> None:
    """Add ``lab`` to the `tahrix` parser."""
    p = sub.add_parser("lab", help="open JupyterLab on the notebooks with the project's kernel")
    p.add_argument("--notebook-dir", help="default: ./notebooks, else the checkout's notebooks")
    p.add_argument("--port", type=int)
    p.add_argument("--no-browser", action="store_true")
    p.add_argument("--print-command", action="store_true", help="print the command instead of running it")
    p.set_defaults(func=_lab)


def install_kernelspec(data_dir: Path, python: str | None = None) -> Path:
    """Write a kernelspec for this venv's python into ``data_dir/kernels/tahrix-lab``
    (a project-local Jupyter data dir, found through ``JUPYTER_PATH``)."""
    spec_dir = data_dir / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [python or sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": KERNEL_DISPLAY_NAME,
        "language": "python",
        "metadata": {"debugger": True},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    return spec_dir


def default_notebook_dir() -> Path:
    here = Path.cwd() / "notebooks"
    return here if here.is_dir() else _REPO / "notebooks"


def lab_command(
    notebook_dir: Path, *, port: int | None = None, no_browser: bool = False, extra: Sequence[str] = ()
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start JupyterLab on ``notebook_dir`` with the project kernel."""
    from tahrix_lab.agent.errors import ConfigurationError  # the engine loads only when a command runs

    if not notebook_dir.is_dir():
        raise ConfigurationError(
            f"There is no notebooks folder at {str(notebook_dir)!r}; pass --notebook-dir."
        )
    data_dir = notebook_dir.resolve().parent / ".jupyter"
    install_kernelspec(data_dir)
    env = dict(os.environ)
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(data_dir), env.get("JUPYTER_PATH", "")) if p)
    argv = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        f"--notebook-dir={notebook_dir.resolve()}",
        f"--MappingKernelManager.default_kernel_name={KERNEL_NAME}",
    ]
    if port is not None:
        argv.append(f"--ServerApp.port={port}")
    if no_browser:
        argv.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")  # containers often run as root; Jupyter refuses without it
    argv.extend(extra)
    return argv, env


def _lab(args: argparse.Namespace) -> int:
    from tahrix_lab.agent.errors import ConfigurationError

    notebook_dir = Path(args.notebook_dir) if args.notebook_dir else default_notebook_dir()
    argv, env = lab_command(notebook_dir, port=args.port, no_browser=args.no_browser)
    if args.print_command:
        print(" ".join(argv))
        return 0
    if importlib.util.find_spec("jupyterlab") is None:
        raise ConfigurationError(
            "JupyterLab is not installed in this environment: pip install 'tahrix-lab[dev]'."
        )
    return subprocess.call(argv, env=env)


__all__ = ["KERNEL_NAME", "add_commands", "default_notebook_dir", "install_kernelspec", "lab_command"]
