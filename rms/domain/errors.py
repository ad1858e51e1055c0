"""Domain errors. The HTTP layer maps each to a problem document; the CLI to an exit code."""

from __future__ import annotations


class RmsError(Exception):
    """Base of every error RMS reports to a caller on purpose."""

    status = 400
    title = "Bad request"
    slug = "bad-request"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class Unauthorized(RmsError):
    status, title, slug = 401, "Unauthorized", "unauthorized"


class Forbidden(RmsError):
    status, title, slug = 403, "Forbidden", "forbidden"


class NotFound(RmsError):
    status, title, slug = 404, "Not found", "not-found"


class Conflict(RmsError):
    status, title, slug = 409, "Conflict", "conflict"


class IllegalTransition(Conflict):
    """The message is not in a state the requested action can start from."""

    title, slug = "Illegal state transition", "illegal-transition"

    def __init__(self, message_id: str, action: str, current: str) -> None:
        super().__init__(
            f"cannot {action} message {message_id!r}: its current state is {current!r}"
        )
        self.current_state = current


class PartOfTransaction(IllegalTransition):
    """A message of a transaction is confirmed or cancelled only with its transaction."""

    title, slug = "Part of a transaction", "part-of-transaction"

    def __init__(self, message_id: str, action: str, current: str, transaction_id: str
                 ) -> None:
        Conflict.__init__(
            self, f"cannot {action} message {message_id!r} on its own: it belongs to "
                  f"transaction {transaction_id!r}; {action} the transaction "
                  f"(/v1/transactions/{transaction_id}/{action})")
        self.current_state = current
        self.transaction_id = transaction_id


class PayloadTooLarge(RmsError):
    status, title, slug = 413, "Payload too large", "payload-too-large"


class Invalid(RmsError):
    status, title, slug = 422, "Validation failed", "validation"


class RateLimited(RmsError):
    status, title, slug = 429, "Too many requests", "rate-limited"

    def __init__(self, detail: str, retry_after_seconds: int,
                 extra: dict[str, int | str] | None = None) -> None:
        super().__init__(detail)
        self.retry_after_seconds = retry_after_seconds
        self.extra = dict(extra or {})  # further members of the problem document


class Unavailable(RmsError):
    status, title, slug = 503, "Service unavailable", "unavailable"
