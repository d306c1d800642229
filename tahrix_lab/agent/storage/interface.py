"""The store interface the loop, the budget and the surfaces see: ``TranscriptStore``.

One interface, two engines (DESIGN.md §1a): ``TranscriptStore(target)`` gives a
``DuckDBStore`` for a file path or ``":memory:"`` (one analyst, nothing to install) and a
``PostgresStore`` for a ``postgresql://`` URL (a team on one record). Both pass the same
conformance suite (tests/agent/storage). Each engine registers itself by subclassing with
``engine=...``; the package ``tahrix_lab.agent.storage`` imports both, so either is there
whenever this module is.

The discipline both keep: each persist is one short autocommit write (never a
transaction held across a stream), and listeners (the budget's ledger) hear of every
message appended by this process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from tahrix_lab.agent.errors import ConfigurationError
from tahrix_lab.agent.storage.target import Engine, default_target, engine_of, redacted
from tahrix_lab.agent.transcript import Message, Part, Session, Usage

if TYPE_CHECKING:
    import duckdb

    from tahrix_lab.agent.storage.duck import Database

# One model call as the budget's ledger reads it: session id, position, created_at,
# model id, backend, input, output, cache read, cache write tokens, and the seq it was
# written in (commit order, across processes).
# A session's link to a case: session_id, case_id, grant (a dict), created_by, created_at,
# updated_at.
CaseLink = dict[str, Any]
LINK_COLUMNS = ("session_id", "case_id", "grant", "created_by", "created_at", "updated_at")
# Who may open a case (issue 31 item 3): one row per case and user, with the role and who
# granted it when. Not the assistant's per-session grant above (what the model may do).
ACCESS_COLUMNS = ("case_id", "user", "role", "granted_by", "granted_at")
ROLES = ("viewer", "investigator", "owner")
USAGE_COLUMNS = (
    "user", "team", "session_id", "purpose", "case_id", "position", "created_at", "backend", "model_id",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "latency_ms", "ttft_ms", "stop_reason",
)  # fmt: skip
USAGE_SQL = (
    's."user", s.team, m.session_id, s.purpose, c.case_id, m.position, m.created_at, m.backend, m.model_id, '
    "m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_write_tokens, m.reasoning_tokens, "
    "m.latency_ms, m.ttft_ms, m.stop_reason FROM messages m JOIN sessions s ON s.id = m.session_id "
    "LEFT JOIN session_cases c ON c.session_id = m.session_id"
)

# What analysts write on a case (issue 26 item 1): the current state of each annotation
# (a flag decision, an address role, an analyst's label, a note, a report finding's review)
# keyed by kind and key, its value ``None`` once reverted or removed; and the audit entries.
ANNOTATION_KINDS = ("flag", "role", "label", "note", "review")
ANNOTATION_COLUMNS = ("case_id", "kind", "key", "value", "updated_by", "updated_at")
AUDIT_COLUMNS = (
    "audit_id", "at_time", "actor", "session_id", "case_id", "action", "target_kind", "target_id",
    "before", "after", "reverted_by",
)  # fmt: skip
SEEN_COLUMNS = ("session_id", "kind", "key", "first_at")
# How a case's evidence was made (issue 26 item 2): one row per step (a load, a detector run),
# ``entry`` saying what it did and ``fingerprint`` what the evidence was after it.
MANIFEST_KINDS = ("load", "detect")
MANIFEST_COLUMNS = (
    "case_id", "step", "step_id", "kind", "entry", "fingerprint", "recorded_by", "recorded_at",
)  # fmt: skip

LedgerRow = tuple[
    str, int, datetime, str | None, str | None, int | None, int | None, int | None, int | None, int
]


class TranscriptStore:
    """Sessions, messages (with their parts), turn ends and the usage ledger.

    ``TranscriptStore(target)``: ``target`` defaults to ``$TAHRIX_DB`` or ``tahrix.duckdb``;
    a ``postgresql://`` URL puts the record in PostgreSQL. ``connection=`` shares a DuckDB
    connection another component opened (always the DuckDB engine).
    """

    engines: ClassVar[dict[str, type[TranscriptStore]]] = {}
    engine: ClassVar[Engine]
    path: str  # the target as it may be shown: a file path, or the URL without its password

    def __init_subclass__(cls, engine: Engine | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if engine is not None:
            cls.engine = engine
            TranscriptStore.engines[engine] = cls

    def __new__(
        cls, path: str | os.PathLike[str] | None = None, *args: Any, **kwargs: Any
    ) -> TranscriptStore:
        if cls is TranscriptStore:
            engine: Engine = "duckdb"
            if kwargs.get("connection") is None:
                engine = engine_of(path if path is not None else default_target())
            cls = TranscriptStore.engines[engine]
        return super().__new__(cls)

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, connection: Any = None, **options: Any
    ) -> None:
        self._listeners: list[Callable[[str, Message], None]] = []

    # -- plumbing --------------------------------------------------------
    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> TranscriptStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self.path)!r})"

    @contextmanager
    def lease(self) -> Iterator[Any]:
        """A burst of reads seen together (DuckDB: one attach of the file). No-op elsewhere."""
        yield self

    def transaction(self, *, buffered: bool = False) -> AbstractContextManager[None]:
        """The writes of the block commit together, or none of them."""
        raise NotImplementedError

    def group_writes(self, *, max_batch: int = 32) -> None:
        """Let many threads' writes at one moment share one transaction (where it pays)."""

    @property
    def connection(self) -> Database:
        """The DuckDB database under the store (DuckDB only: the case tables share its file)."""
        raise ConfigurationError(f"{type(self).__name__} has no DuckDB connection ({self.path}).")

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's DuckDB cursor (DuckDB only; code outside storage should ask the store)."""
        raise ConfigurationError(f"{type(self).__name__} has no DuckDB cursor ({self.path}).")

    # -- sessions --------------------------------------------------------
    def create_session(
        self,
        *,
        user: str = "analyst",
        purpose: str = "chat",
        system_prompt: str | None = None,
        title: str | None = None,
        replay_of: str | None = None,
        session: Session | None = None,
        team: str | None = None,
    ) -> Session:
        """A new session (``team`` defaults to ``$TAHRIX_TEAM``), or ``session`` written as it is."""
        raise NotImplementedError

    def get_session(self, session_id: str) -> Session:
        raise NotImplementedError

    def update_session(self, session_id: str, **changes: Any) -> None:
        raise NotImplementedError

    def list_sessions(
        self,
        *,
        user: str | None = None,
        purpose: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        """Sessions, newest first, filtered by user, purpose and creation time."""
        raise NotImplementedError

    def session_ids_starting(self, prefix: str, limit: int = 3) -> list[str]:
        """Session ids that start with ``prefix`` (``tahrix show 3fa2…``)."""
        raise NotImplementedError

    def delete_session(self, session_id: str) -> None:
        raise NotImplementedError

    # -- messages --------------------------------------------------------
    def append_message(self, session_id: str, message: Message) -> Message:
        """Persist a message with its parts in one write; sets its position."""
        raise NotImplementedError

    def add_listener(self, listener: Callable[[str, Message], None]) -> None:
        """Call ``listener(session_id, message)`` after every append (the budget keeps its ledger so)."""
        self._listeners.append(listener)

    def _notify(self, session_id: str, message: Message) -> None:
        for listener in self._listeners:
            listener(session_id, message)

    def load_messages(self, session_id: str) -> list[Message]:
        """Every message of a session with its parts, ordered by position."""
        raise NotImplementedError

    def append_turn_end(
        self,
        session_id: str,
        *,
        stop_reason: str | None = None,
        error_kind: str | None = None,
        error_message: str | None = None,
    ) -> None:
        """Record how the session's latest turn ended (after its last message)."""
        raise NotImplementedError

    def load_turn_ends(self, session_id: str) -> list[dict[str, Any]]:
        """How each turn ended, in order: ``{position, stop_reason, error_kind, error_message}``."""
        raise NotImplementedError

    def import_sessions(
        self,
        items: Sequence[tuple[Session, Sequence[Message]]],
        links: Sequence[CaseLink] = (),
        turn_ends: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write whole sessions (with their case links and turn ends: ``{session_id, position,
        stop_reason, error_kind, error_message}``) in one transaction: all of them or, on any
        error, none."""
        raise NotImplementedError

    def existing_session_ids(self, session_ids: Sequence[str]) -> set[str]:
        """Those of the given session ids that are stored."""
        raise NotImplementedError

    # -- session-case links ----------------------------------------------
    def link_case(
        self, session_id: str, case_id: str, grant: dict[str, Any], created_by: str | None = None
    ) -> None:
        """Link a session to the case it works on, with the assistant's grant (once per session)."""
        raise NotImplementedError

    def case_link(self, session_id: str) -> CaseLink | None:
        """The session's link, or ``None`` when it works on no case."""
        found = self.case_links(session_ids=[session_id])
        return found[0] if found else None

    def set_case_grant(self, session_id: str, grant: dict[str, Any]) -> None:
        """Change a linked session's grant."""
        raise NotImplementedError

    def case_links(
        self, *, case_id: str | None = None, session_ids: Sequence[str] | None = None
    ) -> list[CaseLink]:
        """Links of one case or of the given sessions (all when neither is given), oldest first."""
        raise NotImplementedError

    # -- case access (who may open which case) ----------------------------
    def grant_case(
        self, case_id: str, user: str, role: str = "investigator", granted_by: str | None = None
    ) -> None:
        """Let ``user`` open ``case_id`` as ``role`` (one of ``ROLES``); granting again changes the role."""
        raise NotImplementedError

    def revoke_case(self, case_id: str, user: str) -> bool:
        """Take ``user``'s access to ``case_id`` away; whether there was any."""
        raise NotImplementedError

    def case_access(self, *, case_id: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        """Access rows (``ACCESS_COLUMNS``) of one case and/or one user, by case then user."""
        raise NotImplementedError

    def cases_granted(self, user: str) -> dict[str, str]:
        """The cases ``user`` may open, with the role of each."""
        return {r["case_id"]: r["role"] for r in self.case_access(user=user)}

    # -- what analysts write on a case -------------------------------------
    def record_annotation(
        self,
        entry: dict[str, Any],
        kind: str | None = None,
        key: str | None = None,
        value: dict[str, Any] | None = None,
        *,
        reverts: str | None = None,
    ) -> None:
        """One audited write in one transaction: the audit ``entry`` (``AUDIT_COLUMNS`` but
        ``reverted_by``; before/after as dicts), the annotation ``kind``/``key``'s new state
        (``value``; ``None``: gone) when ``kind`` is given, and for a revert the reverted entry
        marked. Idempotent by audit id (a retried write is stored once)."""
        raise NotImplementedError

    def annotations(self, case_id: str) -> list[dict[str, Any]]:
        """The case's annotations (``ANNOTATION_COLUMNS``; ``value`` parsed), by kind and key."""
        raise NotImplementedError

    def audit_entries(self, case_id: str) -> list[dict[str, Any]]:
        """The case's audit entries (``AUDIT_COLUMNS``; before/after parsed), oldest first."""
        raise NotImplementedError

    # -- what a session has seen, and moving a case's rows -------------------
    def mark_seen(self, session_id: str, kind: str, keys: Sequence[str]) -> set[str]:
        """Record ``keys`` of ``kind`` as seen by the session; returns those it had seen before."""
        raise NotImplementedError

    def seen(self, session_id: str, kind: str) -> list[str]:
        """The keys of ``kind`` the session has seen, first seen first."""
        raise NotImplementedError

    def seen_rows(self, session_ids: Sequence[str]) -> list[dict[str, Any]]:
        """``SEEN_COLUMNS`` rows of the given sessions, by session, time, kind and key."""
        raise NotImplementedError

    def record_cases(self) -> list[str]:
        """Every case the record holds anything of (links, access, annotations, audit, manifest
        steps), sorted."""
        raise NotImplementedError

    def import_case_rows(
        self,
        *,
        access: Sequence[dict[str, Any]] = (),
        annotations: Sequence[dict[str, Any]] = (),
        audit: Sequence[dict[str, Any]] = (),
        seen: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write case rows as exported (who and when kept; JSON values as dicts) in one
        transaction (the caller's, inside ``transaction()``). A row whose key is there stays."""
        raise NotImplementedError

    # -- case manifests (how each case's evidence was made) ----------------
    def add_manifest_step(
        self,
        case_id: str,
        kind: str,
        entry: dict[str, Any],
        fingerprint: dict[str, Any],
        *,
        step_id: str,
        recorded_by: str | None = None,
        number: int | None = None,
    ) -> int:
        """Append a step (``kind``: one of ``MANIFEST_KINDS``) to the case's manifest; its number
        (0, 1, 2… per case). Idempotent by ``step_id``: a retried write returns the same step.
        ``number``: the number the step must get (the manifest's length when the work began);
        another step recorded since raises ``ManifestMoved`` and nothing is written."""
        raise NotImplementedError

    def case_turn(self, case_id: str) -> AbstractContextManager[None]:
        """This host's turn at the case's evidence, held from the check that its copy is up to
        date until its step is recorded, so that no two hosts record a step over the same
        copy. Taken by another host (or thread): ``CaseBusy`` at once, since the step that host
        records would leave this copy behind anyway."""
        raise NotImplementedError

    def case_manifest(self, case_id: str) -> list[dict[str, Any]]:
        """The case's manifest steps (``MANIFEST_COLUMNS``; entry and fingerprint parsed), in order."""
        raise NotImplementedError

    def manifest_cases(self) -> list[str]:
        """Every case with a manifest, sorted."""
        raise NotImplementedError

    def import_manifest_steps(self, steps: Sequence[dict[str, Any]]) -> None:
        """Write manifest steps as exported (``MANIFEST_COLUMNS``: numbers, ids, who and when
        kept; entry and fingerprint as dicts) in the caller's ``transaction()``. The caller has
        checked that they follow on from the steps there (``lab.transfer``)."""
        raise NotImplementedError

    # -- reports -----------------------------------------------------------
    def usage_sums(
        self,
        by: Sequence[str],
        *,
        changes: Sequence[datetime] = (),
        tiers: Sequence[int] = (),
        **filters: Any,
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Token sums of the model calls grouped, in the engine, by ``by`` plus model, backend,
        price period and input-token tier (``usage_sql``); ``filters``: since, until, user,
        team, purpose, case, and through_seq (only calls up to that ledger seq; the rows then
        end with ``_last``, each group's latest call time, where the budget places its spend).
        Hours and days come back as whole hours or days since 1970.
        Returns the column names and the rows (tuples: a DataFrame is made of them at once)."""
        raise NotImplementedError

    def users(self) -> list[str]:
        """Every user with a session, sorted."""
        raise NotImplementedError

    def models_used(self) -> list[tuple[str, str | None]]:
        """Every (model, backend) with a model call: whose price breaks cut the cost sums."""
        raise NotImplementedError

    # -- the ledger ------------------------------------------------------
    def usage_rows(
        self,
        user: str | None = None,
        since: datetime | None = None,
        *,
        session_ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """One row per model call (assistant message), oldest first: who (user, team), the
        session, its purpose and case, when, which model, tokens, latency, stop reason."""
        raise NotImplementedError

    def ledger_calls(self, *, after_seq: int | None, since: datetime) -> tuple[list[LedgerRow], int]:
        """The model calls the budget has not read yet: those written after ``after_seq`` or,
        on the first read (``None``), those created after ``since``; with the highest seq
        the answer covers (the next ``after_seq``). One indexed query."""
        raise NotImplementedError

    def session_users(self, session_ids: Sequence[str]) -> dict[str, str]:
        """Each given session's user."""
        raise NotImplementedError


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ConfigurationError(f"Unknown role {role!r}; one of {', '.join(ROLES)}.")
    return role


def link_from_row(r: Sequence[Any]) -> CaseLink:
    """A ``session_cases`` row (``LINK_COLUMNS`` order) as a link; the grant arrives as JSON
    text from DuckDB and parsed from PostgreSQL."""
    link = dict(zip(LINK_COLUMNS, r, strict=True))
    if isinstance(link["grant"], str):
        link["grant"] = json.loads(link["grant"])
    return link


def message_from_row(r: Sequence[Any]) -> Message:
    """A ``messages`` row, its columns in ``MESSAGE_COLUMNS`` order, as a ``Message`` (both engines;
    the parts column arrives as JSON text from DuckDB and as a list from PostgreSQL)."""
    has_usage = any(v is not None for v in r[8:13])
    parts = json.loads(r[16]) if isinstance(r[16], str) else r[16]
    return Message(
        role=r[2],
        parts=[Part.from_dict(p) for p in parts],
        session_id=r[0],
        position=r[1],
        created_at=r[3],
        backend=r[4],
        model_id=r[5],
        stop_reason=r[6],
        raw_stop_reason=r[7],
        usage=Usage(*r[8:13]) if has_usage or r[2] == "assistant" else None,
        tools_offered=list(r[13]) if r[13] is not None else None,
        latency_ms=r[14],
        ttft_ms=r[15],
    )


def check_annotation(kind: str | None) -> None:
    if kind is not None and kind not in ANNOTATION_KINDS:
        raise ConfigurationError(f"Unknown annotation kind {kind!r}; one of {', '.join(ANNOTATION_KINDS)}.")


def check_manifest_kind(kind: str) -> None:
    if kind not in MANIFEST_KINDS:
        raise ConfigurationError(f"Unknown manifest step {kind!r}; one of {', '.join(MANIFEST_KINDS)}.")


def parsed(value: Any) -> Any:
    """A JSON column's value: text from DuckDB, already parsed from PostgreSQL."""
    return json.loads(value) if isinstance(value, str) else value
