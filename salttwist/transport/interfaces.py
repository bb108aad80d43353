# -*- test-case-name: tests.test_transports -*-
"""
The transport plugin interface: how the pub and req channels' bytes travel.

A transport makes Twisted endpoints. The master listens on the endpoints of
L{ITransport.serverEndpoint}; minions and the local client connect with the
endpoints of L{ITransport.clientEndpoint}. Everything above the endpoint
(framing, the hello challenge, authentication, the session and publication
ciphers) is salttwist's and stays the same whatever the transport, so a
transport adds to the application-level crypto and never replaces it.

Transports are Twisted plugins: objects providing L{ITransport} found by
L{twisted.plugin.getPlugins} in the modules of C{twisted/plugins/} (see
L{salttwist.transport.registry} and C{docs/transports.md}).

L{ITransport} itself is declared in L{salttwist.interfaces} with the other
interfaces between salttwist's parts; it is re-exported here.

This module imports nothing heavy: the CLIs look transports up before the
reactor is imported, to know whether it needs pyOpenSSL.
"""

from __future__ import annotations

from salttwist.interfaces import ITransport

__all__ = ["ROLE_CLIENT", "ROLE_PUB", "ROLE_REQ", "ITransport"]

#: The master's pub channel: the minions' subscriptions, then publications.
ROLE_PUB = "pub"
#: The master's req channel, as a minion reaches it.
ROLE_REQ = "req"
#: The master's req channel, as the local client (C{salttwist},
#: C{salttwist-run}) reaches it from the master's host with the I{master's}
#: configuration. Server side, this is the C{"req"} endpoint.
ROLE_CLIENT = "client"
