"""A real PostgreSQL server for tests: Debian's binaries, initdb/pg_ctl in a temporary
directory owned by the ``postgres`` user (the server refuses to run as root), on a free
loopback port, with its socket in that directory. Password authentication over TCP, so a
URL's password, ``PGPASSWORD`` and ``.pgpass`` are really exercised."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

PASSWORD = "s3cret-Pw_" + uuid.uuid4().hex[:8]  # never printed by the code under test


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One cluster: ``start()``, ``stop(mode)``, ``url(db)``; ``destroy()`` removes it all."""

    def __init__(self) -> None:
        bin_dir = pg_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed: run scripts/system-deps.sh")
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="tahrix-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD)
        if self._as_postgres:
            shutil.chown(pwfile, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", f"--pwfile={pwfile}",
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        pwfile.unlink()

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, cwd=self.root)

    def start(self) -> None:
        options = (
            # fsync off: a test server outlives no machine crash. Commits stay synchronous,
            # so a committed row survives ``pg_ctl stop -m immediate`` (the fault tests).
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def processes(self) -> list[int]:
        """The postmaster and its children (backends, checkpointer, ...)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(entry))
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP the whole server: sockets stay open, nothing answers (a stalled VM)."""
        for pid in self.processes():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self.processes():
            os.kill(pid, signal.SIGCONT)

    def url(self, db: str = "postgres", *, password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://postgres{secret}@127.0.0.1:{self.port}/{db}"

    def create_database(self) -> str:
        """A fresh, empty database; its name."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already down
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
