# -*- test-case-name: tests.test_eauth_tokens -*-
"""
Stores of login tokens (L{ITokenStore}): L{SQLiteTokenStore}, one SQLite
file under the master's cachedir that outlives a restart, and
L{MemoryTokenStore}, for tests and single-process tools.

A token is L{TOKEN_BYTES} random bytes in hex (Salt's are an MD5 of
random bytes). Only its SHA-256 is stored: whoever reads the store (a
backup, a stray copy) cannot use the tokens in it. A token is valid until
its C{expire}; reading an expired one removes it, and L{prune} (run every
so often by L{TokenPruner}) removes the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import sqlite3
import stat
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.threadpool import ThreadPool
from zope.interface import implementer

from salttwist.eauth.interfaces import ITokenStore, TokenData

__all__ = [
    "DATABASE_NAME",
    "TOKEN_BYTES",
    "MemoryTokenStore",
    "SQLiteTokenStore",
    "TokenPruner",
    "hashToken",
    "newToken",
]

_log = Logger()

#: How many random bytes a token has (it is twice as many hex digits).
TOKEN_BYTES = 32
#: The token store's file, in the master's cachedir.
DATABASE_NAME = "tokens.sqlite"
_TOKEN = re.compile(r"\A[0-9a-f]{32,128}\Z")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    hash TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    eauth TEXT NOT NULL,
    start REAL NOT NULL,
    expire REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_expire ON tokens (expire);
CREATE INDEX IF NOT EXISTS tokens_user ON tokens (eauth, name);
"""


def newToken(nbytes: int = TOKEN_BYTES) -> str:
    """
    @return: a new random token, C{nbytes} random bytes in hex.
    """
    return secrets.token_hex(nbytes)


def hashToken(token: str) -> str:
    """
    @return: what a store keeps of C{token}: its SHA-256, in hex.
    """
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _wellFormed(token: object) -> bool:
    return isinstance(token, str) and _TOKEN.match(token) is not None


@implementer(ITokenStore)
class MemoryTokenStore:
    """
    Tokens in a dict: lost when the process ends.
    """

    def __init__(self, clock: IReactorTime, tokenBytes: int = TOKEN_BYTES) -> None:
        self._clock = clock
        self._tokenBytes = tokenBytes
        self._tokens: dict[str, TokenData] = {}

    def create(self, data: TokenData) -> Deferred[str]:
        token = newToken(self._tokenBytes)
        self._tokens[hashToken(token)] = data
        return succeed(token)

    def get(self, token: str) -> Deferred[TokenData | None]:
        if not _wellFormed(token):
            return succeed(None)
        key = hashToken(token)
        data = self._tokens.get(key)
        if data is not None and data.expire <= self._clock.seconds():
            del self._tokens[key]
            data = None
        return succeed(data)

    def revoke(self, token: str) -> Deferred[bool]:
        if not _wellFormed(token):
            return succeed(False)
        return succeed(self._tokens.pop(hashToken(token), None) is not None)

    def revokeUser(self, eauth: str, name: str) -> Deferred[int]:
        keys = [k for k, d in self._tokens.items() if d.eauth == eauth and d.name == name]
        for key in keys:
            del self._tokens[key]
        return succeed(len(keys))

    def prune(self) -> Deferred[int]:
        now = self._clock.seconds()
        keys = [k for k, d in self._tokens.items() if d.expire <= now]
        for key in keys:
            del self._tokens[key]
        return succeed(len(keys))

    def count(self) -> Deferred[int]:
        return succeed(len(self._tokens))

    def close(self) -> Deferred[None]:
        return succeed(None)


class _TokenDatabase:
    """
    The blocking half of L{SQLiteTokenStore}: one SQLite connection, used
    by one thread at a time.
    """

    def __init__(self, path: str) -> None:
        # Made 0600 before SQLite opens it (its journal takes the same
        # mode); a symlink at the path is refused, not followed.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{path} is not a regular file")
            if info.st_mode & 0o077:
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.executescript(_SCHEMA)

    def insert(self, key: str, data: TokenData) -> None:
        payload = json.dumps({"groups": list(data.groups), "auth_list": data.authList})
        self._db.execute(
            "INSERT INTO tokens (hash, name, eauth, start, expire, data) VALUES (?, ?, ?, ?, ?, ?)",
            (key, data.name, data.eauth, data.start, data.expire, payload),
        )

    def fetch(self, key: str, now: float) -> TokenData | None:
        row = self._db.execute(
            "SELECT name, eauth, start, expire, data FROM tokens WHERE hash = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        name, eauth, start, expire, payload = row
        if expire <= now:
            self._db.execute("DELETE FROM tokens WHERE hash = ?", (key,))
            return None
        try:
            extra = json.loads(payload)
            return TokenData(
                name, eauth, start, expire, tuple(extra["groups"]), list(extra["auth_list"])
            )
        except (ValueError, KeyError, TypeError) as e:
            _log.warn("token store: removing a token whose data is unreadable: {error}", error=e)
            self._db.execute("DELETE FROM tokens WHERE hash = ?", (key,))
            return None

    def delete(self, key: str) -> bool:
        return self._db.execute("DELETE FROM tokens WHERE hash = ?", (key,)).rowcount > 0

    def deleteUser(self, eauth: str, name: str) -> int:
        return self._db.execute(
            "DELETE FROM tokens WHERE eauth = ? AND name = ?", (eauth, name)
        ).rowcount

    def prune(self, now: float) -> int:
        return self._db.execute("DELETE FROM tokens WHERE expire <= ?", (now,)).rowcount

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM tokens").fetchone()[0]

    def close(self) -> None:
        self._db.close()


RunBlocking = Callable[..., Deferred]


@implementer(ITokenStore)
class SQLiteTokenStore:
    """
    Tokens in an SQLite file (mode 0600), kept across restarts. Every
    database call runs on one dedicated thread (or through the
    C{runBlocking} given), in the order the calls were made.
    """

    def __init__(
        self,
        database: _TokenDatabase,
        clock: IReactorTime,
        runBlocking: RunBlocking,
        pool: ThreadPool | None = None,
        tokenBytes: int = TOKEN_BYTES,
    ) -> None:
        """
        Use L{open}.
        """
        self._db = database
        self._clock = clock
        self._run = runBlocking
        self._pool = pool
        self._tokenBytes = tokenBytes

    @classmethod
    def open(
        cls,
        path: str,
        reactor: Any,
        runBlocking: RunBlocking | None = None,
        tokenBytes: int = TOKEN_BYTES,
    ) -> Deferred[SQLiteTokenStore]:
        """
        Open (or create) the store at C{path}.

        @param reactor: gives the time, and runs the store's thread.
        @param runBlocking: runs the database calls; by default on a
            thread of the store's own (tests run them synchronously).
        @return: a L{Deferred} firing with the store, or failing with the
            L{OSError} or L{sqlite3.Error} that stopped it.
        """
        pool = None
        if runBlocking is None:
            pool = ThreadPool(minthreads=1, maxthreads=1, name="salttwist-tokens")
            pool.start()
            owned = pool

            def runBlocking(f: Any, *args: Any) -> Deferred:
                return deferToThreadPool(reactor, owned, f, *args)

        run = runBlocking

        def failed(failure: Any) -> Any:
            if pool is not None:
                pool.stop()
            return failure

        d = run(_TokenDatabase, path)
        d.addCallbacks(lambda db: cls(db, reactor, run, pool, tokenBytes), failed)
        return d

    def create(self, data: TokenData) -> Deferred[str]:
        token = newToken(self._tokenBytes)
        return self._run(self._db.insert, hashToken(token), data).addCallback(lambda _: token)

    def get(self, token: str) -> Deferred[TokenData | None]:
        if not _wellFormed(token):
            return succeed(None)
        return self._run(self._db.fetch, hashToken(token), self._clock.seconds())

    def revoke(self, token: str) -> Deferred[bool]:
        if not _wellFormed(token):
            return succeed(False)
        return self._run(self._db.delete, hashToken(token))

    def revokeUser(self, eauth: str, name: str) -> Deferred[int]:
        return self._run(self._db.deleteUser, eauth, name)

    def prune(self) -> Deferred[int]:
        return self._run(self._db.prune, self._clock.seconds())

    def count(self) -> Deferred[int]:
        return self._run(self._db.count)

    def close(self) -> Deferred[None]:
        d = self._run(self._db.close)

        def stop(result: object) -> object:
            if self._pool is not None:
                self._pool.stop()
            return result

        return d.addBoth(stop)


class TokenPruner:
    """
    Removes a store's expired tokens every C{interval} seconds.
    """

    def __init__(self, store: ITokenStore, clock: IReactorTime, interval: float = 60) -> None:
        self._store = store
        self._call = LoopingCall(self._prune)
        self._call.clock = clock
        self._interval = interval

    def _prune(self) -> Deferred[None]:
        def done(removed: int) -> None:
            if removed:
                _log.debug("token store: {count} expired tokens removed", count=removed)

        def failed(failure: Any) -> None:
            _log.failure("token store: pruning failed", failure)

        return self._store.prune().addCallbacks(done, failed)

    def start(self) -> None:
        """
        Prune now and every C{interval} seconds.
        """
        self._call.start(self._interval, now=True)

    def stop(self) -> None:
        """
        Stop pruning.
        """
        if self._call.running:
            self._call.stop()
