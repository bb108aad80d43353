# -*- test-case-name: tests.test_eauth_authenticator -*-
"""
Logging in with C{external_auth} (Salt's C{LoadAuth}): a backend checks
the password, on a thread; the user's auth list comes from the config;
a token is made and kept; later calls present the token and get a
L{Session} whose permissions L{Session.authorize} checks with the ACL
engine.

Salt's failures say little on purpose (C{Authentication failure of type
"eauth" occurred}); the master logs why. So do these: the message of
L{AuthenticationFailed} is Salt's, its C{reason} is for the log.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater
from twisted.logger import Logger

from salttwist.eauth.config import ExternalAuth
from salttwist.eauth.engine import Decision, Permissions
from salttwist.eauth.interfaces import IAuthBackend, ITokenStore, TokenData

__all__ = ["AuthenticationFailed", "Authenticator", "Session"]

_log = Logger()

#: Salt's default token lifetime (12 hours).
DEFAULT_TOKEN_EXPIRE = 43200
#: The longest a refused login is held back to even out refusal times.
MAX_FAILURE_DELAY = 5.0


class AuthenticationFailed(Exception):
    """
    A login, or a token, that is refused.

    @ivar name: Salt's error name (C{EauthAuthenticationError},
        C{TokenAuthenticationError}).
    @ivar reason: why, for the master's log (not for the client).
    """

    def __init__(self, name: str, message: str, reason: str) -> None:
        super().__init__(message)
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Session:
    """
    A logged-in user: who, until when, and what it may do.
    """

    token: str
    name: str
    eauth: str
    start: float
    expire: float
    groups: tuple[str, ...]
    perms: Permissions

    def authorize(
        self,
        fun: str | Sequence[str],
        minions: Iterable[str] = (),
        kind: str = "local",
        grainsById: Mapping[str, Any] | None = None,
    ) -> Decision:
        """
        May this user call C{fun}? See L{Permissions.authorize}.

        @raise salttwist.eauth.engine.AclRefused: why not.
        """
        return self.perms.authorize(
            fun, minions, kind, grainsById, user=f"{self.eauth} user {self.name}"
        )

    def asDict(self) -> dict[str, Any]:
        """
        @return: the session as Salt's API answers a login: token, start,
            expire, user, eauth and perms (the auth list).
        """
        return {
            "token": self.token,
            "start": self.start,
            "expire": self.expire,
            "user": self.name,
            "eauth": self.eauth,
            "perms": list(self.perms.items),
        }


def _eauthFailure(username: object, reason: str) -> AuthenticationFailed:
    return AuthenticationFailed(
        "EauthAuthenticationError",
        f'Authentication failure of type "eauth" occurred for user {username}.',
        reason,
    )


class Authenticator:
    """
    Logs users in with the backends of C{external_auth}, and finds the
    session of a token.
    """

    def __init__(
        self,
        externalAuth: ExternalAuth,
        backends: Mapping[str, IAuthBackend],
        store: ITokenStore,
        clock: IReactorTime,
        runBlocking: Any,
        tokenExpire: float = DEFAULT_TOKEN_EXPIRE,
        userOverride: bool | Mapping[str, Sequence[str]] = False,
        keepAclInToken: bool = False,
    ) -> None:
        """
        @param backends: the backends by name (L{salttwist.eauth.backends.makeBackends}).
        @param runBlocking: runs a backend's blocking calls off the reactor
            thread (L{salttwist.blocking.threadRunner}).
        @param tokenExpire: Salt's C{token_expire}.
        @param userOverride: Salt's C{token_expire_user_override}.
        @param keepAclInToken: Salt's C{keep_acl_in_token}: a session's
            permissions are those the user had at login, not those the
            config gives it now.
        """
        self.externalAuth = externalAuth
        self.backends = dict(backends)
        self.store = store
        self.clock = clock
        self.runBlocking = runBlocking
        self.tokenExpire = tokenExpire
        self.userOverride = userOverride
        self.keepAclInToken = keepAclInToken
        self._slowestFailure: dict[str, float] = {}
        self._random = random.SystemRandom()

    @classmethod
    def fromConfig(
        cls,
        config: Mapping[str, Any],
        backends: Mapping[str, IAuthBackend],
        store: ITokenStore,
        clock: IReactorTime,
        runBlocking: Any,
    ) -> Authenticator:
        """
        @param config: a master config.
        """
        return cls(
            ExternalAuth.fromConfig(config),
            backends,
            store,
            clock,
            runBlocking,
            config.get("token_expire", DEFAULT_TOKEN_EXPIRE),
            config.get("token_expire_user_override", False),
            bool(config.get("keep_acl_in_token", False)),
        )

    def mayChooseExpire(self, eauth: str, username: str) -> bool:
        """
        May C{username} of C{eauth} choose its token's lifetime?
        """
        if self.userOverride is True:
            return True
        if isinstance(self.userOverride, Mapping):
            return username in (self.userOverride.get(eauth) or ())
        return False

    def _lifetime(self, eauth: str, username: str, tokenExpire: object) -> float:
        if tokenExpire is None or not self.mayChooseExpire(eauth, username):
            return self.tokenExpire
        if (
            isinstance(tokenExpire, bool)
            or not isinstance(tokenExpire, (int, float))
            or not math.isfinite(tokenExpire)
            or tokenExpire <= 0
        ):
            raise ValueError(
                f"token_expire must be a positive number of seconds, not {tokenExpire!r}"
            )
        return float(tokenExpire)

    def authenticate(self, eauth: str, username: str, password: str) -> Deferred[Any]:
        """
        Check a user's password with backend C{eauth} (on a thread), and
        work out its groups and auth list.

        @return: a L{Deferred} firing with C{(groups, authList)}.
        @raise AuthenticationFailed: the backend is not enabled, the
            password is wrong, or the config grants the user nothing.
        """
        return Deferred.fromCoroutine(self._authenticate(eauth, username, password))

    async def _authenticate(
        self, eauth: str, username: str, password: str
    ) -> tuple[tuple[str, ...], list[Any]]:
        backend = self.backends.get(eauth) if isinstance(eauth, str) else None
        if backend is None or eauth not in self.externalAuth.backends:
            raise _eauthFailure(username, f"the eauth system {eauth!r} is not enabled")
        if not isinstance(username, str) or not isinstance(password, str):
            raise _eauthFailure(username, "the user name and password must be strings")
        started = self.clock.seconds()
        ok = await self.runBlocking(backend.authenticate, username, password)
        if not ok:
            await self._evenOut(eauth, started)
            raise _eauthFailure(username, f"{eauth} refused the password of {username!r}")
        groups = await self.runBlocking(backend.groups, username)
        authList = self.externalAuth.authList(eauth, username, groups)
        if not authList:
            raise _eauthFailure(
                username, f"external_auth {eauth} grants {username!r} nothing (no entry names it)"
            )
        return tuple(groups), authList

    async def _evenOut(self, eauth: str, started: float) -> None:
        """
        Make a refusal by C{eauth} take about as long as its slowest one
        so far (Salt's C{time_auth}): a random time within 25% of it, at
        most L{MAX_FAILURE_DELAY} seconds, so that how long a refusal takes
        does not tell whether the user exists.
        """
        elapsed = self.clock.seconds() - started
        slowest = min(max(self._slowestFailure.get(eauth, 0.0), elapsed), MAX_FAILURE_DELAY)
        self._slowestFailure[eauth] = slowest
        wait = self._random.uniform(0.75 * slowest, 1.25 * slowest) - elapsed
        if wait > 0:
            await deferLater(self.clock, wait)

    def login(
        self, eauth: str, username: str, password: str, tokenExpire: object = None
    ) -> Deferred[Session]:
        """
        Log in: authenticate, then make a token.

        @param tokenExpire: the lifetime asked for, used only if the user
            may choose it (C{token_expire_user_override}).
        @return: a L{Deferred} firing with the new L{Session}.
        @raise AuthenticationFailed: see L{authenticate}.
        @raise ValueError: the lifetime asked for is not a positive number.
        """
        return Deferred.fromCoroutine(self._login(eauth, username, password, tokenExpire))

    async def _login(
        self, eauth: str, username: str, password: str, tokenExpire: object
    ) -> Session:
        lifetime = self._lifetime(eauth, username, tokenExpire)
        groups, authList = await self._authenticate(eauth, username, password)
        start = self.clock.seconds()
        data = TokenData(username, eauth, start, start + lifetime, groups, authList)
        token = await self.store.create(data)
        _log.info("eauth: {user} logged in with {eauth}", user=username, eauth=eauth)
        return self._session(token, data, authList)

    def _session(self, token: str, data: TokenData, authList: list[Any]) -> Session:
        perms = Permissions.fromItems(authList, self.externalAuth.nodegroups)
        return Session(token, data.name, data.eauth, data.start, data.expire, data.groups, perms)

    def session(self, token: str) -> Deferred[Session]:
        """
        The session of C{token}.

        @return: a L{Deferred} firing with the L{Session}.
        @raise AuthenticationFailed: the token is unknown, expired or
            revoked, or its backend is no longer enabled.
        """
        return Deferred.fromCoroutine(self._sessionOf(token))

    async def _sessionOf(self, token: str) -> Session:
        data = await self.store.get(token)
        if data is None:
            raise AuthenticationFailed(
                "TokenAuthenticationError",
                'Authentication failure of type "token" occurred.',
                "the token is unknown, expired or revoked",
            )
        if data.eauth not in self.externalAuth.backends:
            raise AuthenticationFailed(
                "TokenAuthenticationError",
                'Authentication failure of type "token" occurred.',
                f"the token's eauth system {data.eauth!r} is no longer enabled",
            )
        if self.keepAclInToken:
            authList = data.authList
        else:
            authList = self.externalAuth.authList(data.eauth, data.name, data.groups)
        return self._session(token, data, authList)

    def logout(self, token: str) -> Deferred[bool]:
        """
        Revoke C{token}.

        @return: a L{Deferred} firing with whether it was valid.
        """
        return self.store.revoke(token)
