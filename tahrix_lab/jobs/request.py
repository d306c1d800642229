"""What a job is asked (``JobRequest``) and how a start is refused (``JobRejected``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tahrix_lab.agent.transcript import new_id


@dataclass
class JobRequest:
    """One question to answer; ``job_id`` is chosen by whoever accepts the request."""

    user: str
    message: str
    case_id: str | None = None
    session_id: str | None = None
    history: list[dict[str, Any]] | None = None
    job_id: str = field(default_factory=new_id)

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "message": self.message, "case_id": self.case_id,
                "session_id": self.session_id, "history": self.history, "job_id": self.job_id}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRequest:
        return cls(
            user=str(data["user"]),
            message=str(data["message"]),
            case_id=data.get("case_id"),
            session_id=data.get("session_id"),
            history=data.get("history"),
            job_id=data.get("job_id") or new_id(),
        )


class JobRejected(Exception):
    """A job that cannot start: ``status`` is the HTTP status, ``message`` is for the user."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "field": self.field}
