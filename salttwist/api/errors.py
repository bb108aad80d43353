# -*- test-case-name: tests.test_api_resource -*-
"""
The API's errors: an L{ApiError} raised anywhere in a handler becomes a
JSON (or YAML, as the client accepts) answer in the shape Salt's
rest_cherrypy gives its unexpected errors::

    {"status": 403, "return": "Authorization error occurred: ..."}

with the HTTP status of the same number.
"""

from __future__ import annotations

from http import HTTPStatus

__all__ = [
    "ApiError",
    "BadRequest",
    "MethodNotAllowed",
    "Forbidden",
    "NotAcceptable",
    "NotFound",
    "TooLarge",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
]


class ApiError(Exception):
    """
    An answer other than success.

    @ivar status: the HTTP status.
    @ivar message: what the answer's C{return} says.
    @ivar headers: headers to add to the answer.
    """

    status = HTTPStatus.INTERNAL_SERVER_ERROR

    def __init__(self, message: str | None = None, headers: dict[str, str] | None = None) -> None:
        if message is None:
            message = HTTPStatus(self.status).phrase
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> dict[str, object]:
        """
        @return: the answer's data.
        """
        return {"status": int(self.status), "return": self.message}


class BadRequest(ApiError):
    """
    The body or the query is not what the endpoint takes (400).
    """

    status = HTTPStatus.BAD_REQUEST


class Unauthorized(ApiError):
    """
    No token, or one that is unknown, expired or revoked (401).
    """

    status = HTTPStatus.UNAUTHORIZED

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "Please log in", {"WWW-Authenticate": "Session"})


class Forbidden(ApiError):
    """
    The token's permissions do not allow the call (403).
    """

    status = HTTPStatus.FORBIDDEN


class NotFound(ApiError):
    """
    No such resource (404).
    """

    status = HTTPStatus.NOT_FOUND


class MethodNotAllowed(ApiError):
    """
    The resource does not answer this method (405).
    """

    status = HTTPStatus.METHOD_NOT_ALLOWED


class NotAcceptable(ApiError):
    """
    The client accepts no format the API writes, or sent a body in a format
    it does not read (406, as rest_cherrypy answers both).
    """

    status = HTTPStatus.NOT_ACCEPTABLE


class TooLarge(ApiError):
    """
    The body is larger than C{max_request_body_size} (413).
    """

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE


class TooManyRequests(ApiError):
    """
    Too many logins from one address (429).
    """

    status = HTTPStatus.TOO_MANY_REQUESTS


class Unavailable(ApiError):
    """
    The master cannot be reached, or the API is not ready (503).
    """

    status = HTTPStatus.SERVICE_UNAVAILABLE
