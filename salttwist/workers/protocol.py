# -*- test-case-name: tests.test_workers -*-
"""
The parent's side of one worker process: a L{ProcessProtocol} that carries
AMP over the child's fds 3 (parent to child) and 4 (child to parent) and logs
the child's stdout and stderr, after C{twisted.trial._dist.worker}'s
C{LocalWorker} and C{LocalWorkerTransport}.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.error import ProcessExitedAlready
from twisted.internet.interfaces import IAddress, ITransport
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.protocols.amp import AMP
from twisted.python.failure import Failure
from zope.interface import implementer

CHILD_AMP_IN = 3
"""
The child's fd the parent writes AMP to.
"""

CHILD_AMP_OUT = 4
"""
The child's fd the parent reads AMP from.
"""

CHILD_FDS = {0: "w", 1: "r", 2: "r", CHILD_AMP_IN: "w", CHILD_AMP_OUT: "r"}
"""
The C{childFDs} to spawn a worker with.
"""

_MAX_LINE = 65536
_TAIL_LINES = 20


@implementer(IAddress)
class WorkerAddress:
    """
    The placeholder address of either end of a worker's pipes.
    """


@implementer(ITransport)
class WorkerTransport:
    """
    The transport AMP writes to: the child's fd 3.
    """

    def __init__(self, processTransport: Any) -> None:
        """
        @param processTransport: the L{IProcessTransport} of the child.
        """
        self._process = processTransport

    def write(self, data: bytes) -> None:
        """
        Write C{data} to the child's fd 3.
        """
        self._process.writeToChild(CHILD_AMP_IN, data)

    def writeSequence(self, data: Sequence[bytes]) -> None:
        """
        Write each of C{data} to the child's fd 3.
        """
        for chunk in data:
            self._process.writeToChild(CHILD_AMP_IN, chunk)

    def loseConnection(self) -> None:
        """
        Close all of the child's pipes; the child exits on end of file, and
        the pool hears of it through C{processEnded}.
        """
        self._process.loseConnection()

    def getPeer(self) -> WorkerAddress:
        """
        @return: a placeholder address.
        """
        return WorkerAddress()

    def getHost(self) -> WorkerAddress:
        """
        @return: a placeholder address.
        """
        return WorkerAddress()


class WorkerProcessProtocol(ProcessProtocol):
    """
    One worker process, as seen by the parent.

    @ivar amp: the L{AMP} protocol connected to the child.
    @ivar pid: the child's pid once connected, else C{None}.
    @ivar stderrTail: the last lines the child wrote to stderr, to explain an
        unexpected exit.
    """

    log = Logger()

    def __init__(
        self,
        onEnded: Callable[[WorkerProcessProtocol, Failure], None],
        ampProtocol: AMP | None = None,
    ) -> None:
        """
        @param onEnded: called with this protocol and the reason once the
            process has exited and its pipes are closed, after every
            outstanding AMP call has failed with that reason.
        @param ampProtocol: the AMP protocol to connect (a new L{AMP} by
            default).
        """
        self.amp = ampProtocol if ampProtocol is not None else AMP()
        self.pid: int | None = None
        self.stderrTail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._onEnded = onEnded
        self._partial = {1: b"", 2: b""}
        self._ended = False

    def connectionMade(self) -> None:
        """
        Connect AMP to the child's fds 3 and 4.
        """
        self.pid = self.transport.pid
        self.amp.makeConnection(WorkerTransport(self.transport))

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        """
        Feed fd 4 to AMP; log complete lines of stdout and stderr at debug.
        """
        if childFD == CHILD_AMP_OUT:
            self.amp.dataReceived(data)
        elif childFD in self._partial:
            buffered = self._partial[childFD] + data
            *lines, rest = buffered.split(b"\n")
            if len(rest) > _MAX_LINE:
                lines.append(rest)
                rest = b""
            self._partial[childFD] = rest
            for line in lines:
                self._logLine(childFD, line)

    def _logLine(self, childFD: int, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r")
        stream = "stdout" if childFD == 1 else "stderr"
        if childFD == 2:
            self.stderrTail.append(text)
        self.log.debug("worker {pid} {stream}: {line}", pid=self.pid, stream=stream, line=text)

    def kill(self) -> None:
        """
        SIGKILL the child, if it is still running.
        """
        if self.transport is None or self._ended:
            return
        try:
            self.transport.signalProcess("KILL")
        except ProcessExitedAlready:
            pass

    def processEnded(self, reason: Failure) -> None:
        """
        Flush partial output lines, fail outstanding AMP calls with
        C{reason}, then tell the pool.
        """
        self._ended = True
        for childFD, rest in self._partial.items():
            if rest:
                self._logLine(childFD, rest)
        self._partial = {1: b"", 2: b""}
        self.amp.connectionLost(reason)
        self._onEnded(self, reason)
