# -*- test-case-name: tests.test_cluster -*-
"""
The interface of the bus between the masters of a cluster, and its
message kinds.

Each kind is durable or best effort:

  - L{JOB} (durable): a job published on one master, which every master
    publishes to its own minions;
  - L{RETURN} (durable): a minion's return accepted by one master, fired on
    the bus of every other;
  - L{EVENT} (best effort): a minion's own event, fired on the bus of every
    other master that is connected to the broker when it is sent.

A durable message is stored by the broker before it is acknowledged, and
is delivered at least once to every member subscribed to its kind, even one
that was away when it was sent (within the broker's retention); members
drop the copies they already handled. A best-effort message is delivered
at most once, to the members connected at the time.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface

#: A job's load and targeted minions (durable).
JOB = "job"
#: A minion's return event (durable).
RETURN = "ret"
#: A minion's event (best effort).
EVENT = "event"
#: The kinds the broker stores and acknowledges.
DURABLE_KINDS = (JOB, RETURN)
#: The kinds sent at most once, to the members connected then.
VOLATILE_KINDS = (EVENT,)
#: Every kind.
KINDS = DURABLE_KINDS + VOLATILE_KINDS


class ClusterUnavailable(ValueError):
    """
    The cluster's broker cannot take a message now (its buffer is full, or
    the broker has been unreachable too long); the message says why. A
    L{ValueError}: the master's request channel answers a client or a
    minion with its message.
    """


class IClusterBus(Interface):
    """
    One master's connection to the bus shared by the masters of a cluster.
    """

    memberId = Attribute("This master's name in the cluster (unique in it).")
    maxPayload = Attribute(
        "The most bytes one message may take (the broker's limit, less room for headers)."
    )

    def subscribe(kind, handler):  # noqa: N805
        """
        Deliver the messages of C{kind} to C{handler}, called with the
        message's bytes. A durable message is acknowledged once the
        handler's result (a value or a L{Deferred}) succeeds; if it fails,
        the message is delivered again later. Call before L{start}.

        @param kind: one of L{KINDS}.
        @param handler: a callable taking C{bytes}.
        """

    def start():
        """
        Connect to the broker and keep connected (reconnecting with
        back-off).
        """

    def stop():
        """
        Disconnect.

        @return: a L{Deferred} firing once disconnected.
        """

    def publish(kind, payload):  # noqa: N805
        """
        Send C{payload} to every member subscribed to C{kind} (this one
        too).

        A durable message is kept in a bounded buffer until the broker has
        stored it (across reconnections); a best-effort message is dropped
        when not connected.

        @return: a L{Deferred} firing once the broker acknowledged a durable
            message (at once for a best-effort one).
        @raise ClusterUnavailable: the buffer of durable messages is full,
            or C{payload} is larger than L{maxPayload}.
        """

    def whyUnavailable():
        """
        Whether a new job can be fanned out now.

        @return: L{None} if it can, else why not (a sentence for the user):
            the buffer is full, or the broker has been unreachable for
            longer than the configured limit.
        """


#: The broker's limit on one message when it has not said (NATS's default).
DEFAULT_MAX_PAYLOAD = 1048576
#: Bytes kept for a message's headers within the broker's limit.
HEADER_ROOM = 256


def tooLarge(size: int, maxPayload: int) -> str | None:
    """
    @return: L{None} if a message of C{size} bytes fits in C{maxPayload},
        else why not.
    """
    if size <= maxPayload:
        return None
    return (
        f"the message takes {size} bytes, more than the broker allows ({maxPayload}; "
        "raise max_payload in the NATS server's configuration)"
    )


def checkPublishable(kind: str, payload: bytes, maxPayload: int) -> None:
    """
    Check a message before L{IClusterBus.publish} takes it.

    @raise ValueError: C{kind} is not one of L{KINDS}.
    @raise ClusterUnavailable: C{payload} is larger than C{maxPayload}
        (L{tooLarge} says why).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown message kind {kind!r}")
    problem = tooLarge(len(payload), maxPayload)
    if problem is not None:
        raise ClusterUnavailable(problem)
