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

from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist.master.core import Master
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import CLEAR_FUNCS, ReqServerProtocol
from salttwist.transport.framing import PREAUTH_MAX_FRAME
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
        Every attribute name of L{Master} and of L{ReqServerProtocol} (public,
        private and dunder), the allow-listed method names themselves, and
        the names of Salt's ClearFuncs/AESFuncs, sent as clear-text
        commands, are each answered with one error frame and the
        connection is closed; the master fires no event, opens no session
        and stores no key.
        """
        names = set(SALT_NAMES)
        names |= {name for name, _ in inspect.getmembers(Master)}
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
        self.net.flush()
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
        self.net.flush()
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
        With L{MAX_AUTH_IN_FLIGHT} authentications in progress, the next one
        is answered "busy" at once without calling the authenticator; once
        they finish, authentication works again.
        """
        from twisted.internet.defer import Deferred
        from twisted.internet.task import Clock

        from salttwist.blocking import runSynchronously
        from salttwist.config import loadMasterConfig
        from salttwist.events.bus import LocalEventBus
        from salttwist.master import core
        from salttwist.master.keys import MasterKeys
        from salttwist.pki.keystore import InMemoryKeyStore

        self.patch(core, "MAX_AUTH_IN_FLIGHT", 3)
        root = os.path.abspath(self.mktemp())
        master = Master(
            loadMasterConfig(root, overrides={"root_dir": root}),
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            InMemoryKeyStore(),
            LocalEventBus(),
            runSynchronously,
            Clock(),
        )
        held: list[Deferred[Any]] = []
        self.patch(master, "authenticate", lambda *a: held.append(Deferred()) or held[-1])

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
