# -*- test-case-name: tests.test_presence -*-
"""
Tests for the presence events (C{presence_events: True}):
L{salttwist.master.maintenance.PresenceEvents} on a real L{Master}, and its
L{LoopingCall} in L{MasterService}, driven by the memory reactor's clock.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master, runSynchronously
from salttwist.master.maintenance import CHANGE_TAG, PRESENT_TAG, PresenceEvents
from salttwist.master.service import MasterService
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from tests.test_master_service import _RecordingJobCache
from tests.test_runners_jobs import MASTER_KEY, MASTER_PEM, FakeSubscriber, makeMaster

PRESENCE_TAGS = ("salt/presence/",)


def record(bus: LocalEventBus, prefixes: tuple[str, ...] = PRESENCE_TAGS) -> list[Any]:
    """
    @return: a list that receives C{(tag, data without _stamp)} of every
        event on C{bus} under C{prefixes}.
    """
    events: list[Any] = []

    def keep(tag: str, data: dict[str, Any]) -> None:
        data = dict(data)
        del data["_stamp"]
        events.append((tag, data))

    bus.subscribe(prefixes, keep)
    return events


def makeService(testCase: SynchronousTestCase, **overrides: Any) -> MasterService:
    """
    A master service on a L{MemoryReactorClock} (C{service.reactor}), under
    a short temporary root (UNIX socket paths are short), with the
    module-wide test key as the master's key (no RSA key generation), no
    worker processes and no SQLite job cache. The keys of C{minion1} and
    C{minion2} are accepted (the master cuts off connected minions whose
    key is not).
    """
    root = tempfile.mkdtemp(prefix="stp-")
    testCase.addCleanup(shutil.rmtree, root, True)
    config = loadMasterConfig(
        root, overrides={"root_dir": root, "interface": "127.0.0.1", **overrides}
    )
    os.makedirs(config["pki_dir"], mode=0o700)
    crypt.writePrivateFile(
        os.path.join(config["pki_dir"], "master.pem"), crypt.privateKeyToPem(MASTER_KEY)
    )
    store = FilesystemKeyStore(config["pki_dir"])
    for minionId in ("minion1", "minion2"):
        store.putKey(ACCEPTED, minionId, MASTER_PEM)
    return MasterService(
        config,
        MemoryReactorClock(),
        runBlocking=runSynchronously,
        jobCache=_RecordingJobCache(),
        useWorkers=False,
    )


def connect(master: Master, *minionIds: str) -> None:
    """
    Make C{minionIds} connected: subscribed to the pub channel.
    """
    for minionId in minionIds:
        master.subscribers[minionId] = FakeSubscriber()  # type: ignore[assignment]


class PresenceEventsTests(SynchronousTestCase):
    """
    L{PresenceEvents} compares the connected minions with the last run's.
    """

    def setUp(self) -> None:
        """
        A master, its presence events and a record of them.
        """
        self.master = makeMaster(self)
        self.presence = PresenceEvents(self.master)
        self.events = record(self.master.bus)

    def test_present(self) -> None:
        """
        Each run fires C{salt/presence/present} with the sorted ids of the
        connected minions (Salt's C{{"present": [...]}}), even when nothing
        changed; no C{change} event then.
        """
        connect(self.master, "minion2", "minion1")
        self.presence()
        del self.events[:]
        self.presence()
        self.assertEqual(self.events, [(PRESENT_TAG, {"present": ["minion1", "minion2"]})])

    def test_nobody(self) -> None:
        """
        With no minion connected ever, only an empty C{present} event.
        """
        self.presence()
        self.assertEqual(self.events, [(PRESENT_TAG, {"present": []})])

    def test_change(self) -> None:
        """
        When the connected set changed since the last run,
        C{salt/presence/change} comes first with the sorted C{new} and
        C{lost} ids, then C{present}.
        """
        connect(self.master, "minion1", "minion2")
        self.presence()
        self.assertEqual(
            self.events,
            [
                (CHANGE_TAG, {"new": ["minion1", "minion2"], "lost": []}),
                (PRESENT_TAG, {"present": ["minion1", "minion2"]}),
            ],
        )
        del self.events[:]
        del self.master.subscribers["minion1"]
        connect(self.master, "minion3")
        self.presence()
        self.assertEqual(
            self.events,
            [
                (CHANGE_TAG, {"new": ["minion3"], "lost": ["minion1"]}),
                (PRESENT_TAG, {"present": ["minion2", "minion3"]}),
            ],
        )

    def test_goneAndBackBetweenRuns(self) -> None:
        """
        A minion that left and came back between two runs is no change:
        the set is compared once per run, as Salt's maintenance loop does.
        """
        connect(self.master, "minion1")
        self.presence()
        del self.master.subscribers["minion1"]
        connect(self.master, "minion1")
        del self.events[:]
        self.presence()
        self.assertEqual(self.events, [(PRESENT_TAG, {"present": ["minion1"]})])


class PresenceLoopTests(SynchronousTestCase):
    """
    L{MasterService} runs the presence events every C{loop_interval}
    seconds when C{presence_events} is true.
    """

    def test_everyLoopInterval(self) -> None:
        """
        The first run comes C{loop_interval} seconds after the start, then
        one every C{loop_interval} seconds; stopping the service stops
        them.
        """
        service = makeService(self, presence_events=True, loop_interval=10)
        events = record(service.bus)
        service.startService()
        connect(service.master, "minion1")
        service.reactor.advance(9.5)
        self.assertEqual(events, [])
        service.reactor.advance(0.5)
        self.assertEqual(
            events,
            [
                (CHANGE_TAG, {"new": ["minion1"], "lost": []}),
                (PRESENT_TAG, {"present": ["minion1"]}),
            ],
        )
        del events[:]
        service.master.subscribers.clear()
        service.reactor.advance(10)
        self.assertEqual(
            events,
            [
                (CHANGE_TAG, {"new": [], "lost": ["minion1"]}),
                (PRESENT_TAG, {"present": []}),
            ],
        )
        del events[:]
        self.successResultOf(service.stopService())
        service.reactor.advance(60)
        self.assertEqual(events, [])

    def test_offByDefault(self) -> None:
        """
        Without C{presence_events} no presence event is fired.
        """
        service = makeService(self)
        events = record(service.bus)
        service.startService()
        connect(service.master, "minion1")
        service.reactor.advance(600)
        self.assertEqual(events, [])
        self.successResultOf(service.stopService())

    def test_loopIntervalDefault(self) -> None:
        """
        C{loop_interval} is Salt's, 60 seconds by default, and must be a
        number above 0.
        """
        from salttwist.config import ConfigError

        root = self.mktemp()
        self.assertEqual(loadMasterConfig(root)["loop_interval"], 60)
        for bad in (0, -1, "5"):
            self.assertRaises(ConfigError, loadMasterConfig, root, {"loop_interval": bad})
