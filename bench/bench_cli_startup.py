"""How long `tahrix` takes to answer, beside the interpreter's own start (`python -c pass`).

Each command runs N times as a fresh process (the console script `tahrix` next to this
Python when installed, else `python -m tahrix_lab.cli`); printed per command: the median
and p95 wall time, the median CPU time (user + sys of the child: less disturbed by other
work on a shared machine), how many times `python -c pass` that is, and the target.
`tahrix sessions` runs on a small DuckDB file made in a temp dir: 20 sessions of 3 priced
calls each (the fake backend under the name "openai", model gpt-4o).

    python bench/bench_cli_startup.py            # 10 runs of each
    python bench/bench_cli_startup.py --runs 30
    python bench/bench_cli_startup.py --before OTHER_CHECKOUT   # also another checkout's CLI, same run, and the ratio
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tahrix_lab.agent import FakeBackend, TranscriptStore, ask  # noqa: E402
from tahrix_lab.agent.backends.fake import text  # noqa: E402

TARGETS = {"tahrix --help": 0.5, "tahrix --version": 0.5, "tahrix sessions": 1.0}


def make_workspace(path: Path, sessions: int = 20, turns: int = 3) -> None:
    with TranscriptStore(path) as store:
        for i in range(sessions):
            session = store.create_session(user="ana", purpose="chat", title=f"question {i}")
            for t in range(turns):
                backend = FakeBackend([[text(f"answer {t}")]], name="openai")
                list(ask(store, session, f"question {i}.{t}?", backend=backend, model="gpt-4o"))


def run(argv: list[str], env: dict[str, str], n: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return walls, cpus


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--before", type=Path, help="a checkout whose `tahrix` runs beside this one's")
    opts = parser.parse_args()
    n = opts.runs
    script = Path(sys.executable).with_name("tahrix")
    tahrix = [str(script)] if script.exists() else [sys.executable, "-m", "tahrix_lab.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tahrix.duckdb"
        make_workspace(db)
        env = {**os.environ, "TAHRIX_DB": str(db), "TAHRIX_LOG": str(Path(tmp) / "tahrix.log")}
        checkouts = {"": ROOT, **({"before: ": opts.before.resolve()} if opts.before else {})}
        commands = {"python -c pass": [sys.executable, "-c", "pass"]}
        envs = {"python -c pass": env}
        for tag, root in checkouts.items():
            for args in ("--help", "--version", "sessions"):
                commands[f"{tag}tahrix {args}"] = [*tahrix, args]
                envs[f"{tag}tahrix {args}"] = {**env, "PYTHONPATH": str(root)}  # which checkout's code runs
        run(commands["tahrix sessions"], envs["tahrix sessions"], 1)  # warm the file cache once
        results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
        for _ in range(n):  # interleaved: a burst of load on a shared machine hits every command alike
            for name, argv in commands.items():
                walls, cpus = run(argv, envs[name], 1)
                results[name][0].extend(walls)
                results[name][1].extend(cpus)
    base = statistics.median(results["python -c pass"][0])
    print(
        f"{n} runs each; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {' '.join(tahrix)}"
    )
    print(f"{'command':26} {'median':>8} {'p95':>8} {'CPU':>7} {'× pass':>7}  target")
    for name, (walls, cpus) in results.items():
        median = statistics.median(walls)
        target = TARGETS.get(name)
        verdict = "" if target is None else f"≤ {target:.1f} s {'met' if median <= target else 'NOT met'}"
        if name.startswith("before: "):
            now = statistics.median(results[name.removeprefix("before: ")][0])
            verdict = f"{median / now:.1f}× the time of this checkout's"
        print(f"{name:26} {median:7.3f}s {p95(walls):7.3f}s {statistics.median(cpus):6.3f}s "
              f"{median / base:6.1f}×  {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
