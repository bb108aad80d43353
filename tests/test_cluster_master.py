# -*- test-case-name: tests.test_cluster_master -*-
"""
Two masters joined by the cluster's fan-out (L{salttwist.cluster.service.joinCluster})
over the in-memory bus: a job published through one master's local client
reaches a minion connected to the other, sealed with that master's own
publication key, and the minion's return is fired on the first master's
bus; when the broker has been away too long the first master refuses jobs,
saying why, and takes them again once it is back. And the cluster options
(L{salttwist.cluster.service.clusterFromConfig}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock

from salttwist import crypt, serial, wire
from salttwist.cluster.fanout import CLUSTER_ORIGIN
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.nats import NatsClusterBus
from salttwist.cluster.sealed import ClusterKeyError, SealedClusterBus, loadOrCreateClusterKey
from salttwist.cluster.service import (
    ClusterConfigError,
    ClusterService,
    clusterFromConfig,
    joinCluster,
)
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.master.core import ACK_DELAY
from salttwist.pki.keystore import ACCEPTED
from tests.test_master_core import MINION_KEYS, MasterTestCase


class TwoMastersTests(MasterTestCase):
    """
    Master B (C{self.master}) holds the sessions of C{m1} and C{m2}; master
    A only the local client's. Both accept both minions' keys.
    """

    def setUp(self) -> None:
        super().setUp()
        self.masterB = self.master
        self.masterA = self.makeMaster(self.masterB.runBlocking)
        # Each master's own events (MasterTestCase's self.events gets both).
        self.eventsA: list[tuple[str, dict[str, Any]]] = []
        self.eventsB: list[tuple[str, dict[str, Any]]] = []
        self.masterA.bus.subscribe([], lambda tag, data: self.eventsA.append((tag, data)))
        self.masterB.bus.subscribe([], lambda tag, data: self.eventsB.append((tag, data)))
        for minionId, key in MINION_KEYS.items():
            self.masterA.keyStore.putKey(ACCEPTED, minionId, crypt.publicKeyToPem(key.public_key()))
        self.clock = Clock()
        self.broker = MemoryBroker()
        self.buses = {}
        for name, master in (("a", self.masterA), ("b", self.masterB)):
            bus = self.buses[name] = MemoryClusterBus(self.broker, name, self.clock)
            service = joinCluster(master.config, self.clock, master, bus)
            self.assertIsInstance(service, ClusterService)
            service.startService()
            self.addCleanup(service.stopService)
        self.master = self.masterB
        self.minions = {}
        for minionId in ("m1",):
            client, _, sessionKey = self.authMinion(minionId)
            _, _, received, answer = self.subscribe(minionId, sessionKey)
            self.assertEqual(answer, "subscribed")
            self.minions[minionId] = (client, received)
        self.master = self.masterA
        self.client, _ = self.authClient()

    def publish(self, **load: Any) -> Any:
        self.master = self.masterA
        return self.request(self.client, {"cmd": "publish", "fun": "test.ping", **load})

    def test_jobAndReturnAcrossMasters(self) -> None:
        """
        A job published on A reaches C{m1} on B, sealed with B's key; every
        targeted minion is reported connected (it may be on any master);
        C{m1}'s return to B is fired on A's bus.
        """
        reply = self.successResultOf(self.publish(tgt="*"))
        jid = reply["jid"]
        self.assertEqual(reply["minions"], ["m1", "m2"])
        self.assertEqual(reply["connected"], ["m1", "m2"])
        client, received = self.minions["m1"]
        [frame] = received
        publication = self.masterB.publicationKey
        self.assertEqual(frame["kid"], publication.kid)
        self.assertRaises(
            crypt.CryptError,
            self.masterA.publicationKey.cipher().decrypt,
            frame["pub"],
            wire.publicationAad(frame["kid"]),
        )
        load = serial.loads(
            publication.cipher().decrypt(frame["pub"], wire.publicationAad(frame["kid"]))
        )
        self.assertEqual((load["jid"], load["fun"]), (jid, "test.ping"))
        self.assertIn(f"salt/job/{jid}/new", [tag for tag, _ in self.eventsB])
        self.master = self.masterB
        answer = self.request(
            client, {"cmd": "_return", "id": "m1", "jid": jid, "fun": "test.ping", "return": True}
        )
        self.masterB.clock.advance(ACK_DELAY)
        self.assertTrue(self.successResultOf(answer)["ret"])
        returns = [data for tag, data in self.eventsA if tag == f"salt/job/{jid}/ret/m1"]
        self.assertEqual([r["return"] for r in returns], [True])

    def test_minionEventAcrossMasters(self) -> None:
        """
        A minion's event fired on B is fired on A's bus.
        """
        client, _ = self.minions["m1"]
        self.master = self.masterB
        self.successResultOf(
            self.request(client, {"cmd": "_minion_event", "tag": "myco/done", "data": {"n": 1}})
        )
        [(tag, data)] = [(t, d) for t, d in self.eventsA if t == "myco/done"]
        self.assertEqual((data["id"], data["data"]), ("m1", {"n": 1}))

    def test_startAndAuthEventsAcrossMasters(self) -> None:
        """
        C{m1}'s authentication and subscription on B fire C{salt/auth} and
        C{salt/minion/m1/start} on A's bus too, marked as B's; on B they
        are B's own (unmarked), and each was fired once on each master.
        """
        for tag in ("salt/auth", "salt/minion/m1/start"):
            onA = [data for t, data in self.eventsA if t == tag]
            onB = [data for t, data in self.eventsB if t == tag]
            self.assertEqual([d.get(CLUSTER_ORIGIN) for d in onA], ["b"], tag)
            self.assertEqual([d.get(CLUSTER_ORIGIN) for d in onB], [None], tag)
            self.assertEqual(onA[0]["id"], "m1")

    def test_keyEventAcrossMasters(self) -> None:
        """
        A C{salt/key} fired on A (C{salttwist-key -d m1} run with A's
        config) is fired on B's bus, marked as A's. A acts on it (it
        rotates its publication key); B does not: with a shared key store
        the store's own notification cuts the minion off on B, and here,
        with a key store each, B's key for C{m1} stands, so C{m1} stays
        connected on B and B's publication key is not rotated.
        """
        kidA, kidB = self.masterA.publicationKey.kid, self.masterB.publicationKey.kid
        self.masterA.keyStore.deleteKey(ACCEPTED, "m1")
        self.masterA.bus.fire("salt/key", {"act": "delete", "id": "m1"})
        [onB] = [data for tag, data in self.eventsB if tag == "salt/key"]
        self.assertEqual((onB["act"], onB["id"], onB[CLUSTER_ORIGIN]), ("delete", "m1", "a"))
        self.assertEqual(self.masterA.publicationKey.kid, kidA + 1)
        self.assertEqual(self.masterB.publicationKey.kid, kidB)
        self.assertIn("m1", self.masterB.subscribers)
        self.assertEqual([tag for tag, _ in self.eventsA if tag == "salt/key"], ["salt/key"])

    def test_jobsRefusedWhileBrokerAway(self) -> None:
        """
        After the broker has been away C{cluster_unreachable_limit}
        seconds, a publish on A is refused with a message saying why, and
        no job is made; when the broker is back, jobs are taken and the
        minion on B gets them.
        """
        self.broker.down()
        self.clock.advance(self.buses["a"].unreachableLimit)
        error = self.requestError(self.client, {"cmd": "publish", "tgt": "*", "fun": "test.ping"})
        self.assertIn("job refused", error)
        self.assertIn("unreachable", error)
        self.assertEqual(self.masterA.jobs.recent(), [])
        self.broker.up()
        reply = self.successResultOf(self.publish(tgt="*"))
        _, received = self.minions["m1"]
        self.assertEqual(len(received), 1)
        self.assertTrue(reply["jid"])


class ClusterConfigTests(MasterTestCase):
    """
    The cluster options.
    """

    def config(self, **options: Any) -> dict[str, Any]:
        root = self.mktemp()
        return loadMasterConfig(root, overrides={"root_dir": root, **options})

    def test_offByDefault(self) -> None:
        """
        Without C{cluster_id}, a master joins no cluster.
        """
        self.assertIsNone(clusterFromConfig(self.config(), Clock(), self.master))
        self.assertIsNone(self.master.jobPublisher.cluster)

    def test_badValues(self) -> None:
        """
        A cluster id that could not name a subject, or a broker that is not
        a C{nats://} URL, is refused naming the option.
        """
        for options, name in (
            ({"cluster_id": "a.b"}, "cluster_id"),
            ({"cluster_master_id": "x y"}, "cluster_master_id"),
            ({"cluster_broker": "redis://127.0.0.1:6379"}, "cluster_broker"),
            ({"cluster_broker": "nats://h:port"}, "cluster_broker"),
            ({"cluster_unreachable_limit": 0}, "cluster_unreachable_limit"),
        ):
            error = self.assertRaises(ConfigError, self.config, **options)
            self.assertIn(name, str(error))

    def test_halfConfigured(self) -> None:
        """
        C{cluster_id} without C{cluster_broker}, or the other way round, is
        refused saying what is missing.
        """
        error = self.assertRaises(
            ClusterConfigError,
            clusterFromConfig,
            self.config(cluster_id="c1"),
            Clock(),
            self.master,
        )
        self.assertIn("cluster_broker is not", str(error))
        error = self.assertRaises(
            ClusterConfigError,
            clusterFromConfig,
            self.config(cluster_broker="nats://127.0.0.1:4222"),
            Clock(),
            self.master,
        )
        self.assertIn("cluster_id is not", str(error))

    def test_joins(self) -> None:
        """
        With both, the master's publishing and returns rooms fan out
        through a NATS bus named by the options, sealed with the cluster
        key (made in C{pki_dir/cluster} the first time), not connected
        until the service starts.
        """
        config = self.config(
            cluster_id="c1",
            cluster_broker="nats://127.0.0.1:4222",
            cluster_master_id="m-a",
            cluster_buffer_messages=7,
        )
        service = clusterFromConfig(config, Clock(), self.master)
        keyPath = os.path.join(config["pki_dir"], "cluster", "cluster.key")
        self.assertTrue(os.path.exists(keyPath))
        self.assertIsInstance(service.bus, SealedClusterBus)
        self.assertIsInstance(service.bus._inner, NatsClusterBus)
        self.assertEqual(service.bus.memberId, "m-a")
        self.assertEqual(service.bus.outbox.maxMessages, 7)
        self.assertIs(self.master.jobPublisher.cluster, service.fanout)
        self.assertIs(self.master.minionRequests.cluster, service.fanout)
        self.assertFalse(service.bus.connected)

    def test_badKeyFile(self) -> None:
        """
        A cluster key others may read stops the join, saying so.
        """
        config = self.config(
            cluster_id="c1",
            cluster_broker="nats://127.0.0.1:4222",
            cluster_pki_dir=self.mktemp(),
        )
        _, path, _ = loadOrCreateClusterKey(config["cluster_pki_dir"])
        os.chmod(path, 0o640)
        error = self.assertRaises(ClusterKeyError, clusterFromConfig, config, Clock(), self.master)
        self.assertIn("chmod go-rwx", str(error))
