# -*- test-case-name: tests.integration.test_tls -*-
"""
Transports with real processes: a master and a minion speaking C{tls},
a minion without TLS turned away by a TLS master, and a third-party
transport plugin that the daemons and the CLI find on C{PYTHONPATH}.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from salttwist import crypt
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from salttwist.transport.tls import CERT_FILE, HANDSHAKE_TIMEOUT, PINNED_MASTER_FILE
from tests.integration import harness
from tests.integration.harness import Cluster, seedKeyPair, waitFor
from tests.integration.test_end_to_end import IntegrationTestCase

#: The directory whose C{twisted/plugins} holds the test transport plugin.
TEST_PLUGINS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins")


async def startCluster(
    cluster: Cluster, masterOptions: dict, minions: dict[str, dict]
) -> harness.EventWatcher:
    """
    Start a master with C{masterOptions} and accepted minions, each with its
    own options; wait for no minion.

    @return: a watcher of the master's events, subscribed before the
        minions start.
    """
    cluster.writeMasterConfig(**masterOptions)
    seedKeyPair(cluster.masterPkiDir, "master", "master")
    store = FilesystemKeyStore(cluster.masterPkiDir)
    for minionId in minions:
        store.putKey(
            ACCEPTED, minionId, seedKeyPair(cluster.minionPkiDir(minionId), "minion", minionId)
        )
    await cluster.startMaster()
    watcher = await cluster.watchEvents()
    for minionId, options in minions.items():
        cluster.writeMinionConfig(minionId, **options)
        cluster.startMinion(minionId)
    return watcher


async def ping(cluster: Cluster, expected: Sequence[str]) -> None:
    """
    C{salttwist -L EXPECTED test.ping} answers C{True} for each of them.
    """
    result = await cluster.salt("-L", ",".join(expected), "test.ping", "--static", "--out", "json")
    assert result.code == 0, cluster.explain(result)
    assert json.loads(result.out) == dict.fromkeys(expected, True), cluster.explain(result)


class TLSTransportTests(IntegrationTestCase):
    """
    A master with C{transport: tls}.
    """

    async def test_pingOverTLS(self) -> None:
        """
        A minion with C{transport: tls} authenticates over TLS and answers
        C{salttwist test.ping} (the CLI too speaks TLS to the req
        channel). The master made its certificate at its first start; the
        minion trusted its key on first contact and pinned it.
        """
        cluster = self.cluster
        watcher = await startCluster(
            cluster, {"transport": "tls"}, {"minion1": {"transport": "tls"}}
        )
        await cluster.waitForStart(watcher, ["minion1"])
        await ping(cluster, ["minion1"])
        self.assertTrue(os.path.exists(os.path.join(cluster.masterPkiDir, CERT_FILE)))
        with open(os.path.join(cluster.minionPkiDir("minion1"), PINNED_MASTER_FILE), "rb") as f:
            pinned = crypt.canonicalPublicPem(f.read())
        with open(os.path.join(cluster.masterPkiDir, "master.pub"), "rb") as f:
            self.assertEqual(pinned, crypt.canonicalPublicPem(f.read()))
        self.assertIn("first contact, trusting its key", cluster.minions["minion1"].output())
        self.assertIn("the master's TLS certificate", cluster.master.output())

    async def test_plainMinionTurnedAway(self) -> None:
        """
        A minion left on C{transport: tcp} never authenticates with a TLS
        master: the master closes its connections when no TLS handshake
        comes, with a log line that names the likely cause, while a TLS
        minion beside it works.
        """
        cluster = self.cluster
        watcher = await startCluster(
            cluster,
            {"transport": "tls"},
            {"plain": {"transport": "tcp"}, "secure": {"transport": "tls"}},
        )
        await cluster.waitForStart(watcher, ["secure"])
        assert cluster.master is not None
        master = cluster.master
        await waitFor(
            lambda: "no TLS handshake" in master.output(),
            "the master's log line about the minion without TLS",
            timeout=HANDSHAKE_TIMEOUT + 10,
            context=cluster.logs,
        )
        self.assertIn("is the peer's transport option tls too?", master.output())
        self.assertNotIn("salt/minion/plain/start", watcher.tags, cluster.logs())
        await ping(cluster, ["secure"])


class ThirdPartyTransportTests(IntegrationTestCase):
    """
    The test plugin C{loggingtcp}, installed by putting its directory on
    the daemons' and the CLI's C{PYTHONPATH}: salttwist's code is the same.
    """

    def setUp(self) -> None:
        super().setUp()
        childEnvironment = harness.childEnvironment

        def withPlugins() -> dict[str, str]:
            env = childEnvironment()
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [TEST_PLUGINS, env.get("PYTHONPATH", "")])
            )
            return env

        self.patch(harness, "childEnvironment", withPlugins)

    async def test_pluginDaemons(self) -> None:
        """
        With C{transport: loggingtcp} in both configs, the master listens,
        the minion connects and the CLI reaches the req channel through the
        plugin (its records show each of them), and test.ping works.
        """
        cluster = self.cluster
        masterLog = os.path.join(cluster.baseDir, "master-transport.log")
        minionLog = os.path.join(cluster.baseDir, "minion-transport.log")
        watcher = await startCluster(
            cluster,
            {"transport": "loggingtcp", "loggingtcp_log": masterLog},
            {"minion1": {"transport": "loggingtcp", "loggingtcp_log": minionLog}},
        )
        await cluster.waitForStart(watcher, ["minion1"])
        await ping(cluster, ["minion1"])
        with open(masterLog) as f:
            masterRecords = f.read().splitlines()
        with open(minionLog) as f:
            minionRecords = f.read().splitlines()
        self.assertEqual(masterRecords[:3], ["prepare master", "listen pub", "listen req"])
        for record in ("accept req", "accept pub", "connect client"):
            self.assertIn(record, masterRecords)
        self.assertEqual(minionRecords[:2], ["connect req", "connect pub"])
