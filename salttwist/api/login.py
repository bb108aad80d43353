# -*- test-case-name: tests.test_api_login -*-
"""
C{/login} and C{/logout}, as Salt's rest_cherrypy.

C{POST /login} with C{username}, C{password} and C{eauth} (and
C{token_expire} where C{token_expire_user_override} allows it) answers::

    {"return": [{"token": "...", "expire": ..., "start": ..., "user": "fred",
                 "eauth": "pam", "perms": [...]}]}

and the token in the C{X-Auth-Token} header. The token goes in the
C{X-Auth-Token} header of later requests; no cookie is set (see
docs/api.md). A refused login is a 401 with Salt's words; logins from one
address are limited (L{salttwist.api.limits}), past the limit a 429.

C{POST /logout} revokes the request's token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from twisted.logger import Logger

from salttwist.api.errors import ApiError, BadRequest, TooManyRequests, Unauthorized
from salttwist.api.resource import Answer, ApiCall, ApiResource, requireSession
from salttwist.eauth.authenticator import AuthenticationFailed, Session

__all__ = ["Login", "Logout", "login"]

_log = Logger()


def _credentials(body: Any) -> Mapping[str, Any]:
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    if not isinstance(body, Mapping):
        raise BadRequest(
            "the login body must be a mapping with username, password and eauth"
            f" (JSON, YAML or form fields), not {type(body).__name__}"
        )
    missing = [name for name in ("username", "password", "eauth") if name not in body]
    if missing:
        raise BadRequest(f"the login is missing {', '.join(missing)}")
    for name in ("username", "password", "eauth"):
        if not isinstance(body[name], str):
            raise BadRequest(f"the login's {name} must be a string")
    return body


async def login(call: ApiCall, body: Any) -> Session:
    """
    Log in with the credentials of C{body}, counted by the login limit.

    @raise ApiError: 400 for credentials missing, 429 past the limit, 401
        when they are refused.
    """
    creds = _credentials(body)
    limiter = call.context.loginLimiter
    assert limiter is not None
    wait = limiter.attempt(call.source)
    if wait > 0:
        _log.warn("api: login from {source} refused: too many", source=call.source)
        raise TooManyRequests(
            f"Too many logins from {call.source}: try again in {math.ceil(wait)} s",
            {"Retry-After": str(math.ceil(wait))},
        )
    authenticator = await call.context.getAuthenticator()
    try:
        session = await authenticator.login(
            creds["eauth"], creds["username"], creds["password"], creds.get("token_expire")
        )
    except AuthenticationFailed as e:
        _log.warn(
            "api: login of {user} from {source} refused: {reason}",
            user=creds["username"],
            source=call.source,
            reason=e.reason,
        )
        raise Unauthorized("Could not authenticate using provided credentials") from None
    except ValueError as e:
        raise BadRequest(str(e)) from None
    limiter.succeeded(call.source)
    return session


class Login(ApiResource):
    """
    C{/login}: log in with C{external_auth}.
    """

    name = "login"
    requiresToken = False

    async def GET(self, call: ApiCall) -> Answer:
        return Answer(
            {"status": 200, "return": "Please log in"}, headers={"WWW-Authenticate": "Session"}
        )

    async def POST(self, call: ApiCall) -> Answer:
        session = await login(call, call.body)
        return Answer({"return": [session.asDict()]}, headers={"X-Auth-Token": session.token})


class Logout(ApiResource):
    """
    C{/logout}: revoke the token.
    """

    name = "logout"
    readsBody = ()

    async def POST(self, call: ApiCall) -> dict[str, Any]:
        session = requireSession(call)
        authenticator = await call.context.getAuthenticator()
        try:
            await authenticator.logout(session.token)
        except Exception as e:
            _log.failure("api: revoking a token failed")
            raise ApiError("the token could not be revoked") from e
        return {"return": "Your token has been cleared"}
