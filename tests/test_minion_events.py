# -*- test-case-name: tests.test_minion_events -*-
"""
Tests for minion events (issues 5 and 7): the master's C{_minion_event}
handler and its tag rules (L{salttwist.master.core.minionTagProblem},
L{Master.minionEvent}), the C{event} execution module
(L{salttwist.modules.event}) and L{Minion.fireMaster}, the hook the module
uses inside the minion daemon.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionLost
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist.master.core import MAX_EVENT_DATA_BYTES, MAX_EVENT_TAG, minionTagProblem
from salttwist.master.ratelimit import EventRateLimiter
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    loadFunctions,
)
from salttwist.modules import event as eventModule
from salttwist.transport.reqclient import RequestError
from tests.test_master_core import MasterTestCase
from tests.test_minion import MinionTestCase

JID = "20260101000000000001"

#: Tags a minion must never fire: the master's own events, and those of
#: other minions.
FORGED_TAGS = (
    f"salt/job/{JID}/new",
    f"salt/job/{JID}/ret/m2",
    f"salt/job/{JID}/ret/m1",
    "salt/auth",
    "salt/key",
    "salt/run/20260101000000000002/new",
    "salt/minion/m2/start",
    "salt/minion/m1x/start",
    "salt/minion/m1",
    "salt/minion/",
    "salt/",
    "salt/event/dropped",
    "salt/presence/present",
)


class FakeSession:
    """
    A minion's req session, as much as L{Master.minionEvent} uses.
    """

    def __init__(self, minionId: str) -> None:
        self.minionId = minionId
        self.role = "minion"


class TagRuleTests(SynchronousTestCase):
    """
    Tests for L{minionTagProblem}: which tags a minion may fire.
    """

    def test_forgedTagsRefused(self) -> None:
        """
        Tags under C{salt/} are refused unless they start with
        C{salt/minion/<the sender's id>/}: job, auth, key and run events and
        other minions' events (even an id that merely starts with the
        sender's) all name the rule.
        """
        for tag in FORGED_TAGS:
            problem = minionTagProblem("m1", tag)
            self.assertIsNotNone(problem, tag)
            self.assertIn("tags under salt/ are the master's", problem, tag)
            self.assertIn("salt/minion/m1/", problem, tag)

    def test_ownPrefixAndCustomTagsAccepted(self) -> None:
        """
        The sender's own C{salt/minion/<id>/...} tags and any tag outside
        C{salt/} are accepted as they are.
        """
        for tag in (
            "salt/minion/m1/start",
            "salt/minion/m1/custom/thing",
            "myco/deploy/done",
            "saltstack/x",
            "Salt/job/x",
            "x",
        ):
            self.assertIsNone(minionTagProblem("m1", tag), tag)

    def test_ownStateProgress(self) -> None:
        """
        The progress events of the sender's own state runs,
        C{salt/job/<jid>/prog/<its id>/<n>}, are accepted; another minion's
        progress, a bad jid, a count that is not a number or more parts
        are refused.
        """
        jid = "20261126194501123456"
        self.assertIsNone(minionTagProblem("m1", f"salt/job/{jid}/prog/m1/0"))
        self.assertIsNone(minionTagProblem("m1", f"salt/job/{jid}/prog/m1/41"))
        for tag in (
            f"salt/job/{jid}/prog/m2/0",
            f"salt/job/{jid}/prog/m1/x",
            f"salt/job/{jid}/prog/m1/0/more",
            f"salt/job/{jid}/ret/m1",
            "salt/job/notajid/prog/m1/0",
            f"salt/job/{jid}/prog/m1/",
        ):
            problem = minionTagProblem("m1", tag)
            self.assertIsNotNone(problem, tag)
            self.assertIn("tags under salt/ are the master's", problem, tag)

    def test_ownStateResult(self) -> None:
        """
        The C{fire_event} events of the sender's own states,
        C{salt/state_result/<jid>/<its id>/<name>} (a name may hold
        slashes), are accepted; another minion's, a bad jid or no name are
        refused.
        """
        jid = "20261126194501123456"
        self.assertIsNone(minionTagProblem("m1", f"salt/state_result/{jid}/m1/thing"))
        self.assertIsNone(minionTagProblem("m1", f"salt/state_result/{jid}/m1//etc/motd"))
        self.assertIsNone(minionTagProblem("m1", f"salt/state_result/{jid}/m1/deploy/done"))
        for tag in (
            f"salt/state_result/{jid}/m2/thing",
            "salt/state_result/notajid/m1/thing",
            f"salt/state_result/{jid}/m1/",
            f"salt/state_result/{jid}/m1",
        ):
            problem = minionTagProblem("m1", tag)
            self.assertIsNotNone(problem, tag)
            self.assertIn("tags under salt/ are the master's", problem, tag)

    def test_shapeAndLength(self) -> None:
        """
        A tag must be a non-empty string of at most L{MAX_EVENT_TAG}
        characters without control characters.
        """
        self.assertIsNone(minionTagProblem("m1", "a" * MAX_EVENT_TAG))
        self.assertIn("longer than 512", minionTagProblem("m1", "a" * (MAX_EVENT_TAG + 1)))
        for tag in ("", None, 7, b"myco/x", ["myco/x"]):
            self.assertIn("non-empty string", minionTagProblem("m1", tag), repr(tag))
        for tag in ("myco/x\n", "myco/\x00x", "myco/\x1bx", "my\x7fco"):
            self.assertIn("control characters", minionTagProblem("m1", tag), repr(tag))


class MinionEventTests(MasterTestCase):
    """
    Tests for L{Master.minionEvent}, called as the req server calls it and
    over a real minion session in memory.
    """

    def setUp(self) -> None:
        """
        A master (see L{MasterTestCase}) and a log observer.
        """
        super().setUp()
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def fire(self, tag: Any, data: Any = None, minionId: str = "m1", **load: Any) -> Any:
        """
        Call L{Master.minionEvent} for a session of C{minionId}.
        """
        return self.master.minionEvent(
            FakeSession(minionId),  # type: ignore[arg-type]
            {"cmd": "_minion_event", "tag": tag, "data": data, **load},
        )

    def nonMasterEvents(self) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the events whose tag is not one the master fires itself
            during these tests.
        """
        return [(t, d) for t, d in self.events if not t.startswith(("salt/auth", "salt/minion/"))]

    def test_customTagFired(self) -> None:
        """
        An accepted event is fired under its tag as it is, with Salt's data
        shape: C{id} (the session's), C{tag}, C{data}, C{cmd} and the
        C{_stamp} the bus adds.
        """
        self.assertEqual(self.fire("myco/deploy/done", {"ok": True}), {"ret": True})
        [(tag, data)] = self.events
        self.assertEqual(tag, "myco/deploy/done")
        self.assertEqual(data["id"], "m1")
        self.assertEqual(data["tag"], "myco/deploy/done")
        self.assertEqual(data["data"], {"ok": True})
        self.assertEqual(data["cmd"], "_minion_event")
        self.assertIn("_stamp", data)

    def test_ownPrefixFired(self) -> None:
        """
        A minion may fire under C{salt/minion/<its id>/}.
        """
        self.fire("salt/minion/m1/backup/done", [1, 2])
        [(tag, data)] = self.events
        self.assertEqual(
            (tag, data["data"], data["id"]), ("salt/minion/m1/backup/done", [1, 2], "m1")
        )

    def test_claimedIdOverwritten(self) -> None:
        """
        The event's C{id} is always the session's minion id: an C{id} the
        load claims, or one inside a C{salt/minion/<other>/} attempt, is
        never believed. A C{_stamp} the minion sends is replaced too.
        """
        self.fire("myco/x", {"v": 1}, id="m2")
        self.fire("myco/y", {"v": 2}, id=None)
        [(_, first), (_, second)] = self.events
        self.assertEqual(first["id"], "m1")
        self.assertEqual(second["id"], "m1")
        self.assertTrue(self.loggedContaining("claiming to be 'm2'"))
        self.events.clear()
        self.master.minionEvent(
            FakeSession("m1"),  # type: ignore[arg-type]
            {"tag": "myco/z", "data": {}, "_stamp": "forged", "id": "m1"},
        )
        [(_, data)] = self.events
        self.assertNotIn("forged", data.values())

    def test_forgedTagsRefused(self) -> None:
        """
        A forged master tag (a job's C{new} or another minion's C{ret},
        C{salt/auth}, another minion's C{salt/minion/...}) is refused with an
        error naming the rule, logged, and fires nothing.
        """
        for tag in FORGED_TAGS:
            with self.assertRaises(ValueError) as caught:
                self.fire(tag, {"jid": JID, "minions": ["m1"]})
            self.assertIn("event refused: tags under salt/ are the master's", str(caught.exception))
        self.assertEqual(self.events, [])
        logged = self.loggedContaining("from minion m1 refused")
        self.assertEqual(len(logged), len(FORGED_TAGS))
        self.assertIn(f"salt/job/{JID}/new", logged[0])

    def test_badTagsRefused(self) -> None:
        """
        Tags that are not strings, empty, too long or hold control
        characters are refused; a long tag is shortened in the log.
        """
        for tag in (None, "", 5, "a" * (MAX_EVENT_TAG + 1), "myco/\nsalt/auth"):
            self.assertRaises(ValueError, self.fire, tag, {})
        self.assertEqual(self.events, [])
        [long] = self.loggedContaining("longer than")
        self.assertLess(len(long), 300)

    def test_dataBounded(self) -> None:
        """
        Data up to L{MAX_EVENT_DATA_BYTES} serialised is fired; more is
        refused with the sizes in the error.
        """
        self.fire("myco/big", "x" * (MAX_EVENT_DATA_BYTES - 10))
        self.assertEqual(len(self.events), 1)
        with self.assertRaises(ValueError) as caught:
            self.fire("myco/bigger", "x" * MAX_EVENT_DATA_BYTES)
        self.assertIn(f"more than {MAX_EVENT_DATA_BYTES}", str(caught.exception))
        self.assertEqual(len(self.events), 1)

    def test_rateLimited(self) -> None:
        """
        Each minion fires at most C{minion_event_rate_limit} events per
        second after a burst of C{minion_event_rate_burst} (by default 100
        and 1,000); past that its events are refused with the rule, logged
        once a minute, and other minions are not affected.
        """
        self.assertEqual((self.master.eventRate.rate, self.master.eventRate.burst), (100, 1000))
        self.master.eventRate = EventRateLimiter(2, 3, self.master.clock)
        for _ in range(3):
            self.fire("myco/x", {})
        for _ in range(2):
            with self.assertRaises(ValueError) as caught:
                self.fire("myco/x", {})
        self.assertEqual(
            str(caught.exception),
            "event refused: minion m1 fires more than 2 events/s (burst 3, "
            "minion_event_rate_limit)",
        )
        self.assertEqual(len(self.loggedContaining("events refused: minion m1")), 1)
        self.fire("myco/x", {}, minionId="m2")
        self.master.clock.advance(0.5)
        self.fire("myco/x", {})
        self.assertRaises(ValueError, self.fire, "myco/x", {})
        self.assertEqual(len(self.nonMasterEvents()), 5)
        self.master.clock.advance(60)
        for _ in range(3):
            self.fire("myco/y", {})
        self.assertRaises(ValueError, self.fire, "myco/y", {})
        self.assertEqual(len(self.nonMasterEvents()), 8)
        self.assertEqual(len(self.loggedContaining("events refused: minion m1")), 2)

    def test_overTheWire(self) -> None:
        """
        In a real minion session, C{_minion_event} is answered C{{"ret":
        True}} for a custom tag and with the rule for a forged one; the
        session survives the refusal.
        """
        client, server, _ = self.authMinion("m1")
        self.events.clear()
        error = self.requestError(
            client, {"cmd": "_minion_event", "tag": f"salt/job/{JID}/new", "data": {}}
        )
        self.assertEqual(
            error,
            "event refused: tags under salt/ are the master's; a minion may only fire "
            "salt/minion/m1/... among them",
        )
        reply = self.successResultOf(
            self.request(
                client, {"cmd": "_minion_event", "id": "m2", "tag": "myco/x", "data": {"a": 1}}
            )
        )
        self.assertEqual(reply["ret"], True)
        [(tag, data)] = self.events
        self.assertEqual((tag, data["id"], data["data"]), ("myco/x", "m1", {"a": 1}))
        self.assertIs(self.master.sessions["m1"], server)

    def test_clientCannotFireMinionEvents(self) -> None:
        """
        The local client's session has no C{_minion_event}.
        """
        client, _ = self.authClient()
        error = self.requestError(client, {"cmd": "_minion_event", "tag": "myco/x", "data": {}})
        self.assertIn("not available to a client session", error)

    def loggedContaining(self, text: str) -> list[str]:
        """
        @return: the log messages so far that contain C{text}.
        """
        return [m for m in (formatEvent(e) for e in self.logs) if text in m]


class RecordingHook:
    """
    A L{LoaderContext.fireMaster} that records its calls and answers with
    C{result}.
    """

    def __init__(self, result: Deferred[Any] | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.result = result

    def __call__(self, tag: str, data: Any) -> Deferred[Any]:
        self.calls.append((tag, data))
        return self.result if self.result is not None else succeed({"ret": True})


class EventModuleTests(SynchronousTestCase):
    """
    Tests for the C{event} execution module.
    """

    def context(self, hook: Any = None) -> LoaderContext:
        """
        @return: a loader context whose C{fireMaster} is C{hook}.
        """
        return LoaderContext({}, {"id": "m1", "os": "Linux"}, None, fireMaster=hook)

    def test_loaded(self) -> None:
        """
        The loader offers C{event.send}, C{event.fire_master} and
        C{event.fire} (the minion's own bus: L{tests.test_minion_bus}).
        """
        functions = loadFunctions()
        self.assertIs(functions["event.send"], eventModule.send)
        self.assertIs(functions["event.fire_master"], eventModule.fire_master)
        self.assertIs(functions["event.fire"], eventModule.fire)

    def test_sendCallsHook(self) -> None:
        """
        C{event.send} hands the tag and a map to the hook (C{preload}, then
        the keyword arguments, then C{data} on top) and returns C{True}.
        """
        hook = RecordingHook()
        d = eventModule.send(
            self.context(hook), "myco/deploy/done", {"ok": True, "n": 2}, preload={"p": 1}, n=1
        )
        self.assertIs(self.successResultOf(d), True)
        self.assertEqual(hook.calls, [("myco/deploy/done", {"p": 1, "n": 2, "ok": True})])

    def test_sendDefaultsAndGrains(self) -> None:
        """
        Without data the event's data is an empty map; C{with_grains=True}
        adds the minion's grains under C{grains}.
        """
        hook = RecordingHook()
        self.successResultOf(eventModule.send(self.context(hook), "myco/a"))
        self.successResultOf(eventModule.send(self.context(hook), "myco/b", with_grains=True))
        self.assertEqual(
            hook.calls,
            [("myco/a", {}), ("myco/b", {"grains": {"id": "m1", "os": "Linux"}})],
        )

    def test_fireMasterSendsDataAsIs(self) -> None:
        """
        C{event.fire_master} sends its data (any value) as it is.
        """
        hook = RecordingHook()
        self.successResultOf(eventModule.fire_master(self.context(hook), [1, "two"], "myco/list"))
        self.successResultOf(eventModule.fire_master(self.context(hook), {"a": 1}, "myco/map"))
        self.assertEqual(hook.calls, [("myco/list", [1, "two"]), ("myco/map", {"a": 1})])

    def test_refusedByMaster(self) -> None:
        """
        When the master refuses the event, the function fails with
        L{CommandExecutionError} carrying the master's reason.
        """
        hook = RecordingHook(fail(RequestError("event refused: tags under salt/ are ...")))
        d = eventModule.send(self.context(hook), "salt/auth", {})
        failure = self.failureResultOf(d, CommandExecutionError)
        self.assertEqual(
            str(failure.value),
            "the master refused the event: event refused: tags under salt/ are ...",
        )

    def test_notConnected(self) -> None:
        """
        A hook that cannot reach the master (not connected, connection lost)
        makes the function fail with L{CommandExecutionError}.
        """
        for error in (ConnectionError("not connected"), ConnectionLost("gone")):
            d = eventModule.send(self.context(RecordingHook(fail(error))), "myco/x")
            self.assertIn("the event was not sent", str(self.failureResultOf(d).value))

    def test_noMaster(self) -> None:
        """
        Without a hook (C{salttwist-call --local}) the function fails and
        says there is no master.
        """
        with self.assertRaises(CommandExecutionError) as caught:
            eventModule.send(self.context(None), "myco/x")
        self.assertIn("no master", str(caught.exception))

    def test_badArguments(self) -> None:
        """
        A tag that is not a non-empty string, or C{data} or C{preload} that
        is not a map, is a L{SaltInvocationError}; the hook is not called.
        """
        hook = RecordingHook()
        context = self.context(hook)
        self.assertRaises(SaltInvocationError, eventModule.send, context, "", {})
        self.assertRaises(SaltInvocationError, eventModule.send, context, None, {})
        self.assertRaises(SaltInvocationError, eventModule.send, context, "myco/x", [1])
        self.assertRaises(SaltInvocationError, eventModule.send, context, "myco/x", preload=3)
        self.assertRaises(SaltInvocationError, eventModule.fire_master, context, {}, 7)
        self.assertEqual(hook.calls, [])


class MinionDaemonEventTests(MinionTestCase):
    """
    C{event.send} run by the minion daemon as a published job reaches the
    master over the daemon's own session (L{Minion.fireMaster}).
    """

    def test_publishedEventSend(self) -> None:
        """
        C{salttwist m1 event.send myco/deploy/done '{"ok": true}'}: the
        master's bus gets the event with C{id} m1, and the job returns
        C{True}.
        """
        self.readyMinion()
        jid = self.publish("event.send", ["myco/deploy/done", {"ok": True}])
        [(tag, data)] = self.net.eventsTagged("myco/")
        self.assertEqual((tag, data["id"], data["data"]), ("myco/deploy/done", "m1", {"ok": True}))
        [ret] = self.returns()
        self.assertEqual((ret["jid"], ret["return"], ret["retcode"]), (jid, True, 0))

    def test_publishedForgeryRefused(self) -> None:
        """
        A job that makes the minion fire a forged C{salt/job/...} tag fires
        nothing and returns the master's refusal with retcode 1; the minion
        stays connected.
        """
        minion = self.readyMinion()
        forged = f"salt/job/{JID}/ret/m2"
        self.publish("event.send", [forged, {"return": "pwned"}])
        self.assertEqual([t for t, _ in self.net.events if t == forged], [])
        [ret] = self.returns()
        self.assertEqual(ret["retcode"], 1)
        self.assertIn("ERROR: the master refused the event: event refused:", ret["return"])
        self.assertEqual(minion.state, "ready")

    def test_fireMasterNotConnected(self) -> None:
        """
        L{Minion.fireMaster} fails with L{ConnectionError} while the minion
        is not connected.
        """
        minion = self.makeMinion()
        self.failureResultOf(minion.fireMaster("myco/x", {}), ConnectionError)

    def test_hookWired(self) -> None:
        """
        The daemon's loader context reaches the master through
        L{Minion.fireMaster}.
        """
        minion = self.makeMinion()
        self.assertEqual(minion.executor.context.fireMaster, minion.fireMaster)
