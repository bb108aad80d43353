# -*- test-case-name: tests.test_eauth_backends,tests.test_eauth_tokens -*-
"""
The interfaces of external authentication: a backend that checks a
password (L{IAuthBackend}) and a store of login tokens (L{ITokenStore}).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zope.interface import Attribute, Interface

__all__ = ["IAuthBackend", "ITokenStore", "TokenData"]


class IAuthBackend(Interface):
    """
    An eauth backend (Salt's C{salt/auth/<name>.py}): checks a user's
    password and tells its groups. Both methods block (PAM, password
    hashing, NSS lookups): call them off the reactor thread.
    """

    name = Attribute("The backend's name in external_auth: C{'pam'}, C{'file'}.")

    def authenticate(username: str, password: str) -> bool:  # noqa: N805
        """
        Is C{password} the password of C{username}? Never raises for a
        wrong or malformed password or an unknown user: it is then false.
        """

    def groups(username: str) -> list[str]:  # noqa: N805
        """
        @return: the names of the groups C{username} belongs to, for
            C{group%} entries; empty if the backend has no groups.
        """


@dataclass(frozen=True)
class TokenData:
    """
    What a login token stands for.

    @ivar name: the user's name.
    @ivar eauth: the backend it logged in with.
    @ivar start: when, in seconds since the epoch.
    @ivar expire: when it stops being valid.
    @ivar groups: the user's groups at login.
    @ivar authList: the user's auth list at login (see
        L{salttwist.eauth.engine}).
    """

    name: str
    eauth: str
    start: float
    expire: float
    groups: tuple[str, ...] = ()
    authList: list[Any] = field(default_factory=list)

    def asDict(self, token: str) -> dict[str, Any]:
        """
        @return: the token's data as Salt's C{mk_token} returns it.
        """
        return {
            "token": token,
            "name": self.name,
            "eauth": self.eauth,
            "start": self.start,
            "expire": self.expire,
            "groups": list(self.groups),
            "auth_list": list(self.authList),
        }


class ITokenStore(Interface):
    """
    Where login tokens are kept. Only a hash of each token is stored, so the
    store's content lets nobody log in. Every method returns a L{Deferred}.
    """

    def create(data: TokenData) -> Any:  # noqa: N805
        """
        Make a new random token for C{data} and keep it until
        C{data.expire}.

        @return: a L{Deferred} firing with the token (a string).
        """

    def get(token: str) -> Any:  # noqa: N805
        """
        @return: a L{Deferred} firing with the L{TokenData} of C{token}, or
            L{None} if it is unknown, revoked or expired (an expired one is
            removed).
        """

    def revoke(token: str) -> Any:  # noqa: N805
        """
        Remove C{token}.

        @return: a L{Deferred} firing with whether it was there.
        """

    def revokeUser(eauth: str, name: str) -> Any:  # noqa: N805
        """
        Remove every token of the user C{name} of backend C{eauth}.

        @return: a L{Deferred} firing with how many were removed.
        """

    def prune() -> Any:
        """
        Remove the expired tokens.

        @return: a L{Deferred} firing with how many were removed.
        """

    def count() -> Any:
        """
        @return: a L{Deferred} firing with how many tokens are kept,
            expired ones not yet pruned included.
        """

    def close() -> Any:
        """
        Release the store; no call may follow.

        @return: a L{Deferred} firing when done.
        """
