# -*- test-case-name: tests.test_cluster -*-
"""
What a master of a cluster sends to the others and does with what they
send (L{ClusterFanout}), over an L{IClusterBus}.

  - A job published here is sent as its load and targeted minions
    (durable). Every other master records it (so its minions' returns are
    accepted), fires C{salt/job/<jid>/new} on its bus and publishes it to
    its own minions, sealed with its own publication key: no key crosses
    the broker. A job older than C{jobMaxAge} seconds when it arrives (a
    master that was away) is not published.
  - A return accepted here is sent (durable); every other master fires it
    on its bus as C{salt/job/<jid>/ret/<id>}, and stores it in its job
    cache unless the job cache is shared (PostgreSQL), where the master
    that accepted it stored it once.
  - A minion's event is sent best effort and fired on the others' buses.
  - The master events a Salt user watches (L{isClusterMasterEvent}:
    C{salt/key}, C{salt/auth}, C{salt/minion/<id>/start}, C{minion_start},
    C{salt/presence/...}) are taken from this master's own bus as they are
    fired, whoever fired them (C{salttwist-key} through the pull socket,
    an authentication, the presence timer), and sent best effort.

Each message names the master it came from; a master ignores its own, and
drops a job or return it has already handled (a durable message may come
twice).

Every event a master fires for another master carries that master's
C{cluster_master_id} under L{CLUSTER_ORIGIN} in its data. The event's tag
is unchanged, so listeners (C{salttwist-run state.event}, the API's
C{/events} and its ACL) see and filter it as a local one; what acts on
events tells the two apart: the reactor acts only on events without the
key (unless C{reactor_cluster_events}), so a reaction runs once in the
cluster, on the master where the event happened; the key watch ignores a
forwarded C{salt/key} (a shared key store tells every master of the change
itself; separate key stores do not hold the other master's keys). A local
event that already carries the key is never sent again, so nothing loops.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from twisted.logger import Logger

from salttwist import serial, wire
from salttwist.cluster.interfaces import (
    EVENT,
    JOB,
    RETURN,
    ClusterUnavailable,
    IClusterBus,
    tooLarge,
)
from salttwist.interfaces import IEventBus, IJobCache

#: Seconds after its publication a job from another master is still
#: published to this master's minions.
JOB_MAX_AGE = 300.0
#: Bytes a job's message holds beyond its function, arguments, target and
#: minions (the jid, the user, the time, the field names), at most.
_JOB_FIELDS = 512
#: How many (jid, minion) returns from other masters are remembered to drop
#: copies (a copy comes within seconds: a redelivery after a lost
#: acknowledgement or a reconnection; the job cache drops later ones).
SEEN_RETURNS = 20000
#: The key added to the data of every event a master fires for another
#: master of its cluster, with that master's C{cluster_master_id} (see the
#: module's docstring). A local event never carries it.
CLUSTER_ORIGIN = "_cluster_origin"
#: The tags (exact) and tag prefixes of the master's own events sent to the
#: other masters; L{isClusterMasterEvent} says which.
_MASTER_EVENT_TAGS = frozenset({"salt/key", "salt/auth", "minion_start"})
_MASTER_EVENT_PREFIXES = ("salt/presence/",)


def isClusterMasterEvent(tag: str) -> bool:
    """
    @return: whether C{tag} is one of the master's own events the other
        masters of a cluster fire too: C{salt/key}, C{salt/auth},
        C{minion_start}, C{salt/minion/<id>/start} and C{salt/presence/...}.
        The other master events stay on the master that fired them:
        runner and wheel jobs (C{salt/run/...}, C{salt/wheel/...}), the
        reactor's errors, C{salt/event/dropped}, custom tags sent with
        C{event.send}.
    """
    if tag in _MASTER_EVENT_TAGS or tag.startswith(_MASTER_EVENT_PREFIXES):
        return True
    return tag.startswith("salt/minion/") and tag.endswith("/start") and tag.count("/") == 3


def fromCluster(data: Any) -> bool:
    """
    @return: whether an event's C{data} was fired for another master of the
        cluster (it carries L{CLUSTER_ORIGIN}).
    """
    return isinstance(data, dict) and data.get(CLUSTER_ORIGIN) is not None


class ClusterFanout:
    """
    One master's side of the fan-out.

    @ivar publisher: the master's job publishing room (C{jobs},
        C{publish(load)}); set by L{attach}.
    """

    log = Logger()

    def __init__(
        self,
        bus: IClusterBus,
        clock: Any,
        sharedJobCache: bool,
        jobMaxAge: float = JOB_MAX_AGE,
    ) -> None:
        self.bus = bus
        self.memberId = bus.memberId
        self._clock = clock
        self.sharedJobCache = sharedJobCache
        self.jobMaxAge = jobMaxAge
        self.publisher: Any = None
        self.eventBus: IEventBus | None = None
        self.jobCache: IJobCache | None = None
        self._seenReturns: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: The subscription to this master's own events (L{attach}).
        self._masterEvents: Any = None
        bus.subscribe(JOB, self._jobReceived)
        bus.subscribe(RETURN, self._returnReceived)
        bus.subscribe(EVENT, self._eventReceived)

    def attach(self, publisher: Any, eventBus: IEventBus, jobCache: IJobCache | None) -> None:
        """
        Give the fan-out the master's rooms it acts on, and subscribe to
        the master events of C{eventBus} that go to the other masters
        (L{isClusterMasterEvent}).

        @param publisher: a L{salttwist.master.publishing.JobPublisher}.
        """
        self.publisher = publisher
        self.eventBus = eventBus
        self.jobCache = jobCache
        self._masterEvents = eventBus.subscribe(
            ["salt/key", "salt/auth", "minion_start", *_MASTER_EVENT_PREFIXES],
            self.masterEventFired,
            globs=["salt/minion/*/start"],
        )

    # -- outgoing ------------------------------------------------------------

    def checkJobs(self, fun: str, arg: Any, tgt: Any, minions: list[str]) -> None:
        """
        Check a new job can be fanned out, before it is made.

        @raise ClusterUnavailable: it cannot now (the message says why):
            the broker has been away too long, or the buffer has no room
            for it.
        """
        why = self.bus.whyUnavailable()
        outbox = getattr(self.bus, "outbox", None)
        if why is None:
            # The message's size but for the few fields made with the job.
            size = len(serial.dumps([self.memberId, fun, arg, tgt, minions])) + _JOB_FIELDS
            why = tooLarge(size, self.bus.maxPayload)
            if why is None and outbox is not None:
                why = outbox.whyFull(self._bufferedSize(size))
        if why is not None:
            raise ClusterUnavailable(f"{wire.JOB_REFUSED} {why}")

    def jobPublished(self, load: dict[str, Any], minions: list[str]) -> None:
        """
        Send a job published here to the other masters.
        """
        payload = serial.dumps({"origin": self.memberId, "load": load, "minions": minions})
        self._send(JOB, payload, "job", load.get("jid"))

    def returnMessage(self, event: dict[str, Any]) -> bytes:
        """
        The message of a return about to be accepted here, checked first:
        a return the buffer has no room for now is to be refused with
        C{return not stored} (the minion keeps it and sends it again a few
        seconds later), so that a return acknowledged to its minion is
        never left out of the fan-out for want of room.

        @return: the message, for L{returnAccepted}.
        @raise ClusterUnavailable: the buffer has no room for it now. A
            buffer holding its most messages refuses any return before it
            is serialised (while the broker is away every return is
            refused: each refusal must cost little). Otherwise a message
            that could never fit (larger than the broker's C{max_payload}
            or than the whole buffer) is not refused: it would be sent
            again forever; L{returnAccepted} keeps it here.
        """
        outbox = getattr(self.bus, "outbox", None)
        if outbox is not None:
            why = outbox.whyNoRoom()
            if why is not None:
                raise ClusterUnavailable(why)
        payload = serial.dumps({"origin": self.memberId, "event": event})
        size = len(payload)
        buffered = self._bufferedSize(size)
        if (
            outbox is not None
            and buffered <= outbox.maxBytes
            and tooLarge(size, self.bus.maxPayload) is None
        ):
            why = outbox.whyFull(buffered)
            if why is not None:
                raise ClusterUnavailable(why)
        return payload

    def _bufferedSize(self, size: int) -> int:
        """
        @return: the bytes a message of C{size} bytes takes in the bus's
            outbox: more than C{size} on a bus that seals its messages
            (L{salttwist.cluster.sealed.SealedClusterBus.bufferedSize}).
        """
        bufferedSize = getattr(self.bus, "bufferedSize", None)
        return size if bufferedSize is None else bufferedSize(size)  # type: ignore[no-any-return]

    def returnAccepted(self, event: dict[str, Any], payload: bytes | None = None) -> None:
        """
        Send a return accepted here to the other masters.

        @param payload: its message from L{returnMessage}, if made.

        A return that finds no room in the buffer after all (one accepted
        without L{returnMessage}, or too large to ever cross) is kept here
        only (this master's bus and job cache), and that is logged as an
        error.
        """
        if payload is None:
            payload = serial.dumps({"origin": self.memberId, "event": event})
        self._send(RETURN, payload, "return", event.get("jid"), event.get("id"))

    def _send(self, kind: str, payload: bytes, what: str, jid: Any, minionId: Any = None) -> None:
        try:
            self.bus.publish(kind, payload).addErrback(self._sendFailed, what, jid)
        except ClusterUnavailable as e:
            self.log.error(
                "cluster: the {what} of job {jid}{minion} is NOT sent to the other masters: "
                "{why}; it is only on this master (its bus and job cache)",
                what=what,
                jid=jid,
                minion=f" from {minionId}" if minionId else "",
                why=e,
            )

    def eventFired(self, tag: str, data: dict[str, Any]) -> None:
        """
        Send a minion's event to the other masters (best effort). Called
        just after the event was fired on this master's bus: one whose tag
        is a master event (a minion's own C{salt/minion/<id>/start}) was
        sent then, by L{masterEventFired}, and is not sent twice.
        """
        if self.eventBus is not None and isClusterMasterEvent(tag):
            return
        self.bus.publish(EVENT, serial.dumps({"origin": self.memberId, "tag": tag, "data": data}))

    def masterEventFired(self, tag: str, data: dict[str, Any]) -> None:
        """
        The bus callback for the master events other masters fire too
        (L{isClusterMasterEvent}): send one fired here to them, best effort.
        One fired here for another master (it carries L{CLUSTER_ORIGIN}) is
        not sent back. An event that cannot be sent (too large for the
        broker) is logged, never raised: the local bus goes on.
        """
        if not isClusterMasterEvent(tag) or fromCluster(data):
            return
        try:
            payload = serial.dumps({"origin": self.memberId, "tag": tag, "data": data})
            self.bus.publish(EVENT, payload).addErrback(self._eventNotSent, tag)
        except (ClusterUnavailable, serial.SerialError) as e:
            self.log.warn(
                "cluster: event {tag} is not sent to the other masters: {why}", tag=tag, why=e
            )

    def _eventNotSent(self, failure: Any, tag: str) -> None:
        self.log.failure("cluster: event {tag} was not sent", failure, tag=tag)

    def _sendFailed(self, failure: Any, what: str, jid: Any) -> None:
        self.log.failure(
            "cluster: the {what} of job {jid} was not sent", failure, what=what, jid=jid
        )

    # -- incoming -------------------------------------------------------------

    def _decode(self, payload: bytes) -> dict[str, Any] | None:
        try:
            message = serial.loads(payload)
        except serial.SerialError as e:
            self.log.warn("cluster: dropped a message that is not msgpack: {error}", error=e)
            return None
        if not isinstance(message, dict) or message.get("origin") == self.memberId:
            return None
        return message

    def _jobReceived(self, payload: bytes) -> Any:
        message = self._decode(payload)
        if message is None or self.publisher is None:
            return
        load, minions = message.get("load"), message.get("minions")
        if not isinstance(load, dict) or not isinstance(minions, list):
            self.log.warn(
                "cluster: dropped a malformed job from {origin}", origin=message.get("origin")
            )
            return
        jid = load.get("jid")
        if not isinstance(jid, str):
            return
        known = self.publisher.jobs.get(jid)
        if known is not None:
            if any(known.load.get(k) != load.get(k) for k in ("ts", "fun", "user")):
                # Two masters made the same jid in the same microsecond: the
                # other master's job is not run here.
                self.log.error(
                    "cluster: job {jid} from {origin} has the jid of another job; "
                    "it is NOT published to this master's minions",
                    jid=jid,
                    origin=message.get("origin"),
                )
            return
        age = self._clock.seconds() - float(load.get("ts") or 0)
        if age > self.jobMaxAge:
            self.log.warn(
                "cluster: job {jid} from {origin} arrived {age:.0f} s after it was published; "
                "not published to this master's minions",
                jid=jid,
                origin=message.get("origin"),
                age=age,
            )
            return
        self.publisher.jobs.add(jid, load, minions)
        if self.jobCache is not None and not self.sharedJobCache:
            self.jobCache.storeJob(jid, load, minions).addErrback(self._storeFailed, "job", jid)
        assert self.eventBus is not None
        self.eventBus.fire(
            f"salt/job/{jid}/new",
            {
                "jid": jid,
                "tgt": load.get("tgt"),
                "tgt_type": load.get("tgt_type"),
                "fun": load.get("fun"),
                "arg": load.get("arg"),
                "minions": minions,
                "user": load.get("user"),
                CLUSTER_ORIGIN: _origin(message),
            },
        )
        return self.publisher.publish(load)

    def _returnReceived(self, payload: bytes) -> None:
        message = self._decode(payload)
        if message is None:
            return
        event = message.get("event")
        if not isinstance(event, dict):
            return
        jid, minionId = event.get("jid"), event.get("id")
        if not isinstance(jid, str) or not isinstance(minionId, str):
            return
        key = (jid, minionId)
        if key in self._seenReturns:
            return
        self._seenReturns[key] = None
        while len(self._seenReturns) > SEEN_RETURNS:
            self._seenReturns.popitem(last=False)
        if self.publisher is not None:
            job = self.publisher.jobs.get(jid)
            if job is not None:
                job.returned.add(minionId)
        assert self.eventBus is not None
        self.eventBus.fire(
            f"salt/job/{jid}/ret/{minionId}", {**event, CLUSTER_ORIGIN: _origin(message)}
        )
        if self.jobCache is not None and not self.sharedJobCache:
            self.jobCache.storeReturn(jid, minionId, event).addErrback(
                self._storeFailed, "return", jid
            )

    def _eventReceived(self, payload: bytes) -> None:
        message = self._decode(payload)
        if message is None or self.eventBus is None:
            return
        tag, data = message.get("tag"), message.get("data")
        if isinstance(tag, str) and isinstance(data, dict):
            self.eventBus.fire(tag, {**data, CLUSTER_ORIGIN: _origin(message)})

    def _storeFailed(self, failure: Any, what: str, jid: str) -> None:
        self.log.failure(
            "cluster: storing the {what} of job {jid} failed", failure, what=what, jid=jid
        )


def _origin(message: dict[str, Any]) -> str:
    """
    @return: the member id a message names as its sender, as the
        L{CLUSTER_ORIGIN} of the events fired for it (C{"?"} if it names
        none: the key must hold a true value).
    """
    origin = message.get("origin")
    return origin if isinstance(origin, str) and origin else "?"
