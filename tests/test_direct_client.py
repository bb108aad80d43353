# -*- test-case-name: tests.test_direct_client -*-
"""
Tests for L{salttwist.client.direct}: the blocking client the C{salttwist}
command uses without Twisted.

The master is a script on the far ends of two socket pairs (the event bus
and the req channel): it checks the client's login MAC with the real root
key, opens the real session cipher and answers requests. It runs inside the
client's wait hook, so everything happens on one thread, and time is a fake
clock that moves only when the client waits with nothing to read.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.client.base import CONNECT_TIMEOUT, JobResult, MasterUnavailable
from salttwist.client.direct import DirectClient, _readable, runToCompletion
from salttwist.config import loadMasterConfig
from salttwist.events import EVENT_PUB_SOCKET
from salttwist.master.keys import ROOT_KEY_FILE
from salttwist.transport.errors import RequestError
from salttwist.transport.frames import FrameReader, encodeFrame
from salttwist.transport.session import SessionCipher

JID = "20261122000000000001"
FIND_JID = "20261122000000000002"
OTHER_JID = "20261122000000000009"

Reply = dict[str, Any]


class ScriptedMaster:
    """
    The master's side of the two connections.

    @ivar onRequest: C{payload -> reply} for each session request; it may
        call L{fire} to send events.
    @ivar requests: the session requests received, in order.
    """

    def __init__(self, rootKey: bytes) -> None:
        self.rootKey = rootKey
        self.challenge = os.urandom(32)
        self.eventsPeer: socket.socket | None = None
        self.reqPeer: socket.socket | None = None
        self._eventsReader = FrameReader()
        self._reqReader = FrameReader()
        self.session: SessionCipher | None = None
        self.requests: list[Reply] = []
        self.onRequest: Callable[[Reply], Reply] = lambda payload: {"error": "no script"}
        self.subscription: Reply | None = None
        self.login: Reply | None = None
        self.loginReply: Reply | None = None
        self.greet = True
        self.answerRequests = True

    def connectUnix(self, path: str, timeout: float) -> socket.socket:
        self.unixPath = path
        client, self.eventsPeer = socket.socketpair()
        return client

    def connectTcp(self, host: str, port: int, timeout: float) -> socket.socket:
        self.tcpAddress = (host, port)
        client, self.reqPeer = socket.socketpair()
        if self.greet:
            self.reqPeer.sendall(encodeFrame({"cmd": "hello", "challenge": self.challenge}))
        return client

    def fire(self, tag: str, data: dict[str, Any]) -> None:
        """
        Send one event to the subscriber.
        """
        assert self.eventsPeer is not None
        self.eventsPeer.sendall(encodeFrame({"tag": tag, "data": data}))

    def fireReturn(self, jid: str, minionId: str, ret: Any = True, retcode: int = 0) -> None:
        self.fire(
            f"salt/job/{jid}/ret/{minionId}",
            {"id": minionId, "jid": jid, "return": ret, "retcode": retcode, "success": True},
        )

    def sendRaw(self, data: bytes) -> None:
        assert self.reqPeer is not None
        self.reqPeer.sendall(data)

    def step(self) -> None:
        """
        Read what the client sent and answer it.
        """
        if self.eventsPeer is not None:
            for frame in self._eventsReader.feed(_drain(self.eventsPeer)):
                self.subscription = frame
                self.eventsPeer.sendall(encodeFrame({"subscribed": True}))
        if self.reqPeer is not None:
            for frame in self._reqReader.feed(_drain(self.reqPeer)):
                self._reqFrame(frame)

    def _reqFrame(self, frame: Reply) -> None:
        assert self.reqPeer is not None
        if self.session is None:
            self.login = frame
            expected = crypt.hmacSha256(
                self.rootKey,
                wire.clientAuthMessage(self.challenge, frame["nonce"], frame["user"]),
            )
            if self.loginReply is not None:
                self.reqPeer.sendall(encodeFrame(self.loginReply))
                return
            if frame.get("mac") != expected:
                self.reqPeer.sendall(encodeFrame({"ret": "error", "error": "bad mac"}))
                return
            self.session = SessionCipher(
                crypt.deriveKey(
                    self.rootKey, wire.clientSessionContext(self.challenge, frame["nonce"])
                ),
                isServer=True,
            )
            self.reqPeer.sendall(encodeFrame({"ret": "ok"}))
            return
        payload = self.session.open(frame)
        self.requests.append(payload)
        if not self.answerRequests:
            return
        reply = dict(self.onRequest(payload), rid=payload["rid"])
        self.reqPeer.sendall(encodeFrame(self.session.seal(reply)))


def _drain(sock: socket.socket) -> bytes:
    data = b""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    return data


class FakeTime:
    """
    The client's clock and wait: each wait first lets the master answer,
    then looks at the sockets without blocking; when nothing is readable
    the clock jumps to the end of the wait.
    """

    def __init__(self, master: ScriptedMaster) -> None:
        self.master = master
        self.now = 1000.0
        self.waits: list[float | None] = []

    def clock(self) -> float:
        return self.now

    def wait(self, socks: list[socket.socket], timeout: float | None) -> set[int]:
        self.waits.append(timeout)
        self.master.step()
        ready = _readable(socks, 0)
        if ready:
            return ready
        if timeout is None:
            raise AssertionError("the client would wait forever")
        self.now += timeout
        return set()


class DirectClientTestsMixin:
    """
    A config with a root key, a scripted master and a client wired to it.
    """

    def setUpClient(self: Any) -> None:
        root = self.mktemp()
        self.config = loadMasterConfig(
            root, overrides={"root_dir": root, "interface": "127.0.0.1", "ret_port": 4506}
        )
        os.makedirs(self.config["cachedir"], exist_ok=True)
        self.rootKey = os.urandom(32)
        crypt.writePrivateFile(
            os.path.join(self.config["cachedir"], ROOT_KEY_FILE), self.rootKey.hex().encode()
        )
        self.master = ScriptedMaster(self.rootKey)
        self.time = FakeTime(self.master)
        self.client = DirectClient(
            self.config,
            connectUnix=self.master.connectUnix,
            connectTcp=self.master.connectTcp,
            clock=self.time.clock,
            wait=self.time.wait,
        )
        self.addCleanup(self.client.close)

    def runJob(self: Any, *args: Any, **kwargs: Any) -> JobResult:
        return runToCompletion(self.client.run(*args, **kwargs))


class RunTests(DirectClientTestsMixin, SynchronousTestCase):
    """
    L{DirectClient.run} publishes a job and gathers its returns as
    L{salttwist.client.local.LocalClient.run} does.
    """

    def setUp(self) -> None:
        self.setUpClient()

    def test_allReturn(self) -> None:
        """
        The client subscribes to the job events, logs in with a MAC the
        master checks with the root key, publishes with Salt's fields and
        gathers every targeted minion's return, calling C{onPublished} and
        then C{onReturn} for each.
        """
        calls: list[Any] = []

        def onRequest(payload: Reply) -> Reply:
            self.master.fireReturn(JID, "a")
            self.master.fireReturn(JID, "b", ret=False, retcode=1)
            return {"jid": JID, "minions": ["a", "b"], "connected": ["a", "b"]}

        self.master.onRequest = onRequest
        result = self.runJob(
            "*",
            "test.ping",
            [1],
            timeout=5,
            onPublished=lambda jid, minions: calls.append(("published", jid, minions)),
            onReturn=lambda minionId, data: calls.append(("return", minionId, data["return"])),
        )
        self.assertEqual(self.master.subscription, {"subscribe": ["salt/job/"]})
        self.assertEqual(
            self.master.unixPath, os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET)
        )
        self.assertEqual(self.master.tcpAddress, ("127.0.0.1", 4506))
        self.assertEqual(self.master.login["cmd"], "_client_auth")
        [request] = self.master.requests
        self.assertEqual(
            {k: request[k] for k in ("cmd", "tgt", "tgt_type", "fun", "arg")},
            {"cmd": "publish", "tgt": "*", "tgt_type": "glob", "fun": "test.ping", "arg": [1]},
        )
        self.assertEqual(request["user"], self.master.login["user"])
        self.assertEqual(result.jid, JID)
        self.assertEqual(result.minions, ["a", "b"])
        self.assertEqual(sorted(result.returns), ["a", "b"])
        self.assertEqual((result.missing, result.notConnected), ([], []))
        self.assertEqual(calls[0], ("published", JID, ["a", "b"]))
        self.assertEqual(sorted(calls[1:]), [("return", "a", True), ("return", "b", False)])

    def test_portsFile(self) -> None:
        """
        The req port is the one the master wrote in its ports file.
        """
        os.makedirs(self.config["sock_dir"], exist_ok=True)
        with open(os.path.join(self.config["sock_dir"], "master.ports"), "w") as f:
            f.write('{"ret_port": 40001, "publish_port": 40000}')
        self.master.onRequest = lambda payload: {"jid": JID, "minions": []}
        self.runJob("*", "test.ping", [])
        self.assertEqual(self.master.tcpAddress, ("127.0.0.1", 40001))

    def test_returnsBeforeReply(self) -> None:
        """
        Returns that arrive before the publish reply names their jid are
        kept and gathered; returns of other jobs, of minions not targeted,
        and a second return of a minion are not.
        """

        def onRequest(payload: Reply) -> Reply:
            self.master.fireReturn(OTHER_JID, "a")
            self.master.fireReturn(JID, "a")
            self.master.fireReturn(JID, "a", ret="again")
            self.master.fireReturn(JID, "stranger")
            self.master.fire("salt/job/x/new", {"jid": "x"})
            self.master.fire("salt/job/broken", {})
            return {"jid": JID, "minions": ["a"], "connected": ["a"]}

        self.master.onRequest = onRequest
        # The reply is read in a later wait than the events.
        result = self.runJob("*", "test.ping", [], timeout=5)
        self.assertEqual(
            result.returns,
            {"a": {"id": "a", "jid": JID, "return": True, "retcode": 0, "success": True}},
        )
        self.assertEqual(result.missing, [])

    def test_noMatch(self) -> None:
        """
        When no minion matched, the result has no minions and nothing is
        waited for.
        """
        self.master.onRequest = lambda payload: {"jid": "", "minions": []}
        result = self.runJob("nope*", "test.ping", [])
        self.assertEqual((result.jid, result.minions), ("", []))
        self.assertEqual(self.time.now, 1000.0)

    def test_notConnectedNotWaitedFor(self) -> None:
        """
        Minions the master knew were not connected are reported as such,
        without waiting for them or asking them with find_job.
        """

        def onRequest(payload: Reply) -> Reply:
            self.master.fireReturn(JID, "a")
            return {"jid": JID, "minions": ["a", "gone"], "connected": ["a"]}

        self.master.onRequest = onRequest
        result = self.runJob("*", "test.ping", [], timeout=5)
        self.assertEqual(result.notConnected, ["gone"])
        self.assertEqual(result.missing, [])
        self.assertEqual(len(self.master.requests), 1)
        self.assertEqual(self.time.now, 1000.0)

    def test_findJob(self) -> None:
        """
        After C{timeout}, the silent minions are asked with
        C{saltutil.find_job}; the one still running the job is waited for
        another C{timeout} and its return is gathered; the one that is not
        running it is reported missing.
        """
        published: list[str] = []

        def onRequest(payload: Reply) -> Reply:
            published.append(payload["fun"])
            if payload["fun"] == "test.sleep":
                return {"jid": JID, "minions": ["busy", "idle"], "connected": ["busy", "idle"]}
            self.assertEqual(
                (payload["tgt"], payload["tgt_type"], payload["arg"]),
                (["busy", "idle"], "list", [JID]),
            )
            self.master.fireReturn(FIND_JID, "busy", ret={"jid": JID})
            self.master.fireReturn(FIND_JID, "idle", ret={})
            # The job's return comes after the find_job answers.
            self.master.fireReturn(JID, "busy", ret="slept")
            return {"jid": FIND_JID, "minions": ["busy", "idle"]}

        self.master.onRequest = onRequest
        result = self.runJob("*", "test.sleep", [], timeout=5, gatherJobTimeout=3)
        self.assertEqual(published, ["test.sleep", "saltutil.find_job"])
        self.assertEqual(result.returns["busy"]["return"], "slept")
        self.assertEqual(result.missing, ["idle"])
        self.assertEqual(self.time.now, 1005.0)

    def test_findJobNobodyRunning(self) -> None:
        """
        When no silent minion answers find_job within C{gatherJobTimeout},
        they are all missing and the wait ends.
        """

        def onRequest(payload: Reply) -> Reply:
            if payload["fun"] == "test.ping":
                return {"jid": JID, "minions": ["a"], "connected": ["a"]}
            return {"jid": FIND_JID, "minions": ["a"]}

        self.master.onRequest = onRequest
        result = self.runJob("*", "test.ping", [], timeout=5, gatherJobTimeout=3)
        self.assertEqual(result.missing, ["a"])
        self.assertEqual(self.time.now, 1008.0)

    def test_refused(self) -> None:
        """
        A publish the master answers with an error raises L{RequestError}
        carrying its message.
        """
        self.master.onRequest = lambda payload: {"error": "user may not run cmd.run"}
        e = self.assertRaises(RequestError, self.runJob, "*", "cmd.run", ["id"])
        self.assertEqual(str(e), "user may not run cmd.run")

    def test_publishOnly(self) -> None:
        """
        L{DirectClient.publish} returns the master's reply without waiting
        for returns.
        """
        self.master.onRequest = lambda payload: {"jid": JID, "minions": ["a"]}
        reply = runToCompletion(self.client.publish("a", "test.ping", [], "list"))
        self.assertEqual((reply["jid"], reply["minions"]), (JID, ["a"]))
        self.assertEqual(self.master.requests[0]["tgt_type"], "list")

    def test_eventBusLostWhileGathering(self) -> None:
        """
        When the event bus connection is lost while returns are awaited,
        the wait ends at once and the silent minions are missing.
        """

        def onRequest(payload: Reply) -> Reply:
            self.master.fireReturn(JID, "a")
            assert self.master.eventsPeer is not None
            self.master.eventsPeer.close()
            self.master.eventsPeer = None
            return {"jid": JID, "minions": ["a", "b"], "connected": ["a", "b"]}

        self.master.onRequest = onRequest
        result = self.runJob("*", "test.ping", [], timeout=5)
        self.assertEqual(list(result.returns), ["a"])
        self.assertEqual(result.missing, ["b"])
        self.assertEqual(len(self.master.requests), 1)

    def test_reqLostWhileWaitingForReply(self) -> None:
        """
        When the req connection is lost before the publish is answered,
        L{MasterUnavailable} says so.
        """

        def onRequest(payload: Reply) -> Reply:
            assert self.master.reqPeer is not None
            self.master.reqPeer.close()
            self.master.reqPeer = None
            raise _Unanswered()

        self.master.onRequest = onRequest
        self.patch(ScriptedMaster, "_reqFrame", _closingReqFrame(ScriptedMaster._reqFrame))
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("lost", str(e))

    def test_sealedFrameTampered(self) -> None:
        """
        A reply that does not open with the session key raises
        L{MasterUnavailable} saying the master broke the protocol.
        """

        def onRequest(payload: Reply) -> Reply:
            self.master.sendRaw(encodeFrame({"enc": b"\x00" * 40}))
            raise _Unanswered()

        self.master.onRequest = onRequest
        self.patch(ScriptedMaster, "_reqFrame", _closingReqFrame(ScriptedMaster._reqFrame))
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("broke the protocol", str(e))


class _Unanswered(Exception):
    """
    The script chose not to answer this request.
    """


def _closingReqFrame(original: Callable[..., None]) -> Callable[..., None]:
    def reqFrame(self: ScriptedMaster, frame: Reply) -> None:
        try:
            original(self, frame)
        except _Unanswered:
            pass

    return reqFrame


class ConnectTests(DirectClientTestsMixin, SynchronousTestCase):
    """
    Reaching the master: every failure is a L{MasterUnavailable} that says
    which step failed.
    """

    def setUp(self) -> None:
        self.setUpClient()

    def test_noEventBus(self) -> None:
        """
        When nothing listens on the event bus socket, the error names it.
        """

        def refuse(path: str, timeout: float) -> socket.socket:
            raise FileNotFoundError(2, "No such file or directory")

        self.client._connectUnix = refuse
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn(
            "event bus at " + os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET), str(e)
        )

    def test_noReqChannel(self) -> None:
        """
        When the req port refuses the connection, the error names the
        address.
        """

        def refuse(host: str, port: int, timeout: float) -> socket.socket:
            raise ConnectionRefusedError(111, "Connection refused")

        self.client._connectTcp = refuse
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("req channel at 127.0.0.1:4506", str(e))
        self.assertIn("Connection refused", str(e))

    def test_noGreeting(self) -> None:
        """
        A req channel that never greets is given up after
        L{CONNECT_TIMEOUT} seconds.
        """
        self.master.greet = False
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("req channel", str(e))
        self.assertIn(f"no answer within {CONNECT_TIMEOUT:g} seconds", str(e))
        self.assertEqual(self.time.now, 1000.0 + CONNECT_TIMEOUT)

    def test_badGreeting(self) -> None:
        """
        A greeting without a challenge is refused.
        """
        self.master.greet = False
        original = self.master.connectTcp

        def connectTcp(host: str, port: int, timeout: float) -> socket.socket:
            sock = original(host, port, timeout)
            self.master.sendRaw(encodeFrame({"cmd": "hello"}))
            return sock

        self.client._connectTcp = connectTcp
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("did not greet with a challenge", str(e))

    def test_loginRefused(self) -> None:
        """
        A login the master refuses raises L{MasterUnavailable} with its
        reason.
        """
        self.master.loginReply = {"ret": "error", "error": "client authentication failed"}
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("refused this client: client authentication failed", str(e))

    def test_oversizedFrameBeforeLogin(self) -> None:
        """
        A frame header over the pre-authentication limit is refused before
        its body is read.
        """
        self.master.greet = False
        original = self.master.connectTcp

        def connectTcp(host: str, port: int, timeout: float) -> socket.socket:
            sock = original(host, port, timeout)
            self.master.sendRaw(struct.pack("!I", 2**31))
            return sock

        self.client._connectTcp = connectTcp
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("broke the protocol", str(e))
        self.assertIn("exceeds the limit", str(e))

    def test_noRootKey(self) -> None:
        """
        Without a readable root key, the error says to run as the master's
        user.
        """
        os.unlink(os.path.join(self.config["cachedir"], ROOT_KEY_FILE))
        self.patch(os, "geteuid", lambda: 0)
        e = self.assertRaises(MasterUnavailable, self.runJob, "*", "test.ping", [])
        self.assertIn("cannot read the master's root key", str(e))

    def test_closeClosesBoth(self) -> None:
        """
        L{DirectClient.close} closes both connections: the master sees
        the end of both streams.
        """
        self.master.onRequest = lambda payload: {"jid": JID, "minions": []}
        self.runJob("*", "test.ping", [])
        self.client.close()
        assert self.master.eventsPeer is not None and self.master.reqPeer is not None
        self.master.eventsPeer.setblocking(True)
        self.master.reqPeer.setblocking(True)
        self.assertEqual(self.master.eventsPeer.recv(10), b"")
        self.assertEqual(self.master.reqPeer.recv(10), b"")


class RunToCompletionTests(SynchronousTestCase):
    """
    L{runToCompletion} runs a coroutine that never suspends.
    """

    def test_value(self) -> None:
        """
        The coroutine's value is returned.
        """

        async def job() -> int:
            return 7

        self.assertEqual(runToCompletion(job()), 7)

    def test_suspends(self) -> None:
        """
        A coroutine that suspends (it waits for an event loop) raises
        L{RuntimeError}.
        """
        from twisted.internet.defer import Deferred

        async def job() -> None:
            await Deferred()

        self.assertRaises(RuntimeError, runToCompletion, job())
