# -*- test-case-name: tests.test_api_options -*-
"""
Tests for C{rest_cherrypy} (L{salttwist.api.options}), the login limit
(L{salttwist.api.limits}) and the formats (L{salttwist.api.formats}).
"""

from __future__ import annotations

import os

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.api.errors import BadRequest, NotAcceptable
from salttwist.api.formats import JSON, YAML, chooseFormat, parseBody
from salttwist.api.limits import LoginLimiter
from salttwist.api.options import ApiOptions, checkRestCherrypy
from salttwist.config import ConfigError, loadMasterConfig


class OptionsTests(SynchronousTestCase):
    """
    The block's checks and defaults.
    """

    def test_defaults(self) -> None:
        """
        Without a block, Salt's defaults; TLS is required.
        """
        options = ApiOptions.fromConfig({})
        self.assertEqual((options.port, options.host), (8000, "0.0.0.0"))
        self.assertEqual(options.maxRequestBodySize, 1048576)
        self.assertIn("ssl_crt and ssl_key not set", options.tlsProblem())

    def test_disableSsl(self) -> None:
        """
        C{disable_ssl: True} allows plain HTTP; a certificate and key too.
        """
        self.assertIsNone(
            ApiOptions.fromConfig({"rest_cherrypy": {"disable_ssl": True}}).tlsProblem()
        )
        block = {"ssl_crt": "/a.crt", "ssl_key": "/a.key"}
        self.assertIsNone(ApiOptions.fromConfig({"rest_cherrypy": block}).tlsProblem())
        problem = ApiOptions.fromConfig({"rest_cherrypy": {"ssl_crt": "/a.crt"}}).tlsProblem()
        self.assertIn("ssl_key not set", problem)

    def test_badValues(self) -> None:
        """
        Bad values and unknown options are refused, naming them.
        """
        for block, words in (
            ({"port": "eighty"}, "port must be an integer"),
            ({"port": 70000}, "port must be between 0 and 65535"),
            ({"disable_ssl": "yes"}, "disable_ssl must be true or false"),
            ({"max_request_body_size": 0}, "max_request_body_size must be >= 1"),
            ({"cors_origin": 3}, "cors_origin must be"),
            ({"prot": 8000}, "unknown option 'prot'"),
            ("x", "must be a mapping"),
        ):
            with self.assertRaises(ValueError) as caught:
                checkRestCherrypy(block)
            self.assertIn(words, str(caught.exception))

    def test_masterConfig(self) -> None:
        """
        The master config checks the block and C{netapi_enable_clients}
        when it is loaded.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        with open(os.path.join(directory, "master"), "w") as f:
            f.write("rest_cherrypy:\n  port: nope\n")
        with self.assertRaises(ConfigError) as caught:
            loadMasterConfig(directory)
        self.assertIn("rest_cherrypy", str(caught.exception))
        with open(os.path.join(directory, "master"), "w") as f:
            f.write("netapi_enable_clients: [local, lcoal]\n")
        with self.assertRaises(ConfigError) as caught:
            loadMasterConfig(directory)
        self.assertIn("lcoal", str(caught.exception))
        with open(os.path.join(directory, "master"), "w") as f:
            f.write("netapi_enable_clients: [local, runner]\nrest_cherrypy: {port: 8001}\n")
        config = loadMasterConfig(directory)
        self.assertEqual(config["netapi_enable_clients"], ["local", "runner"])
        self.assertEqual(config["rest_cherrypy"], {"port": 8001})


class LoginLimiterTests(SynchronousTestCase):
    """
    L{LoginLimiter}: a token bucket per address, bounded.
    """

    def test_burstThenRate(self) -> None:
        """
        C{burst} attempts pass at once, then one per C{1/rate} seconds.
        """
        clock = Clock()
        limiter = LoginLimiter(clock, rate=0.5, burst=3)
        self.assertEqual([limiter.attempt("a") for _ in range(3)], [0, 0, 0])
        self.assertEqual(limiter.attempt("a"), 2.0)
        self.assertEqual(limiter.attempt("b"), 0)
        clock.advance(2)
        self.assertEqual(limiter.attempt("a"), 0)

    def test_successGivesBack(self) -> None:
        """
        An attempt that succeeded gives its token back: only refusals
        count.
        """
        limiter = LoginLimiter(Clock(), rate=0.1, burst=2)
        for _ in range(50):
            self.assertEqual(limiter.attempt("a"), 0)
            limiter.succeeded("a")
        limiter.attempt("a")
        limiter.attempt("a")
        self.assertGreater(limiter.attempt("a"), 0)

    def test_bounded(self) -> None:
        """
        At most C{maxSources} addresses are remembered, the least recently
        seen forgotten first.
        """
        limiter = LoginLimiter(Clock(), rate=0.1, burst=1, maxSources=100)
        for n in range(1000):
            limiter.attempt(f"10.0.{n // 256}.{n % 256}")
        self.assertEqual(len(limiter), 100)
        self.assertGreater(limiter.attempt("10.0.3.231"), 0)


class FormatsTests(SynchronousTestCase):
    """
    Bodies read and formats chosen as Salt's.
    """

    def test_form(self) -> None:
        """
        Form fields: repeated ones are lists, C{arg} always a list read as
        YAML where that gives a scalar.
        """
        body = parseBody(
            "application/x-www-form-urlencoded",
            b"client=local&tgt=*&fun=test.arg&arg=1&arg=two&arg=a%3D1&arg=[1,2]",
        )
        self.assertEqual(
            body,
            {"client": "local", "tgt": "*", "fun": "test.arg", "arg": [1, "two", "a=1", [1, 2]]},
        )
        self.assertEqual(parseBody("application/x-www-form-urlencoded", b"arg=x")["arg"], ["x"])

    def test_yamlSafe(self) -> None:
        """
        YAML is read with safe_load: a Python object tag is a 400.
        """
        self.assertEqual(
            parseBody("application/x-yaml", b"- fun: test.ping"), [{"fun": "test.ping"}]
        )
        with self.assertRaises(BadRequest):
            parseBody("application/x-yaml", b"!!python/object/apply:os.system ['id']")

    def test_yamlAliases(self) -> None:
        """
        YAML aliases are refused (a few lines of them make billions of
        nodes once written out), in a body and in a form's C{arg}.
        """
        bomb = b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
        with self.assertRaises(BadRequest) as caught:
            parseBody("application/x-yaml", bomb)
        self.assertIn("aliases", caught.exception.message)
        body = parseBody("application/x-www-form-urlencoded", b"arg=%5B%26a+x%2C+%2Aa%5D")
        self.assertEqual(body["arg"], ["[&a x, *a]"])

    def test_deep(self) -> None:
        """
        A body nested deeper than Python recurses is a 400, not a 500.
        """
        for media, body in (
            ("application/json", b"[" * 100000 + b"]" * 100000),
            ("application/x-yaml", b"[" * 100000 + b"]" * 100000),
        ):
            with self.assertRaises(BadRequest):
                parseBody(media, body)

    def test_textPlain(self) -> None:
        """
        C{text/plain} is read as JSON if it is JSON, kept as text if not.
        """
        self.assertEqual(parseBody("text/plain", b'{"a": 1}'), {"a": 1})
        self.assertEqual(parseBody("text/plain", b"hello"), "hello")

    def test_refused(self) -> None:
        """
        Another type is a 406, bad UTF-8 a 400.
        """
        with self.assertRaises(NotAcceptable):
            parseBody("application/xml", b"<a/>")
        with self.assertRaises(BadRequest):
            parseBody("application/json", b"\xff")

    def test_accept(self) -> None:
        """
        JSON by default and for C{*/*}; YAML when preferred.
        """
        for accept, media in (
            (None, JSON),
            ("*/*", JSON),
            ("application/json, application/x-yaml", JSON),
            ("application/x-yaml", YAML),
            ("text/yaml", YAML),
            ("application/x-yaml, */*;q=0.5", YAML),
            ("application/json;q=0.5, application/x-yaml", YAML),
            ("text/html, */*;q=0.1", JSON),
        ):
            self.assertEqual(chooseFormat(accept), media, accept)
        with self.assertRaises(NotAcceptable):
            chooseFormat("text/html")
        with self.assertRaises(NotAcceptable):
            chooseFormat("application/json;q=0")
