# -*- test-case-name: tests.integration.test_single_connection -*-
"""
Integration test of the minion's C{single_connection} option: real
C{salttwist-master} and C{salttwist-minion} processes on 127.0.0.1, one
minion with the option and one without, and the real CLI.
"""

from __future__ import annotations

import json
import os

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from tests.integration.harness import Cluster, seedKeyPair


def remotePortsOf(pid: int) -> list[int]:
    """
    @return: the remote ports of the established TCP connections of
        process C{pid} (from C{/proc}: its socket inodes, looked up in
        C{/proc/net/tcp} and C{tcp6}).
    """
    inodes = set()
    fdDir = f"/proc/{pid}/fd"
    for name in os.listdir(fdDir):
        try:
            target = os.readlink(os.path.join(fdDir, name))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local, remote, state ... inode (field 9); 01 is ESTABLISHED.
            if fields[3] == "01" and fields[9] in inodes:
                ports.append(int(fields[2].rsplit(":", 1)[1], 16))
    return sorted(ports)


class SingleConnectionTests(TestCase):
    """
    A minion with C{single_connection} gets its jobs over its one
    connection to C{ret_port}, beside a minion with both connections.
    """

    timeout = 90

    async def test_jobsOverOneConnection(self) -> None:
        """
        Both minions answer C{test.ping} through the CLI; the one with the
        option holds a single connection, to C{ret_port}, the other one to
        each port.
        """
        cluster = Cluster(self)
        seedKeyPair(cluster.masterPkiDir, "master", "master")
        store = FilesystemKeyStore(cluster.masterPkiDir)
        for minionId in ("single", "double"):
            store.putKey(
                ACCEPTED, minionId, seedKeyPair(cluster.minionPkiDir(minionId), "minion", minionId)
            )
        await cluster.startMaster()
        assert cluster.ports is not None
        cluster.writeMinionConfig("single", single_connection=True)
        watcher = await cluster.watchEvents()
        single = cluster.startMinion("single")
        double = cluster.startMinion("double")
        await cluster.waitForStart(watcher, ["single", "double"])
        result = await cluster.salt("*", "test.ping", "--static", "--out", "json")
        self.assertEqual(result.code, 0, cluster.explain(result))
        self.assertEqual(json.loads(result.out), {"single": True, "double": True})
        retPort, pubPort = cluster.ports["ret_port"], cluster.ports["publish_port"]
        assert single.pid is not None and double.pid is not None
        self.assertEqual(remotePortsOf(single.pid), [retPort], cluster.logs())
        self.assertEqual(remotePortsOf(double.pid), sorted([retPort, pubPort]), cluster.logs())
