# -*- test-case-name: tests.test_api_service,tests.integration.test_api -*-
"""
C{salttwist-api} as a service tree: L{ApiService} holds the eauth
service (the token store and the login threads) and the HTTPS (or, with
C{disable_ssl}, HTTP) server of the resource tree (L{salttwist.api.app}).

The request body limit (C{max_request_body_size}) is enforced as the body
arrives (L{LimitedRequest}): a larger C{Content-Length}, or a chunked body
that grows past it, gets a 413 and the connection is closed, nothing past
the limit read.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import MultiService
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.web.server import Request, Site

from salttwist.api.app import makeRoot
from salttwist.api.context import ApiContext
from salttwist.api.gateway import MasterGateway
from salttwist.api.options import ApiOptions
from salttwist.api.wheel import KeyWheel
from salttwist.blocking import threadRunner
from salttwist.daemon import RunAs, StartupError, dropPrivileges, ensurePrivateDir
from salttwist.eauth.service import EauthService

__all__ = ["ApiService", "ApiSite", "LimitedRequest", "apiSite", "serverEndpoint"]

_log = Logger()


class LimitedRequest(Request):
    """
    A request whose body may not be larger than C{maxBody} bytes.
    """

    maxBody = 1048576
    _received = 0
    _refused = False

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > self.maxBody:
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._received > self.maxBody:
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self._refused:
            return
        super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        """
        Answer 413 at once and close the connection.
        """
        if self._refused:
            return
        self._refused = True
        body = json.dumps(
            {
                "status": 413,
                "return": f"Request Entity Too Large: the body may be at most {self.maxBody} bytes",
            }
        ).encode("utf-8")
        transport = self.channel.transport
        transport.write(
            b"HTTP/1.1 413 Request Entity Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"X-Content-Type-Options: nosniff\r\n"
            b"Cache-Control: no-store\r\n"
            b"Connection: close\r\n"
            b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n\r\n" + body
        )
        transport.loseConnection()


class ApiSite(Site):
    """
    The API's site: requests are logged to C{log_access_file} when it is
    set (as Salt's), and not at all otherwise (twisted.web would log each
    one to the daemon's log).
    """

    def log(self, request: Request) -> None:
        if self.logPath is not None:
            super().log(request)


def apiSite(context: ApiContext) -> Site:
    """
    @return: the site serving the API's resource tree, with its body limit.
    """
    site = ApiSite(makeRoot(context), logPath=context.options.logAccessFile, reactor=context.clock)
    site.requestFactory = type(
        "LimitedRequest", (LimitedRequest,), {"maxBody": context.options.maxRequestBodySize}
    )
    site.displayTracebacks = False
    return site


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise StartupError(
            f"rest_cherrypy: cannot read the {what} {path}: {e.strerror or e}"
        ) from None


def serverEndpoint(reactor: Any, options: ApiOptions) -> Any:
    """
    The endpoint the API listens on: TLS with C{ssl_crt} and C{ssl_key}
    (and C{ssl_chain}), or plain TCP with C{disable_ssl}.

    @raise StartupError: no certificate and plain HTTP not asked for, or
        the files cannot be read or do not hold a certificate and its key.
    """
    from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint

    problem = options.tlsProblem()
    if problem is not None:
        raise StartupError(problem)
    ipv6 = ":" in options.host
    if options.disableSsl:
        cls = TCP6ServerEndpoint if ipv6 else TCP4ServerEndpoint
        return cls(reactor, options.port, backlog=128, interface=options.host)
    try:
        from twisted.internet import ssl
        from twisted.internet.endpoints import SSL4ServerEndpoint

        ssl.CertificateOptions  # noqa: B018 (missing without pyOpenSSL)
    except (ImportError, AttributeError):
        raise StartupError(
            "salttwist-api serves HTTPS, which needs pyOpenSSL: pip install 'salttwist[tls]'"
            " (or set disable_ssl: True in rest_cherrypy behind a TLS-terminating proxy)"
        ) from None

    assert options.sslCrt is not None and options.sslKey is not None
    crt = _read(options.sslCrt, "certificate ssl_crt")
    key = _read(options.sslKey, "private key ssl_key")
    try:
        certificate = ssl.PrivateCertificate.loadPEM(crt + b"\n" + key)
        chain = []
        if options.sslChain:
            chain = [
                ssl.Certificate.loadPEM(pem).original
                for pem in _splitPem(_read(options.sslChain, "certificate chain ssl_chain"))
            ]
        contextFactory = ssl.CertificateOptions(
            privateKey=certificate.privateKey.original,
            certificate=certificate.original,
            extraCertChain=chain or None,
        )
    except Exception as e:
        raise StartupError(
            f"rest_cherrypy: ssl_crt {options.sslCrt} and ssl_key {options.sslKey} must hold"
            f" a PEM certificate and its private key ({e})"
        ) from None
    return SSL4ServerEndpoint(
        reactor, options.port, contextFactory, backlog=128, interface=options.host
    )


def _splitPem(data: bytes) -> list[bytes]:
    marker = b"-----END CERTIFICATE-----"
    return [part + marker for part in data.split(marker) if b"-----BEGIN" in part]


class ApiService(MultiService):
    """
    The API: its eauth service and its server.
    """

    #: The user to run as once the port is bound (C{-u}, the C{user}
    #: option), or L{None}.
    runAs: RunAs | None = None

    def __init__(self, config: dict[str, Any], reactor: Any) -> None:
        """
        @raise StartupError: the options are invalid (the message says
            which), or the certificate cannot be used.
        """
        super().__init__()
        self.config = config
        self.reactor = reactor
        self._cachedirMade = False
        try:
            self.options = ApiOptions.fromConfig(config)
        except ValueError as e:
            raise StartupError(str(e)) from None
        endpoint = serverEndpoint(reactor, self.options)
        self.eauth = EauthService(config, reactor)
        self.eauth.setServiceParent(self)
        from salttwist.events.fire import fireMasterEvent
        from salttwist.pki.stores import keyStoreSpec, openKeyStore

        store = openKeyStore(keyStoreSpec(config))

        def notify(act: str, minionId: str) -> None:
            fireMasterEvent(config["sock_dir"], "salt/key", {"act": act, "id": minionId})

        self.gateway = MasterGateway(
            config, reactor, KeyWheel(store, notify), threadRunner(reactor)
        )
        self.context = ApiContext(
            config=config,
            options=self.options,
            clock=reactor,
            authenticator=self.eauth.whenReady,
            master=self.gateway,
            enabledClients=tuple(config.get("netapi_enable_clients") or ()),
        )
        self.site = apiSite(self.context)
        self.server = StreamServerEndpointService(endpoint, self.site)
        self.server._raiseSynchronously = True
        self.server.setServiceParent(self)

    def privilegedStartService(self) -> None:
        """
        Make C{cachedir} if the master has not yet (the token store lives
        there), bind the port, then switch to L{runAs} if set, as the
        master does (L{salttwist.daemon.dropPrivileges}).
        """
        self.makeCachedir()
        super().privilegedStartService()
        dropPrivileges(self.runAs, self.config)

    def makeCachedir(self) -> None:
        """
        Make C{cachedir} (0700; its missing parents 0711 when the API runs
        as another user, which must reach it) if the master has not yet:
        the token store lives there.
        """
        if not self._cachedirMade:
            ensurePrivateDir(self.config["cachedir"], searchableParents=bool(self.config["user"]))
            self._cachedirMade = True

    def startService(self) -> None:
        self.context.stats.started = self.reactor.seconds()
        super().startService()
        scheme = "http" if self.options.disableSsl else "https"
        _log.info(
            "salttwist-api listening on {scheme}://{host}:{port}",
            scheme=scheme,
            host=self.options.host,
            port=self.options.port,
        )

    def stopService(self) -> Deferred[None]:
        self.gateway.close()
        return super().stopService()
