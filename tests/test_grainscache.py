# -*- test-case-name: tests.test_grainscache -*-
"""
Tests for L{salttwist.master.grainscache.GrainsCache}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.master.core import runSynchronously
from salttwist.master.grainscache import MAX_GRAINS_BYTES, GrainsCache


class GrainsCacheTests(SynchronousTestCase):
    """
    Grains reported by minions, in memory and on disk.
    """

    def setUp(self) -> None:
        """
        A cache over a temporary directory.
        """
        self.directory = os.path.abspath(self.mktemp())
        self.cache = GrainsCache(self.directory, runSynchronously)
        self.cache.load()

    def test_updatePersists(self) -> None:
        """
        Updated grains are kept in memory and read back by a new cache over
        the same directory (a master restart), from a 0600 file.
        """
        self.successResultOf(self.cache.update("web1", {"os": "Debian", "roles": ["web"]}))
        self.assertEqual(self.cache.grains["web1"]["os"], "Debian")
        self.assertEqual(os.stat(os.path.join(self.directory, "web1")).st_mode & 0o777, 0o600)
        again = GrainsCache(self.directory, runSynchronously)
        again.load()
        self.assertEqual(again.grains, {"web1": {"os": "Debian", "roles": ["web"]}})

    def test_sameGrainsNotWrittenAgain(self) -> None:
        """
        Grains equal to those on disk (written before, or read at start)
        are not written again; different ones are, and a failed write
        leaves the next report of the same grains to write them.
        """
        writes: list[str] = []

        def counting(f: Any, *args: Any) -> Any:
            writes.append(args[0])
            return runSynchronously(f, *args)

        cache = GrainsCache(self.directory, counting)
        self.successResultOf(cache.update("web1", {"os": "Debian"}))
        self.successResultOf(cache.update("web1", {"os": "Debian"}))
        self.assertEqual(len(writes), 1)
        self.successResultOf(cache.update("web1", {"os": "Alpine"}))
        self.assertEqual(len(writes), 2)
        restarted = GrainsCache(self.directory, counting)
        restarted.load()
        self.successResultOf(restarted.update("web1", {"os": "Alpine"}))
        self.assertEqual(len(writes), 2)

        def failing(f: Any, *args: Any) -> Any:
            writes.append(args[0])
            return fail(OSError("disk full"))

        broken = GrainsCache(self.directory, failing)
        self.failureResultOf(broken.update("web2", {"os": "Debian"}), OSError)
        self.failureResultOf(broken.update("web2", {"os": "Debian"}), OSError)
        self.assertEqual(len(writes), 4)

    def test_forget(self) -> None:
        """
        Forgetting a minion removes its grains from memory and disk.
        """
        self.successResultOf(self.cache.update("web1", {"os": "Debian"}))
        self.successResultOf(self.cache.forget("web1"))
        self.assertEqual(self.cache.grains, {})
        self.assertEqual(os.listdir(self.directory), [])

    def test_batched(self) -> None:
        """
        One batch is written at a time, in one call to C{runBlocking};
        what changes meanwhile goes in the next batch, the last change of
        each minion only, and every caller hears when its change is on
        disk. A removal queued after a write of the same minion wins.
        """
        held: list[tuple[Deferred[Any], Any, tuple[Any, ...]]] = []

        def holding(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((d, f, args))
            return d

        def release() -> None:
            d, f, args = held.pop(0)
            d.callback(f(*args))

        cache = GrainsCache(self.directory, holding)
        os.makedirs(self.directory, exist_ok=True)
        first = cache.update("web1", {"os": "Debian"})
        second = [
            cache.update("web2", {"os": "Debian"}),
            cache.update("web3", {"os": "Debian"}),
            cache.update("web3", {"os": "Alpine"}),
            cache.update("web4", {"os": "Debian"}),
        ]
        removed = cache.forget("web4")
        self.assertEqual(len(held), 1)
        self.assertEqual(held[0][2][1], {"web1": serial.dumps({"os": "Debian"})})
        release()
        self.successResultOf(first)
        [(_, _, (_, batch))] = held
        self.assertEqual(
            batch,
            {
                "web2": serial.dumps({"os": "Debian"}),
                "web3": serial.dumps({"os": "Alpine"}),
                "web4": None,
            },
        )
        release()
        for d in [*second, removed]:
            self.successResultOf(d)
        self.assertEqual(sorted(os.listdir(self.directory)), ["web1", "web2", "web3"])
        again = GrainsCache(self.directory, runSynchronously)
        again.load()
        self.assertEqual(again.grains["web3"], {"os": "Alpine"})

    def test_oneFileFails(self) -> None:
        """
        A file that cannot be written fails its own caller only; the rest
        of its batch is written.
        """
        os.makedirs(os.path.join(self.directory, "web1"))
        held: list[tuple[Deferred[Any], Any, tuple[Any, ...]]] = []

        def holding(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((d, f, args))
            return d

        cache = GrainsCache(self.directory, holding)
        cache.update("web0", {"os": "Debian"})
        failed = cache.update("web1", {"os": "Debian"})
        written = cache.update("web2", {"os": "Debian"})
        while held:
            d, f, args = held.pop(0)
            d.callback(f(*args))
        self.failureResultOf(failed, OSError)
        self.successResultOf(written)
        self.assertTrue(os.path.isfile(os.path.join(self.directory, "web2")))

    def test_refusesBadGrains(self) -> None:
        """
        Grains that are not a map, or are too large, are refused.
        """
        self.assertRaises(ValueError, self.cache.update, "web1", ["not", "a", "map"])
        self.assertRaises(ValueError, self.cache.update, "web1", {"x": "y" * MAX_GRAINS_BYTES})
        self.assertEqual(self.cache.grains, {})

    def test_loadSkipsJunk(self) -> None:
        """
        Files with invalid names or contents are skipped when loading.
        """
        with open(os.path.join(self.directory, ".hidden"), "wb") as f:
            f.write(b"\x81\xa1a\x01")
        with open(os.path.join(self.directory, "web2"), "wb") as f:
            f.write(b"\xc1garbage")
        cache = GrainsCache(self.directory, runSynchronously)
        cache.load()
        self.assertEqual(cache.grains, {})
