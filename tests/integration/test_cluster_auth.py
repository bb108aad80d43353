# -*- test-case-name: tests.integration.test_cluster_auth -*-
"""
Two real masters (the installed wheel's daemons) in one cluster:

  - through a private C{nats-server} that requires client certificates
    (C{tls { verify: true }}) and has an NKEY user: the masters log in with
    C{cluster_broker_cert}, C{cluster_broker_key} and C{cluster_broker_nkey},
    a job through A reaches the minion on B, and no log shows the seed
    (L{BrokerLoginTests});
  - the cluster key rotated while both run, by the rolling procedure of
    docs/cluster.md (new key added as previous on both, made current on A,
    then on B, the old one taken out), a job crossing at every step and no
    message dropped (L{KeyRotationTests}, on the machine's NATS server).
"""

from __future__ import annotations

import json
import os

from twisted.trial.unittest import TestCase

from salttwist.cluster.sealed import CLUSTER_KEY_FILE, PREVIOUS_KEYS_FILE, keyId
from tests._nats import serverUrl
from tests.integration.harness import Cluster, waitFor
from tests.integration.test_cluster import _TwoMasters
from tests.test_cluster_nats_auth import MutualTls


class BrokerLoginTests(MutualTls, _TwoMasters, TestCase):
    """
    The fan-out through a broker that wants a client certificate and an
    NKEY.
    """

    timeout = 180

    async def test_jobThroughMutualTlsNkeyBroker(self) -> None:
        """
        A ping through A's CLI reaches C{minion1} on B; the seed shows in
        neither master's log.
        """
        await self.startMutualTls()
        await self.startMasters(
            self.server.url,
            cluster_broker_ca=self.serverCert,
            cluster_broker_cert=self.clientCert,
            cluster_broker_key=self.clientKey,
            cluster_broker_nkey=self.seedFile,
        )
        ping = await self.ping()
        self.assertEqual(ping.code, 0, f"{ping}\n{self.logs()}")
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
        self.assertNotIn(self.seed, self.logs())


def replace(path: str, text: str) -> None:
    """
    Replace C{path} with C{text}, mode 0600, at once (as an admin's
    C{install -m 600} does).
    """
    temporary = path + ".new"
    with open(temporary, "w") as f:
        f.write(text)
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


class KeyRotationTests(_TwoMasters, TestCase):
    """
    The cluster key rotated with both masters running.
    """

    timeout = 240

    def keyDir(self, cluster: Cluster) -> str:
        """
        @return: C{cluster}'s master's C{cluster_pki_dir}.
        """
        return os.path.join(cluster.masterPkiDir, "cluster")

    async def logged(self, cluster: Cluster, text: str) -> None:
        """
        Wait until C{cluster}'s master has logged C{text} (it reads its key
        files again within 10 s of a change).
        """
        assert cluster.master is not None
        master = cluster.master
        await waitFor(
            lambda: text in master.output(),
            f"the master to log {text!r}",
            timeout=60,
            context=self.logs,
        )

    async def pingOk(self, step: str) -> None:
        """
        Ping C{minion1} on B through A, failing with C{step} named.
        """
        ping = await self.ping()
        self.assertEqual(ping.code, 0, f"{step}: {ping}\n{self.logs()}")
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{step}: {ping}\n{self.logs()}")

    async def test_rollingRotation(self) -> None:
        """
        Each step is read by the running masters within their check
        interval, and a job and its return cross at every step.
        """
        await self.startMasters(serverUrl())
        masters = (self.a, self.b)
        with open(os.path.join(self.keyDir(self.b), CLUSTER_KEY_FILE)) as f:
            old = f.read().strip()
        new = os.urandom(32).hex()
        await self.pingOk("before")
        # Step 1: the new key added as previous on every master.
        oldId = keyId(bytes.fromhex(old)).hex()
        newId = keyId(bytes.fromhex(new)).hex()
        for cluster in masters:
            replace(os.path.join(self.keyDir(cluster), PREVIOUS_KEYS_FILE), new + "\n")
        for cluster in masters:
            await self.logged(cluster, f"sealing with {oldId}, also opening {newId}")
        await self.pingOk("step 1")
        # Step 2: the new key made current, the old one previous, on A,
        # then (after a job between the two) on B.
        for number, cluster in enumerate(masters):
            keyDir = self.keyDir(cluster)
            replace(os.path.join(keyDir, PREVIOUS_KEYS_FILE), old + "\n")
            replace(os.path.join(keyDir, CLUSTER_KEY_FILE), new + "\n")
            await self.logged(cluster, f"sealing with {newId} (was {oldId}), also opening {oldId}")
            await self.pingOk(f"step 2, {number + 1} master(s) switched")
        # Step 3: the old key taken out.
        for cluster in masters:
            os.remove(os.path.join(self.keyDir(cluster), PREVIOUS_KEYS_FILE))
        for cluster in masters:
            await self.logged(cluster, f"sealing with {newId}, also opening no other")
        await self.pingOk("step 3")
        self.assertNotIn("dropped a", self.logs())
        self.assertNotIn(old, self.logs())
        self.assertNotIn(new, self.logs())
