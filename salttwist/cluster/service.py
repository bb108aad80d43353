# -*- test-case-name: tests.test_cluster_service -*-
"""
A master's membership of a cluster as a service (L{ClusterService}), built
from the master's options by L{clusterFromConfig}: C{cluster_id} (the
cluster's name: its stream and subjects on the broker), C{cluster_broker}
(C{nats://host:port}), C{cluster_master_id} (this master's name in the
cluster, the host name by default), C{cluster_pki_dir} (where the key every
master shares is, L{salttwist.cluster.sealed}), C{cluster_buffer_messages} and
C{cluster_buffer_bytes} (the bounded buffer of messages the broker has not
acknowledged yet), C{cluster_unreachable_limit} (seconds the broker may be
unreachable before new jobs are refused) and C{cluster_job_max_age}.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from salttwist.cluster.fanout import ClusterFanout
from salttwist.cluster.interfaces import IClusterBus

log = Logger()

#: The job cache names of a job cache every master shares (PostgreSQL).
SHARED_JOB_CACHES = ("pgjsonb", "postgres")


class ClusterConfigError(ValueError):
    """
    The cluster options do not fit together; the message says how.
    """


def defaultMemberId() -> str:
    """
    @return: this host's name, as a member id (characters a member id may
        not hold become C{-}).
    """
    return re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())[:64] or "master"


class ClusterService(Service):
    """
    Connects a master's L{IClusterBus} while the master runs.
    """

    def __init__(self, bus: IClusterBus, fanout: ClusterFanout, keyWatcher: Any = None) -> None:
        """
        @param keyWatcher: a L{salttwist.cluster.sealed.ClusterKeyWatcher}
            that reads the cluster keys again while the master runs, if any.
        """
        self.bus = bus
        self.fanout = fanout
        self.keyWatcher = keyWatcher

    def startService(self) -> None:
        """
        Connect to the broker (and keep connected).
        """
        super().startService()
        self.bus.start()
        if self.keyWatcher is not None:
            self.keyWatcher.start()

    def stopService(self) -> Deferred[None]:
        """
        Disconnect.
        """
        super().stopService()
        if self.keyWatcher is not None:
            self.keyWatcher.stop()
        return self.bus.stop()  # type: ignore[no-any-return]


def clusterFromConfig(
    config: dict[str, Any],
    reactor: Any,
    master: Any,
    keyClock: Callable[[], float] = time.monotonic,
) -> ClusterService | None:
    """
    Join the cluster the options name, if any: make the bus and the
    fan-out, and hand the fan-out to the master's publishing and returns
    rooms.

    @param master: a L{salttwist.master.core.Master}.
    @param keyClock: the clock of the previous cluster keys' grace: a
        monotonic one (the reactor's is the wall clock, which set back
        would prolong the grace); tests give a L{Clock}'s C{seconds}.
    @return: the service to start with the master, or L{None} when
        C{cluster_id} is not set (a single master needs no broker).
    @raise ClusterConfigError: C{cluster_id} without C{cluster_broker}, or
        the other way round.
    @raise salttwist.cluster.sealed.ClusterKeyError: the cluster key file
        is unusable.
    """
    clusterId, broker = config.get("cluster_id"), config.get("cluster_broker")
    if clusterId is None and broker is None:
        return None
    if clusterId is None:
        raise ClusterConfigError("cluster_broker is set but cluster_id is not: name the cluster")
    if broker is None:
        raise ClusterConfigError(
            "cluster_id is set but cluster_broker is not: give the NATS JetStream "
            "broker's URL (nats://host:4222)"
        )
    from salttwist.cluster.nats import NatsClusterBus
    from salttwist.cluster.sealed import (
        ClusterKeyring,
        ClusterKeyWatcher,
        SealedClusterBus,
        loadOrCreateClusterKey,
        loadPreviousKeys,
    )

    keyDir = config.get("cluster_pki_dir") or os.path.join(config["pki_dir"], "cluster")
    runAs = config.get("user")
    key, keyPath, made = loadOrCreateClusterKey(keyDir, runAs)
    if made:
        log.warn(
            "cluster: made a new cluster key {path}: copy it (mode 0600) to cluster_pki_dir "
            "on every other master of cluster {id} before starting it",
            path=keyPath,
            id=clusterId,
        )
    keyring = ClusterKeyring(
        key,
        loadPreviousKeys(keyDir, runAs),
        float(config.get("cluster_previous_keys_grace", 86400)),
        keyClock,
    )
    log.info(
        "cluster: sealing with the cluster key {current}, also opening {previous}",
        current=keyring.currentId.hex(),
        previous=", ".join(kid.hex() for kid in keyring.previousIds) or "no other",
    )
    inner = NatsClusterBus(
        reactor,
        broker,
        clusterId,
        config.get("cluster_master_id") or defaultMemberId(),
        maxMessages=config.get("cluster_buffer_messages", 10000),
        maxBytes=config.get("cluster_buffer_bytes", 64 * 1024 * 1024),
        unreachableLimit=float(config.get("cluster_unreachable_limit", 10)),
        caFile=config.get("cluster_broker_ca"),
        certFile=config.get("cluster_broker_cert"),
        keyFile=config.get("cluster_broker_key"),
        nkeyFile=config.get("cluster_broker_nkey"),
        credsFile=config.get("cluster_broker_creds"),
        runAs=runAs,
    )
    return joinCluster(
        config,
        reactor,
        master,
        SealedClusterBus(inner, keyring, clusterId),
        ClusterKeyWatcher(keyDir, keyring, reactor, runAs=runAs),
    )


def joinCluster(
    config: dict[str, Any], clock: Any, master: Any, bus: IClusterBus, keyWatcher: Any = None
) -> ClusterService:
    """
    Make the fan-out of C{master} over C{bus} and hand it to the master's
    publishing and returns rooms.

    @param master: a L{salttwist.master.core.Master}.
    @param keyWatcher: see L{ClusterService}.
    @return: the service that connects C{bus} while the master runs.
    """
    shared = config.get("master_job_cache") in SHARED_JOB_CACHES
    fanout = ClusterFanout(bus, clock, shared, float(config.get("cluster_job_max_age", 300)))
    fanout.attach(master.jobPublisher, master.bus, master.jobCache)
    master.jobPublisher.cluster = fanout
    master.minionRequests.cluster = fanout
    return ClusterService(bus, fanout, keyWatcher)
