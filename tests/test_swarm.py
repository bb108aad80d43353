# -*- test-case-name: tests.test_swarm -*-
"""
Tests for the benchmark swarm (C{benchmarks/swarmlib.py}): its command, its
key cache and status files, and a small swarm of simulated minions against a
real C{salttwist-master} process on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from twisted.internet.defer import gatherResults
from twisted.trial.unittest import SynchronousTestCase, TestCase

from benchmarks import swarmlib as swarm
from benchmarks.swarmlib import (
    SharedPublications,
    SharedVerification,
    Swarm,
    acceptKeys,
    ensureKeys,
    minionIdFor,
    raiseFileLimit,
    readKeyPair,
    readStatus,
)
from benchmarks.swarmlib import _minionOverrides as minionOverrides
from benchmarks.swarmlib import _parser as swarmParser
from benchmarks.swarmlib import main as swarmMain
from salttwist import crypt, serial, wire
from salttwist.cli import swarm as swarmCommand
from salttwist.client.local import LocalClient
from salttwist.events.fire import fireMasterEvent
from salttwist.files import MASTER_PUB_FILE
from tests._scripts import ROOT, loadScript
from tests.integration.harness import Cluster, seedKeyPair, waitFor


class ScriptTests(SynchronousTestCase):
    """
    C{benchmarks/swarm.py} is the C{salttwist-swarm} command.
    """

    def test_sameCommand(self) -> None:
        """
        The script runs the swarm's C{main} (C{benchmarks/swarmlib.py}), from
        any directory.
        """
        self.assertIs(loadScript("benchmarks", "swarm.py").main, swarm.main)
        elsewhere = self.mktemp()
        os.makedirs(elsewhere)
        result = subprocess.run(
            [sys.executable, os.path.join(ROOT, "benchmarks", "swarm.py"), "--help"],
            cwd=elsewhere,
            capture_output=True,
            timeout=60,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(b"salttwist-swarm", result.stdout)

    def test_installedCommand(self) -> None:
        """
        The installed C{salttwist-swarm} (L{salttwist.cli.swarm}) runs the
        checkout's script with its arguments, from any directory.
        """
        self.assertTrue(
            os.path.samefile(
                swarmCommand.SWARM_SCRIPT, os.path.join(ROOT, "benchmarks", "swarm.py")
            )
        )
        elsewhere = self.mktemp()
        os.makedirs(elsewhere)
        result = subprocess.run(
            [sys.executable, "-c", "from salttwist.cli.swarm import main; main(['--help'])"],
            cwd=elsewhere,
            capture_output=True,
            timeout=60,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(b"salttwist-swarm", result.stdout)

    def test_noCheckout(self) -> None:
        """
        Installed without a checkout (from a wheel), C{salttwist-swarm}
        exits 2 and says where the swarm is.
        """
        self.patch(swarmCommand, "SWARM_SCRIPT", os.path.abspath(self.mktemp()))
        stderr = io.StringIO()
        self.patch(sys, "stderr", stderr)
        self.assertEqual(swarmCommand.main(["--help"]), 2)
        self.assertIn("benchmarks/swarm.py", stderr.getvalue())


class StatusTests(SynchronousTestCase):
    """
    Tests for L{readStatus} and L{raiseFileLimit}.
    """

    def writeShard(self, directory: str, shard: int, **status: object) -> None:
        with open(os.path.join(directory, f"shard-{shard}.json"), "w") as f:
            json.dump(status, f)

    def test_sumsShards(self) -> None:
        """
        The counters of every shard file are added up, the kid counts are
        merged, the first ready time is the earliest and the last ready time
        and the time each kid was last reached are the latest.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        common = {"attempt_failures": 0, "returns": 1}
        self.writeShard(
            directory,
            0,
            pid=10,
            minions=2,
            ready=2,
            ever_ready=2,
            auths=2,
            kids={"1": 1, "2": 1},
            kid_last_at={"1": 5.0, "2": 7.0},
            first_ready_at=3.0,
            last_ready_at=4.0,
            **common,
        )
        self.writeShard(
            directory,
            1,
            pid=11,
            minions=3,
            ready=1,
            ever_ready=3,
            auths=4,
            kids={"2": 1},
            kid_last_at={"2": 8.0},
            first_ready_at=2.0,
            last_ready_at=3.5,
            **common,
        )
        total = readStatus(directory)
        self.assertEqual(
            (total["shards"], total["minions"], total["ready"], total["ever_ready"]), (2, 5, 3, 5)
        )
        self.assertEqual((total["auths"], total["returns"], total["pids"]), (6, 2, [10, 11]))
        self.assertEqual(total["kids"], {1: 1, 2: 2})
        self.assertEqual(total["kid_last_at"], {1: 5.0, 2: 8.0})
        self.assertEqual((total["first_ready_at"], total["last_ready_at"]), (2.0, 4.0))

    def test_readyByMasterSummed(self) -> None:
        """
        The ready minions of each master are added up over the shards; a
        shard file without them (an older swarm) counts none.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        common = {
            "pid": 1,
            "minions": 2,
            "ready": 2,
            "ever_ready": 2,
            "auths": 2,
            "attempt_failures": 0,
            "returns": 0,
            "kids": {},
            "kid_last_at": {},
            "first_ready_at": None,
            "last_ready_at": None,
        }
        self.writeShard(directory, 0, ready_by_master={"h:1": 1, "h:2": 1}, **common)
        self.writeShard(directory, 1, ready_by_master={"h:2": 2}, **common)
        self.writeShard(directory, 2, **common)
        self.assertEqual(readStatus(directory)["ready_by_master"], {"h:1": 1, "h:2": 3})

    def test_mastersRotatedPerShard(self) -> None:
        """
        With C{--masters}, each process's minions list every master,
        starting with the one of the process's number, the others in turn
        or, every second round of processes, the other way round, in
        failover mode;
        C{--option} values are read as JSON when they are JSON.
        """
        options = swarmParser().parse_args(
            ["--port", "1", "--masters", "h:1,h:2,h:3", "--option", "master_alive_interval=2"]
            + ["--option", "log_level=debug", "--single-connection"]
        )
        lists = []
        for shard in range(6):
            options.shard = shard
            overrides = minionOverrides(options)
            lists.append(overrides.pop("master"))
            self.assertEqual(
                overrides,
                {
                    "master_type": "failover",
                    "master_alive_interval": 2,
                    "log_level": "debug",
                    "single_connection": True,
                },
            )
        self.assertEqual(
            lists,
            [["h:1", "h:2", "h:3"], ["h:2", "h:3", "h:1"], ["h:3", "h:1", "h:2"]]
            + [["h:1", "h:3", "h:2"], ["h:2", "h:1", "h:3"], ["h:3", "h:2", "h:1"]],
        )

    def test_noShards(self) -> None:
        """
        A status directory without shard files reads as zero shards.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        self.assertEqual(readStatus(directory)["shards"], 0)

    def test_fileLimitRaised(self) -> None:
        """
        L{raiseFileLimit} lifts the soft open-file limit to the hard one.
        """
        soft, hard = raiseFileLimit()
        self.assertEqual((soft, hard), resource.getrlimit(resource.RLIMIT_NOFILE))
        if hard != resource.RLIM_INFINITY:
            self.assertEqual(soft, hard)


class SharedVerificationTests(SynchronousTestCase):
    """
    L{SharedVerification}: one real signature check per (key, signature,
    message), failures never remembered.
    """

    def setUp(self) -> None:
        self.key = crypt.generatePrivateKey()
        self.other = crypt.generatePrivateKey()
        self.verify = SharedVerification(crypt.verify)

    def test_checkedOnce(self) -> None:
        """
        The same good signature on the same message with the same key is
        checked for real once; a new message is checked again.
        """
        sig = crypt.sign(self.key, b"job one")
        for _ in range(3):
            self.verify(self.key.public_key(), sig, b"job one")
        self.assertEqual(self.verify.checks, 1)
        self.verify(self.key.public_key(), crypt.sign(self.key, b"job two"), b"job two")
        self.assertEqual(self.verify.checks, 2)

    def test_badNeverRemembered(self) -> None:
        """
        A signature made with another key, or over another message, fails
        every time, even after the good one was remembered.
        """
        sig = crypt.sign(self.key, b"job")
        self.verify(self.key.public_key(), sig, b"job")
        for _ in range(2):
            self.assertRaises(crypt.CryptError, self.verify, self.other.public_key(), sig, b"job")
            self.assertRaises(crypt.CryptError, self.verify, self.key.public_key(), sig, b"jo")
        forged = crypt.sign(self.other, b"job")
        self.assertRaises(crypt.CryptError, self.verify, self.key.public_key(), forged, b"job")

    def test_bounded(self) -> None:
        """
        At most L{SharedVerification.SIZE} successes are kept, oldest first
        out.
        """
        sigs = [crypt.sign(self.key, b"%d" % i) for i in range(SharedVerification.SIZE + 1)]
        for i, sig in enumerate(sigs):
            self.verify(self.key.public_key(), sig, b"%d" % i)
        self.verify(self.key.public_key(), sigs[-1], b"%d" % SharedVerification.SIZE)
        self.assertEqual(self.verify.checks, SharedVerification.SIZE + 1)
        self.verify(self.key.public_key(), sigs[0], b"0")
        self.assertEqual(self.verify.checks, SharedVerification.SIZE + 2)


class SharedPublicationsTests(SynchronousTestCase):
    """
    L{SharedPublications}: one real decryption per (key, generation,
    ciphertext), failures never remembered, each caller with its own map.
    """

    def setUp(self) -> None:
        self.cipher = crypt.AesCipher(os.urandom(32))
        self.shared = SharedPublications()
        self.opened: list[bytes] = []

    def realOpen(self, cipher: crypt.AesCipher, kid: int, blob: bytes) -> object:
        self.opened.append(blob)
        return serial.loads(cipher.decrypt(blob, wire.publicationAad(kid)))

    def seal(self, load: object, kid: int = 1, cipher: crypt.AesCipher | None = None) -> bytes:
        return (cipher or self.cipher).encrypt(serial.dumps(load), wire.publicationAad(kid))

    def test_openedOnce(self) -> None:
        """
        The same ciphertext under the same key and generation is opened for
        real once; every caller gets an equal map of its own.
        """
        blob = self.seal({"jid": "1" * 20, "fun": "test.ping"})
        first = self.shared.open(self.realOpen, self.cipher, 1, blob)
        second = self.shared.open(self.realOpen, crypt.AesCipher(self.cipher.key), 1, blob)
        self.assertEqual(first, {"jid": "1" * 20, "fun": "test.ping"})
        self.assertEqual(second, first)
        self.assertIsNot(second, first)
        self.assertEqual((self.opened, self.shared.opened), ([blob], 1))

    def test_otherKeyOpenedForReal(self) -> None:
        """
        A ciphertext that opened with one key is opened for real, and fails,
        under another key or another generation: nothing is taken on trust.
        """
        blob = self.seal({"jid": "1" * 20})
        self.shared.open(self.realOpen, self.cipher, 1, blob)
        other = crypt.AesCipher(os.urandom(32))
        for _ in range(2):
            self.assertRaises(crypt.CryptError, self.shared.open, self.realOpen, other, 1, blob)
            self.assertRaises(
                crypt.CryptError, self.shared.open, self.realOpen, self.cipher, 2, blob
            )
        self.assertEqual(len(self.opened), 5)

    def test_bounded(self) -> None:
        """
        At most L{SharedPublications.SIZE} loads are kept, oldest first out.
        """
        blobs = [self.seal({"n": i}) for i in range(SharedPublications.SIZE + 1)]
        for blob in blobs:
            self.shared.open(self.realOpen, self.cipher, 1, blob)
        self.shared.open(self.realOpen, self.cipher, 1, blobs[-1])
        self.assertEqual(self.shared.opened, SharedPublications.SIZE + 1)
        self.assertEqual(self.shared.open(self.realOpen, self.cipher, 1, blobs[0]), {"n": 0})
        self.assertEqual(self.shared.opened, SharedPublications.SIZE + 2)


class FastKeyLoadTests(SynchronousTestCase):
    """
    The swarm's key loading (L{swarm._fastLoadPrivateKey}).
    """

    def test_loadedWarm(self) -> None:
        """
        A cached key is loaded as the same key, and makes its first
        private-key operation at once (a signature of a fixed message that
        its public key verifies), not during the benchmark.
        """
        key = crypt.generatePrivateKey()
        signed: list[tuple[object, bytes]] = []
        realSign = crypt.sign

        def recordingSign(privateKey: object, message: bytes) -> bytes:
            signature = realSign(privateKey, message)  # type: ignore[arg-type]
            signed.append((privateKey, signature))
            crypt.verify(privateKey.public_key(), signature, message)  # type: ignore[attr-defined]
            return signature

        self.patch(crypt, "sign", recordingSign)
        loaded = swarm._fastLoadPrivateKey(crypt.privateKeyToPem(key))
        self.assertEqual(loaded.private_numbers(), key.private_numbers())
        self.assertEqual([k for k, _ in signed], [loaded])


class SwarmTests(TestCase):
    """
    Three simulated minions against a real master process.
    """

    timeout = 60

    def test_keysCached(self) -> None:
        """
        L{ensureKeys} generates only the key pairs that are missing; each
        index keeps its own pair.
        """
        keysDir = self.mktemp()
        self.assertEqual(ensureKeys(keysDir, 2, workers=1), 2)
        self.assertEqual(ensureKeys(keysDir, 2, workers=1), 0)
        self.assertNotEqual(readKeyPair(keysDir, 0)[1], readKeyPair(keysDir, 1)[1])

    async def masterAndSwarm(
        self, prefix: str, count: int, **options: Any
    ) -> tuple[Cluster, Swarm, list[tuple[int, str]]]:
        """
        Start a real master and build (not start) a swarm of C{count}
        minions whose keys it accepted.

        @return: the cluster, the swarm and the minions' indexes and ids.
        """
        from twisted.internet import reactor

        cluster = Cluster(self)
        keysDir = os.path.join(cluster.baseDir, "keys")
        ensureKeys(keysDir, count, workers=1)
        seedKeyPair(cluster.masterPkiDir, "master", "master")
        await cluster.startMaster()
        assert cluster.ports is not None
        ids = [(i, minionIdFor(prefix, i)) for i in range(count)]
        acceptKeys(cluster.masterPkiDir, keysDir, ids, 2048)
        swarm = Swarm(
            reactor,
            os.path.join(cluster.baseDir, "swarm"),
            keysDir,
            list(range(count)),
            "127.0.0.1",
            cluster.ports["ret_port"],
            idPrefix=prefix,
            **options,
        )
        return cluster, swarm, ids

    async def test_swarmAgainstRealMaster(self) -> None:
        """
        Minions of a swarm authenticate to a real master with their own
        keys, answer C{test.ping} and C{swarm.payload} through the local
        client, and take a rotated publication key without authenticating
        again.
        """
        from twisted.internet import reactor

        cluster, swarm, ids = await self.masterAndSwarm("t-", 3, returnBytes=10)
        started = time.time()
        swarm.start()
        try:
            await waitFor(lambda: swarm.status()["ever_ready"] == 3, "three ready minions")
            status = swarm.status()
            self.assertEqual((status["ready"], status["auths"]), (3, 3))
            self.assertGreaterEqual(status["last_ready_at"], started)

            client = LocalClient(cluster.masterConfig(), reactor)
            result = await client.run("*", "swarm.payload", [], timeout=10)
            self.assertEqual(
                {m: r["return"] for m, r in result.returns.items()},
                {minionId: "x" * 10 for _, minionId in ids},
            )
            result = await client.run("t-00001", "swarm.payload", ["100"], timeout=10)
            self.assertEqual(result.returns["t-00001"]["return"], "x" * 100)
            self.assertEqual(swarm.status()["returns"], 4)
            # Each job's publication was opened once for the three minions.
            self.assertEqual(swarm.publications.opened, 2)

            (kid,) = swarm.status()["kids"]
            fireMasterEvent(cluster.sockDir, "salt/key", {"act": "delete", "id": "no-such-minion"})
            await waitFor(
                lambda: swarm.status()["kids"] == {str(int(kid) + 1): 3}, "the rotated key"
            )
            self.assertEqual(swarm.status()["auths"], 3)
        finally:
            protocols = [p for m in swarm.minions for p in (m.req, m.pub) if p is not None]
            swarm.stop()
            await gatherResults([p.lost for p in protocols])

    async def test_pinnedMaster(self) -> None:
        """
        With C{--pin-master}, every minion holds the master's key before
        it starts (as after a master restart) and authenticates against
        it; a file that is no public key is refused, naming it.
        """
        pubPath = self.mktemp()
        with open(pubPath, "wb") as f:
            f.write(b"no key")
        e = self.assertRaises(
            SystemExit, swarmMain, ["--port", "1", "--pin-master", pubPath, "-n", "0"]
        )
        self.assertIn(f"--pin-master {pubPath}", str(e))
        # The key pair masterAndSwarm gives the master.
        masterPub = seedKeyPair(self.mktemp(), "master", "master")
        cluster, swarm, ids = await self.masterAndSwarm("p-", 2, masterPub=masterPub)
        pinned = [os.path.join(m.config["pki_dir"], MASTER_PUB_FILE) for m in swarm.minions]
        for path in pinned:
            with open(path, "rb") as f:
                self.assertEqual(f.read(), masterPub)
        inodes = [os.stat(path).st_ino for path in pinned]
        swarm.start()
        try:
            await waitFor(lambda: swarm.status()["ever_ready"] == 2, "two ready minions")
            self.assertEqual(swarm.status()["auths"], 2)
            self.assertEqual(swarm.status()["attempt_failures"], 0)
            # Checked against, not written again.
            self.assertEqual([os.stat(path).st_ino for path in pinned], inodes)
        finally:
            protocols = [p for m in swarm.minions for p in (m.req, m.pub) if p is not None]
            swarm.stop()
            await gatherResults([p.lost for p in protocols])

    async def test_singleConnection(self) -> None:
        """
        With C{--single-connection} (C{single_connection} in every simulated
        minion's config), each minion holds its req connection only and
        still answers jobs.
        """
        from twisted.internet import reactor

        self.assertTrue(
            swarmParser().parse_args(["--port", "1", "--single-connection"]).single_connection
        )
        cluster, swarm, ids = await self.masterAndSwarm(
            "s-", 2, configOverrides={"single_connection": True}
        )
        swarm.start()
        try:
            await waitFor(lambda: swarm.status()["ever_ready"] == 2, "two ready minions")
            self.assertEqual([m.pub for m in swarm.minions], [None, None])
            client = LocalClient(cluster.masterConfig(), reactor)
            result = await client.run("*", "test.ping", [], timeout=10)
            self.assertEqual(sorted(result.returns), [minionId for _, minionId in ids])
        finally:
            protocols = [m.req for m in swarm.minions if m.req is not None]
            swarm.stop()
            await gatherResults([p.lost for p in protocols])
