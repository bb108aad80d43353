# -*- test-case-name: tests.integration.test_api_schema -*-
"""
The property-based run of C{salttwist-api} against its OpenAPI document
(issue 24): a real master, a minion and the API (the installed wheel's
commands, as L{tests.integration.test_api}), over HTTPS; schemathesis
(its command line, run by the test's interpreter) loads the document the
API serves at C{/openapi.json}, generates requests from it (valid ones and
some that are not) with a token from C{/login}, and checks every answer:
no 5xx, the status documented, the body and headers as the document says.

The number of examples per operation is bounded (L{MAX_EXAMPLES}) so that
schemathesis takes under a minute here; the seed is fixed for reproducible CI
runs; C{SALTTWIST_SCHEMATHESIS_SEED} and C{SALTTWIST_SCHEMATHESIS_EXAMPLES}
change them for a longer hunt, and C{SALTTWIST_SCHEMATHESIS_CHECKS} the
checks (C{all} adds the ones that judge which data the API should accept,
which the document cannot say exactly: noisy, for reading, not for CI).
Left out: C{GET /events} (a stream that does not end) and C{POST /logout}
(it would revoke the run's token); both have their own tests
(L{tests.test_api_events}, L{tests.integration.test_api}).
"""

from __future__ import annotations

import json
import os
import sys
import time

import treq
from passlib.hash import bcrypt
from twisted.internet import reactor
from twisted.internet.ssl import Certificate
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, BrowserLikePolicyForHTTPS

from tests.integration.harness import Cluster, waitFor
from tests.integration.test_api import freePort, makeCertificate

#: Examples per operation.
MAX_EXAMPLES = int(os.environ.get("SALTTWIST_SCHEMATHESIS_EXAMPLES", "50"))
#: Hypothesis's seed.
SEED = int(os.environ.get("SALTTWIST_SCHEMATHESIS_SEED", "24"))
#: What schemathesis checks of each answer (SALTTWIST_SCHEMATHESIS_CHECKS,
#: comma-separated, replaces them: e.g. "all" for a hunt).
CHECKS = tuple(filter(None, os.environ.get("SALTTWIST_SCHEMATHESIS_CHECKS", "").split(","))) or (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "missing_required_header",
    "unsupported_method",
    "ignored_auth",
)
#: The user the run logs in as: a few quick functions on the minions (not
#: test.sleep), the job cache, the wheel's key listings (not key.gen_accept,
#: whose keysize may be 8192 bits: seconds of RSA per example) and the jobs
#: runner.
PERMS = [
    "test.ping",
    "test.echo",
    "test.arg",
    "test.version",
    "grains.items",
    "@jobs",
    {"@wheel": ["key.list_all", "key.finger", "key.list"]},
    {"@runner": ["jobs.*"]},
]


class ApiSchemaTests(TestCase):
    """
    schemathesis against a running salttwist-api.
    """

    timeout = 600

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        os.makedirs(self.cluster.masterDir, exist_ok=True)
        self.crt, key, crtPem = makeCertificate(self.cluster.masterDir)
        htpasswd = os.path.join(self.cluster.masterDir, "htpasswd")
        with open(htpasswd, "w") as f:
            f.write(f"fuzz:{bcrypt.using(rounds=4).hash('fuzz-pw')}\n")
        self.port = freePort()
        self.cluster.writeMasterConfig(
            rest_cherrypy={
                "port": self.port,
                "host": "127.0.0.1",
                "ssl_crt": self.crt,
                "ssl_key": key,
                "collect_stats": True,
            },
            netapi_enable_clients=[
                "local",
                "local_async",
                "local_batch",
                "runner",
                "runner_async",
                "wheel",
            ],
            external_auth={"file": {"^filename": htpasswd, "^filetype": "htpasswd", "fuzz": PERMS}},
            timeout=2,
        )
        await self.cluster.startReady(("minion1",))
        self.api = self.cluster.spawn("api", ["salttwist-api", "-c", self.cluster.masterDir])
        policy = BrowserLikePolicyForHTTPS(trustRoot=Certificate.loadPEM(crtPem))
        self.http = treq.client.HTTPClient(Agent(reactor, contextFactory=policy))
        self.base = f"https://127.0.0.1:{self.port}"
        await waitFor(self.ready, "salttwist-api answering", context=self.cluster.logs)

    async def ready(self) -> bool:
        if not self.api.running:
            self.fail(f"salttwist-api exited\n{self.cluster.logs()}")
        try:
            response = await self.http.get(self.base + "/openapi.json")
            await response.content()
        except Exception:
            return False
        return response.code == 200

    async def login(self) -> str:
        response = await self.http.post(
            self.base + "/login",
            json.dumps({"username": "fuzz", "password": "fuzz-pw", "eauth": "file"}).encode(),
            headers={"Content-Type": ["application/json"]},
        )
        data = json.loads(await response.content())
        self.assertEqual(response.code, 200, data)
        return data["return"][0]["token"]

    async def test_schemathesis(self) -> None:
        """
        schemathesis finds no answer that breaks the document: no 5xx, no
        undocumented status, no body or header off the schema.
        """
        token = await self.login()
        report = os.path.abspath(self.mktemp())
        os.makedirs(report)
        argv = [
            "-m",
            "schemathesis.cli",
            "run",
            f"{self.base}/openapi.json",
            "--url",
            self.base,
            "--checks",
            ",".join(CHECKS),
            "--header",
            f"X-Auth-Token: {token}",
            "--tls-verify",
            self.crt,
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            "--phases",
            "examples,coverage,fuzzing,stateful",
            # One worker: Python 3.11's ast.parse, which hypothesis calls to
            # describe strategies, is not safe in threads (SystemError: AST
            # constructor recursion depth mismatch).
            "--workers",
            "1",
            "--request-timeout",
            "30",
            "--exclude-path",
            "/events",
            "--exclude-operation-id",
            "logout",
            "--suppress-health-check",
            "all",
            "--report",
            "junit,vcr",
            "--report-dir",
            report,
            "--no-color",
        ]
        env = {
            key: value for key, value in os.environ.items() if not key.startswith("SCHEMATHESIS")
        }
        started = time.monotonic()
        out, err, code = await getProcessOutputAndValue(
            sys.executable, argv, env=env, path=report, reactor=reactor
        )
        elapsed = time.monotonic() - started
        output = (out + err).decode("utf-8", "replace")
        print(
            f"\nschemathesis: {MAX_EXAMPLES} examples per operation, seed {SEED}:"
            f" {elapsed:.0f} s, report in {report}\n{output[-3000:]}"
        )
        self.assertTrue(self.api.running, self.cluster.logs())
        self.assertEqual(code, 0, f"{output}\n{self.cluster.logs()}")
