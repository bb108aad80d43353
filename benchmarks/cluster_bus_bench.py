# -*- test-case-name: tests.test_cluster_nats -*-
"""
Figures of the cluster's bus on NATS JetStream (L{salttwist.cluster.nats}),
two members (two masters) of a cluster of the run's own on one server:

  1. durable throughput: member A sends N return-sized messages back to
     back; seconds until JetStream acknowledged them all (A's outbox empty)
     and until B's handler has them all: messages/s;
  2. round trip: K messages one at a time, A to B and B's answer back to
     A (a job out, its return back): p50/p99/max milliseconds;
  3. the fan-out's own cost: C{ClusterFanout.returnAccepted} (msgpack and
     the outbox) per return, timed on the reactor without a broker answer.

Figures only, no assertions. On this shared 2-core machine repeat a run and
compare: the figures vary with the other load. The stream is deleted at the
end. Usage::

    .venv/bin/python benchmarks/cluster_bus_bench.py [--messages 20000] [--size 400]
        [--round-trips 500] [--server nats://127.0.0.1:4222]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from twisted.internet import defer, task
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Factory

from salttwist.cluster.fanout import ClusterFanout
from salttwist.cluster.interfaces import EVENT, JOB, RETURN
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.nats import NatsClusterBus, parseBrokerUrl
from salttwist.cluster.natsprotocol import NatsProtocol


async def _until(reactor: Any, condition: Any, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise SystemExit("timed out")
        await task.deferLater(reactor, 0.001, lambda: None)


async def _deleteStream(reactor: Any, url: str, clusterId: str) -> None:
    host, port = parseBrokerUrl(url)
    proto = await TCP4ClientEndpoint(reactor, host, port).connect(
        Factory.forProtocol(lambda: NatsProtocol(reactor, "bench"))
    )
    await proto.ready
    await proto.request(f"$JS.API.STREAM.DELETE.SALTTWIST_{clusterId}", b"{}", 5)
    proto.transport.loseConnection()


async def main(reactor: Any, options: argparse.Namespace) -> None:
    clusterId = "bench" + os.urandom(4).hex()
    url = options.server
    received: list[bytes] = []
    answers: list[bytes] = []
    a = NatsClusterBus(
        reactor, url, clusterId, "a", maxMessages=options.messages + 10, maxBytes=10**10
    )
    b = NatsClusterBus(reactor, url, clusterId, "b")
    a.subscribe(RETURN, lambda p: None)
    a.subscribe(EVENT, answers.append)
    b.subscribe(RETURN, received.append)

    def answer(payload: bytes) -> None:
        b.publish(EVENT, payload)

    b.subscribe(JOB, answer)
    a.subscribe(JOB, lambda p: None)
    for bus in (a, b):
        bus.start()
    try:
        await _until(reactor, lambda: a.connected and b.connected, 20)
        payload = json.dumps({"return": "x" * options.size}).encode()
        start = time.perf_counter()
        for _ in range(options.messages):
            a.publish(RETURN, payload)
        await _until(reactor, lambda: len(a.outbox) == 0)
        stored = time.perf_counter() - start
        await _until(reactor, lambda: len(received) >= options.messages)
        delivered = time.perf_counter() - start
        n = options.messages
        print(
            f"durable: {n} messages of {len(payload)} bytes: all acknowledged in {stored:.2f} s "
            f"({n / stored:.0f}/s), all delivered to B in {delivered:.2f} s ({n / delivered:.0f}/s)"
        )
        times = []
        for i in range(options.round_trips):
            start = time.perf_counter()
            await a.publish(JOB, b"%d" % i)
            await _until(reactor, lambda i=i: len(answers) > i)
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        print(
            f"round trip A -> B (durable) -> A (best effort), {len(times)} one at a time: "
            f"p50 {statistics.median(times):.2f} ms, "
            f"p99 {times[int(len(times) * 0.99) - 1]:.2f} ms, "
            f"max {times[-1]:.2f} ms"
        )
    finally:
        await a.stop()
        await b.stop()
        await _deleteStream(reactor, url, clusterId)
    clock = task.Clock()
    broker = MemoryBroker()
    memory = MemoryClusterBus(broker, "m", clock, maxMessages=10**7, maxBytes=10**10)
    fanout = ClusterFanout(memory, clock, False)
    event = {"cmd": "_return", "id": "minion1", "jid": "20261127000000000001", "return": True}
    event.update(fun="test.ping", fun_args=[], retcode=0, success=True)
    broker.down()
    count = 100000
    start = time.perf_counter()
    for _ in range(count):
        fanout.returnAccepted(event)
    per = (time.perf_counter() - start) / count * 1e6
    print(f"fan-out cost of one test.ping return (msgpack + outbox): {per:.1f} us")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--size", type=int, default=400)
    parser.add_argument("--round-trips", type=int, default=500)
    parser.add_argument("--server", default="nats://127.0.0.1:4222")
    return parser.parse_args()


if __name__ == "__main__":
    opts = parse()
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, opts)))
