# -*- test-case-name: tests.test_transient_sessions -*-
"""
Tests for transient sessions (issue 4): C{salttwist-call}'s link to the
master (L{salttwist.client.transient.MasterCaller}) beside a running minion
daemon of the same id, the master's handling of such sessions
(L{Master.sessionStarted}, L{Master.cutOff}) and of returns with jid C{req}
(L{Master.minionReturn}). Everything runs in memory on a
L{tests._loopback.MasterMinionNetwork}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, wire
from salttwist.client.transient import CallerError, MasterCaller
from salttwist.config import loadMinionConfig
from salttwist.jid import isJid
from salttwist.master.core import MAX_TRANSIENT_SESSIONS, runSynchronously
from salttwist.minion.pubclient import PubClientProtocol
from salttwist.pki.credentials import MinionCredentials
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, REJECTED
from salttwist.transport.framing import quietFactory
from salttwist.transport.reqclient import ReqClientProtocol, RequestError, reqClientFactory
from tests.test_minion import (
    MINION_KEY,
    MINION_PEM,
    OTHER_PEM,
    PUB_PORT,
    REQ_PORT,
    MinionTestCase,
)
from tests.test_runners_jobs import FakeJobCache

RESULT = {"return": "hi", "retcode": 0, "success": True}


class TransientTestCase(MinionTestCase):
    """
    A master on a L{MasterMinionNetwork} with an in-memory job cache, and
    callers connected through it.
    """

    def setUp(self) -> None:
        """
        Give the master a L{FakeJobCache}.
        """
        super().setUp()
        self.cache = FakeJobCache(self.net.reactor)
        self.master.jobCache = self.cache

    def makeCaller(
        self, minionId: str = "m1", config: dict[str, Any] | None = None
    ) -> MasterCaller:
        """
        A caller for C{minionId}: with C{config} (a minion daemon's), or a
        minion config of its own holding L{MINION_KEY}.
        """
        if config is None:
            root = os.path.abspath(self.mktemp())
            config = loadMinionConfig(
                root,
                overrides={
                    "root_dir": root,
                    "id": minionId,
                    "master": "salt.test",
                    "master_port": REQ_PORT,
                },
            )
            os.makedirs(config["pki_dir"], mode=0o700)
            crypt.writePrivateFile(
                os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(MINION_KEY)
            )
        caller = MasterCaller(
            config, minionId, self.net.reactor, runSynchronously, connectTCP=self.net.connectTCP
        )
        self.addCleanup(caller.close)
        return caller

    def run_(self, coroutine: Any) -> Deferred[Any]:
        """
        Start C{coroutine} and deliver every byte it causes.

        @return: its L{Deferred}.
        """
        d = Deferred.fromCoroutine(coroutine)
        self.net.flush()
        return d

    def transients(self, minionId: str = "m1") -> list[Any]:
        """
        @return: the master's transient sessions of C{minionId}.
        """
        return list(self.master.transients.get(minionId, ()))


class CoexistenceTests(TransientTestCase):
    """
    A transient session never displaces the minion daemon of its id.
    """

    def test_daemonKeepsSessionAndSubscription(self) -> None:
        """
        While a caller of the same id authenticates and returns, the daemon's
        req session and pub subscription stay the master's, the daemon stays
        ready without reconnecting, and it still runs jobs afterwards.
        """
        minion = self.readyMinion()
        session, subscriber = self.master.sessions["m1"], self.master.subscribers["m1"]
        attempts = list(self.net.attempts)
        caller = self.makeCaller(config=minion.config)
        self.successResultOf(self.run_(caller.session()))
        self.assertEqual(len(self.transients()), 1)
        self.assertIs(self.master.sessions["m1"], session)
        self.assertIs(self.master.subscribers["m1"], subscriber)
        self.successResultOf(self.run_(caller.sendReturn("test.echo", ["hi"], RESULT)))
        caller.close()
        self.net.flush()
        self.assertEqual(self.transients(), [])
        self.assertEqual(self.master.transients, {})
        self.assertIs(self.master.sessions["m1"], session)
        self.assertIs(self.master.subscribers["m1"], subscriber)
        self.assertEqual(minion.state, "ready")
        self.assertEqual(self.net.attempts, [*attempts, REQ_PORT])
        jid = self.publish("test.ping")
        self.assertIn(jid, [data["jid"] for data in self.returns()])

    def test_cannotSubscribe(self) -> None:
        """
        A pub subscription made with a transient session's key is refused:
        only the daemon's session may subscribe; the daemon's subscription
        is untouched.
        """
        minion = self.readyMinion()
        subscriber = self.master.subscribers["m1"]
        caller = self.makeCaller(config=minion.config)
        self.successResultOf(self.run_(caller.session()))
        [transient] = self.transients()
        pub = self.successResultOf(
            self.net.connectTCP(
                "salt.test", PUB_PORT, quietFactory(lambda: PubClientProtocol(2**20))
            )
        )
        self.net.flush()
        challenge = self.successResultOf(pub.hello)
        token = crypt.deriveKey(transient.sessionKey, wire.PUB_TOKEN_CONTEXT)
        mac = crypt.hmacSha256(token, wire.pubSubscribeMessage(challenge, "m1"))
        answer = pub.subscribe("m1", mac)
        self.net.flush()
        self.assertEqual(self.successResultOf(answer), "refused")
        self.assertIs(self.master.subscribers["m1"], subscriber)
        self.assertEqual(minion.state, "ready")

    def test_onlyReqReturnsAndEvents(self) -> None:
        """
        A transient session may send C{_return} with jid C{req} and
        C{_minion_event}; C{_grains} and returns for published jobs (even
        one that targeted its minion) are refused.
        """
        minion = self.readyMinion()
        minion.executor.call = lambda fun, arg, jid=None: Deferred()  # type: ignore[method-assign]
        jid = self.publish("test.ping")
        caller = self.makeCaller(config=minion.config)
        error = self.failureResultOf(
            self.run_(caller.request({"cmd": "_grains", "grains": {"evil": True}})), RequestError
        )
        self.assertIn("'_grains' is not available to a transient session", str(error.value))
        load = {"cmd": "_return", "id": "m1", "jid": jid, "fun": "test.ping", "return": False}
        error = self.failureResultOf(self.run_(caller.request(load)), RequestError)
        self.assertIn("a transient session may only return jid 'req'", str(error.value))
        self.assertEqual(self.master.jobs.get(jid).returned, set())
        fired = caller.fireMaster("myco/x", {"a": 1})
        self.net.flush()
        self.assertEqual(self.successResultOf(fired)["ret"], True)
        [(_, data)] = self.net.eventsTagged("myco/x")
        self.assertEqual(data["id"], "m1")

    def test_manyTransientsCapped(self) -> None:
        """
        At most L{MAX_TRANSIENT_SESSIONS} transient sessions are kept per
        minion; one more closes the oldest.
        """
        callers = [self.makeCaller() for _ in range(MAX_TRANSIENT_SESSIONS + 1)]
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        protocols = [self.successResultOf(self.run_(c.session())) for c in callers]
        self.assertEqual(len(self.transients()), MAX_TRANSIENT_SESSIONS)
        self.assertTrue(protocols[0].lost.called)
        self.assertFalse(any(p.lost.called for p in protocols[1:]))

    def test_deletedKeyCutsTransients(self) -> None:
        """
        Deleting the minion's key cuts off its transient sessions with its
        daemon's session.
        """
        minion = self.readyMinion()
        caller = self.makeCaller(config=minion.config)
        req = self.successResultOf(self.run_(caller.session()))
        self.net.keyStore.deleteKey(ACCEPTED, "m1")
        self.successResultOf(self.master.reconcileKeys())
        self.net.flush()
        self.assertTrue(req.lost.called)
        self.assertEqual(self.master.transients, {})
        self.assertNotIn("m1", self.master.sessions)


class ReqReturnTests(TransientTestCase):
    """
    Returns with jid C{req}: the master makes a jid and records the job.
    """

    def test_recordedInJobCache(self) -> None:
        """
        C{sendReturn} gets a new jid from the master, which recorded the job
        (C{fun}, C{arg}, C{tgt} the minion id, C{tgt_type} C{list}, the
        user) and the return in its job cache and registry, and fired
        C{salt/job/<jid>/new} before C{salt/job/<jid>/ret/<id>}.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        result = {"return": {"a": 1}, "retcode": 3, "success": False}
        jid = self.successResultOf(self.run_(caller.sendReturn("test.echo", ["hi", 2], result)))
        self.assertTrue(isJid(jid))
        self.assertEqual(caller.jid, jid)
        job = self.cache.jobs[jid]
        self.assertEqual(
            (job["fun"], job["arg"], job["tgt"], job["tgt_type"], job["minions"]),
            ("test.echo", ["hi", 2], "m1", "list", ["m1"]),
        )
        self.assertIsInstance(job["user"], str)
        self.assertEqual(self.cache.returns[jid]["m1"]["return"], {"a": 1})
        self.assertEqual(self.cache.returns[jid]["m1"]["retcode"], 3)
        self.assertEqual(self.master.jobs.get(jid).returned, {"m1"})
        tags = [tag for tag, _ in self.net.eventsTagged("salt/job/")]
        self.assertEqual(tags, [f"salt/job/{jid}/new", f"salt/job/{jid}/ret/m1"])
        [(_, new)] = self.net.eventsTagged(f"salt/job/{jid}/new")
        self.assertEqual(
            (new["fun"], new["arg"], new["tgt"], new["tgt_type"], new["minions"]),
            ("test.echo", ["hi", 2], "m1", "list", ["m1"]),
        )
        [(_, ret)] = self.net.eventsTagged(f"salt/job/{jid}/ret/")
        self.assertEqual((ret["return"], ret["retcode"], ret["fun_args"]), ({"a": 1}, 3, ["hi", 2]))

    def test_eachReturnItsOwnJob(self) -> None:
        """
        Two returns with jid C{req} make two jobs.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        first = self.successResultOf(self.run_(caller.sendReturn("test.ping", [], RESULT)))
        second = self.successResultOf(self.run_(caller.sendReturn("test.ping", [], RESULT)))
        self.assertNotEqual(first, second)
        self.assertEqual(set(self.cache.jobs), {first, second})

    def test_fromDaemonSession(self) -> None:
        """
        The minion daemon's own session may send a return with jid C{req}
        too (Salt allows it); it is recorded the same way.
        """
        minion = self.readyMinion()
        assert minion.req is not None
        d = minion.req.request(
            {
                "cmd": "_return",
                "id": "m1",
                "jid": "req",
                "fun": "test.ping",
                "fun_args": [],
                "return": True,
                "retcode": 0,
                "success": True,
            }
        )
        self.net.flush()
        jid = self.successResultOf(d)["jid"]
        self.assertEqual(self.cache.jobs[jid]["tgt"], "m1")
        self.assertEqual(self.cache.returns[jid]["m1"]["return"], True)

    def test_invalidReqReturns(self) -> None:
        """
        A return with jid C{req} must name a valid function and a list of
        arguments, and its session's own id; a bad user name is recorded
        as C{root@<id>}.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        base = {"cmd": "_return", "id": "m1", "jid": "req", "fun": "test.ping", "return": True}
        for bad, message in (
            ({"fun": "nodot"}, "invalid function name"),
            ({"fun": None}, "invalid function name"),
            ({"fun_args": "x"}, "fun_args must be a list"),
            ({"id": "m2"}, "does not match the session"),
        ):
            error = self.failureResultOf(self.run_(caller.request({**base, **bad})), RequestError)
            self.assertIn(message, str(error.value))
        self.assertEqual(self.cache.jobs, {})
        reply = self.successResultOf(self.run_(caller.request({**base, "user": "a\nb"})))
        self.assertEqual(self.cache.jobs[reply["jid"]]["user"], "root@m1")

    def test_reqUserBesideMinionId(self) -> None:
        """
        The user a minion claims for its C{req} job is recorded beside its
        id: it can never pass for a master-side user such as C{Reactor},
        an ACL user or C{root}.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        load = {"cmd": "_return", "id": "m1", "jid": "req", "fun": "test.ping", "return": True}
        for claimed in ("Reactor", "fred", "root"):
            reply = self.successResultOf(self.run_(caller.request({**load, "user": claimed})))
            self.assertEqual(self.cache.jobs[reply["jid"]]["user"], f"{claimed}@m1")

    def test_unserialisableReturn(self) -> None:
        """
        A return value msgpack cannot carry is sent as a message saying so,
        as the minion daemon does.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        jid = self.successResultOf(
            self.run_(caller.sendReturn("test.x", [], {**RESULT, "return": {1, 2}}))
        )
        self.assertIn("cannot be sent", self.cache.returns[jid]["m1"]["return"])


class CallerAuthTests(TransientTestCase):
    """
    A transient session follows the key rules of the minion daemon's.
    """

    def test_pendingKey(self) -> None:
        """
        An unknown key becomes pending, as for the daemon, and the caller
        fails with the daemon's message; later calls fail the same way
        without connecting again.
        """
        caller = self.makeCaller()
        failure = self.failureResultOf(self.run_(caller.session()), CallerError)
        self.assertIn("has not accepted this minion's key yet", str(failure.value))
        self.assertEqual(self.net.keyStore.getKey(PENDING, "m1"), MINION_PEM)
        self.assertEqual(self.master.transients, {})
        attempts = len(self.net.attempts)
        again = self.failureResultOf(self.run_(caller.sendReturn("test.ping", [], RESULT)))
        self.assertIn("has not accepted this minion's key yet", str(again.value))
        self.assertEqual(len(self.net.attempts), attempts)

    def test_rejectedAndDenied(self) -> None:
        """
        A rejected key is refused; a key other than the accepted one is
        denied and parked in C{minions_denied}.
        """
        self.net.keyStore.putKey(REJECTED, "m1", MINION_PEM)
        failure = self.failureResultOf(self.run_(self.makeCaller().session()), CallerError)
        self.assertIn("the master rejected this minion's key", str(failure.value))
        self.net.keyStore.putKey(ACCEPTED, "m2", OTHER_PEM)
        failure = self.failureResultOf(self.run_(self.makeCaller("m2").session()), CallerError)
        self.assertIn("the master denied this minion's key", str(failure.value))
        self.assertEqual(self.net.keyStore.getKey(DENIED, "m2"), MINION_PEM)
        self.assertEqual(self.net.keyStore.getKey(ACCEPTED, "m2"), OTHER_PEM)

    def test_noKey(self) -> None:
        """
        Without a key in C{pki_dir} the caller says so and connects nowhere.
        """
        caller = self.makeCaller()
        os.unlink(os.path.join(caller.config["pki_dir"], "minion.pem"))
        failure = self.failureResultOf(self.run_(caller.session()), CallerError)
        self.assertIn("this minion has no key", str(failure.value))
        self.assertEqual(self.net.attempts, [])

    def test_masterUnreachable(self) -> None:
        """
        A master that refuses the connection is reported.
        """
        self.net.refuse = 1
        failure = self.failureResultOf(self.run_(self.makeCaller().session()), CallerError)
        self.assertIn("cannot reach the master at salt.test:4506", str(failure.value))

    def test_pinnedKeyChecked(self) -> None:
        """
        The caller checks the master's key against the one the minion pinned,
        as the daemon does.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        with open(os.path.join(caller.config["pki_dir"], "minion_master.pub"), "wb") as f:
            f.write(OTHER_PEM)
        failure = self.failureResultOf(self.run_(caller.session()), CallerError)
        self.assertIn("not the pinned", str(failure.value))
        self.assertEqual(self.master.transients, {})

    def test_pinsOnFirstContact(self) -> None:
        """
        A caller that meets its master first pins the master's key, as the
        daemon would.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        caller = self.makeCaller()
        self.successResultOf(self.run_(caller.session()))
        with open(os.path.join(caller.config["pki_dir"], "minion_master.pub"), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), self.master.masterKeys.publicPem)


class TransientFlagTests(SynchronousTestCase):
    """
    The C{transient} flag is covered by the auth request's signature.
    """

    def test_signedMessageDiffers(self) -> None:
        """
        L{wire.authRequestMessage} differs with and without C{transient},
        and is unchanged without it (existing minions keep working).
        """
        args = (b"c" * 32, b"n" * 32, "m1", MINION_PEM)
        self.assertNotEqual(
            wire.authRequestMessage(*args), wire.authRequestMessage(*args, transient=True)
        )
        self.assertEqual(wire.authRequestMessage(*args), wire.authRequestMessage(*args, False))


class FlagTamperingTests(TransientTestCase):
    """
    Nobody on the path can turn one kind of session into the other.
    """

    def authWith(self, tamper: Any) -> tuple[dict[str, Any], ReqClientProtocol]:
        """
        Authenticate C{m1} with a request made by L{MinionCredentials} and
        then changed by C{tamper}.

        @return: the master's reply and the client.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        credentials = MinionCredentials("m1", MINION_KEY, MINION_PEM, self.mktemp())
        client = self.successResultOf(
            self.net.connectTCP("salt.test", REQ_PORT, reqClientFactory())
        )
        self.net.flush()
        request = credentials.authRequest(self.successResultOf(client.hello), os.urandom(32))
        tamper(request)
        d = client.sendClear(request)
        self.net.flush()
        return self.successResultOf(d), client

    def test_flagAddedRefused(self) -> None:
        """
        C{"transient": True} added to a daemon's request fails its signature.
        """
        reply, _ = self.authWith(lambda request: request.update(transient=True))
        self.assertEqual(reply["ret"], "error")
        self.assertIn("authentication failed", reply["error"])
        self.assertEqual(self.master.transients, {})

    def test_flagStrippedRefused(self) -> None:
        """
        A transient request stripped of its flag fails its signature, so it
        can never replace the daemon's session.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        credentials = MinionCredentials("m1", MINION_KEY, MINION_PEM, self.mktemp())
        client = self.successResultOf(
            self.net.connectTCP("salt.test", REQ_PORT, reqClientFactory())
        )
        self.net.flush()
        request = credentials.authRequest(
            self.successResultOf(client.hello), os.urandom(32), transient=True
        )
        del request["transient"]
        d = client.sendClear(request)
        self.net.flush()
        reply = self.successResultOf(d)
        self.assertEqual(reply["ret"], "error")
        self.assertEqual(self.master.sessions, {})

    def test_untamperedDaemonRequest(self) -> None:
        """
        The same request unchanged opens a normal (daemon) session.
        """
        reply, _ = self.authWith(lambda request: None)
        self.assertEqual(reply["ret"], "accepted")
        self.assertIn("m1", self.master.sessions)
