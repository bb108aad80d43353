"""
A third-party transport plugin, as someone outside salttwist would write
one: C{loggingtcp}, plain TCP that records what it does.

It lives outside salttwist's tree on purpose. A test puts
C{tests/plugins} on C{sys.path} (C{PYTHONPATH} for real daemons) or adds
this directory to C{twisted.plugins.__path__}, and C{transport:
loggingtcp} then works in the master's and the minions' configs without
any change to salttwist.

Each record is one line, C{"<event> <role>"}: C{prepare master},
C{listen pub}, C{accept req}, C{connect pub} and so on. Records are kept
in L{LoggingTCPTransport.records} and, when the config has the option
C{loggingtcp_log} (a plugin's own option: salttwist's loader keeps unknown
options and warns about them), appended to that file.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IProtocolFactory, IStreamServerEndpoint
from zope.interface import implementer

from salttwist.transport.interfaces import ITransport
from salttwist.transport.tcp import TCP


def _record(transport: LoggingTCPTransport, config: dict[str, Any], line: str) -> None:
    transport.records.append(line)
    path = config.get("loggingtcp_log")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@implementer(IProtocolFactory)
class _RecordingFactory:
    """
    A factory that records each connection it accepts and lets the
    application's factory build the protocol: the application protocol
    sits directly on the TCP transport, as with C{tcp}.
    """

    def __init__(self, wrapped: Any, onAccept: Any) -> None:
        self.wrapped = wrapped
        self.onAccept = onAccept

    def buildProtocol(self, addr: Any) -> Any:
        self.onAccept()
        return self.wrapped.buildProtocol(addr)

    def doStart(self) -> None:
        self.wrapped.doStart()

    def doStop(self) -> None:
        self.wrapped.doStop()

    def logPrefix(self) -> str:
        return "loggingtcp"


@implementer(IStreamServerEndpoint)
class _RecordingServerEndpoint:
    def __init__(self, wrapped: Any, onAccept: Any) -> None:
        self.wrapped = wrapped
        self.onAccept = onAccept

    def listen(self, factory: Any) -> Any:
        return self.wrapped.listen(_RecordingFactory(factory, self.onAccept))


@implementer(ITransport)
class LoggingTCPTransport:
    """
    The C{tcp} transport, recording its calls and accepted connections.
    """

    name = "loggingtcp"
    needsTLS = False

    def __init__(self) -> None:
        self.records: list[str] = []

    def prepareMaster(self, config: dict[str, Any]) -> None:
        _record(self, config, "prepare master")
        TCP.prepareMaster(config)

    def serverEndpoint(
        self, reactor: Any, config: dict[str, Any], interface: str, port: int, role: str
    ) -> Any:
        _record(self, config, f"listen {role}")
        return _RecordingServerEndpoint(
            TCP.serverEndpoint(reactor, config, interface, port, role),
            lambda: _record(self, config, f"accept {role}"),
        )

    def clientEndpoint(
        self, reactor: Any, config: dict[str, Any], host: str, port: int, role: str
    ) -> Any:
        _record(self, config, f"connect {role}")
        return TCP.clientEndpoint(reactor, config, host, port, role)


loggingtcp = LoggingTCPTransport()
