# -*- test-case-name: tests.test_eauth_tokens -*-
"""
Tests for L{salttwist.eauth.tokens}: a contract suite run against each
L{ITokenStore}, and what only the SQLite store does (its file, restarts).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface.verify import verifyObject

from salttwist.blocking import runSynchronously
from salttwist.eauth.interfaces import ITokenStore, TokenData
from salttwist.eauth.tokens import (
    DATABASE_NAME,
    MemoryTokenStore,
    SQLiteTokenStore,
    TokenPruner,
    hashToken,
)

START = 1_700_000_000.0


def tokenData(name: str = "fred", expire: float = 100, eauth: str = "pam") -> TokenData:
    return TokenData(
        name,
        eauth,
        START,
        START + expire,
        ("admins",),
        ["test.*", {"web*": ["pkg.*"]}, "@runner"],
    )


def result(d: Deferred) -> Any:
    """
    The result of a Deferred that has fired (the stores here are synchronous).
    """
    results: list[Any] = []
    d.addBoth(results.append)
    if not results:
        raise AssertionError(f"{d!r} has not fired")
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


class TokenStoreContract:
    """
    What every L{ITokenStore} does. Mixed into a L{SynchronousTestCase}
    whose C{makeStore(clock)} returns a store whose calls fire at once.
    """

    clock: Clock

    def makeStore(self, clock: Clock) -> Any:
        raise NotImplementedError()

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(START)
        self.store = self.makeStore(self.clock)

    def test_interface(self) -> None:
        """
        The store provides L{ITokenStore}.
        """
        self.assertTrue(verifyObject(ITokenStore, self.store))  # type: ignore[attr-defined]

    def test_createGet(self) -> None:
        """
        A new token is 64 random hex digits and stands for its data.
        """
        token = result(self.store.create(tokenData()))
        other = result(self.store.create(tokenData()))
        self.assertRegex(token, r"\A[0-9a-f]{64}\Z")  # type: ignore[attr-defined]
        self.assertNotEqual(token, other)  # type: ignore[attr-defined]
        self.assertEqual(result(self.store.get(token)), tokenData())  # type: ignore[attr-defined]
        self.assertEqual(result(self.store.count()), 2)  # type: ignore[attr-defined]

    def test_unknown(self) -> None:
        """
        An unknown or malformed token has no data.
        """
        result(self.store.create(tokenData()))
        for token in ("0" * 64, "", "x" * 64, "'; DROP TABLE tokens; --", None, 42):
            self.assertIsNone(result(self.store.get(token)))  # type: ignore[attr-defined]
            self.assertFalse(result(self.store.revoke(token)))  # type: ignore[attr-defined]

    def test_expire(self) -> None:
        """
        A token is valid until its expire time; reading it then removes it.
        """
        token = result(self.store.create(tokenData(expire=100)))
        self.clock.advance(99)
        self.assertIsNotNone(result(self.store.get(token)))  # type: ignore[attr-defined]
        self.clock.advance(1)
        self.assertIsNone(result(self.store.get(token)))  # type: ignore[attr-defined]
        self.assertEqual(result(self.store.count()), 0)  # type: ignore[attr-defined]

    def test_revoke(self) -> None:
        """
        A revoked token is gone; the others stay.
        """
        token = result(self.store.create(tokenData()))
        other = result(self.store.create(tokenData()))
        self.assertTrue(result(self.store.revoke(token)))  # type: ignore[attr-defined]
        self.assertFalse(result(self.store.revoke(token)))  # type: ignore[attr-defined]
        self.assertIsNone(result(self.store.get(token)))  # type: ignore[attr-defined]
        self.assertIsNotNone(result(self.store.get(other)))  # type: ignore[attr-defined]

    def test_revokeUser(self) -> None:
        """
        L{ITokenStore.revokeUser} removes the tokens of one user of one backend.
        """
        a = result(self.store.create(tokenData("fred")))
        b = result(self.store.create(tokenData("fred")))
        c = result(self.store.create(tokenData("fred", eauth="file")))
        d = result(self.store.create(tokenData("zoe")))
        self.assertEqual(result(self.store.revokeUser("pam", "fred")), 2)  # type: ignore[attr-defined]
        self.assertEqual(  # type: ignore[attr-defined]
            [result(self.store.get(t)) is not None for t in (a, b, c, d)],
            [False, False, True, True],
        )

    def test_prune(self) -> None:
        """
        L{ITokenStore.prune} removes the expired tokens only.
        """
        result(self.store.create(tokenData(expire=10)))
        result(self.store.create(tokenData(expire=10)))
        keep = result(self.store.create(tokenData(expire=1000)))
        self.clock.advance(10)
        self.assertEqual(result(self.store.prune()), 2)  # type: ignore[attr-defined]
        self.assertEqual(result(self.store.count()), 1)  # type: ignore[attr-defined]
        self.assertIsNotNone(result(self.store.get(keep)))  # type: ignore[attr-defined]

    def test_pruner(self) -> None:
        """
        L{TokenPruner} prunes at start and every interval, until stopped.
        """
        result(self.store.create(tokenData(expire=30)))
        result(self.store.create(tokenData(expire=90)))
        pruner = TokenPruner(self.store, self.clock, 60)
        pruner.start()
        self.assertEqual(result(self.store.count()), 2)  # type: ignore[attr-defined]
        self.clock.advance(60)
        self.assertEqual(result(self.store.count()), 1)  # type: ignore[attr-defined]
        pruner.stop()
        self.clock.advance(60)
        self.assertEqual(result(self.store.count()), 1)  # type: ignore[attr-defined]
        pruner.stop()


class MemoryTokenStoreTests(TokenStoreContract, SynchronousTestCase):
    """
    L{MemoryTokenStore} keeps the contract.
    """

    def makeStore(self, clock: Clock) -> Any:
        return MemoryTokenStore(clock)


class SQLiteTokenStoreTests(TokenStoreContract, SynchronousTestCase):
    """
    L{SQLiteTokenStore} keeps the contract, and keeps only hashes in a file
    of mode 0600 that outlives the store.
    """

    def makeStore(self, clock: Clock) -> Any:
        self.directory = self.mktemp()
        os.makedirs(self.directory)
        self.path = os.path.join(self.directory, DATABASE_NAME)
        store = result(SQLiteTokenStore.open(self.path, clock, runSynchronously))
        self.addCleanup(lambda: store.close())
        return store

    def test_mode(self) -> None:
        """
        The file is the owner's only, even if it was made looser.
        """
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        result(self.store.close())
        os.chmod(self.path, 0o644)
        store = result(SQLiteTokenStore.open(self.path, self.clock, runSynchronously))
        self.addCleanup(store.close)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)

    def test_onlyHashes(self) -> None:
        """
        The file holds the token's SHA-256, never the token.
        """
        token = result(self.store.create(tokenData()))
        with open(self.path, "rb") as f:
            content = f.read()
        self.assertNotIn(token.encode(), content)
        self.assertIn(hashToken(token).encode(), content)

    def test_restart(self) -> None:
        """
        Tokens outlive the store: another store on the same file finds them.
        """
        token = result(self.store.create(tokenData()))
        result(self.store.close())
        again = result(SQLiteTokenStore.open(self.path, self.clock, runSynchronously))
        self.addCleanup(again.close)
        self.assertEqual(result(again.get(token)), tokenData())

    def test_symlinkRefused(self) -> None:
        """
        A symlink at the path is refused, not followed.
        """
        target = os.path.join(self.directory, "elsewhere")
        link = os.path.join(self.directory, "link.sqlite")
        os.symlink(target, link)
        d = SQLiteTokenStore.open(link, self.clock, runSynchronously)
        self.failureResultOf(d, OSError)
        self.assertFalse(os.path.exists(target))

    def test_corruptRow(self) -> None:
        """
        A row whose data cannot be read is removed, and the token is invalid.
        """
        token = result(self.store.create(tokenData()))
        db = sqlite3.connect(self.path)
        db.execute("UPDATE tokens SET data = 'not json'")
        db.commit()
        db.close()
        self.assertIsNone(result(self.store.get(token)))
        self.assertEqual(result(self.store.count()), 0)
        self.flushLoggedErrors()


class SQLiteThreadTests(TestCase):
    """
    L{SQLiteTokenStore} with its own thread, under the real reactor.
    """

    @inlineCallbacks
    def test_thread(self) -> Any:
        """
        The calls run on the store's thread, in order; closing stops it.
        """
        path = os.path.join(self.mktemp() + "-d", DATABASE_NAME)
        os.makedirs(os.path.dirname(path))
        store = yield SQLiteTokenStore.open(path, reactor)
        now = reactor.seconds()
        data = TokenData("fred", "pam", now, now + 60)
        tokens = yield Deferred.fromCoroutine(_createMany(store, data, 5))
        self.assertEqual((yield store.count()), 5)
        self.assertEqual((yield store.get(tokens[0])), data)
        self.assertTrue((yield store.revoke(tokens[0])))
        yield store.close()
        self.assertFalse(store._pool.started)

    def test_openFails(self) -> Deferred[None]:
        """
        A store that cannot open fails, and its thread is stopped.
        """
        d = SQLiteTokenStore.open(os.path.join(self.mktemp(), "no", "such.sqlite"), reactor)
        return self.assertFailure(d, OSError)


async def _createMany(store: SQLiteTokenStore, data: TokenData, n: int) -> list[str]:
    return [await store.create(data) for _ in range(n)]
