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

This module imports nothing heavy: the CLIs look transports up before the
reactor is imported, to know whether it needs pyOpenSSL.
"""

from __future__ import annotations

from twisted.plugin import IPlugin
from zope.interface import Attribute

#: The master's pub channel: the minions' subscriptions, then publications.
ROLE_PUB = "pub"
#: The master's req channel, as a minion reaches it.
ROLE_REQ = "req"
#: The master's req channel, as the local client (C{salttwist},
#: C{salttwist-run}) reaches it from the master's host with the I{master's}
#: configuration. Server side, this is the C{"req"} endpoint.
ROLE_CLIENT = "client"


class ITransport(IPlugin):
    """
    A way to carry the pub and req channels: server endpoints for the master,
    client endpoints for minions and the local client.

    Implementations are module-level objects in a C{twisted/plugins/} module,
    declared with C{@implementer(ITransport)}; C{transport: NAME} in the
    master's and the minions' configs picks one by L{name}. Plugin modules
    are imported by every plugin scan, so they (and this interface's methods
    until called) must import nothing heavy, such as pyOpenSSL.
    """

    name = Attribute("The name the C{transport} option selects, such as C{'tcp'}.")

    needsTLS = Attribute(
        "Whether the transport uses Twisted's TLS support (pyOpenSSL). The CLIs "
        "start the reactor without pyOpenSSL unless the configured transport "
        "sets this (see L{salttwist._startup.withoutTLS})."
    )

    def prepareMaster(config):
        """
        Prepare what the master's side needs, once, as the master starts and
        before it listens: called after the master's key pair exists
        (C{pki_dir/master.pem}). Blocking is fine (the reactor is not
        running yet). The TLS transport makes the master's certificate here.

        @param config: the master's configuration.
        @raise Exception: anything raised stops the master's start with that
            message.
        """

    def serverEndpoint(reactor, config, interface, port, role):
        """
        Make the endpoint the master listens on for one channel. Called in
        C{privilegedStartService}, before twistd drops privileges, so reading
        root-only key files here is fine.

        @param reactor: the reactor to listen with.
        @param config: the master's configuration.
        @param interface: the address to bind (the C{interface} option; IPv4
            or IPv6).
        @param port: the port (C{publish_port} or C{ret_port}); C{0} means one
            chosen by the OS, which the endpoint's port must then report
            through C{getHost().port}.
        @param role: L{ROLE_PUB} or L{ROLE_REQ}.
        @return: an L{IStreamServerEndpoint
            <twisted.internet.interfaces.IStreamServerEndpoint>}.
        """

    def clientEndpoint(reactor, config, host, port, role):
        """
        Make an endpoint that connects to one of the master's channels.
        Called for every connection (a minion reconnecting calls it again),
        so it may read files that change, such as a pinned key.

        The C{Deferred} of the endpoint's C{connect} must fire with the
        application protocol built from the given factory (as
        L{wrapClientTLS <twisted.internet.endpoints.wrapClientTLS>} does),
        whose C{transport} the callers use as usual.

        @param reactor: the reactor to connect with.
        @param config: the minion's configuration for L{ROLE_PUB} and
            L{ROLE_REQ}; the master's for L{ROLE_CLIENT}.
        @param host: the master's host name or address.
        @param port: the channel's port.
        @param role: L{ROLE_PUB} or L{ROLE_REQ} (a minion), or L{ROLE_CLIENT}
            (the local client, on the master's host, to the req channel).
        @return: an L{IStreamClientEndpoint
            <twisted.internet.interfaces.IStreamClientEndpoint>}.
        """
