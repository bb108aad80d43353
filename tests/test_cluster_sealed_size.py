# -*- test-case-name: tests.test_cluster_sealed_size -*-
"""
The fan-out checks the room in the cluster's outgoing buffer for a message
as the buffer holds it: sealed, L{SEAL_BYTES} longer than the message made
(issue 23: a return checked by its unsealed size could be acknowledged to
its minion and then find no room).
"""

from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.cluster import fanout as fanoutModule
from salttwist.cluster.fanout import ClusterFanout
from salttwist.cluster.interfaces import ClusterUnavailable
from salttwist.cluster.nats import NatsClusterBus
from salttwist.cluster.sealed import SEAL_BYTES, ClusterKeyring, SealedClusterBus
from tests.test_cluster_outbox import URL, returnEvent

KEY = bytes(range(32))


class SealedSizeTests(SynchronousTestCase):
    """
    L{ClusterFanout.returnMessage} and L{ClusterFanout.checkJobs} over a
    L{SealedClusterBus}, at the exact bound of the buffer's bytes.
    """

    def fanout(self, maxBytes: int) -> tuple[ClusterFanout, NatsClusterBus]:
        """
        @return: a fan-out over a sealed bus (never connected) whose buffer
            holds C{maxBytes} at most, and the inner bus.
        """
        clock = MemoryReactorClock()
        inner = NatsClusterBus(clock, URL, "c1", "b", maxBytes=maxBytes, unreachableLimit=10.0)
        bus = SealedClusterBus(inner, ClusterKeyring(KEY), "c1", clock=clock)
        bus.start()
        self.addCleanup(bus.stop)
        return ClusterFanout(bus, clock, sharedJobCache=False), inner

    def test_bufferedSize(self) -> None:
        """
        A sealed message takes L{SEAL_BYTES} more in the buffer than the
        message given to the bus.
        """
        fanout, inner = self.fanout(10_000)
        payload = fanout.returnMessage(returnEvent(0))
        fanout.returnAccepted(returnEvent(0), payload)
        self.assertEqual(inner.outbox.bytes, len(payload) + SEAL_BYTES)
        self.assertEqual(fanout.bus.bufferedSize(len(payload)), len(payload) + SEAL_BYTES)  # type: ignore[attr-defined]

    def test_returnAtTheBound(self) -> None:
        """
        With room for one sealed return and a byte less than a second, the
        second is refused before it is accepted; with room for exactly two,
        it is accepted and held in the buffer.
        """
        size = len(serial.dumps({"origin": "b", "event": returnEvent(0)}))
        sealedSize = size + SEAL_BYTES
        fanout, inner = self.fanout(2 * sealedSize - 1)
        fanout.returnAccepted(returnEvent(0), fanout.returnMessage(returnEvent(0)))
        self.assertEqual(inner.outbox.bytes, sealedSize)
        error = self.assertRaises(ClusterUnavailable, fanout.returnMessage, returnEvent(1))
        self.assertIn(f"{sealedSize} bytes not yet acknowledged", str(error))

        fanout, inner = self.fanout(2 * sealedSize)
        fanout.returnAccepted(returnEvent(0), fanout.returnMessage(returnEvent(0)))
        payload = fanout.returnMessage(returnEvent(1))
        self.assertEqual(len(payload), size)
        fanout.returnAccepted(returnEvent(1), payload)
        self.assertEqual(inner.outbox.bytes, 2 * sealedSize)
        self.assertEqual(len(inner.outbox), 2)

    def test_jobAtTheBound(self) -> None:
        """
        A new job is checked against the buffer with its sealed size too.
        """
        job = ("test.ping", [], "*", ["m1", "m2"])
        estimate = len(serial.dumps(["b", *job])) + fanoutModule._JOB_FIELDS
        fanout, _ = self.fanout(estimate + SEAL_BYTES - 1)
        error = self.assertRaises(ClusterUnavailable, fanout.checkJobs, *job)
        self.assertIn("bytes not yet acknowledged", str(error))
        fanout, _ = self.fanout(estimate + SEAL_BYTES)
        fanout.checkJobs(*job)
