# -*- test-case-name: tests.test_cluster_events -*-
"""
What forwarding the master events across a cluster costs
(L{salttwist.cluster.fanout.ClusterFanout.masterEventFired}): N C{salt/auth}
events (an authentication's, with the minion's public key, about 600
bytes) fired on master A's bus, sealed with the cluster key
(L{salttwist.cluster.sealed.SealedClusterBus}) on the in-memory broker, so
the broker's own cost is not counted (NATS: C{cluster_bus_bench.py}).

  1. sending: A alone in the cluster: CPU per event for A's bus, the
     fan-out's msgpack and the seal;
  2. sending and receiving: B joined: CPU per event for both ends (B opens
     the seal, checks the replay window and fires the event on its bus).

Figures only, no assertions. Usage::

    .venv/bin/python benchmarks/cluster_events_bench.py [--events 20000]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from twisted.internet.defer import succeed
from twisted.internet.task import Clock

from salttwist import crypt
from salttwist.cluster.fanout import ClusterFanout
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.sealed import SealedClusterBus
from salttwist.events.bus import LocalEventBus
from salttwist.master.jobs import JobRegistry


class _Publisher:
    def __init__(self) -> None:
        self.jobs = JobRegistry()

    def publish(self, load: dict[str, Any]) -> Any:
        return succeed(None)


def _member(broker: MemoryBroker, name: str, key: bytes, clock: Any) -> LocalEventBus:
    bus = LocalEventBus()
    sealed = SealedClusterBus(MemoryClusterBus(broker, name, clock), key, "bench")
    fanout = ClusterFanout(sealed, clock, sharedJobCache=True)
    fanout.attach(_Publisher(), bus, None)
    sealed.start()
    return bus


def _run(events: int, withReceiver: bool) -> tuple[float, int]:
    clock = Clock()
    clock.advance(time.time())
    broker = MemoryBroker()
    key = os.urandom(32)
    busA = _member(broker, "a", key, clock)
    received: list[str] = []
    if withReceiver:
        busB = _member(broker, "b", key, clock)
        busB.subscribe(["salt/auth"], lambda tag, data: received.append(tag))
    pem = crypt.publicKeyToPem(crypt.generatePrivateKey(2048).public_key())
    start = time.process_time()
    for n in range(events):
        busA.fire(
            "salt/auth",
            {"act": "accept", "id": f"minion{n:05d}", "pub": pem, "result": True},
        )
    return time.process_time() - start, len(received)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20000)
    options = parser.parse_args()
    for withReceiver in (False, True):
        seconds, received = _run(options.events, withReceiver)
        what = "A sends, B receives" if withReceiver else "A sends (alone)"
        print(
            f"{what}: {options.events} salt/auth events, {seconds:.2f} s CPU, "
            f"{seconds / options.events * 1e6:.1f} us per event, {received} fired on B"
        )


if __name__ == "__main__":
    main()
