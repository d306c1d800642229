"""The engine's errors, split by who must act.

    TahrixError
     ├── ConfigurationError      the developer's or operator's mistake (bad backend
     │    │                      name, missing credentials, unknown session)
     │    └── StoreLockedError   the database file is held by another process
     ├── StoreUnavailableError   the team store (PostgreSQL) cannot be reached or is busy
     ├── BackendError            the provider failed (status, retryable, raw cause)
     ├── UserFacingError         a refusal the user should read as it is
     │    └── BudgetExceeded     a budget bucket is full (bucket, calm message)
     ├── ToolDenied              a tool call outside the session's grant
     └── ToolRetry               raised by a tool: "try again" with a hint for the model

The loop never lets any of these escape as an exception during a run: it logs
the raw detail for the operator and yields a calm sentence for the user.
"""

from __future__ import annotations


class TahrixError(Exception):
    """Base of every error the engine raises on purpose."""


class ConfigurationError(TahrixError):
    """A mistake in code or configuration: fix the setup, not the input."""


class StoreLockedError(ConfigurationError):
    """The DuckDB file is held by another process."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"The transcript database {path!r} is in use by another process. "
            "Close the other Tahrix Lab process (or notebook kernel) that has it open, "
            "or point TAHRIX_DB at another file."
        )


class StoreUnavailableError(TahrixError):
    """The PostgreSQL record cannot be reached in time (down, or every pooled connection busy).

    The message names the server (never its password) and is written for the user."""


class BackendError(TahrixError):
    """A provider (or the transport to it) failed.

    ``status`` is the HTTP status when there was one; ``retryable`` says whether
    the same request may succeed later (throttling, 429, 5xx, dropped
    connections, timeouts); ``retry_after`` is the provider's hint in seconds;
    ``cause`` keeps the raw SDK exception for the operator's log;
    ``user_facing`` says the message is already written for the user (e.g. an
    attachment that cannot be sent) and may be shown as it is.
    """

    user_facing: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.cause = cause

    def __repr__(self) -> str:
        return f"BackendError({self.message!r}, status={self.status}, retryable={self.retryable})"


class UserFacingError(TahrixError):
    """An error whose message is already written for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BudgetExceeded(UserFacingError):
    """A budget bucket is full; ``bucket`` names it (e.g. ``"per_minute_tokens"``)."""

    def __init__(self, bucket: str, message: str) -> None:
        super().__init__(message)
        self.bucket = bucket


class CaseBusy(UserFacingError):
    """Another host is loading into the case or running its detectors (``TranscriptStore.case_turn``)."""

    def __init__(self, case_id: str) -> None:
        super().__init__(
            f"Another host is loading into case {case_id!r} or running its detectors right now. Nothing "
            f"was loaded or run here: when it has finished, bring this copy up to date with "
            f"`tahrix case open {case_id}` and try again."
        )


class ManifestMoved(UserFacingError):
    """A step was recorded by another host while this host's work ran (``number``)."""

    def __init__(self, case_id: str, number: int) -> None:
        super().__init__(
            f"Case {case_id!r}: while this work ran here, another host recorded step {number} of its "
            "manifest (this host's turn was lost with its connection to the record), so this work was "
            "not recorded, and nothing of it was kept here. Bring this copy up to date with "
            f"`tahrix case open {case_id}`, then do this work again."
        )


class ToolDenied(TahrixError):
    """The session's grant does not allow this tool call."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolRetry(TahrixError):
    """Raised by a tool to ask the model to try again; the message is shown to the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NeedsApproval(TahrixError):
    """Raised by a tool (or a context provider) when a call must wait for the analyst.

    ``summary`` is the sentence the analyst reads beside Approve / Deny (what the call
    would do, with its arguments); ``why`` says why it needs a human. The loop does not
    run the call: it records it as pending and ends the run (``agent.approvals``).
    """

    def __init__(self, summary: str, why: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.why = why
