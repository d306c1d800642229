"""Retrying a model call that failed before its first event, and the sentence a user reads
when it fails for good (the raw error goes to the log)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tahrix_lab.agent.errors import BackendError


@dataclass
class RetryPolicy:
    """Retries of a model call that failed *before its first event*; never after.

    Exponential backoff with full jitter, honouring the provider's
    ``Retry-After`` when it gives one, capped at ``max_delay``.
    """

    attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def delay(self, attempt: int, error: BackendError) -> float:
        if error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_delay)
        return random.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))


# The sentence a user sees when our own code failed (the traceback goes to the log):
# the loop, the job runner and the widget all say this one.
INTERNAL_ERROR_MESSAGE = (
    "Something went wrong on our side while answering. The details are in the log for the operator."
)
STORE_ERROR_MESSAGE = (
    "The record where conversations are kept did not answer, so this answer may not have been saved. "
    "Please try again in a minute; the details are in the log for the operator."
)


def calm_message(error: BackendError) -> str:
    """The sentence a user sees for a provider failure (the raw one goes to the log)."""
    if error.user_facing:
        return error.message
    if error.retryable:
        return "The model provider is busy or unreachable right now. Please try again in a minute."
    if error.status in (401, 403):
        return (
            "The model provider did not accept our credentials. An operator needs to check the configuration."
        )
    if error.status == 404:
        return (
            "The model provider does not know the requested model. An operator needs to check the model id."
        )
    if error.status is not None and 400 <= error.status < 500:
        return (
            "The model provider could not accept this request. The details are in the log for the operator."
        )
    return "Something went wrong while talking to the model provider. The details are in the log for the operator."
