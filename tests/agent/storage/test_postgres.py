"""What only the PostgreSQL engine has: URLs and their passwords, migrations on a server,
``tahrix db``, idempotent writes, the statement timeout and a pool that runs out."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from tahrix_lab.agent import ConfigurationError, Message, TranscriptStore
from tahrix_lab.agent.errors import StoreUnavailableError
from tahrix_lab.agent.storage import PostgresStore, engine_of, pg_schema, redacted
from tahrix_lab.agent.storage.migrations import Migration
from tahrix_lab.app.cli import main
from tests.agent.storage.pg_server import PASSWORD, PgServer


@pytest.mark.parametrize("bad", ["mysql://u:pw@h/db", "postgres:/x", "postgresql:", "sqlite:///t.db"])
def test_an_unknown_or_malformed_url_is_a_clear_error_never_a_path(
    bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="URL") as info:
        TranscriptStore(bad)
    assert "pw" not in str(info.value)
    monkeypatch.setenv("TAHRIX_DB", bad)
    with pytest.raises(ConfigurationError):
        TranscriptStore()
    assert list(tmp_path.iterdir()) == []  # no directory named "mysql:" or "postgresql:"


def test_paths_and_urls_pick_their_engine() -> None:
    assert engine_of("tahrix.duckdb") == "duckdb"
    assert engine_of("/data/case.duckdb") == "duckdb"
    assert engine_of(":memory:") == "duckdb"
    assert engine_of("C:\\cases\\t.duckdb") == "duckdb"  # a drive letter is no scheme
    assert engine_of("postgresql://h/db") == engine_of("postgres://u@h:5433/db?sslmode=require")
    assert engine_of("postgres://h/db") == "postgresql"


def test_redacted_hides_every_password() -> None:
    url = "postgresql://ana:hunter2@db.example:5433/record?sslmode=require&password=other"
    shown = redacted(url)
    assert "hunter2" not in shown
    assert "other" not in shown
    assert shown.startswith("postgresql://ana:***@db.example:5433/record?")
    assert "sslmode=require" in shown
    assert redacted("postgresql://ana@h/db") == "postgresql://ana@h/db"


def test_store_path_never_holds_the_password(pg_url: str) -> None:
    store = TranscriptStore(pg_url)
    assert PASSWORD not in store.path
    assert PASSWORD not in repr(store)
    assert store.engine == "postgresql"


def test_the_password_may_come_from_pgpassword_or_pgpass(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_server.url(pg_server.create_database(), password=False)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    s = TranscriptStore(url).create_session(user="from-env")
    PostgresStore.close_pools()
    monkeypatch.delenv("PGPASSWORD")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_server.port}:*:postgres:{PASSWORD}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    assert TranscriptStore(url).get_session(s.id).user == "from-env"
    PostgresStore.close_pools()
    monkeypatch.delenv("PGPASSFILE")
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(StoreUnavailableError) as info:  # no password anywhere: refused, calmly
        TranscriptStore(url)
    assert f"127.0.0.1:{pg_server.port}" in str(info.value)


def test_migrations_on_a_blank_and_an_old_database(pg_url: str) -> None:
    TranscriptStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert pg_schema.applied(conn, "transcript") == [m.name for m in pg_schema.MIGRATIONS]
        extra = (*pg_schema.MIGRATIONS, Migration("0002_probe", "CREATE TABLE probe (x INTEGER)"))
        assert pg_schema.migrate(conn, "transcript", extra) == ["0002_probe"]
        assert pg_schema.migrate(conn, "transcript", extra) == []
        assert conn.execute("SELECT count(*) FROM probe").fetchone() == (0,)


def test_tahrix_db_check_and_migrate(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_server.url(pg_server.create_database())
    monkeypatch.setenv("TAHRIX_DB", url)
    assert main(["db", "check"]) == 1  # a blank database: every migration pending
    out = capsys.readouterr()
    assert "pending: 0001_transcript" in out.err
    assert main(["db", "migrate"]) == 0
    assert "applied 0001_transcript" in capsys.readouterr().out
    assert main(["db", "migrate"]) == 0
    assert "already up to date" in capsys.readouterr().out
    assert main(["db", "check"]) == 0
    out = capsys.readouterr()
    assert "up to date" in out.out
    assert PASSWORD not in out.out + out.err


def test_tahrix_db_check_on_a_duckdb_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "t.duckdb"
    monkeypatch.setenv("TAHRIX_DB", str(db))
    assert main(["db", "check"]) == 1  # no file yet
    assert main(["db", "migrate"]) == 0
    assert main(["db", "check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_a_retry_after_a_dropped_connection_never_stores_a_message_twice(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TranscriptStore(pg_url)
    s = store.create_session()
    real = store._pool.run  # type: ignore[attr-defined]
    dropped: list[bool] = []

    def drop_after_commit(work):  # type: ignore[no-untyped-def]
        def once(conn, first):  # type: ignore[no-untyped-def]
            result = work(conn, first)
            if not dropped:  # the server committed; the answer never came back
                dropped.append(True)
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return result

        return real(once)

    monkeypatch.setattr(store._pool, "run", drop_after_commit)  # type: ignore[attr-defined]
    first = store.append_message(s.id, Message.user("once"))
    dropped.clear()
    second = store.append_message(s.id, Message.user("twice?"))
    dropped.clear()
    store.append_turn_end(s.id, stop_reason="end_turn")
    assert (first.position, second.position) == (0, 1)
    assert [m.text for m in store.load_messages(s.id)] == ["once", "twice?"]
    assert len(store.load_turn_ends(s.id)) == 1


def test_a_statement_past_its_timeout_is_a_calm_error(pg_url: str) -> None:
    store = PostgresStore(pg_url, statement_timeout=0.2)
    with pytest.raises(StoreUnavailableError, match=r"took longer than 0\.2 s"):
        store._rows("SELECT pg_sleep(5)")
    store.create_session()  # the connection is fine afterwards


def test_an_exhausted_pool_waits_then_gives_a_calm_error(pg_url: str) -> None:
    store = PostgresStore(pg_url, pool_size=1, wait=0.5)
    store.create_session(user="first")
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._pool.pool.connection():
            taken.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(10)
        with pytest.raises(StoreUnavailableError) as info:
            store.list_sessions()
        message = str(info.value)
        assert "within 0.5 s" in message
        assert "127.0.0.1" in message
        assert PASSWORD not in message
    finally:
        release.set()
        holder.join()
    assert [s.user for s in store.list_sessions()] == ["first"]  # and it works again


def test_show_on_postgresql(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = TranscriptStore(pg_url)
    s = store.create_session(user="ana", title="Trace")
    store.append_message(s.id, Message.user("hello from postgres"))
    monkeypatch.setenv("TAHRIX_DB", pg_url)
    assert main(["show", s.id[:8]]) == 0
    out = capsys.readouterr().out
    assert "hello from postgres" in out
    assert PASSWORD not in out


def test_a_duckdb_user_never_loads_psycopg() -> None:
    code = (
        "import sys; from tahrix_lab.agent import TranscriptStore; TranscriptStore(':memory:').close();"
        "print([m for m in ('psycopg', 'psycopg_pool') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
