# -*- test-case-name: tests.test_cluster_events -*-
"""
Events across the masters of a cluster, on real L{LocalEventBus}es joined
by L{ClusterFanout} over the in-memory broker: what a listener of another
master's bus sees, and that the API's ACL (L{EventFilter}) decides on a
forwarded event exactly as on a local one.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.api.events import EventFilter
from salttwist.cluster.fanout import CLUSTER_ORIGIN, ClusterFanout
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.eauth.engine import Permissions
from salttwist.events.bus import LocalEventBus
from salttwist.master.jobs import JobRegistry


class _Publisher:
    def __init__(self) -> None:
        self.jobs = JobRegistry()

    def publish(self, load: dict[str, Any]) -> Any:
        return succeed(None)


class _ClusterMaster:
    """
    A master's bus and fan-out, and every event its bus delivers.
    """

    def __init__(self, broker: MemoryBroker, memberId: str, clock: Clock) -> None:
        self.bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        clusterBus = MemoryClusterBus(broker, memberId, clock)
        self.fanout = ClusterFanout(clusterBus, clock, sharedJobCache=True)
        self.fanout.attach(_Publisher(), self.bus, None)
        clusterBus.start()


def _perms(*items: Any) -> Permissions:
    return Permissions.fromItems(list(items))


class ForwardedEventsTests(SynchronousTestCase):
    """
    Masters A and B of one cluster.
    """

    def setUp(self) -> None:
        clock = Clock()
        broker = MemoryBroker()
        self.a = _ClusterMaster(broker, "master-a", clock)
        self.b = _ClusterMaster(broker, "master-b", clock)

    def test_listenerSeesOtherMastersEvents(self) -> None:
        """
        A listener of B's bus sees A's C{salt/key} and C{salt/auth} (with
        their data, C{_stamp} of B's bus, and C{_cluster_origin}), and a
        return A accepted.
        """
        self.a.bus.fire("salt/key", {"act": "delete", "id": "m1"})
        self.a.bus.fire("salt/auth", {"act": "accept", "id": "m2", "result": True})
        self.a.fanout.returnAccepted(
            {"id": "m2", "jid": "20261127000000000001", "fun": "test.ping", "return": True}
        )
        tags = [tag for tag, _ in self.b.events]
        self.assertEqual(tags, ["salt/key", "salt/auth", "salt/job/20261127000000000001/ret/m2"])
        key = self.b.events[0][1]
        self.assertEqual((key["act"], key["id"], key[CLUSTER_ORIGIN]), ("delete", "m1", "master-a"))
        self.assertIn("_stamp", key)
        self.assertEqual([tag for tag, _ in self.a.events], ["salt/key", "salt/auth"])

    def test_aclAppliesToForwardedEvents(self) -> None:
        """
        The API's filter decides on a forwarded event as on the same local
        one: without C{@events} a token sees neither A's C{salt/key} nor
        its C{salt/auth} on B, and sees a return only of a function it may
        run; with C{@events} it sees them all.
        """
        self.a.bus.fire("salt/key", {"act": "accept", "id": "m1"})
        self.a.bus.fire("salt/auth", {"act": "pend", "id": "m1", "result": True})
        self.a.bus.fire("salt/minion/m1/start", {"id": "m1", "data": "started"})
        self.a.fanout.returnAccepted(
            {"id": "m1", "jid": "20261127000000000002", "fun": "cmd.run", "return": "secret"}
        )
        self.a.fanout.returnAccepted(
            {"id": "m1", "jid": "20261127000000000003", "fun": "test.ping", "return": True}
        )
        forwarded = [(tag, data) for tag, data in self.b.events]
        self.assertTrue(all(data.get(CLUSTER_ORIGIN) == "master-a" for _, data in forwarded))
        limited = EventFilter(_perms("test.*"))
        self.assertEqual(
            [tag for tag, data in forwarded if limited.visible(tag, data)],
            ["salt/job/20261127000000000003/ret/m1"],
        )
        everything = EventFilter(_perms("@events"))
        self.assertEqual(
            [tag for tag, data in forwarded if everything.visible(tag, data)],
            [tag for tag, _ in forwarded],
        )
        # The same events fired locally on B are decided alike.
        local = [
            (tag, {k: v for k, v in data.items() if k != CLUSTER_ORIGIN}) for tag, data in forwarded
        ]
        self.assertEqual(
            [EventFilter(_perms("test.*")).visible(tag, data) for tag, data in local],
            [EventFilter(_perms("test.*")).visible(tag, data) for tag, data in forwarded],
        )
