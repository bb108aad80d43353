# -*- test-case-name: tests.test_eauth_backends -*-
"""
The eauth backends: C{pam} (L{PamBackend}, the system's users through
PAM) and C{file} (L{HtpasswdBackend}, an Apache htpasswd file), and
L{makeBackends} to build those the config names.

Everything here blocks: PAM calls its modules (which may sleep seconds on
a failure, C{pam_faildelay}), hash verification is deliberately slow, and
group lookups go through NSS. Callers run it in a thread.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.eauth.interfaces import IAuthBackend

__all__ = ["HASH_SCHEMES", "HtpasswdBackend", "PamBackend", "makeBackends", "systemGroups"]

_log = Logger()

#: The hashes the htpasswd backend accepts (libpass scheme names). Apache's
#: MD5 (apr1, htpasswd's default), SHA1, DES crypt and plain text entries
#: are refused: they are too cheap to brute-force.
HASH_SCHEMES = ("bcrypt", "argon2", "sha512_crypt", "sha256_crypt")
#: The PAM service Salt uses by default (its auth.pam.service option).
DEFAULT_PAM_SERVICE = "login"


def _usable(username: object, password: object) -> bool:
    """
    Are both non-empty strings without NUL (which C APIs would cut short)?
    """
    return (
        isinstance(username, str)
        and isinstance(password, str)
        and bool(username)
        and bool(password)
        and "\0" not in username
        and "\0" not in password
    )


def systemGroups(username: str) -> list[str]:
    """
    The names of the groups of the system user C{username}: its primary
    group and those listing it as a member. Empty for an unknown user.
    """
    try:
        entry = pwd.getpwnam(username)
    except (KeyError, ValueError):
        return []
    names = []
    for gid in os.getgrouplist(username, entry.pw_gid):
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return sorted(set(names))


@implementer(IAuthBackend)
class PamBackend:
    """
    Salt's C{pam} backend: a user of this host, checked by PAM's
    authentication and account management (an expired or locked account
    is refused), without opening a session or setting credentials.

    @ivar service: the PAM service (C{/etc/pam.d/<service>}).
    """

    name = "pam"

    def __init__(self, service: str = DEFAULT_PAM_SERVICE) -> None:
        self.service = service

    def authenticate(self, username: str, password: str) -> bool:
        if not _usable(username, password):
            return False
        import pam

        # One authenticator per call: a PAM handle is not shared by threads.
        authenticator = pam.PamAuthenticator()
        try:
            ok = authenticator.authenticate(
                username, password, service=self.service, resetcreds=False
            )
        except Exception as e:  # noqa: BLE001 - any failure is a refusal
            _log.warn("pam: authenticating {user} failed: {error}", user=username, error=e)
            return False
        if not ok:
            _log.info("pam: {user} refused: {reason}", user=username, reason=authenticator.reason)
        return bool(ok)

    def groups(self, username: str) -> list[str]:
        return systemGroups(username)


def _htpasswdEntries(path: str) -> Iterator[tuple[str, str]]:
    """
    The C{user:hash} lines of an htpasswd file (blank lines and C{#}
    comments skipped).
    """
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or ":" not in line:
                continue
            user, _, hashed = line.partition(":")
            yield user, hashed


@implementer(IAuthBackend)
class HtpasswdBackend:
    """
    Salt's C{file} backend with C{^filetype: htpasswd}: users and their
    password hashes in an Apache htpasswd file, read at every login (so an
    edit takes effect at once). Hashes are verified by libpass (bcrypt,
    argon2 and SHA-crypt, see L{HASH_SCHEMES}); a user whose hash is of
    another scheme is refused, with a warning saying why. The file has no
    groups.

    @ivar filename: the file.
    """

    name = "file"

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self._context: Any = None

    def _cryptContext(self) -> Any:
        if self._context is None:
            from passlib.context import CryptContext

            self._context = CryptContext(schemes=list(HASH_SCHEMES))
        return self._context

    def authenticate(self, username: str, password: str) -> bool:
        if not _usable(username, password):
            return False
        try:
            entries = dict(_htpasswdEntries(self.filename))
        except (OSError, UnicodeDecodeError) as e:
            _log.error("file eauth: cannot read {path}: {error}", path=self.filename, error=e)
            return False
        context = self._cryptContext()
        hashed = entries.get(username)
        if hashed is None:
            self._spendAsMuch(context, entries.values(), password)
            return False
        scheme = context.identify(hashed, required=False)
        if scheme is None:
            _log.warn(
                "file eauth: {user} in {path} is refused: its hash is not bcrypt, argon2 or"
                " SHA-crypt (re-hash it, e.g. htpasswd -B)",
                user=username,
                path=self.filename,
            )
            return False
        try:
            return bool(context.verify(password, hashed))
        except (ValueError, TypeError) as e:
            _log.warn(
                "file eauth: the hash of {user} in {path} is malformed: {error}",
                user=username,
                path=self.filename,
                error=e,
            )
            return False

    def _spendAsMuch(self, context: Any, hashes: Iterable[str], password: str) -> None:
        """
        Refusing an unknown user takes as long as refusing a wrong
        password: verify the password against another user's hash, so the
        time taken does not tell which users exist.
        """
        for other in hashes:
            if context.identify(other, required=False) is not None:
                try:
                    context.verify(password, other)
                except (ValueError, TypeError):
                    pass
                return

    def groups(self, username: str) -> list[str]:
        return []


def makeBackends(
    externalAuth: Any, pamService: str = DEFAULT_PAM_SERVICE
) -> Mapping[str, IAuthBackend]:
    """
    @param externalAuth: an L{salttwist.eauth.config.ExternalAuth}.
    @return: a backend for each backend it configures, by name.
    """
    backends: dict[str, IAuthBackend] = {}
    for name in externalAuth.backends:
        if name == "pam":
            backends[name] = PamBackend(pamService)
        elif name == "file":
            backends[name] = HtpasswdBackend(externalAuth.options(name)["filename"])
    return backends
