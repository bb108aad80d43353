# -*- test-case-name: tests.integration.test_cluster_faults -*-
"""
What the cluster fault tests share for their swarm of simulated minions
(C{benchmarks/swarmlib.py}, in the trial process): where the key pairs are
cached, accepting them in a PostgreSQL key store, running the swarms for a
test, and counting a job's returns in a PostgreSQL job cache; and the
cluster key one master made, copied to another as an admin does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from twisted.internet.defer import gatherResults
from twisted.trial.unittest import TestCase

from benchmarks.swarmlib import (
    DEFAULT_KEYS_DIR,
    SharedVerification,
    Swarm,
    minionIdFor,
    readKeyPair,
)
from salttwist import crypt
from salttwist.pki.keystore import ACCEPTED
from salttwist.pki.keystore_pg import PostgresKeyStore
from tests._installed import CHECKOUT
from tests.integration.harness import Cluster, waitFor

KEYS_DIR = os.path.join(CHECKOUT, DEFAULT_KEYS_DIR)
"""
Where the swarm's key pairs are cached: the checkout's C{benchmarks/.keys}
(the first run makes them: about 40 s per 1,000 on 2 cores), not the
trial's working directory, which each run starts empty.
"""


def acceptInDatabase(
    database: dict[str, Any], prefix: str, count: int, keysDir: str = KEYS_DIR
) -> None:
    """
    Accept the keys of swarm minions C{0..count-1} (their key pairs in
    C{keysDir}) in the PostgreSQL key store of C{database}
    (C{psycopg.connect} keywords). The writes go from
    many threads at once, so the store commits them in batches: one at a
    time, each its own commit, 1,000 took minutes on a busy machine.
    Blocking.
    """
    store = PostgresKeyStore(database)
    store.start()
    try:
        store.waitReady(30)

        def accept(index: int) -> None:
            _, public = readKeyPair(keysDir, index)
            store.putKey(ACCEPTED, minionIdFor(prefix, index), public)

        with ThreadPoolExecutor(64) as pool:
            list(pool.map(accept, range(count)))
    finally:
        store.close()


def shareVerification(testCase: TestCase) -> None:
    """
    For C{testCase} only (the trial process goes on to other tests): the
    master's signature over a batch of auth replies is checked once for
    the swarm, not once per simulated minion (L{SharedVerification}).
    """
    testCase.patch(crypt, "verify", SharedVerification(crypt.verify))


def runSwarms(testCase: TestCase, swarms: Sequence[Swarm]) -> list[Any]:
    """
    Start C{swarms}; at C{testCase}'s cleanup, stop them and wait until
    every connection of their minions is closed.

    @return: the minions of all the swarms.
    """

    async def stopSwarms() -> None:
        protocols = [p for s in swarms for m in s.minions for p in (m.req, m.pub) if p is not None]
        for swarm in swarms:
            swarm.stop()
        await gatherResults([p.lost for p in protocols])

    testCase.addCleanup(stopSwarms)
    for swarm in swarms:
        swarm.start()
    return [m for s in swarms for m in s.minions]


def storedReturns(database: dict[str, Any], jid: str) -> tuple[int, int]:
    """
    @return: how many rows the PostgreSQL job cache of C{database} holds
        for C{jid}'s returns, and for how many distinct minions (blocking:
        the server answers at once on the loopback).
    """
    import psycopg

    with psycopg.connect(**database) as connection:
        [(rows, minions)] = connection.execute(
            "SELECT count(*), count(DISTINCT id) FROM salttwist_returns WHERE jid = %s",
            (jid,),
        ).fetchall()
    return rows, minions


async def copyClusterKey(source: Cluster, target: Cluster, context: Callable[[], str]) -> None:
    """
    Wait until C{source}'s master has made its cluster key, then write a
    copy into C{target}'s C{pki_dir} (mode 0600), as an admin copies it to
    the next master of the cluster.

    @param context: what a timeout shows (the masters' logs).
    """
    clusterKey = os.path.join("cluster", "cluster.key")
    await waitFor(
        lambda: os.path.exists(os.path.join(source.masterPkiDir, clusterKey)),
        "the first master's cluster key",
        context=context,
    )
    os.makedirs(os.path.join(target.masterPkiDir, "cluster"), mode=0o700)
    with open(os.path.join(source.masterPkiDir, clusterKey), "rb") as f:
        key = f.read()
    path = os.path.join(target.masterPkiDir, clusterKey)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(key)
