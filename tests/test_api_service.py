# -*- test-case-name: tests.test_api_service -*-
"""
Tests for the API's daemon parts (L{salttwist.api.service},
L{salttwist.api.tap}): the body limit on a real L{HTTPChannel} over an
in-memory transport, the refusal to start without TLS, and the config.
"""

from __future__ import annotations

import json
import os

from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.server import Site

from salttwist.api.options import ApiOptions
from salttwist.api.service import ApiService, apiSite, serverEndpoint
from salttwist.config import loadApiConfig
from salttwist.daemon import StartupError
from tests._apifakes import Api


class BodyLimitTests(SynchronousTestCase):
    """
    C{max_request_body_size} is enforced as the body arrives.
    """

    def setUp(self) -> None:
        api = Api(self.mktemp(), {"disable_ssl": True, "max_request_body_size": 100})
        self.site = apiSite(api.context)

    def connect(self) -> tuple[object, StringTransport]:
        channel = self.site.buildProtocol(None)
        transport = StringTransport()
        channel.makeConnection(transport)
        return channel, transport

    def test_contentLength(self) -> None:
        """
        A C{Content-Length} over the limit is answered 413 at once, before
        any of the body is read, and the connection closed.
        """
        channel, transport = self.connect()
        channel.dataReceived(
            b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 101\r\n\r\n"
        )
        response = transport.value()
        self.assertTrue(response.startswith(b"HTTP/1.1 413 "), response)
        self.assertEqual(json.loads(response.split(b"\r\n\r\n", 1)[1])["status"], 413)
        self.assertTrue(transport.disconnecting)

    def test_chunked(self) -> None:
        """
        A chunked body that grows past the limit is refused the same way.
        """
        channel, transport = self.connect()
        channel.dataReceived(
            b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        channel.dataReceived(b"40\r\n" + b"x" * 64 + b"\r\n")
        self.assertEqual(transport.value(), b"")
        channel.dataReceived(b"40\r\n" + b"x" * 64 + b"\r\n")
        self.assertTrue(transport.value().startswith(b"HTTP/1.1 413 "))
        self.assertTrue(transport.disconnecting)

    def test_withinLimit(self) -> None:
        """
        A body within the limit is read and answered.
        """
        channel, transport = self.connect()
        body = b'{"username": "pinger"}'
        channel.dataReceived(
            b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        response = transport.value()
        self.assertTrue(response.startswith(b"HTTP/1.1 400 "), response)
        self.assertIn(b"missing password, eauth", response)


class AccessLogTests(SynchronousTestCase):
    """
    Requests are logged to C{log_access_file} only.
    """

    def request(self, site: object) -> None:
        channel = site.buildProtocol(None)  # type: ignore[attr-defined]
        transport = StringTransport()
        channel.makeConnection(transport)
        channel.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(transport.value().startswith(b"HTTP/1.1 200 "))
        channel.connectionLost(None)

    def test_accessFile(self) -> None:
        """
        With C{log_access_file}, each request is a line there.
        """
        path = os.path.abspath(self.mktemp())
        api = Api(self.mktemp(), {"disable_ssl": True, "log_access_file": path})
        site = apiSite(api.context)
        site.startFactory()
        self.request(site)
        site.stopFactory()
        with open(path) as f:
            self.assertIn('"GET / HTTP/1.1" 200', f.read())

    def test_none(self) -> None:
        """
        Without it, requests are not logged.
        """
        api = Api(self.mktemp())
        logged: list[object] = []
        from twisted.python import log

        log.addObserver(logged.append)
        self.addCleanup(log.removeObserver, logged.append)
        site = apiSite(api.context)
        site.startFactory()
        self.request(site)
        site.stopFactory()
        self.assertEqual([e for e in logged if "GET / HTTP" in str(e.get("log_io"))], [])


class EndpointTests(SynchronousTestCase):
    """
    L{serverEndpoint}: TLS unless C{disable_ssl}, with clear errors.
    """

    def test_noCertificate(self) -> None:
        """
        Without C{ssl_crt} and C{ssl_key}, and without C{disable_ssl}, the
        API does not start; the message says what to set.
        """
        with self.assertRaises(StartupError) as caught:
            serverEndpoint(None, ApiOptions())
        self.assertIn("disable_ssl: True", str(caught.exception))

    def test_unreadable(self) -> None:
        """
        A certificate file that cannot be read is named.
        """
        options = ApiOptions(sslCrt="/nonexistent/api.crt", sslKey="/nonexistent/api.key")
        with self.assertRaises(StartupError) as caught:
            serverEndpoint(None, options)
        self.assertIn("/nonexistent/api.crt", str(caught.exception))

    def test_notACertificate(self) -> None:
        """
        Files that do not hold a certificate and its key are refused.
        """
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("not a certificate\n")
        with self.assertRaises(StartupError) as caught:
            serverEndpoint(None, ApiOptions(sslCrt=path, sslKey=path))
        self.assertIn("must hold a PEM certificate", str(caught.exception))

    def test_plain(self) -> None:
        """
        With C{disable_ssl}, a TCP endpoint on C{host} and C{port}.
        """
        endpoint = serverEndpoint(None, ApiOptions(disableSsl=True, host="127.0.0.1", port=8123))
        self.assertEqual((endpoint._interface, endpoint._port), ("127.0.0.1", 8123))


class ConfigTests(SynchronousTestCase):
    """
    L{loadApiConfig}: the master's config, with the API's pidfile and log.
    """

    def test_pidfileAndLog(self) -> None:
        """
        The pidfile is C{api_pidfile} and the log file C{api_logfile}, under
        C{root_dir} as every path.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        with open(os.path.join(directory, "master"), "w") as f:
            f.write(f"root_dir: {os.path.abspath(directory)}\napi_pidfile: /run/api.pid\n")
        config = loadApiConfig(directory)
        self.assertTrue(config["pidfile"].endswith("/run/api.pid"))
        self.assertTrue(config["log_file"].endswith("/var/log/salttwist/api"))


class ServiceTests(SynchronousTestCase):
    """
    L{ApiService}'s privileged start.
    """

    def test_privilegedStart(self) -> None:
        """
        Before the eauth service opens the token store, C{cachedir} is made
        (0700) if the master has not made it yet; the port is bound on
        C{host}; without C{runAs}, no privileges change.
        """
        root = os.path.abspath(self.mktemp())
        os.makedirs(root)
        with open(os.path.join(root, "master"), "w") as f:
            f.write(
                f"root_dir: {root}\nrest_cherrypy:\n  host: 127.0.0.1\n  port: 8123\n"
                "  disable_ssl: true\n"
            )
        config = loadApiConfig(root)
        reactor = MemoryReactor()
        service = ApiService(config, reactor)
        service.privilegedStartService()
        self.assertEqual(os.stat(config["cachedir"]).st_mode & 0o777, 0o700)
        port, factory, backlog, interface = reactor.tcpServers[0]
        self.assertEqual((port, interface), (8123, "127.0.0.1"))
        self.assertIsInstance(factory, Site)
