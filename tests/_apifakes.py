"""
What the API's unit tests share: a fake master (L{FakeMaster}, an
L{IMasterGateway} answering from memory) and L{makeApi}, an API tree over
it with a real authenticator (an htpasswd file, bcrypt with few rounds,
tokens in memory, blocking calls run at once) and a L{Clock}, driven
in memory with L{treq.testing.StubTreq}.
"""

from __future__ import annotations

import json
from typing import Any

from passlib.hash import bcrypt
from treq.testing import StubTreq
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from zope.interface import implementer
from zope.interface.verify import verifyClass

from salttwist.api.app import makeRoot
from salttwist.api.context import ApiContext
from salttwist.api.interfaces import IMasterGateway
from salttwist.api.options import CLIENTS, ApiOptions
from salttwist.api.wheel import KeyWheel
from salttwist.blocking import runSynchronously
from salttwist.eauth.authenticator import Authenticator
from salttwist.eauth.backends import makeBackends
from salttwist.eauth.config import ExternalAuth, checkExternalAuthConfig
from salttwist.eauth.tokens import MemoryTokenStore
from salttwist.pki.keystore import InMemoryKeyStore
from salttwist.targeting import checkMinions

START = 1_700_000_000.0


@implementer(IMasterGateway)
class FakeMaster:
    """
    A master with minions C{grains} (id -> grains, all accepted and up)
    that answers C{test.ping} with L{True} and any other function with
    C{"<fun> ran"}; it records every call in C{calls}.
    """

    def __init__(self, grains: dict[str, dict[str, Any]], keyWheel: KeyWheel) -> None:
        self.grainsById = grains
        self.keyWheel = keyWheel
        self.calls: list[tuple[Any, ...]] = []
        #: The user of each job or run, in order.
        self.users: list[str | None] = []
        self.jid = 20240101000000000000
        self.error: Exception | None = None
        #: The events fired on the bus, as C{(tag, data)}.
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _targeted(self, tgt: Any, tgtType: str) -> list[str]:
        return checkMinions(sorted(self.grainsById), tgt, tgtType, grainsById=self.grainsById)

    def _answer(self, fun: Any, minion: str = "") -> Any:
        if fun == "sys.list_functions":
            # db1 lacks grains.items (for local_subset).
            functions = ["sys.list_functions", "test.ping", "grains.items"]
            return functions[:2] if minion == "db1" else functions
        return True if fun == "test.ping" else f"{fun} ran"

    def run(
        self,
        tgt: Any,
        tgtType: str,
        fun: Any,
        arg: list[Any],
        timeout: float,
        full: bool,
        user: str,
    ) -> Deferred[Any]:
        self.calls.append(("run", tgt, tgtType, fun, arg))
        self.users.append(user)
        if self.error is not None:
            return fail(self.error)
        return succeed({m: self._answer(fun, m) for m in self._targeted(tgt, tgtType)})

    def publish(self, tgt: Any, tgtType: str, fun: Any, arg: list[Any], user: str) -> Deferred[Any]:
        self.calls.append(("publish", tgt, tgtType, fun, arg))
        self.users.append(user)
        self.jid += 1
        return succeed({"jid": str(self.jid), "minions": self._targeted(tgt, tgtType)})

    def batch(
        self,
        tgt: Any,
        tgtType: str,
        fun: Any,
        arg: list[Any],
        batch: str,
        timeout: float,
        user: str,
    ) -> Deferred[Any]:
        self.calls.append(("batch", tgt, tgtType, fun, arg, batch))
        self.users.append(user)
        return succeed([{m: self._answer(fun)} for m in self._targeted(tgt, tgtType)])

    def runner(self, fun: str, arg: list[Any], user: str | None = None) -> Deferred[Any]:
        self.calls.append(("runner", fun, arg))
        self.users.append(user)
        if fun == "jobs.list_job":
            ret: Any = {
                "jid": arg[0],
                "Function": "test.ping",
                "Result": {m: {"return": True, "retcode": 0} for m in self.grainsById},
            }
        elif fun == "jobs.list_jobs":
            ret = {"20240101000000000001": {"Function": "test.ping"}}
        else:
            ret = f"{fun} ran"
        return succeed({"jid": "20240101000000000099", "return": ret})

    def runnerAsync(self, fun: str, arg: list[Any], user: str) -> Deferred[Any]:
        self.calls.append(("runnerAsync", fun, arg))
        self.users.append(user)
        return succeed({"tag": "salt/run/20240101000000000098", "jid": "20240101000000000098"})

    def wheel(self, fun: str, kwargs: dict[str, Any]) -> Deferred[Any]:
        self.calls.append(("wheel", fun, kwargs))
        return runSynchronously(self.keyWheel.call, fun, kwargs)

    def fire(self, tag: str, data: dict[str, Any]) -> Deferred[bool]:
        self.events.append((tag, data))
        return succeed(True)

    def grains(self, tgt: Any, tgtType: str) -> Deferred[Any]:
        self.calls.append(("grains", tgt, tgtType))
        return succeed({m: self.grainsById[m] for m in self._targeted(tgt, tgtType)})


verifyClass(IMasterGateway, FakeMaster)

GRAINS = {
    "web1": {"os": "Debian", "id": "web1"},
    "web2": {"os": "Debian", "id": "web2"},
    "db1": {"os": "RedHat", "id": "db1"},
}

#: The users: their passwords and external_auth entries.
USERS = {
    "admin": ("admin-pw", [".*", "@runner", "@wheel", "@jobs"]),
    "webop": ("webop-pw", [{"web*": ["test.*", "grains.items"]}, "@jobs"]),
    "debop": ("debop-pw", [{"G@os:Debian": ["test.ping"]}]),
    "pinger": ("pinger-pw", ["test.ping"]),
}


class Api:
    """
    An API tree over a L{FakeMaster}, and a client for it.
    """

    def __init__(self, tmpdir: str, block: dict[str, Any] | None = None, **config: Any) -> None:
        self.htpasswd = f"{tmpdir}.htpasswd"
        with open(self.htpasswd, "w") as f:
            for user, (password, _) in USERS.items():
                f.write(f"{user}:{bcrypt.using(rounds=4).hash(password)}\n")
        entries: dict[str, Any] = {"^filename": self.htpasswd, "^filetype": "htpasswd"}
        entries.update({user: perms for user, (_, perms) in USERS.items()})
        self.config: dict[str, Any] = {
            "external_auth": checkExternalAuthConfig({"file": entries}),
            "token_expire": 3600,
            "timeout": 5,
            "rest_cherrypy": dict(block or {"port": 8000, "disable_ssl": True}),
            **config,
        }
        self.clock = Clock()
        self.clock.advance(START)
        self.store = MemoryTokenStore(self.clock)
        self.authenticator = Authenticator.fromConfig(
            self.config,
            makeBackends(ExternalAuth.fromConfig(self.config)),
            self.store,
            self.clock,
            runSynchronously,
        )
        self.keyStore = InMemoryKeyStore()
        self.keyEvents: list[tuple[str, str]] = []
        self.master = FakeMaster(
            dict(GRAINS), KeyWheel(self.keyStore, lambda act, m: self.keyEvents.append((act, m)))
        )
        self.context = ApiContext(
            config=self.config,
            options=ApiOptions.fromConfig(self.config),
            clock=self.clock,
            authenticator=lambda: succeed(self.authenticator),
            master=self.master,
            enabledClients=CLIENTS,
        )
        self.root = makeRoot(self.context)
        self.treq = StubTreq(self.root)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        contentType: str = "application/json",
    ) -> tuple[int, dict[str, list[str]], bytes]:
        """
        Make one request and flush it.

        @return: the status, the headers (lower-case names) and the body.
        """
        allHeaders = {"Accept": "application/json", **(headers or {})}
        if token is not None:
            allHeaders["X-Auth-Token"] = token
        data = raw
        if data is None and body is not None:
            data = json.dumps(body).encode("utf-8")
        if data is not None:
            allHeaders.setdefault("Content-Type", contentType)
        d = self.treq.request(method, f"http://api.example{path}", headers=allHeaders, data=data)
        self.treq.flush()
        response = self.successResult(d)
        content = self.treq.content(response)
        self.treq.flush()
        body_ = self.successResult(content)
        headers_ = {
            k.decode("latin-1").lower(): [v.decode("latin-1") for v in vs]
            for k, vs in response.headers.getAllRawHeaders()
        }
        return response.code, headers_, body_

    @staticmethod
    def successResult(d: Deferred[Any]) -> Any:
        results: list[Any] = []
        d.addBoth(results.append)
        if not results:
            raise AssertionError("the request did not finish")
        from twisted.python.failure import Failure

        if isinstance(results[0], Failure):
            results[0].raiseException()
        return results[0]

    def json(
        self, method: str, path: str, body: Any = None, token: str | None = None, **kw: Any
    ) -> tuple[int, Any]:
        status, _, content = self.request(method, path, body, token, **kw)
        return status, json.loads(content)

    def login(self, user: str) -> str:
        status, data = self.json(
            "POST", "/login", {"username": user, "password": USERS[user][0], "eauth": "file"}
        )
        assert status == 200, (status, data)
        return data["return"][0]["token"]
