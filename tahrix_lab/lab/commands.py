"""`tahrix` commands contributed by tahrix_lab.lab."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(sub: Any) -> None:
    """Add this layer's subcommands to the `tahrix` parser."""
    _ = (sub, argparse)
