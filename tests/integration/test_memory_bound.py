# -*- test-case-name: tests.integration.test_memory_bound -*-
"""
Integration test of the master's memory under a stalled event subscriber
(issue 22, section 4): a real master, a subscriber on its event socket that
subscribes and never reads, and a minion (a transient session with the
minion's real key, as C{salttwist-call event.send} opens) firing events as
big and as fast as the master lets it (C{minion_event_rate_limit} 100/s
after a burst of C{minion_event_rate_burst} 1,000, each event's data
C{MAX_EVENT_DATA_BYTES}, 1 MiB) for 30 seconds. The master's RSS, read from
C{/proc/<pid>/status}, must stay under L{RSS_GROWTH_BOUND} above what it was
before the flood.

Before the byte bound, the subscriber's queue kept up to
C{event_queue_max} (10,000) events whatever their size: this run took the
master from 42.7 MiB to 4,354 MiB (4,000 events accepted). With
C{ipc_write_buffer} (16 MiB by default) it holds at most that much for the
subscriber, plus one event in the socket's buffer: 42.8 MiB to 68.1 MiB.
"""

from __future__ import annotations

import os
import socket
import time

from twisted.internet.defer import Deferred, DeferredList
from twisted.trial.unittest import TestCase

from salttwist import serial
from salttwist.blocking import threadRunner
from salttwist.client.transient import MasterCaller
from salttwist.config import loadMinionConfig
from salttwist.master.returns import MAX_EVENT_DATA_BYTES
from salttwist.master.service import EVENT_PUB_SOCKET
from salttwist.transport.frames import HEADER
from tests.integration.harness import Cluster, _reactor, sleep

#: Seconds the minion fires for.
FLOOD_SECONDS = 30.0
#: Requests the minion keeps in flight: enough to reach the rate limit.
IN_FLIGHT = 4
#: The master's default C{minion_event_rate_burst} and
#: C{minion_event_rate_limit}: the minion fires at that pace.
RATE_BURST = 1000
RATE_LIMIT = 100
#: How much the master's RSS may grow during the flood: the stalled
#: subscriber's C{ipc_write_buffer} (16 MiB), a frame or two in flight, the
#: events being decoded, and what the allocator keeps of 1 MiB buffers freed
#: meanwhile. (Measured: +25 MiB; before the bound, +4,311 MiB.)
RSS_GROWTH_BOUND = 100 * 1024 * 1024


def rssBytes(pid: int) -> int:
    """
    @return: the resident set size of process C{pid} (C{VmRSS}).
    """
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


class StalledSubscriberMemoryTests(TestCase):
    """
    A stalled event subscriber and a minion firing at its maximum rate
    leave the master's memory bounded.
    """

    timeout = 180

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.cluster.writeMasterConfig()
        await self.cluster.startReady(("minion1",))

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    def stalledSubscriber(self) -> socket.socket:
        """
        @return: a socket subscribed to every event on the master's bus,
            which this test never reads.
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(os.path.join(self.cluster.sockDir, EVENT_PUB_SOCKET))
        frame = serial.dumps({"subscribe": []})
        sock.sendall(HEADER.pack(len(frame)) + frame)
        self.addCleanup(sock.close)
        return sock

    async def test_stalledSubscriberUnderFlood(self) -> None:
        """
        For 30 s of the biggest events at the fastest rate a minion may
        send them, with one subscriber that never reads, the master's RSS
        grows by less than L{RSS_GROWTH_BOUND}; the events kept flowing
        (the minion's were accepted at its rate).
        """
        reactor = _reactor()
        self.stalledSubscriber()
        config = loadMinionConfig(self.cluster.minionDir("minion1"))
        caller = MasterCaller(config, "minion1", reactor, threadRunner(reactor), timeout=60)
        self.addCleanup(caller.close)
        await caller.session()
        # The data as big as the master takes: a 1 MiB map, serialised.
        blob = os.urandom(MAX_EVENT_DATA_BYTES - 64)
        data = {"blob": blob}
        assert len(serial.dumps(data)) <= MAX_EVENT_DATA_BYTES
        pid = self.cluster.master.pid
        assert pid is not None
        before = rssBytes(pid)
        accepted = 0
        refused = 0
        peak = before
        end = time.monotonic() + FLOOD_SECONDS

        start = time.monotonic()
        sent = 0

        async def fire() -> None:
            nonlocal accepted, refused, sent
            while time.monotonic() < end:
                # At the master's limit, not far past it: what it refuses
                # costs it reading, not keeping.
                allowed = RATE_BURST + RATE_LIMIT * (time.monotonic() - start)
                if sent >= allowed:
                    await sleep(0.005)
                    continue
                sent += 1
                try:
                    await caller.fireMaster("flood/big", data)
                    accepted += 1
                except Exception:
                    refused += 1

        async def watch() -> None:
            nonlocal peak
            while time.monotonic() < end + 1:
                peak = max(peak, rssBytes(pid))
                await sleep(0.25)

        await DeferredList(
            [Deferred.fromCoroutine(fire()) for _ in range(IN_FLIGHT)]
            + [Deferred.fromCoroutine(watch())]
        )
        peak = max(peak, rssBytes(pid))
        growth = peak - before
        print(
            f"\nmaster RSS {before / 2**20:.1f} MiB -> peak {peak / 2**20:.1f} MiB "
            f"(+{growth / 2**20:.1f} MiB); {accepted} events accepted, {refused} refused"
        )
        self.assertGreater(accepted, 1000, "the flood did not reach the master")
        self.assertLess(
            growth,
            RSS_GROWTH_BOUND,
            f"the master's RSS grew by {growth / 2**20:.1f} MiB "
            f"(from {before / 2**20:.1f} MiB) under a stalled subscriber",
        )
