# -*- test-case-name: tests.test_minion,tests.test_late_returns -*-
"""
The return side of a minion: each finished job's return is sent to the
master at once over the session, and kept until the master acknowledges it;
written to the on-disk returns queue (L{ReturnsQueue}) only if the
acknowledgement does not come soon enough (L{PERSIST_AFTER}), when the
master is not connected, or when the minion stops. The copies kept in
memory are bounded in bytes (C{returns_memory_max}): past that, a new
return is written at once and kept on disk only, read back when it is its
turn to be sent.

L{ReturnDelivery} knows nothing of the connection's life: the minion hands
it the req protocol of a ready session (L{ReturnDelivery.req}) and takes it
back when the session ends.

A return the master refuses for now is kept and sent again after a
back-off (C{return_retry_timer} seconds, L{RETRY_FIRST} by default,
doubling up to C{return_retry_timer_max}, L{RETRY_MAX}; each delay drawn
from its last L{RETRY_JITTER} so a fleet refused at once does not send
again in step): C{return not stored} (the master's job cache or its
cluster's broker is away) for as long as it lasts; an internal error of
the master's C{return_retry_tries} times in a row (L{ERROR_TRIES}), then
the return is set aside on disk (sent again when the minion starts next). While backing off, the
returns go one at a time until one is stored. Any other refusal (a return
the master already has, a job that did not target this minion, an unknown
job) is final: the return is dropped, and the log says why.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.logger import Logger

from salttwist import serial, wire
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
#: Seconds before a return the master refused for now (its job cache or
#: broker away: L{wire.RETURN_NOT_STORED}; or an internal error) is first
#: sent again; each refusal in a row doubles it, up to L{RETRY_MAX}. The
#: default of C{return_retry_timer}.
RETRY_FIRST = 5.0
#: The longest wait between two tries of a refused return, in seconds: the
#: default of C{return_retry_timer_max}.
RETRY_MAX = 60.0
#: The share of each wait that is drawn at random: a wait of C{d} seconds
#: is between C{d * (1 - RETRY_JITTER)} and C{d}, so that thousands of
#: minions refused at once (a database restarting) spread their tries.
RETRY_JITTER = 0.5
#: The first wait (the name the tests and docs knew it by).
NOT_STORED_RETRY = RETRY_FIRST
#: How many times in a row the master may answer a return with an internal
#: error before the minion sets it aside: kept in its returns queue on disk
#: (sent again when the minion starts next), no longer sent in this run. The
#: default of C{return_retry_tries}.
ERROR_TRIES = 5
#: How a master's refusal starts when an unexpected error failed it (its
#: reqserver answers C{internal error in <cmd>}).
INTERNAL_ERROR = "internal error"
#: The most bytes of returns the minion keeps in memory by default
#: (C{returns_memory_max}): returns waiting to be sent or acknowledged, as a
#: running total; past it, a new return is kept on disk only and read back
#: when it is its turn (a master away for long, or not acknowledging).
DEFAULT_RETURNS_MEMORY_MAX = 64 * 1024 * 1024
#: Bytes counted for a return's fields other than its value (id, jid,
#: function, arguments, retcode) in L{ReturnDelivery.memoryUsed}.
RETURN_OVERHEAD = 512


class StoredReturn:
    """
    The on-disk copy of one return, written only if the master has not
    acknowledged the return soon enough (see L{PERSIST_AFTER}): the file is
    removed once the master has acknowledged the return and the write has
    finished, whichever comes last.

    @ivar writing: whether the write was started.
    @ivar due: when (reactor time) it is written if still unacknowledged.
    @ivar size: the bytes the return counts in L{ReturnDelivery.memoryUsed}
        while its copy is in memory; 0 once released.
    """

    __slots__ = ("name", "acknowledged", "writing", "due", "size")

    def __init__(self, due: float = float("inf")) -> None:
        self.name: str | None = None
        self.acknowledged = False
        self.writing = False
        self.due = due
        self.size = 0

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
        in the returns queue: a name (a return left by an earlier run, or
        kept on disk only), a L{StoredReturn} (written if the master does
        not acknowledge it soon), or L{None}; and the return, or L{None}
        when it is kept on disk only (past L{memoryLimit}), read back when
        it is its turn.
    @ivar persistAfter: seconds before an unacknowledged return is written.
    @ivar writeLimit: the most bytes the req connection may hold unsent
        before returns wait in L{pending} (C{req_write_buffer}); a return
        is sent whatever its size while it holds less.
    @ivar memoryLimit: the most bytes of returns kept in memory
        (C{returns_memory_max}); past it, a new return is kept on disk only.
        A return read back from disk is sent whatever its size when no
        other is in memory.
    @ivar memoryUsed: the bytes of returns in memory (waiting to be sent,
        sent and not acknowledged, or being written to disk), a running
        total. Returns are counted only with a returns queue (without one
        nothing can go to disk).
    @ivar retryFirst: seconds before a return refused for now is first sent
        again (C{return_retry_timer}), before the jitter.
    @ivar retryMax: the longest wait of the back-off
        (C{return_retry_timer_max}), before the jitter; at least
        L{retryFirst}.
    @ivar errorTries: how many internal errors in a row set a return aside
        (C{return_retry_tries}).
    """

    def __init__(self, minionId: str, reactor: Any, returnsQueue: ReturnsQueue | None) -> None:
        self.id = minionId
        # The minion's log lines keep the logger name they always had.
        self.log = Logger(namespace=MINION_LOG_NAMESPACE, source=self)
        self.reactor = reactor
        self.returnsQueue = returnsQueue
        self._req: ReqClientProtocol | None = None
        self.stopping = False
        self.stopped = True
        self.pending: deque[tuple[str | StoredReturn | None, dict[str, Any]]] = deque()
        self.persistAfter = PERSIST_AFTER
        self.writeLimit = DEFAULT_REQ_WRITE_BUFFER
        self.retryFirst = RETRY_FIRST
        self.retryMax = RETRY_MAX
        self.errorTries = ERROR_TRIES
        #: The delayed call that tries L{flush} again, while one is due.
        self._flushTimer: Any = None
        #: The delayed call that sends again the returns the master
        #: refused for now, while one is due (nothing is sent meanwhile).
        self._retryTimer: Any = None
        #: Refusals for now in a row (no return stored since): the back-off's
        #: exponent.
        self.retryAttempt = 0
        #: Whether the returns go one at a time (after a refusal for now,
        #: until one is stored), and the one awaiting its answer.
        self._probing = False
        self._probe: dict[str, Any] | None = None
        #: A float in [0, 1): the jitter of each wait.
        self.random: Callable[[], float] = random.random
        #: How many times in a row the master failed each return (by jid)
        #: with an internal error.
        self._errorTries: dict[Any, int] = {}
        #: Returns set aside after L{errorTries} internal errors with no
        #: returns queue to keep them in (tests; a minion always has one).
        self.setAside: list[dict[str, Any]] = []
        #: The returns of this run the master has not acknowledged yet.
        self.unacknowledged: dict[StoredReturn, dict[str, Any]] = {}
        #: The delayed call that writes the unacknowledged returns that are
        #: due (L{persistDue}), while one is scheduled.
        self._persistTimer: Any = None
        #: Who waits until no return is unacknowledged.
        self._acknowledgementWaiters: list[Deferred[None]] = []
        #: Returns being written to disk.
        self._writes: set[Deferred[None]] = set()
        self.memoryLimit = DEFAULT_RETURNS_MEMORY_MAX
        self.memoryUsed = 0
        #: The size of each return kept on disk only, by file name.
        self._diskSizes: dict[str, int] = {}
        #: The bytes counted for each return in memory known by its file
        #: name (left by an earlier run, or read back from disk).
        self._heldSizes: dict[str, int] = {}
        #: Returns read back from disk, by file name, until they are sent.
        self._readBack: dict[str, dict[str, Any]] = {}
        #: Whether a return is being read back from disk (one at a time).
        self._reading = False
        #: Whether the next return to send waits on disk for memory to
        #: free up (an acknowledgement then calls L{flush}).
        self._waitingForMemory = False

    @property
    def req(self) -> ReqClientProtocol | None:
        """
        The req protocol of the minion's ready session, or L{None}.
        """
        return self._req

    @req.setter
    def req(self, req: ReqClientProtocol | None) -> None:
        if req is not None and req is not self._req and self._retryTimer is not None:
            # A new session (maybe another master): a first return goes at
            # once, the back-off goes on if it is refused too.
            if self._retryTimer.active():
                self._retryTimer.cancel()
            self._retryTimer = None
        self._req = req

    def stop(self) -> None:
        """
        The minion stopped: no timer is left running.
        """
        self.stopped = True
        self.req = None
        if self._persistTimer is not None and self._persistTimer.active():
            self._persistTimer.cancel()
        self._persistTimer = None
        for timer in (self._flushTimer, self._retryTimer):
            if timer is not None and timer.active():
                timer.cancel()
        self._flushTimer = self._retryTimer = None

    def jobDone(self, result: dict[str, Any], load: dict[str, Any]) -> None:
        """
        Send the return of the job of C{load}, whose function returned
        C{result}.
        """
        value = result["return"]
        size = RETURN_OVERHEAD
        try:
            # Whether it can be sent at all: msgpack takes any bytes and any
            # ASCII text as they are, so a command's big output is not
            # encoded once more just to find that out (nor to size it).
            if type(value) is bytes or (type(value) is str and value.isascii()):
                size += len(value)
            elif not (value is True or value is False or value is None):
                size += len(serial.dumps(value))
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
        overBound = self.memoryUsed + size > self.memoryLimit
        # Counted until the master has it or, past the bound, until it is
        # on disk.
        stored.size = size
        self.memoryUsed += size
        if overBound:
            # Past the bound: on disk only, once written; read back when
            # it is its turn (sent from memory if that comes first).
            self.persist(stored, spill=True)
            self.queue(stored, None)
            return None
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

    def persist(self, stored: StoredReturn, spill: bool = False) -> None:
        """
        Start writing the return of C{stored} to disk, unless it is being or
        was written, or the master has it. L{saveUnacknowledged} waits for
        the writes.

        @param spill: drop the in-memory copy once it is on disk (the
            return came past L{memoryLimit}); if the write fails, the copy
            stays in memory.
        """
        ret = self.unacknowledged.get(stored)
        if stored.writing or ret is None or self.returnsQueue is None:
            return
        stored.writing = True

        def persisted(name: str) -> None:
            stored.written(name, self.returnsQueue)
            if spill and not stored.acknowledged:
                # On disk only from now on: read back when its turn comes.
                self.unacknowledged.pop(stored, None)
                self._diskSizes[name] = stored.size
                self._release(stored)
                if self._waitingForMemory:
                    self.flush()

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

    def queue(self, name: str | StoredReturn | None, ret: dict[str, Any] | None) -> None:
        """
        Send C{ret} (whose file is C{name}; L{None} if kept on disk only)
        when the session allows.
        """
        self.pending.append((name, ret))
        self.flush()

    def queueLeftover(self, name: str, ret: dict[str, Any]) -> None:
        """
        Queue a return left on disk by an earlier run: kept in memory while
        L{memoryUsed} stays within L{memoryLimit}, on disk only beyond.
        """
        size = len(serial.dumps(ret))
        if self.memoryUsed + size <= self.memoryLimit:
            self.memoryUsed += size
            self._heldSizes[name] = size
            self.pending.append((name, ret))
        else:
            self._diskSizes[name] = size
            self.pending.append((name, None))

    def _release(self, stored: StoredReturn) -> None:
        """
        The in-memory copy of C{stored}'s return is no longer counted.
        """
        self.memoryUsed -= stored.size
        stored.size = 0

    def _fromDisk(
        self, name: str | StoredReturn
    ) -> tuple[dict[str, Any] | None, str | StoredReturn]:
        """
        The return of the pending entry C{name} that has no in-memory copy
        in L{pending}: its copy if it is still in memory (its write did not
        finish or failed), or its copy read back from disk, with the name to
        deliver it under. Otherwise L{None}: it is being read back (one at a
        time, in L{ReturnsQueue.read}'s thread), or waits until
        acknowledgements free enough memory.
        """
        if isinstance(name, StoredReturn):
            ret = self.unacknowledged.get(name)
            if ret is not None or name.name is None:
                return ret, name
            fileName = name.name
        else:
            fileName = name
        ret = self._readBack.pop(fileName, None)
        if ret is not None:
            return ret, fileName
        if self._reading or self.returnsQueue is None:
            return None, name
        size = self._diskSizes.get(fileName, 0)
        if self.memoryUsed and self.memoryUsed + size > self.memoryLimit:
            self._waitingForMemory = True
            return None, name
        self._waitingForMemory = False
        self._reading = True

        def read(result: tuple[Any, int]) -> None:
            self._reading = False
            ret, size = result
            if not isinstance(ret, dict):
                raise serial.SerialError("not a map")
            self._diskSizes.pop(fileName, None)
            self._heldSizes[fileName] = size
            self.memoryUsed += size
            self._readBack[fileName] = ret
            self.flush()

        def unreadable(failure: Any) -> None:
            # Kept aside on disk, never deleted (as L{ReturnsQueue.load}
            # does); the next return goes.
            self._reading = False
            self.log.error(
                "minion {id}: cannot read back queued return {name}: {e}",
                id=self.id,
                name=fileName,
                e=failure.value,
            )
            self._diskSizes.pop(fileName, None)
            for i, (entry, held) in enumerate(self.pending):
                if held is None and fileName in (
                    entry,
                    entry.name if isinstance(entry, StoredReturn) else None,
                ):
                    del self.pending[i]
                    break
            self.flush()

        self.returnsQueue.read(fileName).addCallback(read).addErrback(unreadable)
        return None, name

    def flush(self) -> None:
        """
        Send every pending return over the ready session, if there is one,
        while its connection holds at most L{writeLimit} bytes unsent: the
        rest wait, and are sent as acknowledgements come back (or
        L{FLUSH_RETRY} seconds later). Nothing is sent while a refused
        return's back-off runs, and one return at a time after it until one
        is stored.
        """
        while self.req is not None and self.pending:
            if self._retryTimer is not None or self._probe is not None:
                return
            if writeBacklog(self.req.transport) > self.writeLimit:
                if self._flushTimer is None and not self.stopped:
                    self._flushTimer = self.reactor.callLater(FLUSH_RETRY, self._flushAgain)
                return
            name, ret = self.pending[0]
            if ret is None and name is not None:
                # Kept on disk only (past memoryLimit).
                ret, name = self._fromDisk(name)
                if ret is None:
                    return
            self.pending.popleft()
            if self._probing:
                self._probe = ret
            d = self.req.request(ret)
            d.addCallbacks(self._stored, self._failed, (name, ret), None, (name, ret))

    def _flushAgain(self) -> None:
        self._flushTimer = None
        self.flush()

    def _sendAgain(self) -> None:
        self._retryTimer = None
        self.flush()

    def retryDelay(self) -> float:
        """
        @return: the seconds to wait before sending again after
            L{retryAttempt} refusals in a row: L{retryFirst} doubled each
            time, at most L{retryMax}, less up to L{RETRY_JITTER} of it at
            random.
        """
        delay = min(self.retryMax, self.retryFirst * 2 ** min(max(self.retryAttempt - 1, 0), 16))
        return delay * (1.0 - RETRY_JITTER * self.random())

    def _stored(self, reply: Any, name: str | StoredReturn | None, ret: dict[str, Any]) -> None:
        """
        The master acknowledged C{ret}: the back-off is over.
        """
        if self._errorTries:
            self._errorTries.pop(ret.get("jid"), None)
        wasProbing = self._probing
        if ret is self._probe:
            self._probe = None
        self.retryAttempt = 0
        self._probing = False
        self._delivered(reply, name)
        if wasProbing:
            self.flush()

    def _delivered(self, reply: Any, name: str | StoredReturn | None) -> None:
        if isinstance(name, StoredReturn):
            self.unacknowledged.pop(name, None)
            self._release(name)
            if name.name is not None:
                self._diskSizes.pop(name.name, None)
            name.delivered(self.returnsQueue)
            if not self.unacknowledged and self._acknowledgementWaiters:
                self.acknowledgementsSettled()
        elif name is not None:
            self.memoryUsed -= self._heldSizes.pop(name, 0)
            if self.returnsQueue is not None:
                self.returnsQueue.remove(name)
        if self.pending and (self._flushTimer is not None or self._waitingForMemory):
            # The master read up to this return: the connection has room;
            # or a return waiting on disk may now fit in memory.
            self.flush()

    def _failed(self, failure: Any, name: str | StoredReturn | None, ret: dict[str, Any]) -> None:
        probe = ret is self._probe
        if probe:
            self._probe = None
        if failure.check(RequestError):
            why = str(failure.value)
            if why.startswith(wire.RETURN_NOT_STORED):
                # The master could not store it: keep it, and send it again
                # later (to this master, or the next one).
                self._backOff(ret, why)
            elif why.startswith(INTERNAL_ERROR):
                # Something failed on the master (its log has the
                # traceback): maybe for now, so tried again a few times.
                jid = ret.get("jid")
                tries = self._errorTries[jid] = self._errorTries.get(jid, 0) + 1
                self._backOff(ret, why)
                if tries >= self.errorTries:
                    del self._errorTries[jid]
                    self._setAside(name, ret, why, tries)
                    return
            else:
                # Refused (a duplicate of a return the master has, or a job
                # it never sent us): sending it again would not change that.
                self.log.warn(
                    "minion {id}: the master refused the return for {jid}, which is dropped: {e}",
                    id=self.id,
                    jid=ret["jid"],
                    e=why,
                )
                self._errorTries.pop(ret.get("jid"), None)
                self._delivered(None, name)
                if probe:
                    self.flush()
                return
        # Kept, and sent again: after the back-off (a refusal for now), or
        # after reconnecting (the connection went away before the master
        # answered). A duplicate is refused by the master, so the job still
        # gets exactly one return.
        if isinstance(name, StoredReturn) and name.size == 0 and name.name is not None:
            # Sent from memory while being written past the bound: on disk
            # only since, read back when its turn comes again.
            self.pending.appendleft((name, None))
            return
        self.pending.appendleft((name, ret))

    def _backOff(self, ret: dict[str, Any], why: str) -> None:
        """
        The master refused C{ret} for now: send nothing for a while (once
        per round of refusals: those of the returns sent with it only wait
        with it), then one return at a time until one is stored.
        """
        self._probing = True
        if self._retryTimer is not None or self.stopped:
            return
        self.retryAttempt += 1
        delay = self.retryDelay()
        self._retryTimer = self.reactor.callLater(delay, self._sendAgain)
        self.log.warn(
            # The verb is in the format itself: a reader of the log's
            # events (a test, a log shipper) finds it there.
            (
                "minion {id}: the master could not store the return for {jid}"
                if why.startswith(wire.RETURN_NOT_STORED)
                else "minion {id}: the master failed on the return for {jid}"
            )
            + " ({why}); {waiting} return(s) not stored, sent again in {delay:.1f} s "
            "(refusal {n} in a row)",
            id=self.id,
            jid=ret["jid"],
            why=why,
            waiting=max(len(self.unacknowledged), len(self.pending) + 1),
            delay=delay,
            n=self.retryAttempt,
        )

    def _setAside(
        self, name: str | StoredReturn | None, ret: dict[str, Any], why: str, tries: int
    ) -> None:
        """
        The master failed C{ret} L{errorTries} times in a row: keep it in
        the returns queue on disk (the minion sends it again when it starts
        next), and no longer in memory or in this run's sending.
        """
        where = "in the returns queue on disk; sent again when the minion starts next"
        if isinstance(name, StoredReturn) and self.returnsQueue is not None:
            if name.size:
                # Written if it was not yet; its file is never removed here.
                self.persist(name)
                self.unacknowledged.pop(name, None)
                self._release(name)
                if not self.unacknowledged and self._acknowledgementWaiters:
                    self.acknowledgementsSettled()
        elif isinstance(name, str):
            self.memoryUsed -= self._heldSizes.pop(name, 0)
        else:
            if isinstance(name, StoredReturn):
                self.unacknowledged.pop(name, None)
                self._release(name)
            self.setAside.append(ret)
            where = "in memory only (no returns queue)"
        self.log.error(
            "minion {id}: the master failed {tries} times in a row on the return for "
            "{jid} ({why}); it is no longer sent in this run and is kept {where}",
            id=self.id,
            tries=tries,
            jid=ret["jid"],
            why=why,
            where=where,
        )
