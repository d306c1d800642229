"""CaseDB: the case tables in a DuckDB connection shared with the transcript.

One connection, one cursor per thread (DuckDB connections are not
thread-safe and tools run in worker threads), one lock for writes. Every
query is parameterised; identifiers never come from data.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, cast

import duckdb

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage import TranscriptStore
from tahrix_lab.agent.storage.duck import Database
from tahrix_lab.agent.storage.leased_cursor import Cursor
from tahrix_lab.agent.storage.migrations import apply_migrations
from tahrix_lab.case.chains import EVM_CHAINS
from tahrix_lab.case.schema import MIGRATIONS, SEVERITIES

__all__ = [
    "EVM_CHAINS",
    "LABEL_RANK",
    "LABEL_RANK_KEY",
    "CaseDB",
    "jdict",
    "jsonable",
    "label_view",
    "norm_address",
    "utcnow_naive",
]


# How labels rank wherever one is picked (the label library's rule, case/labels): a label marked
# as overriding (an analyst's, marked so) first, then confidence level, cluster definer, newest.
LABEL_RANK = "l.overrides DESC, coalesce(l.confidence_level, 0) DESC, l.is_cluster_definer DESC, l.lastmod DESC, l.label_id"
LABEL_RANK_KEY = "(l.overrides, coalesce(l.confidence_level, 0), l.is_cluster_definer, l.lastmod)"


def norm_address(chain: str, address: str | None) -> str | None:
    """Per-chain normal form: EVM hex lower-cased; others kept as encoded."""
    if address is None:
        return None
    address = address.strip()
    if not address:
        return None
    return address.lower() if chain in EVM_CHAINS else address


def jsonable(value: Any) -> Any:
    """DuckDB values as JSON-safe values (times as ISO UTC, decimals as strings)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(timespec="seconds") + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        s = format(value.normalize(), "f") if value == value.to_integral() else format(value, "f")
        return s.rstrip("0").rstrip(".") if "." in s else s
    if isinstance(value, float) and value != value:  # NaN
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def jdict(value: dict[str, Any]) -> dict[str, Any]:
    """``jsonable`` for a dict, typed as one."""
    out = jsonable(value)
    assert isinstance(out, dict)
    return out


def utcnow_naive() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class CaseDB:
    """The case tables. ``conn`` is shared (e.g. with ``TranscriptStore``)."""

    def __init__(
        self, conn: Database | Cursor | duckdb.DuckDBPyConnection, *, record: TranscriptStore | None = None
    ) -> None:
        # The workspace's Database: the file is held per statement or burst (agent/storage/duck.py).
        # A cursor of it (``db.connection.cursor()``) means that same database.
        if isinstance(conn, Cursor):
            conn = cast(Database, conn.database)
        self._conn = conn if isinstance(conn, Database) else Database(connection=conn)
        self.write_lock = self._conn.write_lock
        # A record elsewhere (PostgreSQL, another file) holds what analysts write; this file's
        # flag status, roles, analysts' labels, notes and audit rows are then its cache,
        # refreshed per tool call (case/annotations.py ``sync_annotations``).
        self.record_elsewhere = record is not None and not _on(record, self._conn)
        self.synced: dict[str, dict[Any, Any]] = {}  # case → what the cache last took from the record
        with self._conn.lease():
            apply_migrations(self._conn, "case", MIGRATIONS)
            # The record (sessions, their case links, what analysts wrote) may be elsewhere, e.g.
            # in PostgreSQL; without one given, the transcript store on this same database,
            # opened now, not at first use: writes reach it inside a local write, where its
            # migrations could not run.
            self._record = record if record is not None else TranscriptStore(connection=self._conn)

    @property
    def record(self) -> TranscriptStore:
        return self._record

    @property
    def connection(self) -> Database:
        return self._conn

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor."""
        return self._conn.local_cursor()

    def write(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """One short transaction under the write lock."""
        return self._conn.write()

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        cur = self.cursor().execute(sql, params if isinstance(params, dict) else list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        # fetchall, not fetchone: a half-read result would block the next statement on this cursor
        rows = self.cursor().execute(sql, list(params)).fetchall()
        return rows[0][0] if rows else None

    # -- cases --------------------------------------------------------------
    def case_exists(self, case_id: str) -> bool:
        return bool(self.scalar("SELECT count(*) FROM cases WHERE case_id = ?", [case_id]))

    def list_cases(self) -> list[dict[str, Any]]:
        return [jdict(r) for r in self.rows("SELECT * FROM cases ORDER BY case_id")]

    def refresh_addresses(self, cur: duckdb.DuckDBPyConnection, case_id: str) -> None:
        """Rebuild the per-address profile of a case from its transfers.

        Failed transactions move nothing (``status`` FALSE is left out; unknown
        status counts); USD totals are NULL when none of the movements is priced
        (unknown, not $0)."""
        self.synced.pop(case_id, None)  # evidence (re)loaded: the record's annotations apply anew
        cur.execute("DELETE FROM addresses WHERE case_id = ?", [case_id])
        cur.execute(
            """
            INSERT INTO addresses
            WITH io AS (
              SELECT chain, to_address AS address, block_time, TRUE AS is_in, usd_value FROM transfers
               WHERE case_id = $1 AND to_address IS NOT NULL AND status IS NOT FALSE
              UNION ALL
              SELECT chain, from_address, block_time, FALSE, usd_value FROM transfers
               WHERE case_id = $1 AND from_address IS NOT NULL AND status IS NOT FALSE),
            nonces AS (SELECT chain, from_address AS address, min(nonce) AS n FROM transactions
               WHERE case_id = $1 GROUP BY ALL)
            SELECT $1, io.chain, io.address, NULL, min(block_time), max(block_time),
                   count(*) FILTER (WHERE is_in), count(*) FILTER (WHERE NOT is_in),
                   sum(usd_value) FILTER (WHERE is_in), sum(usd_value) FILTER (WHERE NOT is_in), any_value(nonces.n)
            FROM io LEFT JOIN nonces USING (chain, address) GROUP BY io.chain, io.address
            """,
            [case_id],
        )

    # -- labels ---------------------------------------------------------------
    def labels_for(
        self, case_id: str, keys: Iterable[tuple[str, str]], at: datetime | None = None
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Resolved labels over ``case_labels`` (the case's own, analysts' from other cases, the
        label library's): the best valid label per address (``LABEL_RANK``), every label with
        its source, and whether their categories conflict."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        rows = self.rows(
            f"""
            SELECT l.* FROM case_labels l
            JOIN (SELECT unnest($2::VARCHAR[]) AS chain, unnest($3::VARCHAR[]) AS address) k
              ON k.chain = l.chain AND k.address = l.address
            WHERE l.case_id = $1
            ORDER BY l.chain, l.address, {LABEL_RANK}
            """,
            [case_id, [k[0] for k in keys], [k[1] for k in keys]],
        )
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for r in rows:
            entry = out.setdefault((r["chain"], r["address"]), {"best": None, "labels": []})
            valid = at is None or (
                (r["valid_from"] is None or r["valid_from"] <= at)
                and (r["valid_to"] is None or at < r["valid_to"])
            )
            lab = label_view(r)
            entry["labels"].append(lab)
            if entry["best"] is None and valid:
                entry["best"] = lab
        for entry in out.values():
            cats = {lab["category"] for lab in entry["labels"]}
            entry["conflict"] = len(cats) > 1
        return out

    def category_map(self, case_id: str) -> dict[tuple[str, str], str]:
        """(chain, address) → resolved category, for every labelled address of a case."""
        rows = self.cursor().execute(
            f"""
            SELECT chain, address, arg_max(category, {LABEL_RANK_KEY})
            FROM case_labels l WHERE case_id = ? AND category IS NOT NULL GROUP BY chain, address
            """,
            [case_id],
        )
        return {(r[0], r[1]): r[2] for r in rows.fetchall()}

    # -- sessions and grants ------------------------------------------------------
    def link_session(self, case_id: str, session_id: str, grant: dict[str, Any], created_by: str) -> None:
        self.record.link_case(session_id, case_id, grant, created_by)

    def session_link(self, session_id: str) -> tuple[str, dict[str, Any]] | None:
        link = self.record.case_link(session_id)
        return None if link is None else (link["case_id"], link["grant"])

    def update_grant(self, session_id: str, grant: dict[str, Any]) -> None:
        self.record.set_case_grant(session_id, grant)

    def sessions_of(self, case_id: str) -> list[dict[str, Any]]:
        """The case's linked sessions, oldest first (the report's default sessions)."""
        return [
            jsonable({k: link[k] for k in ("session_id", "grant", "created_by", "created_at")})
            for link in self.record.case_links(case_id=case_id)
        ]

    def mark_seen(self, session_id: str, kind: str, keys: Iterable[str]) -> set[str]:
        """Record keys as seen by the session (in the record); return those seen before this call."""
        return self.record.mark_seen(session_id, kind, list(keys))

    def seen(self, session_id: str, kind: str) -> list[str]:
        return self.record.seen(session_id, kind)

    # -- flags ------------------------------------------------------------------------
    def upsert_flags(
        self,
        case_id: str,
        flag_type: str,
        flags: list[dict[str, Any]],
        params: dict[str, Any],
        version: str,
        keep: Sequence[str] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Store one detector's output; return its flag ids and the ids of the flags of this
        type it kept although they no longer hold with these params. Flag ids are stable per
        subject, so a re-run updates in place and keeps the analyst's status and note. The
        other flags of this type are removed, except those analysts decided on (status not
        ``new``), or with ``keep`` (a replay of a recorded run) exactly those the run kept:
        a replay's copy has no decisions yet, and must end with the same evidence."""
        self.synced.pop(case_id, None)  # new flags: the record's decisions apply anew
        ids: dict[str, None] = {}  # ordered and O(1) to test: a large run has tens of thousands
        rows: list[dict[str, Any]] = []
        now = utcnow_naive()
        for f in flags:
            key = f"{case_id}|{flag_type}|{f.get('chain')}|{f.get('address')}|{f.get('tx_hash')}|{f.get('key', '')}"
            fid = "FLG-" + hashlib.sha1(key.encode()).hexdigest()[:10]
            if fid in ids:
                continue
            ids[fid] = None
            rows.append(
                {
                    "flag_id": fid, "case_id": case_id, "flag_type": flag_type, "severity": f["severity"],
                    "score": f.get("score"), "subject_kind": f.get("subject_kind", "address"), "chain": f.get("chain"),
                    "address": f.get("address"), "tx_hash": f.get("tx_hash"), "window_start": f.get("window_start"),
                    "window_end": f.get("window_end"), "evidence": json.dumps(jsonable(f.get("evidence", {}))),
                    "params": json.dumps(params), "detector_version": version, "detected_at": now,
                }
            )  # fmt: skip
        with self.write() as cur:
            if rows:
                cols = list(rows[0])
                cur.execute(
                    f"""
                    INSERT INTO anomaly_flags ({", ".join(cols)})
                    SELECT {", ".join(f"unnest(${c}) AS {c}" for c in cols)}
                    ON CONFLICT (flag_id) DO UPDATE SET severity = excluded.severity, score = excluded.score,
                      window_start = excluded.window_start, window_end = excluded.window_end,
                      evidence = excluded.evidence, params = excluded.params,
                      detector_version = excluded.detector_version, detected_at = excluded.detected_at
                    """,
                    {c: [r[c] for r in rows] for c in cols},
                )
            others = "case_id = ? AND flag_type = ? AND flag_id NOT IN (SELECT unnest(?::VARCHAR[]))"
            args: list[Any] = [case_id, flag_type, list(ids)]
            if keep is None:  # those analysts decided on
                stays = "status IS DISTINCT FROM 'new'"
            else:  # exactly those the recorded run kept
                stays, args = "flag_id IN (SELECT unnest(?::VARCHAR[]))", [*args, list(keep)]
            found = cur.execute(
                f"SELECT flag_id FROM anomaly_flags WHERE {others} AND {stays} ORDER BY 1", args
            )
            kept = [r[0] for r in found.fetchall()]
            cur.execute(f"DELETE FROM anomaly_flags WHERE {others} AND NOT ({stays})", args)
        return list(ids), kept

    def list_flags(
        self,
        case_id: str,
        *,
        flag_type: str | None = None,
        min_severity: str | None = None,
        address: str | None = None,
        status: str | None = None,
        limit: int = 200,
    ) -> tuple[list[dict[str, Any]], int]:
        where = ["case_id = ?"]
        params: list[Any] = [case_id]
        if flag_type:
            where.append("flag_type = ?")
            params.append(flag_type)
        if min_severity:
            where.append("list_position(?::VARCHAR[], severity) >= list_position(?::VARCHAR[], ?)")
            params += [list(SEVERITIES), list(SEVERITIES), min_severity]
        if address:
            where.append("(address = ? OR lower(address) = lower(?))")
            params += [address, address]
        if status:
            where.append("status = ?")
            params.append(status)
        total = int(self.scalar(f"SELECT count(*) FROM anomaly_flags WHERE {' AND '.join(where)}", params))
        rows = self.rows(
            f"""SELECT * FROM anomaly_flags WHERE {" AND ".join(where)}
            ORDER BY list_position(?::VARCHAR[], severity) DESC, score DESC NULLS LAST, flag_type, flag_id
            LIMIT ?""",
            [*params, list(SEVERITIES), limit],
        )
        out = []
        for r in rows:
            r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
            r["params"] = json.loads(r["params"]) if r["params"] else {}
            out.append(jsonable(r))
        return out, total

    # -- audit ------------------------------------------------------------------------
    def audit(
        self,
        cur: duckdb.DuckDBPyConnection,
        *,
        actor: str,
        session_id: str | None,
        case_id: str,
        action: str,
        target_kind: str,
        target_id: str,
        before: Any,
        after: Any,
    ) -> str:
        audit_id = "AUD-" + uuid.uuid4().hex[:12]
        cur.execute(
            "INSERT INTO audit_log (audit_id, at_time, actor, session_id, case_id, action, target_kind, target_id, "
            "before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                audit_id, utcnow_naive(), actor, session_id, case_id, action, target_kind, target_id,
                json.dumps(jsonable(before)), json.dumps(jsonable(after)),
            ],
        )  # fmt: skip
        return audit_id

    def audit_log(self, case_id: str) -> list[dict[str, Any]]:
        rows = self.rows("SELECT * FROM audit_log WHERE case_id = ? ORDER BY at_time, audit_id", [case_id])
        for r in rows:
            r["before"] = json.loads(r["before"]) if r["before"] else None
            r["after"] = json.loads(r["after"]) if r["after"] else None
        return [jsonable(r) for r in rows]


def _on(record: TranscriptStore, conn: Database) -> bool:
    """Whether the record lives in this very database (one file: nothing to sync)."""
    try:
        return record.connection is conn
    except ConfigurationError:
        return False


def label_view(r: dict[str, Any]) -> dict[str, Any]:
    """A label as returned to the model: every text field is data, never instructions. A
    label names its source, the source's version or date and its validity window; one from
    the label library or another case says so (``origin``, ``from_case``)."""
    view = {
        k: r.get(k)
        for k in ("label_id", "label", "entity", "category", "abuse", "source", "confidence", "confidence_level",
                  "valid_from", "valid_to", "created_by")
    }  # fmt: skip
    for k in ("source_version", "source_category", "program", "origin", "from_case"):
        if r.get(k) is not None:
            view[k] = r[k]
    if r.get("overrides"):
        view["overrides"] = True
    return jdict(view)
