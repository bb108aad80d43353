# -*- test-case-name: tests.adversarial.test_wire -*-
"""
An internet attacker on the req and pub ports, without a session: only the
clear-text allow-list answers, and malformed or oversized input closes that
one connection without buffering, decoding bombs or touching anyone else.
"""

from __future__ import annotations

import inspect
import os
import struct
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist.master.core import AUTH_BATCH_HOLD, Master
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import CLEAR_FUNCS, ReqServerProtocol
from salttwist.transport.framing import PREAUTH_MAX_FRAME
from salttwist.workers.batch import BUSY_PATIENCE
from tests.adversarial._support import (
    JID,
    MASTER_KEY,
    MASTER_PEM,
    ROOT_KEY,
    AttackedMaster,
    frameBytes,
    rawFrame,
    readFrames,
)

#: Names Salt's master answered (or was exploited through) in clear text or
#: over its AES channel: CVE-2020-11651 reached C{_prep_auth_info} (the root
#: key) and C{_send_pub} without authentication.
SALT_NAMES = (
    "_prep_auth_info",
    "_send_pub",
    "_send_ssh_pub",
    "wheel",
    "runner",
    "publish",
    "get_token",
    "mk_token",
    "_file_recv",
    "_file_list",
    "_file_hash",
    "_serve_file",
    "_mine_get",
    "_mine",
    "_mine_delete",
    "_pillar",
    "_minion_event",
    "_handle_minion_event",
    "_master_opts",
    "_master_tops",
    "_ext_nodes",
    "_return",
    "_syndic_return",
    "minion_pub",
    "minion_publish",
    "minion_runner",
    "pub_ret",
    "revoke_auth",
    "destroy",
    "ping",
    "_grains",
    "subscribe",
    "hello",
)

#: Bytes that are not a frame a peer may send: msgpack bombs (declared sizes
#: far beyond the frame, deep nesting), ext types, non-maps, junk.
BOMBS = {
    "array32 of 2**32-1": b"\xdd\xff\xff\xff\xff",
    "map32 of 2**32-1": b"\xdf\xff\xff\xff\xff",
    "str32 of 4 GiB": b"\xdb\xff\xff\xff\xff",
    "bin32 of 4 GiB": b"\xc6\xff\xff\xff\xff",
    "map with array32 value": b"\x81\xa1a\xdd\xff\xff\xff\xff",
    "fixext1": b"\xd4\x01\x00",
    "ext32 of 4 GiB": b"\xc9\xff\xff\xff\xff\x01",
    "map with ext value": b"\x81\xa1a\xd4\x01\x00",
    "nested arrays 60000 deep": b"\x91" * 60000 + b"\xc0",
    "nested maps 20000 deep": b"\x81\xa1a" * 20000 + b"\xc0",
    "map with nil key": b"\x81\xc0\xc0",
    "map with array key": b"\x81\x90\xc0",
    "reserved byte": b"\xc1",
    "trailing data": b"\x80\x80",
    "truncated map": b"\x82\xa1a",
    "invalid utf-8 key": b"\x81\xa2\xff\xfe\xc0",
    "array, not map": b"\x92\x01\x02",
    "empty": b"",
}


class ClearNamesTests(AttackedMaster):
    """
    Without a session, every name but C{_auth} and C{_client_auth} is
    refused and the connection closed (CVE-2020-11651's class).
    """

    def test_everyOtherNameRefused(self) -> None:
        """
        Every attribute name of L{Master} (and of each of its rooms) and of
        L{ReqServerProtocol} (public, private and dunder), the allow-listed
        method names themselves, and the names of Salt's ClearFuncs/AESFuncs,
        sent as clear-text
        commands, are each answered with one error frame and the
        connection is closed; the master fires no event, opens no session
        and stores no key.
        """
        names = set(SALT_NAMES)
        names |= {name for name, _ in inspect.getmembers(self.master)}
        for room in (
            self.master.admission,
            self.master.sessionsRoom,
            self.master.keyWatch,
            self.master.jobPublisher,
            self.master.minionRequests,
            self.master.runnerDispatch,
        ):
            names |= {name for name, _ in inspect.getmembers(room)}
        names |= {name for name, _ in inspect.getmembers(ReqServerProtocol)}
        names |= set(CLEAR_FUNCS.values())
        names -= set(CLEAR_FUNCS)
        self.assertGreater(len(names), 100)
        for name in sorted(names):
            proto, transport = self.rawReq()
            proto.dataReceived(
                frameBytes(
                    {
                        "cmd": name,
                        "id": "m1",
                        "jid": JID,
                        "fun": "cmd.run",
                        "arg": ["id"],
                        "tgt": "*",
                    }
                )
            )
            [reply] = readFrames(transport.value())
            self.assertEqual(reply["ret"], "error", name)
            self.assertIn("not available without a session", reply["error"], name)
            self.assertTrue(transport.disconnecting, name)
            self.assertIsNone(proto.role, name)
        self.assertEqual(self.events, [])
        self.assertEqual(self.master.sessions, {})
        self.assertEqual(self.keyStore.listKeys("minions_pre"), [])

    def test_nonStringCommands(self) -> None:
        """
        A C{cmd} that is not a string (None, a number, a list, a map, bytes
        of an allowed name) is refused and the connection closed.
        """
        for cmd in (None, 0, 1.5, True, ["_auth"], {"_auth": 1}, b"_auth"):
            proto, transport = self.rawReq()
            proto.dataReceived(frameBytes({"cmd": cmd}))
            [reply] = readFrames(transport.value())
            self.assertEqual(reply["ret"], "error", cmd)
            self.assertTrue(transport.disconnecting, cmd)
        self.assertEqual(self.events, [])

    def test_bytesAfterRefusalIgnored(self) -> None:
        """
        Frames pipelined behind a refused command in the same read (an
        C{_auth} attempt, say) are not acted on.
        """
        proto, transport = self.rawReq()
        proto.dataReceived(
            frameBytes({"cmd": "_send_pub"}) + frameBytes({"cmd": "_auth", "id": "x"})
        )
        self.assertEqual(len(readFrames(transport.value())), 1)
        self.assertEqual(self.keyStore.listKeys("minions_pre"), [])
        self.assertEqual(self.events, [])


class OversizedTests(AttackedMaster):
    """
    Length headers over the limit close the connection on the header alone.
    """

    def test_headerOnlyConsumed(self) -> None:
        """
        On the req and pub ports, a header announcing more than the
        pre-authentication limit (up to 4 GiB) aborts the connection as soon
        as the 4 header bytes arrive: nothing is answered, nothing beyond
        the header is buffered, and no frame is decoded.
        """
        for factory in (self.rawReq, self.rawPub):
            for length in (PREAUTH_MAX_FRAME + 1, 2**31, 2**32 - 1):
                proto, transport = factory()
                proto.dataReceived(struct.pack("!I", length))
                self.assertTrue(transport.disconnected, (factory, length))
                self.assertEqual(transport.value(), b"")
                self.assertEqual(len(proto._unprocessed), 4)
        self.assertEqual(self.events, [])

    def test_limitRisesOnlyAfterAuthentication(self) -> None:
        """
        A frame of exactly the pre-authentication limit is read; the larger
        post-authentication limit applies only to an authenticated session.
        """
        proto, transport = self.rawReq()
        self.assertEqual(proto.MAX_LENGTH, PREAUTH_MAX_FRAME)
        proto.dataReceived(struct.pack("!I", PREAUTH_MAX_FRAME) + b"\x00" * 10)
        self.assertFalse(transport.disconnected)

    def rawPub(self):  # type: ignore[no-untyped-def]
        """
        An attacker's pub connection on a L{StringTransport}.
        """
        proto = PubServerFactory(self.master).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        return proto, transport


class BombTests(AttackedMaster):
    """
    msgpack bombs and malformed frames close the one connection cleanly.
    """

    def test_bombsClosedCleanly(self) -> None:
        """
        Each of L{BOMBS}, as the body of a well-sized frame on the req port,
        aborts the connection with no reply, no exception escaping the
        protocol, and no effect on the master.
        """
        for name, body in BOMBS.items():
            proto, transport = self.rawReq()
            proto.dataReceived(rawFrame(body))
            self.assertTrue(transport.disconnected, name)
            self.assertEqual(transport.value(), b"", name)
        self.assertEqual(self.events, [])
        self.assertEqual(self.master.sessions, {})

    def test_bombsInsideSession(self) -> None:
        """
        Inside an authenticated session, a frame that is not a sealed
        session frame (a bomb, a clear-text C{_return}) closes that session;
        the minion can authenticate again and work.
        """
        self.master.jobs.add(JID, {"fun": "test.ping"}, ["m1"])
        client = self.authMinion("m1")
        server = self.master.sessions["m1"]
        server.dataReceived(rawFrame(BOMBS["array32 of 2**32-1"]))
        self.net.flush()
        self.assertTrue(client.lost.called)
        self.assertNotIn("m1", self.master.sessions)
        again = self.authMinion("m1")
        d = again.request(
            {"cmd": "_return", "id": "m1", "jid": JID, "fun": "test.ping", "return": True}
        )
        self.deliverAcknowledgements()
        self.assertEqual(self.successResultOf(d)["ret"], True)


class FloodTests(AttackedMaster):
    """
    Many malformed connections do not disturb an authenticated minion.
    """

    def test_floodDoesNotAffectMinion(self) -> None:
        """
        With a minion session open, 1000 attacker connections (many times
        any worker count) each send a bomb, an oversized header, a refused
        name or a bad C{_auth}; every one is closed, the minion's session
        survives, and its return for a job is still accepted exactly once.
        """
        self.master.jobs.add(JID, {"fun": "test.ping"}, ["m1"])
        client = self.authMinion("m1")
        attacks = [rawFrame(body) for body in BOMBS.values()]
        attacks.append(struct.pack("!I", 2**32 - 1))
        attacks.append(frameBytes({"cmd": "_prep_auth_info"}))
        attacks.append(
            frameBytes({"cmd": "_auth", "id": "m1", "pub": b"x", "nonce": b"n", "sig": b""})
        )
        transports = []
        for i in range(1000):
            proto, transport = self.rawReq()
            proto.dataReceived(attacks[i % len(attacks)])
            transports.append(transport)
        self.assertTrue(all(t.disconnecting for t in transports))
        self.assertFalse(client.lost.called)
        self.assertIn("m1", self.master.sessions)
        d = client.request(
            {"cmd": "_return", "id": "m1", "jid": JID, "fun": "test.ping", "return": True}
        )
        self.deliverAcknowledgements()
        self.assertEqual(self.successResultOf(d)["ret"], True)
        self.assertEqual(len(self.eventsTagged(f"salt/job/{JID}/ret/m1")), 1)
        self.assertEqual(self.keyStore.listKeys("minions_pre"), [])
        self.assertEqual(self.keyStore.listKeys("minions_denied"), [])


class AuthFloodTests(SynchronousTestCase):
    """
    A flood of authentications is bounded before any RSA or disk work.
    """

    def test_busyBeyondBound(self) -> None:
        """
        With C{max_auth_in_flight} authentications in progress, the next one
        is answered "busy" at once without calling the authenticator; once
        they finish, authentication works again.
        """
        from twisted.internet.defer import Deferred
        from twisted.internet.task import Clock

        from salttwist.blocking import runSynchronously
        from salttwist.config import loadMasterConfig
        from salttwist.events.bus import LocalEventBus
        from salttwist.master.keys import MasterKeys
        from salttwist.pki.keystore import InMemoryKeyStore

        root = os.path.abspath(self.mktemp())
        master = Master(
            loadMasterConfig(root, overrides={"root_dir": root, "max_auth_in_flight": 3}),
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            InMemoryKeyStore(),
            LocalEventBus(),
            runSynchronously,
            Clock(),
        )
        held: list[Deferred[Any]] = []
        self.patch(master.admission, "authenticate", lambda *a: held.append(Deferred()) or held[-1])

        class Peer:
            challenge = b"c" * 32
            peerName = "attacker"

        pending = [master.clearAuth(Peer(), {}) for _ in range(3)]  # type: ignore[arg-type]
        busy = self.successResultOf(master.clearAuth(Peer(), {}))  # type: ignore[arg-type]
        self.assertEqual(busy[0]["ret"], "error")
        self.assertIn("busy", busy[0]["error"])
        self.assertEqual(len(held), 3)
        for d in held:
            d.errback(RuntimeError("done"))
        for d in pending:
            self.failureResultOf(d, RuntimeError)
        master.clearAuth(Peer(), {})  # type: ignore[arg-type]
        self.assertEqual(len(held), 4)


class _Peer:
    """
    The two attributes L{Master.clearAuth} reads from a req connection.
    """

    challenge = b"c" * 32

    def __init__(self, peerName: str) -> None:
        self.peerName = peerName


class _LimitedMaster(SynchronousTestCase):
    """
    A master built with config overrides, C{m1} accepted, events recorded.
    """

    def makeMaster(self, **overrides: Any) -> Master:
        """
        A master with C{overrides} applied to its config.
        """
        from twisted.internet.testing import MemoryReactorClock

        from salttwist.blocking import runSynchronously
        from salttwist.config import loadMasterConfig
        from salttwist.events.bus import LocalEventBus
        from salttwist.master.keys import MasterKeys
        from salttwist.pki.keystore import InMemoryKeyStore
        from tests.adversarial._support import MINION_PEMS

        root = os.path.abspath(self.mktemp())
        self.keyStore = InMemoryKeyStore()
        self.keyStore.putKey("minions", "m1", MINION_PEMS["m1"])
        self.bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        return Master(
            loadMasterConfig(root, overrides={"root_dir": root, **overrides}),
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            self.keyStore,
            self.bus,
            runSynchronously,
            MemoryReactorClock(),
        )

    def auth(self, master: Master, peerName: str, minionId: str) -> dict[str, Any]:
        """
        Authenticate C{minionId} (signed with C{m1}'s key) from C{peerName}.

        @return: the reply.
        """
        from tests.adversarial._support import MINION_KEYS, authLoad

        peer = _Peer(peerName)
        load = authLoad(peer.challenge, minionId, MINION_KEYS["m1"])
        return self.successResultOf(master.clearAuth(peer, load))[0]  # type: ignore[arg-type]


def _recordingLogger(events: list[dict[str, Any]]) -> Any:
    from twisted.logger import Logger

    return Logger(observer=events.append)


class AuthRateTests(_LimitedMaster):
    """
    Each source address gets C{auth_rate_burst} authentications at once and
    C{auth_rate_limit} per second, checked before any RSA or disk work.
    """

    def test_burstThenBusy(self) -> None:
        """
        Beyond the burst, an address is answered "busy" without the
        authenticator being called; another address is not affected; one
        more request passes after a refill interval.
        """
        from twisted.internet.defer import succeed

        from salttwist.master.auth import AuthOutcome

        master = self.makeMaster(auth_rate_limit=1, auth_rate_burst=3)
        calls: list[str] = []

        def authenticate(load: Any, challenge: bytes, peer: str, *rest: Any) -> Any:
            calls.append(peer)
            return succeed(AuthOutcome({"ret": "pending"}, "x"))

        self.patch(master.admission, "authenticate", authenticate)
        replies = [
            self.successResultOf(master.clearAuth(_Peer(f"10.0.0.1:{p}"), {}))[0]  # type: ignore[arg-type]
            for p in range(5)
        ]
        self.assertEqual([r["ret"] for r in replies], ["pending"] * 3 + ["error"] * 2)
        self.assertIn("busy", replies[3]["error"])
        self.assertIn("retry later", replies[3]["error"])
        self.assertEqual(len(calls), 3)
        other = self.successResultOf(master.clearAuth(_Peer("10.0.0.2:1"), {}))[0]  # type: ignore[arg-type]
        self.assertEqual(other["ret"], "pending")
        master.clock.advance(1)
        again = [
            self.successResultOf(master.clearAuth(_Peer("10.0.0.1:9"), {}))[0]["ret"]  # type: ignore[arg-type]
            for _ in range(2)
        ]
        self.assertEqual(again, ["pending", "error"])

    def test_acceptedMinionsBehindOneAddress(self) -> None:
        """
        Authentications that end accepted give their token back: many more
        than the burst, from one (NAT) address, are all accepted.
        """
        master = self.makeMaster(auth_rate_limit=0.001, auth_rate_burst=2)
        replies = [self.auth(master, f"192.0.2.7:{p}", "m1")["ret"] for p in range(8)]
        self.assertEqual(replies, ["accepted"] * 8)
        # Pending requests keep their tokens spent.
        pending = [self.auth(master, "192.0.2.7:1", f"new{i}")["ret"] for i in range(3)]
        self.assertEqual(pending, ["pending", "pending", "error"])

    def test_acceptedStormBehindOneAddress(self) -> None:
        """
        Far more accepted minions than the burst authenticating at once from
        one address (a fleet booting behind NAT) are all admitted; the same
        number of pending ones puts the address in debt, bounded by the
        burst, and it is refused until it has refilled above zero.
        """
        from twisted.internet.defer import Deferred

        from salttwist.master.auth import AuthOutcome

        master = self.makeMaster(auth_rate_limit=1, auth_rate_burst=3)
        held: list[Deferred[Any]] = []
        self.patch(master.admission, "authenticate", lambda *a: held.append(Deferred()) or held[-1])
        results = [master.clearAuth(_Peer(f"10.0.0.1:{p}"), {}) for p in range(20)]  # type: ignore[arg-type]
        self.assertEqual(len(held), 20)
        for d in held:
            d.callback(AuthOutcome({"ret": "accepted"}, "m"))
        self.assertEqual([self.successResultOf(r)[0]["ret"] for r in results], ["accepted"] * 20)
        held.clear()
        results = [master.clearAuth(_Peer(f"10.0.0.1:{p}"), {}) for p in range(20)]  # type: ignore[arg-type]
        for d in held:
            d.callback(AuthOutcome({"ret": "pending"}, "x"))
        refused = self.successResultOf(master.clearAuth(_Peer("10.0.0.1:99"), {}))[0]  # type: ignore[arg-type]
        self.assertIn("busy", refused["error"])
        master.clock.advance(6)  # -3 (the floor) + 6 * 1/s: back above zero
        held.clear()
        again = master.clearAuth(_Peer("10.0.0.1:98"), {})  # type: ignore[arg-type]
        self.assertEqual(len(held), 1)
        held[0].callback(AuthOutcome({"ret": "pending"}, "x"))
        self.assertEqual(self.successResultOf(again)[0]["ret"], "pending")

    def test_masterErrorsNotCharged(self) -> None:
        """
        A request the master fails to check (its own error, here its
        worker's) spends no token of the address: a master bug does not
        lock out the minions behind it. Each such request still fails.
        """
        from twisted.internet.defer import fail

        master = self.makeMaster(auth_rate_limit=0.001, auth_rate_burst=2)
        working = master.admission.authenticate
        master.admission.authenticate = lambda *a: fail(RuntimeError("worker crashed"))  # type: ignore[method-assign]
        for p in range(6):
            self.failureResultOf(master.clearAuth(_Peer(f"10.0.0.1:{p}"), {}), RuntimeError)  # type: ignore[arg-type]
        self.assertEqual(master.admission._authInFlight, 0)
        master.admission.authenticate = working  # type: ignore[method-assign]
        self.assertEqual(self.auth(master, "10.0.0.1:7", "new1")["ret"], "pending")
        self.assertEqual(self.auth(master, "10.0.0.1:8", "new2")["ret"], "pending")

    def test_loggedOncePerMinute(self) -> None:
        """
        Refusals are logged at most once per address per minute, with the
        number refused since the last line.
        """
        from salttwist.master.ratelimit import AuthRateLimiter

        limiter = AuthRateLimiter(1, 1, Clock())
        logged: list[dict[str, Any]] = []
        self.patch(limiter, "log", _recordingLogger(logged))
        self.assertTrue(limiter.allow("10.0.0.1:1"))
        limiter.charge("10.0.0.1:1")
        for _ in range(100):
            self.assertFalse(limiter.allow("10.0.0.1:1"))
        self.assertEqual(len(logged), 1)
        limiter.clock.advance(60)
        for _ in range(61):
            if limiter.allow("10.0.0.1:1"):
                limiter.charge("10.0.0.1:1")
        self.assertEqual(len(logged), 2)
        self.assertEqual(logged[1]["n"], 100)

    def test_boundedMemory(self) -> None:
        """
        At most C{maxPeers} buckets are kept (the least recently used is
        dropped), and buckets that refilled are dropped as time passes.
        """
        from salttwist.master.ratelimit import AuthRateLimiter

        clock = Clock()
        limiter = AuthRateLimiter(5, 20, clock, maxPeers=10)
        for i in range(1000):
            limiter.allow(f"10.0.{i // 256}.{i % 256}:1")
            self.assertLessEqual(len(limiter), 10)
        clock.advance(3600)
        limiter.allow("10.9.9.9:1")
        self.assertEqual(len(limiter), 1)

    def test_addressGrouping(self) -> None:
        """
        A bucket is one IPv4 address (whatever the port, also as an
        IPv4-mapped IPv6 address) or one IPv6 /64; other names are kept as
        they are.
        """
        from salttwist.master.ratelimit import peerKey

        self.assertEqual(peerKey("10.0.0.1:5"), "10.0.0.1")
        self.assertEqual(peerKey("::ffff:10.0.0.1:7"), "10.0.0.1")
        self.assertEqual(peerKey("2001:db8::1:443"), peerKey("2001:db8::ffff:1:80"))
        self.assertEqual(peerKey("2001:db8::1:443"), "2001:db8::/64")
        self.assertNotEqual(peerKey("2001:db8:0:1::1:1"), peerKey("2001:db8::1:1"))
        self.assertEqual(peerKey("local"), "local")

    def test_disabled(self) -> None:
        """
        C{auth_rate_limit: 0} turns the limit off.
        """
        from salttwist.master.ratelimit import AuthRateLimiter

        limiter = AuthRateLimiter(0, 1, Clock())
        self.assertTrue(all(limiter.allow("10.0.0.1:1") for _ in range(1000)))
        self.assertEqual(len(limiter), 0)


class PendingCapTests(_LimitedMaster):
    """
    At most C{max_minions_pre} keys are pending: beyond that new ids are
    refused with nothing written, and the count is not taken per request.
    """

    def test_newIdsRefusedNothingWritten(self) -> None:
        """
        With the cap reached, a new id gets a "busy ... max_minions_pre"
        error and no key file; an already pending id is still pending, an
        accepted one still accepted; one line is logged for many refusals.
        """
        master = self.makeMaster(max_minions_pre=3, auth_rate_limit=0)
        logged: list[dict[str, Any]] = []
        self.patch(master.admission, "log", _recordingLogger(logged))
        replies = [self.auth(master, "10.0.0.1:1", f"new{i}") for i in range(6)]
        self.assertEqual([r["ret"] for r in replies], ["pending"] * 3 + ["error"] * 3)
        self.assertIn("max_minions_pre", replies[3]["error"])
        self.assertIn("retry later", replies[3]["error"])
        self.assertEqual(sorted(self.keyStore.listKeys("minions_pre")), ["new0", "new1", "new2"])
        self.assertEqual(self.keyStore.stateOf("new4"), [])
        self.assertEqual(self.auth(master, "10.0.0.1:1", "new0")["ret"], "pending")
        self.assertEqual(self.auth(master, "10.0.0.1:1", "m1")["ret"], "accepted")
        self.assertEqual(len([e for e in logged if "max_minions_pre" in e["log_format"]]), 1)

    def test_countedOnce(self) -> None:
        """
        The pending keys are listed once, not per request.
        """
        master = self.makeMaster(max_minions_pre=100, auth_rate_limit=0)
        listed: list[str] = []
        listKeys = self.keyStore.listKeys

        def recording(state: str) -> list[str]:
            listed.append(state)
            return listKeys(state)

        self.patch(self.keyStore, "listKeys", recording)
        for i in range(20):
            self.assertEqual(self.auth(master, "10.0.0.1:1", f"new{i}")["ret"], "pending")
        self.assertEqual(listed, ["minions_pre"])
        self.assertEqual(master.admission._pendingCount, 20)

    def test_keyEventsMakeRoom(self) -> None:
        """
        After an admin deletes pending keys (a C{salt/key} event), the
        directory is counted again (at most once a second) and new ids are
        admitted again.
        """
        master = self.makeMaster(max_minions_pre=2, auth_rate_limit=0)
        for i in range(2):
            self.auth(master, "10.0.0.1:1", f"new{i}")
        self.assertEqual(self.auth(master, "10.0.0.1:1", "late")["ret"], "error")
        self.keyStore.deleteKey("minions_pre", "new0")
        self.bus.fire("salt/key", {"act": "delete", "id": "new0"})
        master.clock.advance(1)
        self.assertEqual(self.auth(master, "10.0.0.1:1", "late")["ret"], "pending")
        self.assertEqual(self.auth(master, "10.0.0.1:1", "later")["ret"], "error")

    def test_inFlightReserve(self) -> None:
        """
        Authentications in flight that may add a pending key count against
        the cap: with room for two, the third concurrent one is told it may
        not write a new key, and the worker pool is told so too.
        """
        from twisted.internet.defer import Deferred

        master = self.makeMaster(max_minions_pre=2, auth_rate_limit=0)
        runs: list[tuple[Any, ...]] = []

        class Workers:
            def run(self, *args: Any) -> Deferred[Any]:
                runs.append(args)
                return Deferred()

            def stats(self) -> dict[str, int]:
                return {"size": 2}

        master.workers = Workers()
        for _ in range(3):
            master.clearAuth(_Peer("10.0.0.1:1"), {})  # type: ignore[arg-type]
        # The requests go in batches (AUTHENTICATE_MANY_TASK), once those
        # held back for others have gone.
        master.clock.advance(AUTH_BATCH_HOLD * BUSY_PATIENCE)
        requests = [request for r in runs for request in r[1]]
        self.assertEqual([request[-1] for request in requests], [True, True, False])

    def test_authenticatorWritesNothing(self) -> None:
        """
        In the worker (L{Authenticator} over the real key store), a new id
        refused for the cap leaves no file under C{pki_dir}.
        """
        from salttwist.master.auth import PENDING_FULL, Authenticator
        from salttwist.master.keys import MasterKeys, PublicationKey
        from salttwist.pki.keystore import FilesystemKeyStore
        from tests.adversarial._support import MINION_KEYS, authLoad

        pkiDir = os.path.abspath(self.mktemp())
        store = FilesystemKeyStore(pkiDir)
        authenticator = Authenticator(
            store,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            lambda: PublicationKey(os.urandom(32), 1),
            lambda: 4505,
        )
        load = authLoad(b"c" * 32, "fresh", MINION_KEYS["m1"])
        outcome = authenticator.authenticate(load, b"c" * 32, "peer", False)
        self.assertEqual(outcome.reply, {"ret": "error", "error": PENDING_FULL})
        self.assertEqual(outcome.events, [])
        self.assertEqual(store.stateOf("fresh"), [])
        for _, _, files in os.walk(pkiDir):
            self.assertEqual([f for f in files if "fresh" in f], [])
