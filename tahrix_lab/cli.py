"""``tahrix_lab.cli:main``, the console script's entry point (and ``python -m tahrix_lab.cli``),
kept where scripts and users expect it; the CLI itself lives in the composition root
(``tahrix_lab.app.cli``)."""

from tahrix_lab.app.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
