# -*- test-case-name: tests.test_cluster_sealed_rotation -*-
"""
Tests for the cluster key's rotation (L{salttwist.cluster.sealed}): every
sealed message names its key by id; the rolling procedure (the new key added
as previous on every master, then made current on each, then the old one
taken out) loses no message between masters at different steps; a wrong key
id, a key not held, and a previous key past its grace are dropped and
logged; replays stay dropped across a rotation; the key files are read again
when they change (L{ClusterKeyWatcher}); and a master's options load them
(L{clusterFromConfig}).
"""

from __future__ import annotations

import os
import pwd
import time
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SkipTest, SynchronousTestCase, TestCase

from salttwist.cluster import sealed
from salttwist.cluster.interfaces import EVENT, JOB
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.sealed import (
    KEY_ID_BYTES,
    PREVIOUS_KEYS_FILE,
    ClusterKeyError,
    ClusterKeyring,
    ClusterKeyWatcher,
    SealedClusterBus,
    keyId,
    loadOrCreateClusterKey,
    loadPreviousKeys,
    readClusterKey,
)
from salttwist.cluster.service import clusterFromConfig
from salttwist.config import loadMasterConfig
from salttwist.symmetric import CryptError
from tests._clustercontract import subscribeAll
from tests.test_master_core import MasterTestCase

OLD = bytes(range(32))
NEW = bytes(range(32, 64))
OTHER = bytes(range(64, 96))


def warnings(observer: Any) -> list[str]:
    """
    @return: the text of the warnings and errors logged.
    """
    from twisted.logger import formatEvent

    return [formatEvent(e) for e in observer if e["log_level"] >= LogLevel.warn]


class KeyringTests(SynchronousTestCase):
    """
    L{ClusterKeyring}: sealing with the current key, opening with any held.
    """

    def test_keyIdInClear(self) -> None:
        """
        A sealed message starts with its key's id, a short hash of the key
        that does not hold the key.
        """
        keyring = ClusterKeyring(NEW)
        sealedBytes = keyring.seal(b"text", b"aad")
        self.assertEqual(sealedBytes[:KEY_ID_BYTES], keyId(NEW))
        self.assertEqual(len(keyId(NEW)), KEY_ID_BYTES)
        self.assertNotEqual(keyId(NEW), keyId(OLD))
        self.assertNotIn(keyId(NEW), NEW)
        self.assertEqual(keyring.open(sealedBytes, b"aad"), b"text")

    def test_acrossRotation(self) -> None:
        """
        A master that holds the new key as previous opens what a switched
        master seals, and the switched master opens the old key's messages
        while it holds it as previous; once taken out, it does not.
        """
        notSwitched = ClusterKeyring(OLD, [NEW])
        switched = ClusterKeyring(NEW, [OLD])
        self.assertEqual(notSwitched.open(switched.seal(b"new", b"a"), b"a"), b"new")
        self.assertEqual(switched.open(notSwitched.seal(b"old", b"a"), b"a"), b"old")
        fromOld = notSwitched.seal(b"late", b"a")
        switched.update(NEW)
        error = self.assertRaises(CryptError, switched.open, fromOld, b"a")
        self.assertIn(f"does not hold (id {keyId(OLD).hex()})", str(error))
        self.assertEqual(switched.previousIds, [])

    def test_wrongKeyId(self) -> None:
        """
        A message whose key id was changed to another key held does not
        open (the id is bound into the seal); nor does one too short to
        hold an id, or one of a key not held.
        """
        keyring = ClusterKeyring(NEW, [OLD])
        sealedBytes = keyring.seal(b"text", b"a")
        swapped = keyId(OLD) + sealedBytes[KEY_ID_BYTES:]
        self.assertRaises(CryptError, keyring.open, swapped, b"a")
        self.assertRaises(CryptError, keyring.open, sealedBytes[:2], b"a")
        foreign = ClusterKeyring(OTHER).seal(b"text", b"a")
        error = self.assertRaises(CryptError, keyring.open, foreign, b"a")
        self.assertIn(keyId(OTHER).hex(), str(error))
        self.assertRaises(CryptError, keyring.open, sealedBytes, b"other aad")

    def test_grace(self) -> None:
        """
        A previous key opens messages for C{grace} seconds after it was
        first held, then not (said once, to log); the current key is never
        limited; a key held again after being taken out starts afresh.
        """
        clock = Clock()
        keyring = ClusterKeyring(NEW, [OLD], grace=100, now=clock.seconds)
        fromOld = ClusterKeyring(OLD).seal(b"x", b"a")
        fromNew = ClusterKeyring(NEW).seal(b"y", b"a")
        clock.advance(100)
        self.assertEqual(keyring.open(fromOld, b"a"), b"x")
        self.assertEqual(keyring.expiredIds(), [])
        clock.advance(1)
        error = self.assertRaises(CryptError, keyring.open, fromOld, b"a")
        self.assertIn("grace (100 s) has passed", str(error))
        self.assertEqual(keyring.open(fromNew, b"a"), b"y")
        self.assertEqual(keyring.expiredIds(), [keyId(OLD)])
        self.assertEqual(keyring.expiredIds(), [])
        keyring.update(NEW, [OLD])
        self.assertRaises(CryptError, keyring.open, fromOld, b"a")
        keyring.update(NEW)
        keyring.update(NEW, [OLD])
        self.assertEqual(keyring.open(fromOld, b"a"), b"x")

    def test_graceFromBecomingPrevious(self) -> None:
        """
        A previous key's grace starts when it becomes a previous key, not
        when this master first held it: on a master up longer than the
        grace, step 2 of the rotation (the current key moved to the previous
        keys) leaves the old key opening the messages of the masters not yet
        rotated, for C{grace} seconds from step 2.
        """
        clock = Clock()
        keyring = ClusterKeyring(OLD, grace=100, now=clock.seconds)
        clock.advance(1000)
        fromOld = ClusterKeyring(OLD).seal(b"not yet rotated", b"a")
        # Step 1, then (a while later) step 2.
        keyring.update(OLD, [NEW])
        clock.advance(50)
        keyring.update(NEW, [OLD])
        self.assertEqual(keyring.open(fromOld, b"a"), b"not yet rotated")
        clock.advance(100)
        self.assertEqual(keyring.open(fromOld, b"a"), b"not yet rotated")
        self.assertEqual(keyring.expiredIds(), [])
        clock.advance(1)
        error = self.assertRaises(CryptError, keyring.open, fromOld, b"a")
        self.assertIn("grace (100 s) has passed", str(error))
        self.assertEqual(keyring.expiredIds(), [keyId(OLD)])

    def test_sameIdRefused(self) -> None:
        """
        Two different keys with the same id are refused, and the keys held
        are kept.
        """
        keyring = ClusterKeyring(NEW)
        self.patch(sealed, "keyId", lambda key: b"same")
        self.assertRaises(ClusterKeyError, keyring.update, NEW, [OLD])
        self.assertEqual(keyring.open(keyring.seal(b"x", b""), b""), b"x")
        # The same key twice (current and previous) is not a clash.
        keyring.update(NEW, [NEW])


class RotationBusTests(TestCase):
    """
    Masters at different steps of the rolling procedure, on one
    L{MemoryBroker}.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.broker = MemoryBroker()
        self.observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def member(self, memberId: str, keyring: ClusterKeyring) -> SealedClusterBus:
        """
        @return: a started member sealing with C{keyring}, collecting the
            jobs and events it gets.
        """
        inner = MemoryClusterBus(self.broker, memberId, self.clock)
        bus = SealedClusterBus(inner, keyring, "c1", now=lambda: 1000.0, clock=self.clock)
        bus.got = subscribeAll(bus, (JOB, EVENT), None)  # type: ignore[attr-defined]
        bus.start()
        self.addCleanup(bus.stop)
        return bus

    async def test_rollingProcedure(self) -> None:
        """
        Step 1 (new key added as previous everywhere), step 2 (made current
        on one master, the old one kept as previous), step 3 (old key taken
        out everywhere): every message crosses at every step; after step 3
        a message sealed with the old key is dropped, saying which key.
        """
        a = self.member("a", ClusterKeyring(OLD))
        b = self.member("b", ClusterKeyring(OLD))
        # Step 1.
        a.keyring.update(OLD, [NEW])
        b.keyring.update(OLD, [NEW])
        await a.publish(JOB, b"step 1")
        # Step 2, on a only so far.
        a.keyring.update(NEW, [OLD])
        await a.publish(JOB, b"a on the new key")
        await b.publish(JOB, b"b on the old key")
        # Step 2 on b, then step 3.
        b.keyring.update(NEW, [OLD])
        await b.publish(JOB, b"b on the new key")
        a.keyring.update(NEW)
        b.keyring.update(NEW)
        await a.publish(JOB, b"step 3")
        every = [
            b"step 1",
            b"a on the new key",
            b"b on the old key",
            b"b on the new key",
            b"step 3",
        ]
        # (The in-memory broker delivers a member's own messages to it too.)
        self.assertEqual(a.got[JOB], every)
        self.assertEqual(b.got[JOB], every)
        self.assertEqual(warnings(self.observer), [])
        straggler = self.member("c", ClusterKeyring(OLD))
        await straggler.publish(JOB, b"from a master still on the old key")
        self.assertEqual(a.got[JOB], every)
        [warning] = set(warnings(self.observer))
        self.assertIn(f"does not hold (id {keyId(OLD).hex()})", warning)

    async def test_rollingProcedureWithGrace(self) -> None:
        """
        The rolling procedure on masters up longer than the previous keys'
        grace (the default's case: a day): a master at step 2 still opens
        the messages of one at step 1 (sealed with the old key), for the
        grace from its step 2.
        """
        a = self.member("a", ClusterKeyring(OLD, grace=100, now=self.clock.seconds))
        b = self.member("b", ClusterKeyring(OLD, grace=100, now=self.clock.seconds))
        self.clock.advance(1000)
        # Step 1.
        a.keyring.update(OLD, [NEW])
        b.keyring.update(OLD, [NEW])
        self.clock.advance(10)
        # Step 2, on a only so far.
        a.keyring.update(NEW, [OLD])
        self.clock.advance(10)
        await a.publish(JOB, b"a on the new key")
        await b.publish(JOB, b"b on the old key")
        every = [b"a on the new key", b"b on the old key"]
        self.assertEqual(a.got[JOB], every)
        self.assertEqual(b.got[JOB], every)
        self.assertEqual(warnings(self.observer), [])
        # Past the grace from a's step 2, b's old key is refused by a.
        self.clock.advance(91)
        await b.publish(JOB, b"b too late")
        self.assertEqual(a.got[JOB], every)
        [warning] = set(warnings(self.observer))
        self.assertIn("grace (100 s) has passed", warning)

    async def test_replayAcrossRotation(self) -> None:
        """
        A message handled before a rotation, replayed after it, is still
        dropped (the replay window does not depend on the key).
        """
        a = self.member("a", ClusterKeyring(OLD, [NEW]))
        b = self.member("b", ClusterKeyring(OLD, [NEW]))
        captured: list[bytes] = []
        original = self.broker._members["a"].publish

        def capture(kind: str, payload: bytes) -> Any:
            captured.append(payload)
            return original(kind, payload)

        self.patch(self.broker._members["a"], "publish", capture)
        await a.publish(EVENT, b"once")
        b.keyring.update(NEW, [OLD])
        await original(EVENT, captured[0])
        self.assertEqual(b.got[EVENT], [b"once"])
        [drop] = [
            e
            for e in self.observer
            if e.get("log_source") is b and "had handled already" in e.get("log_format", "")
        ]
        self.assertEqual((drop["count"], drop["kind"]), (1, EVENT))


class KeyFilesTests(SynchronousTestCase):
    """
    L{loadPreviousKeys} and L{ClusterKeyWatcher}.
    """

    def setUp(self) -> None:
        self.directory = os.path.abspath(self.mktemp())
        self.key, self.keyPath, _ = loadOrCreateClusterKey(self.directory)
        self.previousPath = os.path.join(self.directory, PREVIOUS_KEYS_FILE)

    def write(self, path: str, text: str, mode: int = 0o600) -> None:
        """
        Replace C{path} with C{text} (a new file: a new inode).
        """
        temporary = path + ".new"
        with open(temporary, "w") as f:
            f.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)

    def test_previousKeys(self) -> None:
        """
        One key a line, with comments and blank lines; none without the
        file; refused if others may read it or a line is not a key (its
        number given, not its text).
        """
        self.assertEqual(loadPreviousKeys(self.directory), [])
        self.write(self.previousPath, f"# rotated 2026-11-27\n{NEW.hex()}\n\n{OLD.hex()}\n")
        self.assertEqual(loadPreviousKeys(self.directory), [NEW, OLD])
        os.chmod(self.previousPath, 0o640)
        error = self.assertRaises(ClusterKeyError, loadPreviousKeys, self.directory)
        self.assertIn("chmod go-rwx", str(error))
        self.write(self.previousPath, f"{NEW.hex()}\nsecret-ish text\n")
        error = self.assertRaises(ClusterKeyError, loadPreviousKeys, self.directory)
        self.assertIn("line 2", str(error))
        self.assertNotIn("secret-ish", str(error))

    def test_symlinksRefused(self) -> None:
        """
        Either key file as a symlink (even to a file of mode 0600) is
        refused as the daemon's other private files are, saying so; the
        watcher keeps the keys held.
        """
        target = os.path.join(self.directory, "elsewhere")
        self.write(target, OLD.hex() + "\n")
        os.symlink(target, self.previousPath)
        error = self.assertRaises(ClusterKeyError, loadPreviousKeys, self.directory)
        self.assertIn("not a symlink", str(error))
        self.assertIn("previous cluster keys", str(error))
        self.assertNotIn("refusing to start", str(error))
        os.remove(self.previousPath)
        os.replace(self.keyPath, target)
        os.symlink(target, self.keyPath)
        error = self.assertRaises(ClusterKeyError, readClusterKey, self.keyPath)
        self.assertIn("not a symlink", str(error))
        error = self.assertRaises(ClusterKeyError, loadOrCreateClusterKey, self.directory)
        self.assertIn("not a symlink", str(error))

    def test_owner(self) -> None:
        """
        A key file owned by another user than root, this process's or the
        C{user} option's is refused; the C{user} option's own is read (the
        daemon gave it its files when it dropped privileges).
        """
        if os.geteuid() != 0:
            raise SkipTest("chown needs root")
        nobody = pwd.getpwnam("nobody").pw_uid
        self.write(self.previousPath, OLD.hex() + "\n")
        for path in (self.keyPath, self.previousPath):
            os.chown(path, nobody, -1)
        error = self.assertRaises(ClusterKeyError, loadPreviousKeys, self.directory)
        self.assertIn(f"belongs to uid {nobody}", str(error))
        error = self.assertRaises(ClusterKeyError, readClusterKey, self.keyPath)
        self.assertIn(f"belongs to uid {nobody}", str(error))
        self.assertEqual(loadPreviousKeys(self.directory, "nobody"), [OLD])
        self.assertEqual(readClusterKey(self.keyPath, "nobody"), self.key)
        keyring = ClusterKeyring(OLD)
        watcher = ClusterKeyWatcher(self.directory, keyring, Clock(), runAs="nobody")
        watcher._seen = []
        watcher.check()
        self.assertEqual(keyring.currentId, keyId(self.key))
        self.assertEqual(keyring.previousIds, [keyId(OLD)])

    def test_watcherReadsChanges(self) -> None:
        """
        A change to either file is read at the next look; a file that does
        not hold keys is logged and the keys held are kept, then read once
        fixed.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        clock = Clock()
        keyring = ClusterKeyring(self.key)
        watcher = ClusterKeyWatcher(self.directory, keyring, clock, interval=10)
        watcher.start()
        self.addCleanup(watcher.stop)
        self.write(self.previousPath, NEW.hex() + "\n")
        self.assertEqual(keyring.previousIds, [])
        clock.advance(10)
        self.assertEqual(keyring.previousIds, [keyId(NEW)])
        self.write(self.previousPath, self.key.hex() + "\n")
        self.write(self.keyPath, NEW.hex()[:10])
        clock.advance(10)
        self.assertEqual(keyring.currentId, keyId(self.key))
        self.assertIn("cannot read the cluster keys again", " ".join(warnings(observer)))
        self.write(self.keyPath, NEW.hex() + "\n")
        clock.advance(10)
        self.assertEqual(keyring.currentId, keyId(NEW))
        self.assertEqual(keyring.previousIds, [keyId(self.key)])
        os.remove(self.keyPath)
        clock.advance(10)
        self.assertEqual(keyring.currentId, keyId(NEW))
        # Not made afresh: a new key would cut this master off the others.
        self.assertFalse(os.path.exists(self.keyPath))
        self.assertIn("is gone; keeping the keys held", " ".join(warnings(observer)))

    def test_watcherLogsExpiredKeys(self) -> None:
        """
        A previous key past its grace is logged once, naming its id and the
        file to take it out of.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        clock = Clock()
        keyring = ClusterKeyring(self.key, [OLD], grace=15, now=clock.seconds)
        watcher = ClusterKeyWatcher(self.directory, keyring, clock, interval=10)
        watcher.start()
        self.addCleanup(watcher.stop)
        clock.advance(10)
        self.assertEqual(warnings(observer), [])
        clock.advance(10)
        clock.advance(10)
        [warning] = warnings(observer)
        self.assertIn(keyId(OLD).hex(), warning)
        self.assertIn(PREVIOUS_KEYS_FILE, warning)


class ConfigTests(MasterTestCase):
    """
    A master's options load the previous keys and their grace.
    """

    def test_clusterFromConfig(self) -> None:
        """
        C{cluster.previous_keys} in C{cluster_pki_dir} is held with
        C{cluster_previous_keys_grace}, and the service reads the files
        again while it runs.
        """
        root = self.mktemp()
        config = loadMasterConfig(
            root,
            overrides={
                "root_dir": root,
                "cluster_id": "c1",
                "cluster_broker": "nats://127.0.0.1:4222",
                "cluster_pki_dir": "/cluster-keys",
                "cluster_previous_keys_grace": 60,
            },
        )
        # Under root_dir, as Salt's paths are.
        keyDir = config["cluster_pki_dir"]
        loadOrCreateClusterKey(keyDir)
        with open(os.path.join(keyDir, PREVIOUS_KEYS_FILE), "w") as f:
            f.write(OLD.hex() + "\n")
        os.chmod(os.path.join(keyDir, PREVIOUS_KEYS_FILE), 0o600)
        clock = Clock()
        service = clusterFromConfig(config, clock, self.master)
        assert service is not None
        keyring = service.bus.keyring  # type: ignore[attr-defined]
        self.assertEqual(keyring.previousIds, [keyId(OLD)])
        self.assertEqual(keyring.grace, 60)
        self.assertIs(service.keyWatcher.keyring, keyring)
        self.assertEqual(service.keyWatcher.directory, keyDir)

    def test_keyClockMonotonic(self) -> None:
        """
        The previous keys' grace runs on a monotonic clock, not the
        reactor's wall clock (set back, it would prolong the grace); a test
        gives its own.
        """
        root = self.mktemp()
        config = loadMasterConfig(
            root,
            overrides={
                "root_dir": root,
                "cluster_id": "c1",
                "cluster_broker": "nats://127.0.0.1:4222",
                "cluster_previous_keys_grace": 60,
            },
        )
        reactorClock = Clock()
        service = clusterFromConfig(config, reactorClock, self.master)
        assert service is not None
        keyring = service.bus.keyring  # type: ignore[attr-defined]
        self.assertIs(keyring._now, time.monotonic)
        keyClock = Clock()
        service = clusterFromConfig(config, reactorClock, self.master, keyClock.seconds)
        assert service is not None
        keyring = service.bus.keyring  # type: ignore[attr-defined]
        keyring.update(NEW, [OLD])
        fromOld = ClusterKeyring(OLD).seal(b"x", b"a")
        reactorClock.advance(1000)
        self.assertEqual(keyring.open(fromOld, b"a"), b"x")
        keyClock.advance(61)
        self.assertRaises(CryptError, keyring.open, fromOld, b"a")
