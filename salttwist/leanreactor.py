# -*- test-case-name: tests.test_leanreactor -*-
"""
The reactor of the salttwist daemons: Twisted's epoll reactor with a
leaner dispatch of I/O events.

Twisted's L{EPollReactor.doPoll} hands every ready socket to
L{twisted.python.log.callWithLogger}, which asks the socket for its log
prefix and runs the handler inside a new logging context, so that a
legacy C{log.msg} made while handling it is labelled with that connection.
That bookkeeping costs about 4 us per event, and a busy master handles an
event per return and per acknowledgement: measured at 1,000 minions, it
was about 4% of the master's CPU and 5% of a swarm process's.
L{LeanEPollReactor} calls the handler directly.

What changes: salttwist logs only through L{twisted.logger.Logger}, whose
events never carried that label; a legacy message that Twisted itself
writes while handling an event (an "Unhandled Error" from a protocol, with
its traceback) shows C{-} instead of the connection's prefix. An exception
that escapes the handler is still logged, with the prefix, and the loop
goes on, as with C{callWithLogger}.
"""

from __future__ import annotations

import errno
import sys
from typing import Any

from twisted.python import log

try:
    from twisted.internet.epollreactor import EPollReactor
except ImportError:  # No epoll here: installLeanReactor installs nothing.
    EPollReactor = object  # type: ignore[assignment,misc]


class LeanEPollReactor(EPollReactor):
    """
    An epoll reactor that dispatches I/O events without a logging context
    per event (see the module's docstring).
    """

    def doPoll(self, timeout: float | None) -> None:
        """
        Poll for ready file descriptors, for at most C{timeout} seconds
        (forever if L{None}), and run their handlers.
        """
        try:
            events = self._poller.poll(-1 if timeout is None else timeout, len(self._selectables))
        except OSError as e:
            if e.errno == errno.EINTR:
                return
            raise
        handle = self._doReadOrWrite
        selectables = self._selectables
        for fd, event in events:
            selectable = selectables.get(fd)
            if selectable is None:
                # Removed by a handler earlier in this loop.
                continue
            try:
                handle(selectable, fd, event)
            except KeyboardInterrupt:
                raise
            except BaseException:
                log.err(system=_logPrefix(selectable))

    doIteration = doPoll


def _logPrefix(selectable: Any) -> str:
    try:
        return str(selectable.logPrefix())
    except Exception:
        return "(buggy logPrefix method)"


def installLeanReactor() -> bool:
    """
    Install L{LeanEPollReactor} as the global reactor, unless a reactor is
    installed already or this platform has no epoll (Twisted then installs
    its default, as usual).

    @return: whether it was installed.
    """
    if "twisted.internet.reactor" in sys.modules or EPollReactor is object:
        return False
    from twisted.internet.main import installReactor

    installReactor(LeanEPollReactor())
    return True
