# -*- test-case-name: tests.test_cli_call_master -*-
"""
Tests for C{salttwist-call} without C{--local}: the real command in a child
process (it runs its own reactor) against a L{Master} running in the test
process, listening on a port of 127.0.0.1 chosen by the OS, with an
in-memory key store and job cache.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from twisted.internet.task import deferLater
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.master.reqserver import ReqServerFactory
from salttwist.pki.keystore import ACCEPTED, PENDING, REJECTED, InMemoryKeyStore
from tests.test_runners_jobs import FakeJobCache

MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())
MINION_ID = "caller1"
NOT_SENT = "Warning: the result was not sent to the master: "


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class CallMasterTests(TestCase):
    """
    C{salttwist-call} prints the local result and sends it to the master of
    its minion config, which records a job for it.
    """

    timeout = 60

    def setUp(self) -> None:
        """
        A master listening on 127.0.0.1, and a minion config directory with
        the minion's key pointing at it.
        """
        reactor = _reactor()
        root = os.path.abspath(self.mktemp())
        self.events: list[tuple[str, dict[str, Any]]] = []
        bus = LocalEventBus()
        bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        self.keyStore = InMemoryKeyStore()
        self.cache = FakeJobCache(reactor)
        self.master = Master(
            loadMasterConfig(root, overrides={"root_dir": root}),
            MasterKeys(MASTER_KEY, MASTER_PEM, os.urandom(32)),
            self.keyStore,
            bus,
            runSynchronously,
            reactor,
            jobCache=self.cache,
        )
        self.listening = reactor.listenTCP(0, ReqServerFactory(self.master), interface="127.0.0.1")
        self.addCleanup(self.stopMaster)
        self.configDir = os.path.abspath(self.mktemp())
        os.makedirs(self.configDir)
        self.writeConfig(self.listening.getHost().port)
        pkiDir = loadMinionConfig(self.configDir, overrides={"root_dir": self.configDir})["pki_dir"]
        os.makedirs(pkiDir, mode=0o700)
        self.keyPath = os.path.join(pkiDir, "minion.pem")
        crypt.writePrivateFile(self.keyPath, crypt.privateKeyToPem(MINION_KEY))

    def writeConfig(self, port: int) -> None:
        """
        Write the minion config, with the master at C{127.0.0.1:port}.
        """
        with open(os.path.join(self.configDir, "minion"), "w") as f:
            f.write(
                f"root_dir: {self.configDir}\nid: {MINION_ID}\n"
                f"master: 127.0.0.1\nmaster_port: {port}\n"
            )

    async def stopMaster(self) -> None:
        """
        Wait until the master saw every caller's connection close, then stop
        listening.
        """
        deadline = time.monotonic() + 10
        while self.master.transients and time.monotonic() < deadline:
            await deferLater(_reactor(), 0.05, lambda: None)
        await self.listening.stopListening()

    def accept(self) -> None:
        """
        Accept the minion's key on the master.
        """
        self.keyStore.putKey(ACCEPTED, MINION_ID, MINION_PEM)

    async def call(self, *args: str) -> tuple[str, str, int]:
        """
        Run C{salttwist-call -c DIR ARGS}.
        """
        out, err, code = await getProcessOutputAndValue(
            sys.executable,
            ["-m", "salttwist.cli.call", "-c", self.configDir, *args],
            env=dict(os.environ),
            reactor=_reactor(),
        )
        return out.decode(), err.decode(), code

    def tagged(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the master's events so far whose tag starts with C{prefix}.
        """
        return [(tag, data) for tag, data in self.events if tag.startswith(prefix)]

    async def test_returnRecorded(self) -> None:
        """
        With an accepted key, C{salttwist-call test.echo hi} prints the
        result, warns of nothing, and the master recorded the job (target the
        minion id, type C{list}) and its return under a jid of its own,
        firing C{new} then C{ret}.
        """
        self.accept()
        out, err, code = await self.call("test.echo", "hi")
        self.assertEqual((out, err, code), ("local:\n    hi\n", "", 0))
        [jid] = self.cache.jobs
        job = self.cache.jobs[jid]
        self.assertEqual(
            (job["fun"], job["arg"], job["tgt"], job["tgt_type"], job["minions"]),
            ("test.echo", ["hi"], MINION_ID, "list", [MINION_ID]),
        )
        self.assertEqual(self.cache.returns[jid][MINION_ID]["return"], "hi")
        self.assertEqual(
            [tag for tag, _ in self.tagged("salt/job/")],
            [f"salt/job/{jid}/new", f"salt/job/{jid}/ret/{MINION_ID}"],
        )
        self.assertEqual(self.master.sessions, {})

    async def test_local(self) -> None:
        """
        With C{--local} the master is not contacted at all.
        """
        self.accept()
        out, err, code = await self.call("--local", "test.echo", "hi")
        self.assertEqual((out, err, code), ("local:\n    hi\n", "", 0))
        self.assertEqual(self.events, [])
        self.assertEqual(self.cache.jobs, {})

    async def test_retcodePassthrough(self) -> None:
        """
        C{--retcode-passthrough} still exits with the function's retcode,
        which the master recorded too.
        """
        self.accept()
        out, err, code = await self.call("cmd.run", "exit 3", "--retcode-passthrough")
        self.assertEqual((code, err), (3, ""))
        [returns] = self.cache.returns.values()
        self.assertEqual(returns[MINION_ID]["retcode"], 3)

    async def test_pendingKey(self) -> None:
        """
        A key the master has not accepted is left pending; the command warns
        on standard error, prints the local result and exits 0.
        """
        out, err, code = await self.call("test.echo", "hi")
        self.assertEqual((out, code), ("local:\n    hi\n", 0))
        self.assertEqual(
            err,
            NOT_SENT + "the master has not accepted this minion's key yet "
            f"(salttwist-key -a {MINION_ID})\n",
        )
        self.assertEqual(self.keyStore.getKey(PENDING, MINION_ID), MINION_PEM)
        self.assertEqual(self.cache.jobs, {})

    async def test_rejectedKey(self) -> None:
        """
        A rejected key is warned about, and the local result printed.
        """
        self.keyStore.putKey(REJECTED, MINION_ID, MINION_PEM)
        out, err, code = await self.call("test.ping")
        self.assertEqual((out, code), ("local:\n    True\n", 0))
        self.assertEqual(err, NOT_SENT + "the master rejected this minion's key\n")

    async def test_noKey(self) -> None:
        """
        Without a minion key the command says so and prints the result.
        """
        os.unlink(self.keyPath)
        out, err, code = await self.call("test.ping")
        self.assertEqual((out, code), ("local:\n    True\n", 0))
        self.assertTrue(err.startswith(NOT_SENT + "this minion has no key"), err)
        self.assertEqual(self.events, [])

    async def test_masterDown(self) -> None:
        """
        A master that does not listen is warned about; the result is printed.
        """
        probe = _reactor().listenTCP(0, ReqServerFactory(self.master), interface="127.0.0.1")
        port = probe.getHost().port
        await probe.stopListening()
        self.writeConfig(port)
        out, err, code = await self.call("test.ping")
        self.assertEqual((out, code), ("local:\n    True\n", 0))
        self.assertTrue(
            err.startswith(NOT_SENT + f"cannot reach the master at 127.0.0.1:{port}"), err
        )

    async def test_eventSend(self) -> None:
        """
        C{salttwist-call event.send TAG data=...} fires the event on the
        master's bus with the minion's id, prints C{True}, and its return is
        recorded like any other.
        """
        self.accept()
        out, err, code = await self.call("event.send", "myco/deploy/done", 'data={"ok": true}')
        self.assertEqual((out, err, code), ("local:\n    True\n", "", 0))
        [(_, data)] = self.tagged("myco/")
        self.assertEqual((data["id"], data["data"]), (MINION_ID, {"ok": True}))
        [job] = self.cache.jobs.values()
        self.assertEqual(job["fun"], "event.send")

    async def test_eventRefused(self) -> None:
        """
        A forged master tag is refused: the command prints the master's
        reason and exits 1, and nothing is fired under that tag.
        """
        self.accept()
        tag = "salt/job/20260101000000000001/new"
        out, err, code = await self.call("event.send", tag, 'data={"fun": "cmd.run"}')
        self.assertEqual(code, 1)
        self.assertIn(
            "ERROR: the master refused the event: event refused: tags under salt/ are the master's",
            out,
        )
        self.assertEqual(self.tagged(tag), [])

    async def test_eventSendLocal(self) -> None:
        """
        With C{--local}, C{event.send} fails: there is no master.
        """
        out, _, code = await self.call("--local", "event.send", "myco/x")
        self.assertEqual(code, 1)
        self.assertIn("no master to send the event to", out)
