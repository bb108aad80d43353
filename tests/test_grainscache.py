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
from salttwist.master import grainscache
from salttwist.master.core import runSynchronously
from salttwist.master.grainscache import MAX_GRAINS_BYTES, GrainsCache, packRecord


class GrainsCacheTests(SynchronousTestCase):
    """
    Grains reported by minions, in memory and in the cache file.
    """

    def setUp(self) -> None:
        """
        A cache over a file in a temporary directory.
        """
        self.cachedir = os.path.abspath(self.mktemp())
        self.path = os.path.join(self.cachedir, "grains.cache")
        self.cache = GrainsCache(self.path, runSynchronously)
        self.cache.load()

    def reloaded(self) -> dict[str, Any]:
        """
        @return: the grains a new cache over the same database reads (a
            master restart).
        """
        again = GrainsCache(self.path, runSynchronously)
        again.load()
        return again.grains

    def test_updatePersists(self) -> None:
        """
        Updated grains are kept in memory and read back by a new cache over
        the same file, mode 0600.
        """
        self.successResultOf(self.cache.update("web1", {"os": "Debian", "roles": ["web"]}))
        self.assertEqual(self.cache.grains["web1"]["os"], "Debian")
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)
        self.assertEqual(self.reloaded(), {"web1": {"os": "Debian", "roles": ["web"]}})

    def test_noFilePerMinion(self) -> None:
        """
        A thousand minions' grains make no file of their own: the
        directory holds the database (and its WAL) only.
        """
        for i in range(1000):
            self.cache.update(f"web{i}", {"os": "Debian", "i": i})
        self.assertLessEqual(
            set(os.listdir(self.cachedir)), {"grains.cache", "grains.db-wal", "grains.db-shm"}
        )
        self.assertEqual(len(self.reloaded()), 1000)

    def test_sameGrainsNotWrittenAgain(self) -> None:
        """
        Grains equal to those stored (written before, or read at start)
        are not written again; different ones are, and a failed write
        leaves the next report of the same grains to write them.
        """
        writes: list[Any] = []

        def counting(f: Any, *args: Any) -> Any:
            writes.append(args[1])
            return runSynchronously(f, *args)

        cache = GrainsCache(self.path, counting)
        self.successResultOf(cache.update("web1", {"os": "Debian"}))
        self.successResultOf(cache.update("web1", {"os": "Debian"}))
        self.assertEqual(len(writes), 1)
        self.successResultOf(cache.update("web1", {"os": "Alpine"}))
        self.assertEqual(len(writes), 2)
        restarted = GrainsCache(self.path, counting)
        restarted.load()
        self.successResultOf(restarted.update("web1", {"os": "Alpine"}))
        self.assertEqual(len(writes), 2)

        def failing(f: Any, *args: Any) -> Any:
            writes.append(args[1])
            return fail(OSError("disk full"))

        broken = GrainsCache(self.path, failing)
        self.failureResultOf(broken.update("web2", {"os": "Debian"}), OSError)
        self.failureResultOf(broken.update("web2", {"os": "Debian"}), OSError)
        self.assertEqual(len(writes), 4)

    def test_forget(self) -> None:
        """
        Forgetting a minion removes its grains from memory and the file.
        """
        self.successResultOf(self.cache.update("web1", {"os": "Debian"}))
        self.successResultOf(self.cache.forget("web1"))
        self.assertEqual(self.cache.grains, {})
        self.assertEqual(self.reloaded(), {})

    def test_batched(self) -> None:
        """
        One batch is written at a time, in one call to C{runBlocking};
        what changes meanwhile goes in the next batch, the last change of
        each minion only, and every caller hears when its change is
        stored. A removal queued after a write of the same minion wins.
        """
        held: list[tuple[Deferred[Any], Any, tuple[Any, ...]]] = []

        def holding(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((d, f, args))
            return d

        def release() -> None:
            d, f, args = held.pop(0)
            d.callback(f(*args))

        cache = GrainsCache(self.path, holding)
        first = cache.update("web1", {"os": "Debian"})
        second = [
            cache.update("web2", {"os": "Debian"}),
            cache.update("web3", {"os": "Debian"}),
            cache.update("web3", {"os": "Alpine"}),
            cache.update("web4", {"os": "Debian"}),
        ]
        removed = cache.forget("web4")
        self.assertEqual(len(held), 1)
        self.assertEqual(held[0][2][1], [packRecord("web1", serial.dumps({"os": "Debian"}))])
        release()
        self.successResultOf(first)
        [(_, _, (_, batch))] = held
        self.assertEqual(
            batch,
            [
                packRecord("web2", serial.dumps({"os": "Debian"})),
                packRecord("web3", serial.dumps({"os": "Alpine"})),
                packRecord("web4", None),
            ],
        )
        release()
        for d in [*second, removed]:
            self.successResultOf(d)
        grains = self.reloaded()
        self.assertEqual(sorted(grains), ["web1", "web2", "web3"])
        self.assertEqual(grains["web3"], {"os": "Alpine"})

    def test_failedBatch(self) -> None:
        """
        A batch that cannot be written (here the file cannot be
        created) fails each of its callers with an L{OSError} naming the
        grains cache; the cache goes on with the next batch.
        """
        blocker = os.path.join(self.cachedir, "file")
        with open(blocker, "w"):
            pass
        cache = GrainsCache(os.path.join(blocker, "grains.cache"), runSynchronously)
        failure = self.failureResultOf(cache.update("web1", {"os": "Debian"}), OSError)
        self.assertIn("grains cache", str(failure.value))
        self.failureResultOf(cache.update("web2", {"os": "Debian"}), OSError)
        self.assertEqual(cache.grains["web2"], {"os": "Debian"})

    def test_refusesBadGrains(self) -> None:
        """
        Grains that are not a map, or are too large, are refused.
        """
        self.assertRaises(ValueError, self.cache.update, "web1", ["not", "a", "map"])
        self.assertRaises(ValueError, self.cache.update, "web1", {"x": "y" * MAX_GRAINS_BYTES})
        self.assertEqual(self.cache.grains, {})

    def test_loadSkipsJunk(self) -> None:
        """
        Records with invalid ids or contents are skipped when loading; a
        damaged end (an append cut short) is dropped, and the file
        rewritten without it.
        """
        self.successResultOf(self.cache.update("web1", {"os": "Debian"}))
        with open(self.path, "ab") as f:
            f.write(packRecord("../x", serial.dumps({"os": "x"})))
            f.write(packRecord("web2", b"\xc1garbage"))
            f.write(packRecord("web3", serial.dumps({"os": "Alpine"}))[:-3])
        self.assertEqual(self.reloaded(), {"web1": {"os": "Debian"}})
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), packRecord("web1", serial.dumps({"os": "Debian"})))

    def test_compacted(self) -> None:
        """
        When most of the file is records that no longer count (grains that
        changed, minions forgotten), the next batch rewrites it with the
        current grains only; loading compacts it too.
        """
        self.patch(grainscache, "COMPACT_MIN_BYTES", 0)
        for i in range(10):
            self.successResultOf(self.cache.update("web1", {"os": "Debian", "i": i}))
        self.successResultOf(self.cache.update("web2", {"os": "Alpine"}))
        self.successResultOf(self.cache.forget("web2"))
        self.successResultOf(self.cache.update("web3", {"os": "Arch"}))
        current = {"web1": {"os": "Debian", "i": 9}, "web3": {"os": "Arch"}}
        self.assertEqual(self.reloaded(), current)
        live = sum(len(packRecord(m, serial.dumps(g))) for m, g in current.items())
        self.assertLessEqual(os.path.getsize(self.path), 2 * live)

    def test_importsLegacyFiles(self) -> None:
        """
        The files of the older C{cachedir/grains/} directory (one per
        minion) are imported once, junk skipped, and the directory removed.
        """
        legacy = os.path.join(self.cachedir, "grains")
        os.makedirs(legacy)
        with open(os.path.join(legacy, "web7"), "wb") as f:
            f.write(serial.dumps({"os": "Alpine"}))
        with open(os.path.join(legacy, ".hidden"), "wb") as f:
            f.write(serial.dumps({"os": "x"}))
        cache = GrainsCache(self.path, runSynchronously)
        cache.load()
        self.assertEqual(cache.grains, {"web7": {"os": "Alpine"}})
        self.assertFalse(os.path.exists(legacy))
        self.assertEqual(self.reloaded(), {"web7": {"os": "Alpine"}})
