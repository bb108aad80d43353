"""
The load of C{api.py}: C{--clients} threads in this one process, each
logging in once to a salt-api (Salt's C{rest_cherrypy} or
C{salttwist-api}) over HTTPS, keeping its connection, then sending
C{POST /} with C{[{"client": "local", "tgt": "*", "fun": "test.ping"}]}
(and C{"timeout": --job-timeout} when given) again and again until
C{--requests} were sent by all together or C{--max-seconds} have passed.

Each client logs in and sends C{--warmup} untimed requests (all clients
at once), then the
process prints C{ready} and waits for a line on its standard input (the
driver reads the daemons' CPU meanwhile); the timed part starts then, and
ends with one line of JSON: every latency, the wall seconds, the failed
requests (not HTTP 200, or not every one of C{--expect} minions
returning C{True}) and the first few failures' text.

Standard library only (C{http.client}, C{ssl}, threads): any Python 3.9
or later runs it; the certificate given by C{--cafile} is the only one
trusted, and its name (C{127.0.0.1}) is checked.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
import threading
import time
from typing import Any


def lowstate(timeout: float | None) -> list[dict[str, Any]]:
    """
    @return: the lowstate every request sends: C{local} C{test.ping} to
        every minion, with the job's C{timeout} when given.
    """
    chunk: dict[str, Any] = {"client": "local", "tgt": "*", "fun": "test.ping"}
    if timeout is not None:
        chunk["timeout"] = timeout
    return [chunk]


class Client:
    """
    One client: its connection to the API and its token.
    """

    def __init__(self, host: str, port: int, context: ssl.SSLContext, timeout: float) -> None:
        self.host = host
        self.port = port
        self.context = context
        self.timeout = timeout
        self.token = ""
        self.connection: http.client.HTTPSConnection | None = None

    def request(self, path: str, body: Any) -> tuple[int, Any]:
        """
        Send one JSON C{POST}, reconnecting once if the kept connection
        was closed.

        @return: the status and the decoded JSON body (or its text).
        """
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["X-Auth-Token"] = self.token
        for attempt in (0, 1):
            if self.connection is None:
                self.connection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self.context
                )
            try:
                self.connection.request("POST", path, data, headers)
                answer = self.connection.getresponse()
                text = answer.read()
            except (OSError, http.client.HTTPException):
                self.connection.close()
                self.connection = None
                if attempt:
                    raise
                continue
            if answer.getheader("Connection", "").lower() == "close":
                self.connection.close()
                self.connection = None
            try:
                return answer.status, json.loads(text)
            except ValueError:
                return answer.status, text.decode("utf-8", "replace")[:500]
        raise AssertionError("unreachable")

    def login(self, username: str, password: str, eauth: str) -> None:
        """
        Log in and keep the token.
        """
        status, body = self.request(
            "/login", {"username": username, "password": password, "eauth": eauth}
        )
        if status != 200:
            raise RuntimeError(f"login: HTTP {status}: {str(body)[:300]}")
        self.token = body["return"][0]["token"]


def returnedTrue(status: int, body: Any) -> int:
    """
    @return: how many minions returned C{True} in a 200 answer C{body}.
    """
    try:
        returns = body["return"][0] if status == 200 else {}
        return sum(1 for value in returns.values() if value is True)
    except (KeyError, IndexError, TypeError, AttributeError):
        return 0


def judge(status: int, body: Any, expect: int) -> str | None:
    """
    @return: L{None} if C{body} is a 200 answer in which C{expect} minions
        returned C{True}, else what was wrong.
    """
    if status != 200:
        return f"HTTP {status}: {str(body)[:300]}"
    try:
        returns = body["return"][0]
        returned = sum(1 for value in returns.values() if value is True)
    except (KeyError, IndexError, TypeError, AttributeError):
        return f"unexpected body: {str(body)[:300]}"
    if returned != expect:
        return f"{returned} of {expect} minions returned True: {str(returns)[:300]}"
    return None


class Load:
    """
    The shared count of requests and what the clients measured.
    """

    def __init__(self, total: int, maxSeconds: float) -> None:
        self.total = total
        self.maxSeconds = maxSeconds
        self.lock = threading.Lock()
        self.sent = 0
        self.latencies: list[float] = []
        self.failures = 0
        self.failureTexts: list[str] = []
        self.returned = 0
        self.deadline = 0.0

    def take(self) -> bool:
        """
        @return: whether one more request may be sent.
        """
        with self.lock:
            if self.sent >= self.total or time.monotonic() >= self.deadline:
                return False
            self.sent += 1
            return True

    def record(self, latency: float, problem: str | None, returned: int = 0) -> None:
        """
        Note one request's latency, or its failure, and how many minions
        returned C{True} in it.
        """
        with self.lock:
            self.returned += returned
            if problem is None:
                self.latencies.append(latency)
            else:
                self.failures += 1
                if len(self.failureTexts) < 5:
                    self.failureTexts.append(problem)


def runClient(
    client: Client, load: Load, expect: int, go: threading.Event, chunks: list[dict[str, Any]]
) -> None:
    """
    A client's timed loop: wait for C{go}, then send until L{Load.take}
    says no.
    """
    go.wait()
    while load.take():
        started = time.perf_counter()
        returned = 0
        try:
            status, body = client.request("/", chunks)
            problem = judge(status, body, expect)
            returned = returnedTrue(status, body)
        except Exception as e:
            problem = f"{type(e).__name__}: {e}"
        load.record(time.perf_counter() - started, problem, returned)


def main(argv: list[str] | None = None) -> int:
    """
    Log in, warm up, print C{ready}, wait for a line, run, print the JSON.
    """
    p = argparse.ArgumentParser(description="POST / local test.ping from N clients at once.")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cafile", required=True)
    p.add_argument("--username", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--eauth", default="file")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--requests", type=int, default=1000, help="all clients together")
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--expect", type=int, required=True, help="minions that must return True")
    p.add_argument("--warmup", type=int, default=1, help="untimed requests per client")
    p.add_argument("--job-timeout", type=float, default=None, help="the chunk's timeout")
    p.add_argument("--timeout", type=float, default=None, help="socket timeout")
    options = p.parse_args(argv)
    chunks = lowstate(options.job_timeout)
    if options.timeout is None:
        options.timeout = (options.job_timeout or 30.0) + 120.0
    context = ssl.create_default_context(cafile=options.cafile)
    clients = [
        Client("127.0.0.1", options.port, context, options.timeout) for _ in range(options.clients)
    ]
    warmupProblems: list[str] = []

    def warmUp(client: Client) -> None:
        try:
            client.login(options.username, options.password, options.eauth)
            for _ in range(options.warmup):
                problem = judge(*client.request("/", chunks), options.expect)
                if problem is not None:
                    warmupProblems.append(problem)
        except Exception as e:
            warmupProblems.append(f"{type(e).__name__}: {e}")

    warming = [threading.Thread(target=warmUp, args=(client,)) for client in clients]
    for thread in warming:
        thread.start()
    for thread in warming:
        thread.join()
    if any(not client.token for client in clients):
        sys.stderr.write(f"login failed: {warmupProblems[:3]}\n")
        return 1
    print("ready", flush=True)
    sys.stdin.readline()
    load = Load(options.requests, options.max_seconds)
    go = threading.Event()
    threads = [
        threading.Thread(target=runClient, args=(client, load, options.expect, go, chunks))
        for client in clients
    ]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    load.deadline = time.monotonic() + options.max_seconds
    go.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    print(
        json.dumps(
            {
                "elapsed_s": elapsed,
                "sent": load.sent,
                "latencies_s": load.latencies,
                "failures": load.failures,
                "returned_true": load.returned,
                "failure_texts": load.failureTexts,
                "warmup_failures": warmupProblems[:5],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
