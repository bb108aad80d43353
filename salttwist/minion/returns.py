# -*- test-case-name: tests.test_minion,tests.test_late_returns -*-
"""
The return side of a minion: each finished job's return is sent to the
master at once over the session, and kept until the master acknowledges it;
written to the on-disk returns queue (L{ReturnsQueue}) only if the
acknowledgement does not come soon enough (L{PERSIST_AFTER}), when the
master is not connected, or when the minion stops.

L{ReturnDelivery} knows nothing of the connection's life: the minion hands
it the req protocol of a ready session (L{ReturnDelivery.req}) and takes it
back when the session ends.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.logger import Logger

from salttwist import serial
from salttwist.minion.connection import MINION_LOG_NAMESPACE
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.transport.backlog import writeBacklog
from salttwist.transport.reqclient import ReqClientProtocol, RequestError

#: Seconds a return may wait for the master's acknowledgement before the
#: minion writes it to its returns queue on disk. Most are acknowledged
#: within milliseconds and never touch the disk (no file, no fsync, no
#: thread per job); a return is written at once when the master is not
#: connected, when the connection is lost before the acknowledgement, and
#: when the minion stops. One timer serves all the returns waiting (not one
#: per return: a cancelled Twisted timer stays queued and still wakes the
#: reactor when it comes due, a wake-up per job for nothing).
PERSIST_AFTER = 1.0
#: The most bytes of returns the req connection may hold unsent by default
#: (C{req_write_buffer}): past that the returns wait in L{ReturnDelivery}'s
#: queue (and on disk) until the master has read what was sent, rather than
#: each be copied once more into the socket's buffer (after a long time
#: away from the master, thousands of them at once).
DEFAULT_REQ_WRITE_BUFFER = 16 * 1024 * 1024
#: Seconds between two looks at a full req connection, when no
#: acknowledgement comes to say it has room again.
FLUSH_RETRY = 0.1


class StoredReturn:
    """
    The on-disk copy of one return, written only if the master has not
    acknowledged the return soon enough (see L{PERSIST_AFTER}): the file is
    removed once the master has acknowledged the return and the write has
    finished, whichever comes last.

    @ivar writing: whether the write was started.
    @ivar due: when (reactor time) it is written if still unacknowledged.
    """

    __slots__ = ("name", "acknowledged", "writing", "due")

    def __init__(self, due: float = float("inf")) -> None:
        self.name: str | None = None
        self.acknowledged = False
        self.writing = False
        self.due = due

    def written(self, name: str, queue: ReturnsQueue | None) -> None:
        """
        The write finished as C{name}.
        """
        self.name = name
        if self.acknowledged and queue is not None:
            queue.remove(name)

    def delivered(self, queue: ReturnsQueue | None) -> None:
        """
        The master acknowledged (or refused) the return.
        """
        self.acknowledged = True
        if self.name is not None and queue is not None:
            queue.remove(self.name)


class ReturnDelivery:
    """
    Sends a minion's returns and keeps those the master has not
    acknowledged.

    @ivar req: the req protocol of the minion's ready session, or L{None}
        while it has none: returns then wait in L{pending} (and on disk).
    @ivar stopping: the minion stops: a new return is written at once.
    @ivar pending: returns not yet sent, oldest first, each with its file
        in the returns queue: a name (a return left by an earlier run), a
        L{StoredReturn} (written if the master does not acknowledge it
        soon), or L{None}.
    @ivar persistAfter: seconds before an unacknowledged return is written.
    @ivar writeLimit: the most bytes the req connection may hold unsent
        before returns wait in L{pending} (C{req_write_buffer}); a return
        is sent whatever its size while it holds less.
    """

    def __init__(self, minionId: str, reactor: Any, returnsQueue: ReturnsQueue | None) -> None:
        self.id = minionId
        # The minion's log lines keep the logger name they always had.
        self.log = Logger(namespace=MINION_LOG_NAMESPACE, source=self)
        self.reactor = reactor
        self.returnsQueue = returnsQueue
        self.req: ReqClientProtocol | None = None
        self.stopping = False
        self.stopped = True
        self.pending: deque[tuple[str | StoredReturn | None, dict[str, Any]]] = deque()
        self.persistAfter = PERSIST_AFTER
        self.writeLimit = DEFAULT_REQ_WRITE_BUFFER
        #: The delayed call that tries L{flush} again, while one is due.
        self._flushTimer: Any = None
        #: The returns of this run the master has not acknowledged yet.
        self.unacknowledged: dict[StoredReturn, dict[str, Any]] = {}
        #: The delayed call that writes the unacknowledged returns that are
        #: due (L{persistDue}), while one is scheduled.
        self._persistTimer: Any = None
        #: Who waits until no return is unacknowledged.
        self._acknowledgementWaiters: list[Deferred[None]] = []
        #: Returns being written to disk.
        self._writes: set[Deferred[None]] = set()

    def stop(self) -> None:
        """
        The minion stopped: no timer is left running.
        """
        self.stopped = True
        self.req = None
        if self._persistTimer is not None and self._persistTimer.active():
            self._persistTimer.cancel()
        self._persistTimer = None
        if self._flushTimer is not None and self._flushTimer.active():
            self._flushTimer.cancel()
        self._flushTimer = None

    def jobDone(self, result: dict[str, Any], load: dict[str, Any]) -> None:
        """
        Send the return of the job of C{load}, whose function returned
        C{result}.
        """
        value = result["return"]
        try:
            # Whether it can be sent at all: msgpack takes any bytes and any
            # ASCII text as they are, so a command's big output is not
            # encoded once more just to find that out.
            if not (
                value is True
                or value is False
                or value is None
                or type(value) is bytes
                or (type(value) is str and value.isascii())
            ):
                serial.dumps(value)
        except serial.SerialError as e:
            result = {
                "return": f"The minion function returned a value that cannot be sent: {e}",
                "retcode": 1,
                "success": False,
            }
        ret = {
            "cmd": "_return",
            "id": self.id,
            "jid": load["jid"],
            "fun": load["fun"],
            "fun_args": load.get("arg", []),
            **result,
        }
        if self.returnsQueue is None:
            self.queue(None, ret)
            return None
        # Sent at once; written to disk only if the master does not
        # acknowledge it within persistAfter seconds (or is not connected):
        # the disk is not on the return's path, and most returns never
        # reach it. The file is removed once both the master acknowledged
        # and the write finished.
        stored = StoredReturn(self.reactor.seconds() + self.persistAfter)
        self.unacknowledged[stored] = ret
        self.queue(stored, ret)
        if stored.acknowledged:
            return None
        if self.req is None or self.stopping:
            self.persist(stored)
        elif self._persistTimer is None:
            self._persistTimer = self.reactor.callLater(self.persistAfter, self.persistDue)
        return None

    def persistDue(self) -> None:
        """
        The persist timer fired: write every unacknowledged return that is
        due, and come back when the next one is (one timer for them all).
        """
        self._persistTimer = None
        now = self.reactor.seconds()
        nextDue = float("inf")
        for stored in list(self.unacknowledged):
            if stored.writing:
                continue
            if stored.due <= now:
                self.persist(stored)
            else:
                nextDue = min(nextDue, stored.due)
        if nextDue != float("inf") and not self.stopped:
            self._persistTimer = self.reactor.callLater(nextDue - now, self.persistDue)

    def persist(self, stored: StoredReturn) -> None:
        """
        Start writing the return of C{stored} to disk, unless it is being or
        was written, or the master has it. L{saveUnacknowledged} waits for
        the writes.
        """
        ret = self.unacknowledged.get(stored)
        if stored.writing or ret is None or self.returnsQueue is None:
            return
        stored.writing = True

        def persisted(name: str) -> None:
            stored.written(name, self.returnsQueue)

        def notPersisted(failure: Any) -> None:
            # The disk is full or gone: the return is still delivered from
            # memory (and kept there until the master has it).
            self.log.error(
                "minion {id}: cannot keep the return of {jid} on disk: {e}",
                id=self.id,
                jid=ret["jid"],
                e=failure.value,
            )

        writing = self.returnsQueue.persist(ret).addCallbacks(persisted, notPersisted)
        if not writing.called:
            self._writes.add(writing)
            writing.addBoth(lambda _: self._writes.discard(writing))

    def saveUnacknowledged(self) -> Deferred[None]:
        """
        Write every return the master has not acknowledged to disk now.

        @return: a L{Deferred} that fires once they all are on disk.
        """
        for stored in list(self.unacknowledged):
            self.persist(stored)
        if not self._writes:
            return succeed(None)
        return DeferredList(list(self._writes)).addCallback(lambda _: None)

    def whenAcknowledged(self) -> Deferred[None]:
        """
        @return: a L{Deferred} firing once every return sent is acknowledged
            or L{acknowledgementsSettled} says no more will come.
        """
        d: Deferred[None] = Deferred()
        self._acknowledgementWaiters.append(d)
        return d

    def acknowledgementsSettled(self) -> None:
        """
        Every return sent is acknowledged, or no more acknowledgement will
        come (the wait is over, or the connection is gone).
        """
        waiters, self._acknowledgementWaiters = self._acknowledgementWaiters, []
        for waiter in waiters:
            waiter.callback(None)

    def queue(self, name: str | StoredReturn | None, ret: dict[str, Any]) -> None:
        """
        Send C{ret} (whose file is C{name}) when the session allows.
        """
        self.pending.append((name, ret))
        self.flush()

    def flush(self) -> None:
        """
        Send every pending return over the ready session, if there is one,
        while its connection holds at most L{writeLimit} bytes unsent: the
        rest wait, and are sent as acknowledgements come back (or
        L{FLUSH_RETRY} seconds later).
        """
        while self.req is not None and self.pending:
            if writeBacklog(self.req.transport) > self.writeLimit:
                if self._flushTimer is None and not self.stopped:
                    self._flushTimer = self.reactor.callLater(FLUSH_RETRY, self._flushAgain)
                return
            name, ret = self.pending.popleft()
            d = self.req.request(ret)
            d.addCallbacks(self._delivered, self._failed, (name,), None, (name, ret))

    def _flushAgain(self) -> None:
        self._flushTimer = None
        self.flush()

    def _delivered(self, reply: Any, name: str | StoredReturn | None) -> None:
        if isinstance(name, StoredReturn):
            self.unacknowledged.pop(name, None)
            name.delivered(self.returnsQueue)
            if not self.unacknowledged and self._acknowledgementWaiters:
                self.acknowledgementsSettled()
        elif name is not None and self.returnsQueue is not None:
            self.returnsQueue.remove(name)
        if self.pending and self._flushTimer is not None:
            # The master read up to this return: the connection has room.
            self.flush()

    def _failed(self, failure: Any, name: str | StoredReturn | None, ret: dict[str, Any]) -> None:
        if failure.check(RequestError):
            # Refused (a duplicate of a return the master has, or a job it
            # never sent us): sending it again would not change that.
            self.log.warn(
                "minion {id}: the master refused the return for {jid}: {e}",
                id=self.id,
                jid=ret["jid"],
                e=failure.value,
            )
            self._delivered(None, name)
            return
        # The connection went away before the master answered: keep the
        # return and send it again after reconnecting. A duplicate is refused
        # by the master, so the job still gets exactly one return.
        self.pending.appendleft((name, ret))
