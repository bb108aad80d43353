# -*- test-case-name: tests.test_transports -*-
"""
The C{tcp} transport, the default: plain TCP, IPv4 or IPv6.

The channels' confidentiality and integrity come from salttwist's own
crypto (authenticated sessions, sealed and MACed publications), so plain
TCP is safe on an untrusted network; C{tls} adds a TLS layer on top.

Twisted's endpoint module is imported by the methods, not at module scope:
it imports pyOpenSSL, and the plugin scan of a command imports this module
before the command decides whether its reactor needs pyOpenSSL.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IStreamClientEndpoint, ISystemHandle, ITCPTransport
from zope.interface import implementer

from salttwist.transport.interfaces import ITransport

__all__ = ["CONNECT_TIMEOUT", "KEEPALIVE_IDLE", "LISTEN_BACKLOG", "TCP", "TCPTransport"]

#: The listen backlog of the pub and req ports: Twisted's default of 50
#: overflows when thousands of minions connect at once (a master restart),
#: and the overflowing connections hang until the minions time out.
LISTEN_BACKLOG = 4096
#: Seconds a connection attempt may take (callers may give up sooner).
CONNECT_TIMEOUT = 10
#: Seconds of silence before TCP keepalive probes start (Salt's
#: C{tcp_keepalive_idle} is 300 too).
KEEPALIVE_IDLE = 300


def keepAlive(proto: Any) -> Any:
    """
    Turn on TCP keepalive with a 300 s idle time (Salt's C{tcp_keepalive}) on
    C{proto}'s TCP transport, so a master that vanished without closing the
    connection is noticed and the minion reconnects.

    @param proto: a protocol on a TCP transport (L{ITCPTransport}; the
        idle time needs its socket too, L{ISystemHandle}). Other transports,
        such as in-memory ones, are left as they are.
    @return: C{proto}.
    """
    transport = proto.transport
    if ITCPTransport.providedBy(transport):
        transport.setTcpKeepAlive(True)
        # Under TLS the handle is pyOpenSSL's connection, not a socket: the
        # idle time is then the system's default.
        handle = transport.getHandle() if ISystemHandle.providedBy(transport) else None
        if hasattr(handle, "setsockopt") and hasattr(socket, "TCP_KEEPIDLE"):
            handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE)
    return proto


@implementer(IStreamClientEndpoint)
class KeepAliveEndpoint:
    """
    A client endpoint that turns on TCP keepalive on each connection of the
    TCP endpoint it wraps.

    Wrapped in turn (by C{wrapClientTLS}, say), it still sees the protocol
    directly on top of TCP, whose transport is the socket's.
    """

    def __init__(self, wrapped: Any) -> None:
        """
        @param wrapped: a TCP L{IStreamClientEndpoint}.
        """
        self.wrapped = wrapped

    def connect(self, factory: Any) -> Deferred[Any]:
        """
        Connect with the wrapped endpoint, then turn on keepalive.
        """
        return self.wrapped.connect(factory).addCallback(keepAlive)


@implementer(ITransport)
class TCPTransport:
    """
    Plain TCP: C{TCP4ServerEndpoint}/C{TCP6ServerEndpoint} with a deep
    backlog on the master; on the other side C{TCP4ClientEndpoint} or
    C{TCP6ClientEndpoint} for an address, C{HostnameEndpoint} for a name,
    with keepalive.
    """

    name = "tcp"
    needsTLS = False

    def prepareMaster(self, config: dict[str, Any]) -> None:
        """
        Nothing to prepare.
        """

    def serverEndpoint(
        self, reactor: Any, config: dict[str, Any], interface: str, port: int, role: str
    ) -> Any:
        """
        @return: a TCP server endpoint on C{interface} (IPv6 if it has a
            colon) with a backlog of L{LISTEN_BACKLOG}.
        """
        from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint

        if ":" in interface:
            return TCP6ServerEndpoint(reactor, port, backlog=LISTEN_BACKLOG, interface=interface)
        return TCP4ServerEndpoint(reactor, port, backlog=LISTEN_BACKLOG, interface=interface)

    def clientEndpoint(
        self, reactor: Any, config: dict[str, Any], host: str, port: int, role: str
    ) -> Any:
        """
        @return: an endpoint with a L{CONNECT_TIMEOUT} whose connections have
            TCP keepalive on: C{TCP4ClientEndpoint}/C{TCP6ClientEndpoint}
            for an address, C{HostnameEndpoint} (which resolves, in a
            thread, and tries every address) for a name.
        """
        from twisted.internet import endpoints

        family = addressFamily(host)
        if family == socket.AF_INET:
            inner = endpoints.TCP4ClientEndpoint(reactor, host, port, timeout=CONNECT_TIMEOUT)
        elif family == socket.AF_INET6:
            inner = endpoints.TCP6ClientEndpoint(reactor, host, port, timeout=CONNECT_TIMEOUT)
        else:
            inner = endpoints.HostnameEndpoint(reactor, host, port, timeout=CONNECT_TIMEOUT)
        return KeepAliveEndpoint(inner)


def addressFamily(host: str) -> int | None:
    """
    @return: C{AF_INET} or C{AF_INET6} if C{host} is an IP address written
        out (an IPv6 one without a zone index), else L{None} (a name).
    """
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return family
    return None


#: The C{tcp} transport (the object C{twisted/plugins/salttwist_transports.py}
#: declares).
TCP = TCPTransport()
