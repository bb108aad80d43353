# -*- test-case-name: tests.test_workers_lifecycle -*-
"""
Tests for L{salttwist.workers.lifecycle}: one worker's life as a machine,
fed inputs by hand, with a protocol that records its kills and a L{Clock}
for its timers.
"""

from __future__ import annotations

from automat import NoTransition
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.workers.lifecycle import (
    PHASE_BUSY,
    PHASE_ENDED,
    PHASE_IDLE,
    PHASE_KILLED,
    PHASE_STARTING,
    PHASE_STOPPING,
    Worker,
)


class _Protocol:
    """
    A worker's process protocol, as much as the machine uses.
    """

    pid = 1234

    def __init__(self) -> None:
        self.kills = 0

    def kill(self) -> None:
        self.kills += 1


class WorkerLifeTests(SynchronousTestCase):
    """
    L{Worker.life} moves a worker through its phases and keeps
    L{Worker.phase}, L{Worker.current} and its timers in step.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.protocol = _Protocol()
        self.worker = Worker(self.protocol, initial=True)

    def test_startingThenIdle(self) -> None:
        """
        A worker starts in C{starting}; C{ready} makes it idle.
        """
        self.assertEqual((self.worker.phase, self.worker.pid), (PHASE_STARTING, 1234))
        self.worker.life.ready()
        self.assertEqual(self.worker.phase, PHASE_IDLE)

    def test_assignAndRelease(self) -> None:
        """
        C{assign} makes an idle worker busy with the request and cancels its
        idle timer; C{release} gives the request back, cancels the task
        timeout and makes it idle again.
        """
        self.worker.life.ready()
        self.worker.idleCall = self.clock.callLater(60, lambda: None)
        self.worker.life.assign("request")
        self.assertEqual((self.worker.phase, self.worker.current), (PHASE_BUSY, "request"))
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.worker.timeoutCall = self.clock.callLater(30, lambda: None)
        self.assertEqual(self.worker.life.release(), "request")
        self.assertEqual((self.worker.phase, self.worker.current), (PHASE_IDLE, None))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_onlyIdleTakesWork(self) -> None:
        """
        A starting, busy, stopping or killed worker takes no request.
        """
        self.assertRaises(NoTransition, self.worker.life.assign, "r")
        self.worker.life.ready()
        self.worker.life.assign("r")
        self.assertRaises(NoTransition, self.worker.life.assign, "r2")
        self.worker.life.retire()
        self.assertRaises(NoTransition, self.worker.life.assign, "r2")
        self.worker.life.kill()
        self.assertRaises(NoTransition, self.worker.life.assign, "r2")

    def test_retireWhileBusy(self) -> None:
        """
        A busy worker told to shut down keeps its request until it answers,
        then stays stopping; telling it again says it was told.
        """
        self.worker.life.ready()
        self.worker.life.assign("request")
        self.assertTrue(self.worker.life.retire())
        self.assertEqual((self.worker.phase, self.worker.current), (PHASE_STOPPING, "request"))
        self.assertFalse(self.worker.life.retire())
        self.assertEqual(self.worker.life.release(), "request")
        self.assertEqual((self.worker.phase, self.worker.current), (PHASE_STOPPING, None))

    def test_retireWhileStarting(self) -> None:
        """
        A starting worker told to shut down loses its start-up timeout.
        """
        self.worker.timeoutCall = self.clock.callLater(30, lambda: None)
        self.assertTrue(self.worker.life.retire())
        self.assertEqual(self.worker.phase, PHASE_STOPPING)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_killOnce(self) -> None:
        """
        C{kill} signals the process once, cancels the timers and gives back
        the request the worker ran; a killed worker is not told to stop.
        """
        self.worker.life.ready()
        self.worker.life.assign("request")
        self.worker.timeoutCall = self.clock.callLater(30, lambda: None)
        self.assertEqual(self.worker.life.kill(), "request")
        self.assertEqual((self.worker.phase, self.worker.current), (PHASE_KILLED, None))
        self.assertIsNone(self.worker.life.kill())
        self.assertFalse(self.worker.life.retire())
        self.assertEqual(self.protocol.kills, 1)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_ended(self) -> None:
        """
        C{ended} says where the worker was and what it ran, from any phase,
        and cancels its timers.
        """
        self.worker.life.ready()
        self.worker.life.assign("request")
        self.worker.timeoutCall = self.clock.callLater(30, lambda: None)
        self.assertEqual(self.worker.life.ended(), (PHASE_BUSY, "request"))
        self.assertEqual((self.worker.phase, self.worker.current), (PHASE_ENDED, None))
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(Worker(_Protocol(), False).life.ended(), (PHASE_STARTING, None))
