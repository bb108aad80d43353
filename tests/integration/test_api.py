# -*- test-case-name: tests.integration.test_api -*-
"""
Integration test of C{salttwist-api}: a real master, two minions and the
API (the installed wheel's commands) on 127.0.0.1, over HTTPS with a
self-signed certificate made here, a file eauth user (an htpasswd file
made here); the test does what a script written for salt-api does.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import socket
import sys
import time
from typing import Any

import treq
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from passlib.hash import bcrypt
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import Protocol
from twisted.internet.ssl import Certificate
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, BrowserLikePolicyForHTTPS, HTTPConnectionPool

from tests.integration.harness import Cluster, waitFor

MINIONS = ("minion1", "minion2")


def makeCertificate(directory: str) -> tuple[str, str, bytes]:
    """
    Write a self-signed certificate for 127.0.0.1 and its key.

    @return: their paths, and the certificate's PEM.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    crtPem = cert.public_bytes(serialization.Encoding.PEM)
    crtPath = os.path.join(directory, "api.crt")
    keyPath = os.path.join(directory, "api.key")
    with open(crtPath, "wb") as f:
        f.write(crtPem)
    with open(os.open(keyPath, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return crtPath, keyPath, crtPem


def freePort() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiTests(TestCase):
    """
    A salt-api script against salttwist-api.
    """

    timeout = 180

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        os.makedirs(self.cluster.masterDir, exist_ok=True)
        crt, key, crtPem = makeCertificate(self.cluster.masterDir)
        self.crtPath = crt
        htpasswd = os.path.join(self.cluster.masterDir, "htpasswd")
        with open(htpasswd, "w") as f:
            f.write(f"saltdev:{bcrypt.using(rounds=4).hash('saltdev-pw')}\n")
            f.write(f"oneop:{bcrypt.using(rounds=4).hash('oneop-pw')}\n")
        self.port = freePort()
        self.cluster.writeMasterConfig(
            rest_cherrypy={
                "port": self.port,
                "host": "127.0.0.1",
                "ssl_crt": crt,
                "ssl_key": key,
            },
            netapi_enable_clients=[
                "local",
                "local_async",
                "local_batch",
                "local_subset",
                "runner",
                "runner_async",
                "wheel",
                "wheel_async",
            ],
            external_auth={
                "file": {
                    "^filename": htpasswd,
                    "^filetype": "htpasswd",
                    "saltdev": ["test.*", "grains.items", "@jobs", {"@wheel": ["key.list_all"]}],
                    "oneop": [{"minion1": ["test.*"]}],
                }
            },
        )
        await self.cluster.startReady(MINIONS)
        self.api = self.cluster.spawn("api", ["salttwist-api", "-c", self.cluster.masterDir])
        policy = BrowserLikePolicyForHTTPS(trustRoot=Certificate.loadPEM(crtPem))
        pool = HTTPConnectionPool(reactor, persistent=True)
        pool.maxPersistentPerHost = 10
        self.addCleanup(pool.closeCachedConnections)
        self.http = treq.client.HTTPClient(Agent(reactor, contextFactory=policy, pool=pool))
        self.base = f"https://127.0.0.1:{self.port}"
        await waitFor(self.ready, "salttwist-api answering", context=self.cluster.logs)

    async def ready(self) -> bool:
        if not self.api.running:
            self.fail(f"salttwist-api exited\n{self.cluster.logs()}")
        try:
            response = await self.http.get(self.base + "/")
            await response.content()
        except Exception:
            return False
        return response.code == 200

    async def call(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Accept": ["application/json"]}
        if token:
            headers["X-Auth-Token"] = [token]
        if body is not None:
            headers["Content-Type"] = ["application/json"]
        response = await self.http.request(
            method,
            self.base + path,
            headers=headers,
            data=json.dumps(body).encode() if body is not None else None,
        )
        content = await response.content()
        return response.code, json.loads(content)

    async def test_saltApiScript(self) -> None:
        """
        Log in, run test.ping, publish asynchronously and read the job
        back, list jobs (also as an asynchronous runner) and keys, be
        refused a function not granted, log out and be refused the token.
        """
        explain = self.cluster.logs
        status, data = await self.call(
            "POST", "/login", {"username": "saltdev", "password": "saltdev-pw", "eauth": "file"}
        )
        self.assertEqual(status, 200, explain())
        token = data["return"][0]["token"]
        self.assertEqual(data["return"][0]["user"], "saltdev")

        status, data = await self.call(
            "POST", "/", [{"client": "local", "tgt": "*", "fun": "test.ping"}], token
        )
        self.assertEqual((status, data), (200, {"return": [{"minion1": True, "minion2": True}]}))

        status, data = await self.call(
            "POST",
            "/",
            [{"client": "local_batch", "tgt": "*", "fun": "test.ping", "batch": 1}],
            token,
        )
        self.assertEqual(status, 200, explain())
        self.assertEqual(
            sorted(data["return"], key=lambda r: list(r)),
            [{"minion1": True}, {"minion2": True}],
        )

        status, data = await self.call(
            "POST",
            "/",
            [{"client": "local_async", "tgt": "minion1", "fun": "test.echo", "arg": ["hi"]}],
            token,
        )
        self.assertEqual(status, 200, explain())
        jid = data["return"][0]["jid"]
        self.assertEqual(data["return"][0]["minions"], ["minion1"])

        async def returned() -> Any:
            status, data = await self.call("GET", f"/jobs/{jid}", token=token)
            self.assertEqual(status, 200, explain())
            return data if data["return"][0] else None

        job = await waitFor(returned, "the job's return", context=explain)
        self.assertEqual(job["return"], [{"minion1": "hi"}])
        self.assertEqual(job["info"][0]["Function"], "test.echo")
        self.assertEqual(job["info"][0]["User"], "saltdev")

        status, data = await self.call(
            "POST", "/", [{"client": "runner", "fun": "jobs.list_jobs"}], token
        )
        self.assertEqual(status, 200, explain())
        self.assertIn(jid, data["return"][0])

        status, data = await self.call(
            "POST", "/", [{"client": "runner_async", "fun": "jobs.list_jobs"}], token
        )
        self.assertEqual(status, 200, explain())
        started = data["return"][0]
        self.assertEqual(started["tag"], f"salt/run/{started['jid']}")
        self.assertEqual(len(started["jid"]), 20)

        status, data = await self.call(
            "POST", "/", [{"client": "wheel", "fun": "key.list_all"}], token
        )
        self.assertEqual(status, 200, explain())
        self.assertEqual(data["return"][0]["data"]["return"]["minions"], list(MINIONS))
        status, data = await self.call("GET", "/keys", token=token)
        self.assertEqual(data["return"]["minions"], list(MINIONS))

        status, data = await self.call(
            "POST", "/", [{"client": "local", "tgt": "*", "fun": "cmd.run", "arg": ["id"]}], token
        )
        self.assertEqual(status, 403, data)
        self.assertIn("cmd.run", data["return"])
        status, data = await self.call(
            "POST", "/", [{"client": "wheel", "fun": "key.delete", "match": "minion1"}], token
        )
        self.assertEqual(status, 403, data)

        status, data = await self.call("GET", "/minions", token=token)
        self.assertEqual(status, 200, explain())
        grains = data["return"][0]
        self.assertEqual(sorted(grains), list(MINIONS))
        self.assertEqual(grains["minion2"]["id"], "minion2")

        status, data = await self.call("POST", "/logout", token=token)
        self.assertEqual(status, 200)
        status, data = await self.call("GET", "/jobs", token=token)
        self.assertEqual(status, 401)

    async def test_subsetAndWheelAsync(self) -> None:
        """
        Through the real master: C{local_subset} runs on as many minions as
        C{subset} says (found by their C{sys.list_functions}), and
        C{wheel_async} answers C{{"tag", "jid"}} at once while its C{ret}
        event, with the return, reaches C{/events}.
        """
        explain = self.cluster.logs
        status, data = await self.call(
            "POST", "/login", {"username": "saltdev", "password": "saltdev-pw", "eauth": "file"}
        )
        self.assertEqual(status, 200, explain())
        token = data["return"][0]["token"]
        status, data = await self.call(
            "POST",
            "/",
            [{"client": "local_subset", "tgt": "*", "fun": "test.ping", "subset": 1}],
            token,
        )
        self.assertEqual(status, 200, explain())
        (picked,) = data["return"]
        self.assertEqual(len(picked), 1, data)
        self.assertIn(next(iter(picked)), MINIONS)
        self.assertEqual(list(picked.values()), [True])

        received: list[bytes] = []

        class Collect(Protocol):
            def dataReceived(self, data: bytes) -> None:
                received.append(data)

        response = await self.http.get(self.base + "/events", headers={"X-Auth-Token": [token]})
        self.assertEqual(response.code, 200, explain())
        collect = Collect()
        response.deliverBody(collect)
        try:
            status, data = await self.call(
                "POST", "/", [{"client": "wheel_async", "fun": "key.list_all"}], token
            )
            self.assertEqual(status, 200, explain())
            started = data["return"][0]
            self.assertEqual(
                started, {"tag": f"salt/wheel/{started['jid']}", "jid": started["jid"]}
            )
            tag = f"tag: salt/wheel/{started['jid']}/ret\n"

            async def arrived() -> bool:
                return tag in b"".join(received).decode()

            await waitFor(arrived, "the wheel_async ret event", context=explain)
            text = b"".join(received).decode()
            line = text[text.index(tag) + len(tag) :].split("\n", 1)[0]
            event = json.loads(line.removeprefix("data: "))["data"]
            self.assertTrue(event["success"])
            self.assertEqual(event["return"]["minions"], list(MINIONS))
        finally:
            collect.transport.stopProducing()

    async def pepper(self, *args: str) -> tuple[int, str]:
        """
        Run pepper (Salt's command-line client of salt-api) against the API
        as user saltdev, trusting the test's certificate.

        @return: its exit code and output.
        """
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": self.cluster.baseDir,
            "SSL_CERT_FILE": self.crtPath,
            "SALTAPI_URL": self.base,
            "SALTAPI_USER": "saltdev",
            "SALTAPI_PASS": "saltdev-pw",
            "SALTAPI_EAUTH": "file",
        }
        pepper = os.path.join(os.path.dirname(sys.executable), "pepper")
        out, err, code = await getProcessOutputAndValue(pepper, args, env=env)
        return code, (out + err).decode("utf-8", "replace")

    async def test_pepper(self) -> None:
        """
        pepper works unchanged: local, local_async, runner, wheel, the /run
        URL with a token from /token, and a refusal.
        """
        code, out = await self.pepper("*", "test.echo", "hi")
        self.assertEqual(code, 0, out)
        returns = json.loads(out)["return"][0]
        self.assertEqual({m: r["ret"] for m, r in returns.items()}, {m: "hi" for m in MINIONS})
        code, out = await self.pepper("--client=local_async", "minion1", "test.ping")
        self.assertEqual((code, json.loads(out)["return"][0]["minions"]), (0, ["minion1"]), out)
        code, out = await self.pepper("--client=runner", "jobs.list_jobs")
        self.assertEqual(code, 0, out)
        self.assertEqual(
            {job["Function"] for job in json.loads(out)["return"][0].values()},
            {"test.echo", "test.ping"},
        )
        code, out = await self.pepper("--client=wheel", "key.list_all")
        self.assertEqual(code, 0, out)
        self.assertEqual(json.loads(out)["return"][0]["data"]["return"]["minions"], list(MINIONS))
        code, out = await self.pepper("-r", "minion2", "test.kwarg", "one=1")
        self.assertEqual(code, 0, out)
        self.assertEqual(json.loads(out)["return"][0]["minion2"]["ret"], {"one": 1})
        code, out = await self.pepper("*", "cmd.run", "id")
        self.assertNotEqual(code, 0)
        self.assertIn("403", out)

    async def test_targetRestricted(self) -> None:
        """
        A user allowed test.* on minion1 only: a job for every minion is
        refused (403, naming minion2), one for minion1 runs there only.
        """
        status, data = await self.call(
            "POST", "/login", {"username": "oneop", "password": "oneop-pw", "eauth": "file"}
        )
        self.assertEqual(status, 200, self.cluster.logs())
        token = data["return"][0]["token"]
        status, data = await self.call(
            "POST", "/", [{"client": "local", "tgt": "*", "fun": "test.ping"}], token
        )
        self.assertEqual(status, 403, data)
        self.assertIn("minion2", data["return"])
        status, data = await self.call(
            "POST",
            "/",
            [{"client": "local", "tgt": "minion*", "fun": "test.echo", "arg": ["x"]}],
            token,
        )
        self.assertEqual(status, 403, data)
        status, data = await self.call(
            "POST",
            "/",
            [{"client": "local", "tgt": "minion1", "fun": "test.echo", "arg": ["x"]}],
            token,
        )
        self.assertEqual((status, data), (200, {"return": [{"minion1": "x"}]}))

    async def test_masterRestart(self) -> None:
        """
        While the master is down, calls that need it get 503 (the token
        still works: the API keeps it); once it is back, they work again.
        """
        status, data = await self.call(
            "POST", "/login", {"username": "saltdev", "password": "saltdev-pw", "eauth": "file"}
        )
        token = data["return"][0]["token"]
        chunk = [{"client": "runner", "fun": "jobs.list_jobs"}]
        self.assertEqual((await self.call("POST", "/", chunk, token))[0], 200)
        await self.cluster.stopMaster()
        status, data = await self.call("POST", "/", chunk, token)
        self.assertEqual(status, 503, data)
        self.assertIn("Salt Master is not available", data["return"])
        await self.cluster.startMaster()
        status, data = await self.call("POST", "/", chunk, token)
        self.assertEqual(status, 200, self.cluster.logs())

    async def test_throughput(self) -> None:
        """
        Print the latency and rate of C{POST /} local C{test.ping} to both
        minions at 10 concurrent clients (figures, not assertions on time):
        200 requests over HTTPS, each client keeping its connection.
        """
        status, data = await self.call(
            "POST", "/login", {"username": "saltdev", "password": "saltdev-pw", "eauth": "file"}
        )
        token = data["return"][0]["token"]
        chunk = [{"client": "local", "tgt": "*", "fun": "test.ping"}]
        latencies: list[float] = []
        answers: list[Any] = []

        async def client(count: int) -> None:
            for _ in range(count):
                started = time.perf_counter()
                status, data = await self.call("POST", "/", chunk, token)
                latencies.append(time.perf_counter() - started)
                answers.append((status, data))

        started = time.perf_counter()
        await gatherResults([Deferred.fromCoroutine(client(20)) for _ in range(10)])
        elapsed = time.perf_counter() - started
        self.assertEqual(answers, [(200, {"return": [{"minion1": True, "minion2": True}]})] * 200)
        latencies.sort()
        print(
            f"\nsalttwist-api POST / local test.ping, 2 minions, 10 clients, 200 requests:"
            f" {200 / elapsed:.1f} requests/s, latency median"
            f" {latencies[100] * 1000:.1f} ms, p95 {latencies[190] * 1000:.1f} ms,"
            f" max {latencies[-1] * 1000:.1f} ms"
        )
