# -*- test-case-name: tests.test_minion_events -*-
"""
Salt's C{event} module: send events from a minion to its master's event bus.

The event travels over the minion's own authenticated req session (the
daemon's, or the transient session of C{salttwist-call}) as a
C{_minion_event} request, and the master fires it on its bus with the
session's minion id in the data. The master refuses tags under C{salt/}
other than C{salt/minion/<this minion's id>/...} (see C{docs/security.md});
a refusal makes the function fail with the master's reason.

C{event.fire} fires on the minion's own local bus instead (Salt's
C{minion_event_<hash>_pub.ipc}, watched with C{salttwist-event --node
minion}): in the daemon directly, under C{salttwist-call} through the
running daemon's C{minion_event_<hash>_pull.ipc}.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.error import ConnectionLost
from twisted.python.failure import Failure

from salttwist.events import minionEventSockets
from salttwist.events.bus import MAX_GLOB_LENGTH
from salttwist.events.fire import fireEvent
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
    onReactor,
)
from salttwist.serial import SerialError
from salttwist.transport.reqclient import RequestError


@onReactor
@needsContext
def send(
    context: LoaderContext,
    tag: Any,
    data: Any = None,
    preload: Any = None,
    with_grains: bool = False,
    **kwargs: Any,
) -> Deferred[bool]:
    """
    Send an event with tag C{tag} to the master. Its data is a map: C{preload}
    first, then the minion's grains under C{grains} with C{with_grains=True},
    then the keyword arguments, then C{data} (a map) on top. The master adds
    C{id} (this minion's) and C{_stamp}.

    Return C{True} once the master has fired it; fail with the master's
    reason when it refuses the tag (for instance C{salt/job/...}).

    CLI Example:

        salttwist '*' event.send myco/deploy/done '{"ok": true}'
        salttwist-call event.send myco/deploy/done data='{"ok": true}'
        salttwist-call event.send myco/backup/done with_grains=True status=ok
    """
    if data is not None and not isinstance(data, Mapping):
        raise SaltInvocationError(f"data must be a map, not {type(data).__name__}")
    if preload is not None and not isinstance(preload, Mapping):
        raise SaltInvocationError(f"preload must be a map, not {type(preload).__name__}")
    payload: dict[str, Any] = dict(preload or {})
    if with_grains:
        payload["grains"] = dict(context.grains)
    payload.update(kwargs)
    payload.update(data or {})
    return _fire(context, tag, payload)


@onReactor
@needsContext
def fire_master(context: LoaderContext, data: Any, tag: Any, preload: Any = None) -> Deferred[bool]:
    """
    Send C{data} (any value) with tag C{tag} to the master, as it is (a map
    C{preload} is merged under a map C{data}). The master adds C{id} (this
    minion's) and C{_stamp} around it.

    Return C{True} once the master has fired it; fail with the master's
    reason when it refuses the tag.

    CLI Example:

        salttwist '*' event.fire_master '{"data": "my event data"}' myco/tag
    """
    if isinstance(preload, Mapping) and isinstance(data, Mapping):
        data = {**preload, **data}
    return _fire(context, tag, data)


@onReactor
@needsContext
def fire(context: LoaderContext, data: Any, tag: Any) -> bool:
    """
    Fire an event with tag C{tag} and data C{data} (a map) on this minion's
    own event bus, not the master's; the bus adds C{_stamp}. Return C{True}
    once it is on the bus. Outside the daemon (C{salttwist-call}, even with
    C{--local}) the event goes through the running daemon's local socket,
    and the function fails if no minion daemon runs with this config.

    CLI Example:

        salttwist '*' event.fire '{"data": "my event data"}' myco/tag
        salttwist-call --local event.fire '{"a": 1}' myco/tag
    """
    if not isinstance(tag, str) or not tag:
        raise SaltInvocationError("tag must be a non-empty string")
    # The longest tag a bus's pull socket takes.
    if len(tag) > MAX_GLOB_LENGTH:
        raise SaltInvocationError(f"tag must be at most {MAX_GLOB_LENGTH} characters")
    if not isinstance(data, Mapping):
        raise SaltInvocationError(f"data must be a map, not {type(data).__name__}")
    if context.fireLocal is not None:
        context.fireLocal(tag, dict(data))
        return True
    from salttwist.pki.ids import configuredMinionId

    # The id grain is known already: no name lookup (getfqdn) on the reactor.
    minionId = context.grains.get("id") or configuredMinionId(context.opts)
    pullPath = minionEventSockets(context.opts["sock_dir"], minionId)[1]
    try:
        # A blocking write of one frame to a local socket, bounded by a
        # second: quick enough to make on the reactor of salttwist-call.
        fired = fireEvent(pullPath, tag, dict(data))
    except SerialError as e:
        raise CommandExecutionError(f"the event was not fired: {e}") from e
    if not fired:
        raise CommandExecutionError(
            f"the event was not fired: no salttwist minion listens on {pullPath} "
            "(is the minion daemon of this config running, and may this user reach its "
            "sock_dir?)"
        )
    return True


def _fire(context: LoaderContext, tag: Any, data: Any) -> Deferred[bool]:
    """
    Hand C{(tag, data)} to the context's L{LoaderContext.fireMaster} hook.
    """
    if not isinstance(tag, str) or not tag:
        raise SaltInvocationError("tag must be a non-empty string")
    if context.fireMaster is None:
        raise CommandExecutionError(
            "no master to send the event to (salttwist-call --local runs without one)"
        )
    d = maybeDeferred(context.fireMaster, tag, data)

    def failed(failure: Failure) -> None:
        if failure.check(RequestError):
            raise CommandExecutionError(f"the master refused the event: {failure.value}")
        if failure.check(ConnectionError, ConnectionLost, SerialError):
            raise CommandExecutionError(f"the event was not sent: {failure.value}")
        failure.raiseException()

    return d.addCallbacks(lambda _: True, failed)
