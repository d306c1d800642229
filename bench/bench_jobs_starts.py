"""What a job costs the worker apart from its tokens: start and end, with and without grouping.

N one-token jobs are admitted at once into Redis; one ``tahrix serve --role
worker`` process (the real wiring, the bench's stamping backend) runs them.
Printed: the worker's CPU per job and the time until every job ended, for

* grouped: the transcript writes of many run threads share transactions
  (``TranscriptStore.group_writes``) and the loop is handed a new session's
  messages (``run_agent(history=...)``), as the runner does;
* alone: the same code with both turned off (each message and turn end its
  own transaction, the loop reading the session back): the previous design;

and the ratio. DuckDB pays a few milliseconds per transaction on this machine.

    .venv/bin/python bench/bench_jobs_starts.py            # 300 jobs
    .venv/bin/python bench/bench_jobs_starts.py --jobs 500
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_jobs_latency import RedisProc, cpu_seconds, serve_child


def worker(grouped: bool, *args: Any) -> None:
    if not grouped:  # the previous design: every write its own transaction, history read back
        from tahrix_lab.agent.storage import TranscriptStore
        from tahrix_lab.jobs import runner

        TranscriptStore.group_writes = lambda self, **kw: None  # type: ignore[method-assign]
        run_agent = runner.run_agent
        runner.run_agent = lambda *a, history=None, **kw: run_agent(*a, **kw)  # type: ignore[assignment]
    serve_child(*args)


def one(jobs: int, grouped: bool) -> dict[str, Any]:
    from tahrix_lab.jobs.contract import JobRequest
    from tahrix_lab.jobs.stores.redis import RedisJobStore

    redis_proc = RedisProc()
    tmp = tempfile.TemporaryDirectory()
    db = os.path.join(tmp.name, "bench.duckdb")
    proc = mp.get_context("spawn").Process(
        target=worker, args=(grouped, 0, redis_proc.url, db, 1, 0.05, jobs, "worker")
    )
    proc.start()
    store = RedisJobStore(redis_proc.url)
    try:
        deadline = time.monotonic() + 60
        while store.workers_alive() == 0:  # the worker renewed once: it is up
            if time.monotonic() > deadline:
                raise SystemExit("the bench worker did not start")
            time.sleep(0.1)
        assert proc.pid is not None
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        ids = []
        for i in range(jobs):
            req = JobRequest(user="bench", message=f"job {i}")
            store.create(req.job_id, user="bench", request=req.to_dict(), enqueue=True)
            ids.append(req.job_id)
        while any(store.client.hget(f"chatjob:{j}", "status") == "streaming" for j in ids):
            time.sleep(0.05)
        wall, cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - cpu0
        ended = [store.client.hget(f"chatjob:{j}", "status") for j in ids]
        assert ended == ["done"] * jobs, f"not every job ended done: {set(ended)}"
    finally:
        store.close()
        proc.terminate()
        proc.join(10)
        redis_proc.close()
        tmp.cleanup()
    row = {"design": "grouped" if grouped else "alone", "jobs": jobs, "all_ended_s": round(wall, 2),
           "worker_cpu_ms_per_job": round(1000 * cpu / jobs, 1)}  # fmt: skip
    print(f"  {row['design']:8s} {jobs} jobs: all ended in {wall:5.2f} s, worker CPU "
          f"{row['worker_cpu_ms_per_job']:5.1f} ms per job", flush=True)  # fmt: skip
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=300)
    args = ap.parse_args()
    print(f"job starts and ends: {args.jobs} one-token jobs at once, one worker process, "
          f"cores={os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    grouped, alone = one(args.jobs, True), one(args.jobs, False)
    print(f"  alone/grouped: CPU {alone['worker_cpu_ms_per_job'] / grouped['worker_cpu_ms_per_job']:.1f}x, "
          f"time {alone['all_ended_s'] / grouped['all_ended_s']:.1f}x")  # fmt: skip
    print(json.dumps([grouped, alone]))


if __name__ == "__main__":
    main()
