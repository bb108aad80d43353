# -*- test-case-name: tests.test_api_resource -*-
"""
Tests for the API's resource base (L{salttwist.api.resource}), the tree
(L{salttwist.api.app}), logins (L{salttwist.api.login}) and the answers'
headers, driven in memory with L{treq.testing.StubTreq}.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from tests._apifakes import Api


class RootTests(SynchronousTestCase):
    """
    C{GET /}, unknown paths, formats and headers.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())

    def test_welcome(self) -> None:
        """
        C{GET /} answers Salt's welcome and the clients, without a token.
        """
        status, data = self.api.json("GET", "/")
        self.assertEqual(status, 200)
        self.assertEqual(data["return"], "Welcome")
        self.assertIn("local", data["clients"])

    def test_securityHeaders(self) -> None:
        """
        Every answer carries the security headers and C{no-store}; no HSTS
        over plain HTTP, no CORS header without C{cors_origin}.
        """
        for path in ("/", "/nowhere", "/minions"):
            _, headers, _ = self.api.request(
                "GET", path, headers={"Origin": "https://evil.example"}
            )
            self.assertEqual(headers["x-content-type-options"], ["nosniff"])
            self.assertEqual(headers["x-frame-options"], ["DENY"])
            self.assertIn("default-src 'self'", headers["content-security-policy"][0])
            self.assertEqual(headers["cache-control"], ["no-store"])
            self.assertNotIn("strict-transport-security", headers)
            self.assertNotIn("access-control-allow-origin", headers)

    def test_hstsWithTls(self) -> None:
        """
        With TLS (no C{disable_ssl}), answers carry HSTS.
        """
        api = Api(self.mktemp(), {"ssl_crt": "/x.crt", "ssl_key": "/x.key"})
        _, headers, _ = api.request("GET", "/")
        self.assertIn("max-age", headers["strict-transport-security"][0])

    def test_notFound(self) -> None:
        """
        An unknown path is a 404 in the JSON error shape.
        """
        status, data = self.api.json("GET", "/nowhere/at/all")
        self.assertEqual(status, 404)
        self.assertEqual(data["status"], 404)
        self.assertIn("/nowhere/at/all", data["return"])

    def test_yaml(self) -> None:
        """
        A client that accepts YAML gets YAML.
        """
        status, headers, body = self.api.request(
            "GET", "/", headers={"Accept": "application/x-yaml"}
        )
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], ["application/x-yaml"])
        self.assertIn(b"return: Welcome", body)

    def test_notAcceptable(self) -> None:
        """
        A client that accepts neither JSON nor YAML gets a 406.
        """
        status, data = self.api.json("GET", "/", headers={"Accept": "text/html"})
        self.assertEqual(status, 406)
        self.assertIn("text/html", data["return"])

    def test_methodNotAllowed(self) -> None:
        """
        A method a resource does not answer is a 405 naming those it does.
        """
        status, headers, body = self.api.request("DELETE", "/login")
        self.assertEqual(status, 405)
        self.assertEqual(headers["allow"], ["GET, HEAD, POST"])
        status, headers, _ = self.api.request("HEAD", "/logout")
        self.assertEqual(status, 405)
        self.assertEqual(headers["allow"], ["POST"])

    def test_head(self) -> None:
        """
        C{HEAD} is answered wherever C{GET} is, as twisted.web does: the
        status and headers of the C{GET} (its C{Content-Length} too), no
        body; it needs the same token.
        """
        token = self.api.login("admin")
        for path in ("/", "/minions", "/minions/web1", "/jobs", "/keys", "/login"):
            get = self.api.request("GET", path, token=token)
            status, headers, body = self.api.request("HEAD", path, token=token)
            self.assertEqual(status, get[0], path)
            self.assertEqual(body, b"", path)
            self.assertEqual(headers["content-length"], [str(len(get[2]))], path)
            self.assertEqual(headers["content-type"], get[1]["content-type"], path)
            self.assertEqual(headers["x-content-type-options"], ["nosniff"], path)
        status, _, body = self.api.request("HEAD", "/minions")
        self.assertEqual((status, body), (401, b""))

    def test_corsAllowedOrigin(self) -> None:
        """
        With C{cors_origin}, a preflight from that origin is answered and
        the answers name it; another origin gets no CORS header.
        """
        api = Api(self.mktemp(), {"disable_ssl": True, "cors_origin": "https://ui.example"})
        status, headers, _ = api.request(
            "OPTIONS",
            "/",
            headers={"Origin": "https://ui.example", "Access-Control-Request-Method": "POST"},
        )
        self.assertEqual(status, 200)
        self.assertEqual(headers["access-control-allow-origin"], ["https://ui.example"])
        self.assertIn("X-Auth-Token", headers["access-control-allow-headers"][0])
        _, headers, _ = api.request("GET", "/", headers={"Origin": "https://other.example"})
        self.assertNotIn("access-control-allow-origin", headers)


class LoginTests(SynchronousTestCase):
    """
    C{/login}, C{/logout} and the token.
    """

    def setUp(self) -> None:
        self.api = Api(self.mktemp())

    def test_login(self) -> None:
        """
        A login answers Salt's shape and the token in C{X-Auth-Token}.
        """
        status, headers, body = self.api.request(
            "POST", "/login", {"username": "pinger", "password": "pinger-pw", "eauth": "file"}
        )
        self.assertEqual(status, 200)
        ret = json.loads(body)["return"][0]
        self.assertEqual(headers["x-auth-token"], [ret["token"]])
        self.assertEqual(ret["user"], "pinger")
        self.assertEqual(ret["eauth"], "file")
        self.assertEqual(ret["perms"], ["test.ping"])
        self.assertEqual(ret["expire"] - ret["start"], 3600)
        int(ret["token"], 16)

    def test_loginForm(self) -> None:
        """
        A login may be form fields, as curl -d sends them.
        """
        status, data = self.api.json(
            "POST",
            "/login",
            raw=b"username=pinger&password=pinger-pw&eauth=file",
            contentType="application/x-www-form-urlencoded",
        )
        self.assertEqual(status, 200)
        self.assertEqual(data["return"][0]["user"], "pinger")

    def test_loginRefused(self) -> None:
        """
        A wrong password is a 401 with Salt's words.
        """
        status, data = self.api.json(
            "POST", "/login", {"username": "pinger", "password": "nope", "eauth": "file"}
        )
        self.assertEqual(status, 401)
        self.assertEqual(data["return"], "Could not authenticate using provided credentials")

    def test_loginMissing(self) -> None:
        """
        A login without a password is a 400 naming it.
        """
        status, data = self.api.json("POST", "/login", {"username": "pinger", "eauth": "file"})
        self.assertEqual(status, 400)
        self.assertIn("password", data["return"])

    def test_badJson(self) -> None:
        """
        A body that is not JSON is a 400 saying so.
        """
        status, data = self.api.json("POST", "/login", raw=b"{nope")
        self.assertEqual(status, 400)
        self.assertIn("Invalid JSON", data["return"])

    def test_unsupportedBody(self) -> None:
        """
        A body of a type the API does not read is a 406, as Salt answers.
        """
        status, data = self.api.json("POST", "/login", raw=b"<x/>", contentType="text/xml")
        self.assertEqual(status, 406)
        self.assertIn("text/xml", data["return"])

    def test_rateLimit(self) -> None:
        """
        Past the burst, logins from one address get a 429 with
        C{Retry-After}, until the bucket refills.
        """
        creds = {"username": "pinger", "password": "nope", "eauth": "file"}
        statuses = [self.api.json("POST", "/login", creds)[0] for _ in range(10)]
        self.assertEqual(set(statuses), {401})
        status, headers, _ = self.api.request("POST", "/login", creds)
        self.assertEqual(status, 429)
        self.assertEqual(headers["retry-after"], ["5"])
        self.api.clock.advance(5)
        self.assertEqual(self.api.json("POST", "/login", creds)[0], 401)

    def test_rateLimitCountsRefusals(self) -> None:
        """
        Logins that succeed are not held back, however many.
        """
        for _ in range(30):
            self.api.login("pinger")

    def test_noToken(self) -> None:
        """
        An endpoint that needs a token answers 401 without one, or with a
        token that is unknown.
        """
        for token in (None, "00" * 32, "not-hex"):
            status, headers, body = self.api.request("GET", "/jobs", token=token)
            self.assertEqual(status, 401)
            self.assertEqual(json.loads(body)["status"], 401)
            self.assertEqual(headers["www-authenticate"], ["Session"])

    def test_logout(self) -> None:
        """
        After C{/logout} the token is refused.
        """
        token = self.api.login("admin")
        self.assertEqual(self.api.json("GET", "/jobs", token=token)[0], 200)
        status, data = self.api.json("POST", "/logout", token=token)
        self.assertEqual((status, data["return"]), (200, "Your token has been cleared"))
        self.assertEqual(self.api.json("GET", "/jobs", token=token)[0], 401)

    def test_expired(self) -> None:
        """
        A token past its C{expire} is refused.
        """
        token = self.api.login("admin")
        self.api.clock.advance(3601)
        self.assertEqual(self.api.json("GET", "/jobs", token=token)[0], 401)

    def test_unexpectedError(self) -> None:
        """
        An unexpected error is a 500 without details, logged.
        """
        token = self.api.login("admin")
        self.api.master.error = RuntimeError("secret detail")
        status, data = self.api.json(
            "POST", "/", [{"client": "local", "tgt": "*", "fun": "test.ping"}], token=token
        )
        self.assertEqual(status, 500)
        self.assertEqual(data["return"], "An unexpected error occurred")
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_unexpectedErrorDebug(self) -> None:
        """
        With C{debug: True}, a 500 carries the traceback.
        """
        api = Api(self.mktemp(), {"disable_ssl": True, "debug": True})
        token = api.login("admin")
        api.master.error = RuntimeError("secret detail")
        status, data = api.json(
            "POST", "/", [{"client": "local", "tgt": "*", "fun": "test.ping"}], token=token
        )
        self.assertEqual(status, 500)
        self.assertIn("RuntimeError: secret detail", data["return"])
        self.assertIn("Traceback", data["return"])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
