# -*- test-case-name: tests.test_keystore_pg_restart -*-
"""
The PostgreSQL key store across a restart of its server (a private server
made for the test, L{tests.test_jobcache_pg_restart.PrivateServer}): reads
keep answering from memory, writes fail with a clear error, and once the
server is back both stores reconnect by themselves, reload, and see each
other's changes again; nothing committed before is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from salttwist.pki.keystore import ACCEPTED, PENDING, REJECTED
from salttwist.pki.keystore_pg import KeyStoreUnavailable, PostgresKeyStore
from tests.test_jobcache_pg_restart import PrivateServer
from tests.test_keystore import PEM_A, PEM_B

WAIT = 60.0


class RestartTests(TestCase):
    """
    Two stores on one private server, stopped and started again.
    """

    timeout = 180

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """
        Wait (polling, on the reactor) until C{condition} holds; fail after
        L{WAIT} seconds.
        """
        deadline = time.monotonic() + WAIT
        while not condition():
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {WAIT} s")
            await deferLater(reactor, 0.05, lambda: None)

    async def writeWhenBack(self, write: Callable[[], object]) -> None:
        """
        Make C{write} (blocking, in a thread) once the writer's back-off
        lets it reach the server again.
        """
        deadline = time.monotonic() + WAIT
        while True:
            try:
                await deferToThread(write)
                return
            except KeyStoreUnavailable:
                if time.monotonic() > deadline:
                    raise
                await deferLater(reactor, 0.2, lambda: None)

    async def test_restart(self) -> None:
        """
        While the server is down: reads answer from memory, a write fails
        with L{KeyStoreUnavailable} naming the server. Once it is back, a
        write made through one store is seen by the other (its listener
        reconnected and reloaded), and the keys stored before are there.
        """
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise SkipTest("psycopg is not installed") from None
        server = PrivateServer(self)
        await server.create()
        one = PostgresKeyStore(server.options())
        two = PostgresKeyStore(server.options())
        for store in (one, two):
            store.start()
            self.addCleanup(store.close)
            await store.whenReady(reactor)
        await deferToThread(one.putKey, ACCEPTED, "web1", PEM_A)
        await self.until(lambda: two.stateOf("web1") == [ACCEPTED], "web1 accepted on two")
        loads = two.loads

        await server.stop()
        await self.until(lambda: not one.connected and not two.connected, "listeners down")
        self.assertEqual(two.listKeys(ACCEPTED), ["web1"])
        with self.assertRaises(KeyStoreUnavailable) as raised:
            await deferToThread(one.putKey, PENDING, "web2", PEM_B)
        self.assertIn(f"127.0.0.1:{server.port}/postgres", str(raised.exception))
        self.assertEqual(one.stateOf("web2"), [])

        await server.start()
        await self.until(lambda: two.connected and two.loads > loads, "two reloaded")
        await self.writeWhenBack(lambda: one.moveKey("web1", ACCEPTED, REJECTED))
        await self.until(lambda: two.stateOf("web1") == [REJECTED], "web1 rejected on two")
        await self.writeWhenBack(lambda: two.putKey(PENDING, "web2", PEM_B))
        await self.until(lambda: one.stateOf("web2") == [PENDING], "web2 pending on one")
        fresh = PostgresKeyStore(server.options())
        fresh.start()
        self.addCleanup(fresh.close)
        await fresh.whenReady(reactor)
        self.assertEqual((fresh.listKeys(REJECTED), fresh.listKeys(PENDING)), (["web1"], ["web2"]))
