# -*- test-case-name: tests.test_api_events -*-
"""
Tests for L{salttwist.api.events}: C{GET /events} served by a real
L{Site} over a L{StringTransport}, the bus replaced by a subscription the
test feeds, time by a L{Clock}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from salttwist.api.events import (
    HEARTBEAT,
    RECHECK,
    DecisionCaches,
    EventFilter,
    EventHub,
    EventsResource,
    formatEvent,
)
from salttwist.eauth.engine import Permissions

START = 1_700_000_000.0


@dataclass
class FakeSession:
    """
    What L{EventsResource} reads of a session.
    """

    perms: Permissions
    expire: float


class FakeBusConnection:
    """
    A subscription to the bus: the hub closes its transport; C{lost} fires
    when the test ends it.
    """

    def __init__(self) -> None:
        self.transport = StringTransport()
        self.lost: Deferred[None] = Deferred()


class FakeBus:
    """
    The hub's C{subscribe}: records each subscription; the test fires its
    events with L{fire}.
    """

    def __init__(self, reachable: bool = True) -> None:
        self.reachable = reachable
        self.subscriptions: list[tuple[Any, FakeBusConnection]] = []

    def subscribe(self, onEvent: Any) -> Deferred[Any]:
        if not self.reachable:
            return fail(ConnectionRefusedError("no bus"))
        connection = FakeBusConnection()
        self.subscriptions.append((onEvent, connection))
        return succeed(connection)

    def fire(self, tag: str, data: dict[str, Any]) -> None:
        onEvent, connection = self.subscriptions[-1]
        if not connection.transport.disconnecting:
            onEvent(tag, data)


def perms(*items: Any) -> Permissions:
    return Permissions.fromItems(list(items))


class Client:
    """
    One HTTP connection to the site, over a L{StringTransport}.
    """

    def __init__(self, site: Site) -> None:
        self.transport = StringTransport()
        self.proto = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
        self.proto.makeConnection(self.transport)

    def get(
        self,
        path: str = "/events",
        token: str | None = "good",
        method: str = "GET",
        extra: str = "",
    ) -> None:
        header = f"X-Auth-Token: {token}\r\n" if token else ""
        self.proto.dataReceived(
            f"{method} {path} HTTP/1.1\r\nHost: api\r\n{header}{extra}\r\n".encode()
        )

    def text(self) -> str:
        return self.transport.value().decode()

    def status(self) -> int:
        return int(self.text().split(" ", 2)[1])

    def body(self) -> dict[str, Any]:
        """
        The JSON body of an error answer (chunked or not).
        """
        raw = self.text().split("\r\n\r\n", 1)[1]
        start, end = raw.index("{"), raw.rindex("}")
        return json.loads(raw[start : end + 1])

    def disconnect(self) -> None:
        self.proto.connectionLost(ConnectionError("gone"))


class EventsResourceTests(SynchronousTestCase):
    """
    L{EventsResource} streams the bus's events as Salt's rest_cherrypy does,
    to authenticated clients, within bounds.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(START)
        self.bus = FakeBus()
        self.sessions: dict[str, FakeSession] = {
            "good": FakeSession(perms("@events"), START + 3600),
            "tester": FakeSession(perms("test.*"), START + 3600),
        }
        self.hub = EventHub(self.bus.subscribe)
        self.resource = self.makeResource()

    def makeResource(self, **kwargs: Any) -> EventsResource:
        self.resource = EventsResource(self.sessionFor, self.hub, self.clock, **kwargs)
        root = Resource()
        root.putChild(b"events", self.resource)
        self.site = Site(root, reactor=self.clock)
        return self.resource

    def sessionFor(self, token: str) -> Deferred[Any]:
        session = self.sessions.get(token)
        if session is None or session.expire <= self.clock.seconds():
            return fail(ValueError("unknown token"))
        return succeed(session)

    def connect(
        self,
        token: str | None = "good",
        path: str = "/events",
        method: str = "GET",
        extra: str = "",
    ) -> Client:
        client = Client(self.site)
        client.get(path, token, method, extra)
        return client

    def test_stream(self) -> None:
        """
        An authenticated client gets C{text/event-stream}, Salt's retry hint,
        then each event as a C{tag:} and a C{data:} line holding the tag and
        the data as JSON.
        """
        client = self.connect()
        self.bus.fire("salt/auth", {"id": "m1", "act": "pend", "pub": b"key"})
        text = client.text()
        self.assertIn("200 OK", text.splitlines()[0])
        self.assertIn("Content-Type: text/event-stream", text)
        self.assertIn("Cache-Control: no-cache", text)
        self.assertIn("retry: 400\n", text)
        self.assertIn(
            'tag: salt/auth\ndata: {"tag": "salt/auth", "data": {"id": "m1", "act": "pend",'
            ' "pub": "key"}}\n\n',
            text,
        )

    def test_formatEvent(self) -> None:
        """
        L{formatEvent} escapes a line break in a tag (it would end the field).
        """
        self.assertEqual(
            formatEvent("a\nb", {}),
            b'tag: a\\nb\ndata: {"tag": "a\\nb", "data": {}}\n\n',
        )

    def test_noToken(self) -> None:
        """
        Without a token the answer is 401, in JSON.
        """
        client = self.connect(token=None)
        self.assertEqual(client.status(), 401)
        self.assertEqual(client.body()["status"], 401)
        self.assertEqual(self.bus.subscriptions, [])

    def test_badToken(self) -> None:
        """
        An unknown token is refused with 401 and no subscription is kept.
        """
        client = self.connect(token="nope")
        self.assertEqual(client.status(), 401)
        self.assertEqual(self.hub.streams, [])

    def test_queryRefused(self) -> None:
        """
        As Salt 3008, a query string is refused with 400 (a token there
        would end up in logs), even with a valid header.
        """
        client = self.connect(path="/events?token=good")
        self.assertEqual(client.status(), 400)
        self.assertIn("query parameters", client.body()["return"])
        for path in ("/events?token=good", "/events?salt_token=good"):
            client = self.connect(token=None, path=path)
            self.assertEqual(client.status(), 400, path)
        self.assertEqual(self.hub.streams, [])

    def test_tooManyClients(self) -> None:
        """
        Past C{maxClients} streams, a client gets 503 with C{Retry-After}.
        """
        self.makeResource(maxClients=1)
        self.connect()
        second = self.connect()
        self.assertEqual(second.status(), 503)
        self.assertIn("Retry-After: 5", second.text())
        self.assertEqual(len(self.hub.streams), 1)

    def test_tooManyForOneToken(self) -> None:
        """
        Past C{maxPerToken} streams with one token, that token gets 429 with
        C{Retry-After}; other tokens still get streams, and a stream that
        ends frees its place.
        """
        self.makeResource(maxPerToken=2)
        first, _ = self.connect(), self.connect()
        third = self.connect()
        self.assertEqual(third.status(), 429)
        self.assertIn("Retry-After: 5", third.text())
        self.assertIn("at most 2", third.body()["return"])
        self.assertIn("retry: 400", self.connect(token="tester").text())
        self.assertEqual(len(self.hub.streams), 3)
        first.disconnect()
        self.assertIn("retry: 400", self.connect().text())

    def test_head(self) -> None:
        """
        C{HEAD} gets the headers a C{GET} would, after the same checks, and
        no stream is kept open; without a token it is a 401.
        """
        client = self.connect(method="HEAD")
        self.assertEqual(client.status(), 200)
        self.assertIn("Content-Type: text/event-stream", client.text())
        self.assertNotIn("retry:", client.text())
        self.assertEqual(self.hub.streams, [])
        self.assertEqual(self.connect(token=None, method="HEAD").status(), 401)
        self.assertEqual(self.connect(token="nope", method="HEAD").status(), 401)

    def test_cors(self) -> None:
        """
        With C{cors}, an allowed origin gets the CORS headers on the stream
        and on errors, and a preflight (C{OPTIONS}) is answered; another
        origin gets none.
        """
        from salttwist.api.resource import corsHeaders

        self.makeResource(cors=lambda request: corsHeaders(request, "https://ui.example"))
        allowed = "Origin: https://ui.example\r\n"
        client = self.connect(extra=allowed)
        self.assertIn("Access-Control-Allow-Origin: https://ui.example", client.text())
        self.assertIn("retry: 400", client.text())
        refused = self.connect(token=None, extra=allowed)
        self.assertEqual(refused.status(), 401)
        self.assertIn("Access-Control-Allow-Origin: https://ui.example", refused.text())
        preflight = self.connect(token=None, method="OPTIONS", extra=allowed)
        self.assertEqual(preflight.status(), 200)
        self.assertIn("Access-Control-Allow-Methods: GET", preflight.text())
        self.assertIn("Access-Control-Allow-Headers:", preflight.text())
        other = self.connect(extra="Origin: https://evil.example\r\n")
        self.assertNotIn("Access-Control-Allow-Origin", other.text())
        otherPreflight = self.connect(
            token=None, method="OPTIONS", extra="Origin: https://evil.example\r\n"
        )
        self.assertEqual(otherPreflight.status(), 405)

    def test_busUnreachable(self) -> None:
        """
        When the master's bus cannot be reached the answer is 503.
        """
        self.bus.reachable = False
        client = self.connect()
        self.assertEqual(client.status(), 503)
        self.assertEqual(self.hub.streams, [])

    def test_oneSubscription(self) -> None:
        """
        Streams share one subscription to the bus, closed when the last
        client goes away.
        """
        first, second = self.connect(), self.connect()
        self.assertEqual(len(self.bus.subscriptions), 1)
        self.bus.fire("custom/tag", {"n": 1})
        self.assertIn("tag: custom/tag", first.text())
        self.assertIn("tag: custom/tag", second.text())
        first.disconnect()
        connection = self.bus.subscriptions[0][1]
        self.assertFalse(connection.transport.disconnecting)
        second.disconnect()
        self.assertTrue(connection.transport.disconnecting)
        self.assertEqual(self.hub.streams, [])

    def test_busLost(self) -> None:
        """
        When the bus connection ends, every stream is finished (clients
        reconnect after the retry hint).
        """
        client = self.connect()
        self.bus.subscriptions[0][1].lost.callback(None)
        self.assertTrue(client.text().endswith("0\r\n\r\n"))
        self.assertEqual(self.hub.streams, [])

    def test_heartbeat(self) -> None:
        """
        An idle stream gets a comment line every L{HEARTBEAT} seconds.
        """
        client = self.connect()
        self.assertNotIn(": heartbeat", client.text())
        self.clock.advance(HEARTBEAT)
        self.assertEqual(client.text().count(": heartbeat\n\n"), 1)
        self.clock.advance(HEARTBEAT)
        self.assertEqual(client.text().count(": heartbeat\n\n"), 2)

    def test_tokenExpires(self) -> None:
        """
        The stream ends when the token expires.
        """
        self.sessions["good"].expire = START + 100
        client = self.connect()
        self.clock.advance(99)
        self.assertFalse(client.text().endswith("0\r\n\r\n"))
        self.clock.advance(1)
        self.assertTrue(client.text().endswith("0\r\n\r\n"))
        self.assertEqual(self.hub.streams, [])

    def test_tokenRevoked(self) -> None:
        """
        The token is checked every L{RECHECK} seconds; once revoked, the
        stream ends and sends nothing more.
        """
        client = self.connect()
        del self.sessions["good"]
        self.clock.advance(RECHECK)
        self.assertTrue(client.text().endswith("0\r\n\r\n"))
        self.bus.fire("late", {})
        self.assertNotIn("tag: late", client.text())

    def test_slowClientDropped(self) -> None:
        """
        While the client's transport is paused, events are queued; past
        C{queueLimit} bytes the connection is aborted and the stream removed.
        """
        self.makeResource(queueLimit=2000)
        client = self.connect()
        client.transport.producer.pauseProducing()
        before = client.text()
        for n in range(5):
            self.bus.fire("t", {"n": n, "pad": "x" * 150})
        self.assertEqual(client.text(), before)
        self.assertFalse(client.transport.disconnecting)
        for n in range(5, 10):
            self.bus.fire("t", {"n": n, "pad": "x" * 150})
        self.assertTrue(client.transport.disconnecting)
        self.assertEqual(self.hub.streams, [])
        self.assertTrue(self.bus.subscriptions[0][1].transport.disconnecting)

    def test_pausedQueueFlushed(self) -> None:
        """
        Events queued while paused are written, in order, on resume.
        """
        client = self.connect()
        client.transport.producer.pauseProducing()
        for n in range(3):
            self.bus.fire(f"t/{n}", {})
        client.transport.producer.resumeProducing()
        text = client.text()
        positions = [text.index(f"tag: t/{n}\n") for n in range(3)]
        self.assertEqual(positions, sorted(positions))

    def test_filtered(self) -> None:
        """
        A token without C{@events} sees the events of the jobs its
        permissions allow, and no other event.
        """
        client = self.connect(token="tester")
        self.bus.fire("salt/auth", {"id": "m1"})
        self.bus.fire("salt/job/1/new", {"fun": "cmd.run", "minions": ["m1"], "arg": ["id"]})
        self.bus.fire("salt/job/1/ret/m1", {"fun": "cmd.run", "return": "secret"})
        self.bus.fire("salt/job/2/new", {"fun": "test.ping", "minions": ["m1"]})
        self.bus.fire("salt/job/2/ret/m1", {"fun": "test.ping", "return": True})
        text = client.text()
        self.assertNotIn("salt/auth", text)
        self.assertNotIn("salt/job/1/", text)
        self.assertNotIn("secret", text)
        self.assertIn("tag: salt/job/2/new", text)
        self.assertIn("tag: salt/job/2/ret/m1", text)


class EventFilterTests(SynchronousTestCase):
    """
    L{EventFilter} decides which events a token may see.
    """

    def test_everything(self) -> None:
        """
        C{@events} shows every event.
        """
        eventFilter = EventFilter(perms("@events"))
        self.assertTrue(eventFilter.visible("salt/key", {"act": "accept"}))
        self.assertTrue(eventFilter.visible("salt/netapi/hook/x", {}))

    def test_eventsWithFunctionsIsNotEverything(self) -> None:
        """
        C{{'@events': [...]}} (functions of a module named events) does not
        show the whole bus.
        """
        eventFilter = EventFilter(perms({"@events": ["x"]}))
        self.assertFalse(eventFilter.visible("salt/key", {}))

    def test_targetRestricted(self) -> None:
        """
        With a target-restricted item, a job's start is shown only when all
        its minions are covered, a return only from a covered minion.
        """
        eventFilter = EventFilter(perms({"web*": ["test.*"]}))
        self.assertFalse(
            eventFilter.visible("salt/job/1/new", {"fun": "test.ping", "minions": ["web1", "db1"]})
        )
        self.assertTrue(
            eventFilter.visible("salt/job/2/new", {"fun": "test.ping", "minions": ["web1"]})
        )
        self.assertTrue(eventFilter.visible("salt/job/1/ret/web1", {"fun": "test.ping"}))
        self.assertFalse(eventFilter.visible("salt/job/1/ret/db1", {"fun": "test.ping"}))

    def test_noMinions(self) -> None:
        """
        A job start with no minion is shown only if the function is allowed
        everywhere (a restricted item would otherwise pass vacuously).
        """
        self.assertFalse(
            EventFilter(perms({"web*": ["test.*"]})).visible(
                "salt/job/1/new", {"fun": "test.ping", "minions": []}
            )
        )
        self.assertTrue(
            EventFilter(perms("test.*")).visible(
                "salt/job/1/new", {"fun": "test.ping", "minions": []}
            )
        )

    def test_progress(self) -> None:
        """
        Progress events (which carry no function) are shown for the jobs
        whose start was shown, on covered minions.
        """
        eventFilter = EventFilter(perms("state.*"))
        prog = {"ret": {"result": True}, "len": 1}
        self.assertFalse(eventFilter.visible("salt/job/1/prog/m1/0", prog))
        eventFilter.visible("salt/job/1/new", {"fun": "state.apply", "minions": ["m1"]})
        self.assertTrue(eventFilter.visible("salt/job/1/prog/m1/0", prog))
        self.assertFalse(eventFilter.visible("salt/job/2/prog/m1/0", prog))

    def test_returnJudgedByItsJob(self) -> None:
        """
        A return is judged by the function of the job it answers, when its
        start came by, not by the function the return names.
        """
        eventFilter = EventFilter(perms("test.*"))
        self.assertFalse(
            eventFilter.visible("salt/job/1/new", {"fun": "cmd.run", "minions": ["m1"]})
        )
        self.assertFalse(
            eventFilter.visible("salt/job/1/ret/m1", {"fun": "test.ping", "return": "secret"})
        )

    def test_malformed(self) -> None:
        """
        Job events without a function, or with a list of minions that is
        not one, are not shown.
        """
        eventFilter = EventFilter(perms("test.*"))
        self.assertFalse(eventFilter.visible("salt/job/1/new", {"minions": ["m1"]}))
        self.assertFalse(eventFilter.visible("salt/job/1/new", {"fun": "test.ping"}))
        self.assertFalse(eventFilter.visible("salt/job/2/ret/m1", {}))
        self.assertFalse(eventFilter.visible("salt/job/2/ret", {"fun": "test.ping"}))

    def test_runnerAndWheel(self) -> None:
        """
        Runner and wheel job events follow C{@runner}/C{@wheel} items; a
        runner's C{args} event (no function) follows its start.
        """
        runner = EventFilter(perms({"@runner": ["manage.*"]}))
        self.assertTrue(runner.visible("salt/run/1/new", {"fun": "manage.up"}))
        self.assertTrue(runner.visible("salt/run/1/args", {"type": "state"}))
        self.assertFalse(runner.visible("salt/run/2/new", {"fun": "jobs.list_jobs"}))
        self.assertFalse(runner.visible("salt/run/2/args", {}))
        self.assertFalse(runner.visible("salt/wheel/3/new", {"fun": "key.list_all"}))
        wheel = EventFilter(perms("@wheel"))
        self.assertTrue(wheel.visible("salt/wheel/3/ret", {"fun": "key.accept"}))
        self.assertFalse(wheel.visible("salt/run/1/new", {"fun": "manage.up"}))

    def test_clientPrefix(self) -> None:
        """
        Salt's events name the function with its client's prefix
        (C{wheel.key.list_all}, as C{wheel_async} fires them;
        C{runner.manage.up}); the rules are matched without it, and only
        the event's own client prefix is taken off.
        """
        wheel = EventFilter(perms({"@wheel": ["key.list_all"]}))
        self.assertTrue(wheel.visible("salt/wheel/3/ret", {"fun": "wheel.key.list_all"}))
        self.assertFalse(wheel.visible("salt/wheel/4/ret", {"fun": "wheel.key.delete"}))
        self.assertFalse(wheel.visible("salt/wheel/5/ret", {"fun": "runner.key.list_all"}))
        runner = EventFilter(perms({"@runner": ["manage.*"]}))
        self.assertTrue(runner.visible("salt/run/1/new", {"fun": "runner.manage.up"}))
        self.assertTrue(runner.visible("salt/run/1/args", {"type": "state"}))
        self.assertFalse(runner.visible("salt/run/2/new", {"fun": "wheel.manage.up"}))

    def test_remembersBoundedJobs(self) -> None:
        """
        Only the last C{remember} job starts are kept.
        """
        eventFilter = EventFilter(perms("test.*"), remember=2)
        for jid in "123":
            eventFilter.visible(f"salt/job/{jid}/new", {"fun": "test.ping", "minions": ["m"]})
        self.assertFalse(eventFilter.visible("salt/job/1/prog/m/0", {}))
        self.assertTrue(eventFilter.visible("salt/job/3/prog/m/0", {}))


class DecisionCachesTests(SynchronousTestCase):
    """
    L{DecisionCaches} shares decisions between the filters of the same
    permissions only.
    """

    def test_shared(self) -> None:
        """
        Two filters of equal permissions share one cache; a decision made
        by one is found by the other; other permissions have another.
        """
        caches = DecisionCaches()
        first = caches.forPerms(perms("test.*"))
        self.assertIs(caches.forPerms(perms("test.*")), first)
        self.assertIsNot(caches.forPerms(perms("cmd.*")), first)
        EventFilter(perms("test.*"), decisions=first).visible(
            "salt/job/1/ret/m1", {"fun": "test.ping"}
        )
        self.assertEqual(first, {("local", "test.ping", "m1"): True})
        self.assertTrue(
            EventFilter(perms("test.*"), decisions=first).visible(
                "salt/job/2/ret/m1", {"fun": "test.ping"}
            )
        )

    def test_dropped(self) -> None:
        """
        A cache no filter holds is dropped.
        """
        caches = DecisionCaches()
        first = caches.forPerms(perms("test.*"))
        first[("local", "x", "m")] = True
        del first
        self.assertEqual(caches.forPerms(perms("test.*")), {})
