# -*- test-case-name: tests.test_runners -*-
"""
Tests for the runner plumbing: L{salttwist.runners.loadRunners} and
L{Master.clientRunner}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.pki.keystore import InMemoryKeyStore
from salttwist.runners import RunnerContext

MASTER_KEY = crypt.generatePrivateKey()


def _echo(context: RunnerContext, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs, "master": context.master is not None}


def _boom(context: RunnerContext) -> None:
    raise RuntimeError("boom")


class ClientRunnerTests(SynchronousTestCase):
    """
    The local client's C{runner} command runs a runner function in the
    master and fires C{salt/run} events.
    """

    def setUp(self) -> None:
        """
        A master with two test runners and a recording bus.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(root, overrides={"root_dir": root})
        bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        bus.subscribe(["salt/run/"], lambda tag, data: self.events.append((tag, data)))
        self.master = Master(
            config,
            MasterKeys(MASTER_KEY, crypt.publicKeyToPem(MASTER_KEY.public_key()), b"r" * 32),
            InMemoryKeyStore(),
            bus,
            runSynchronously,
            Clock(),
        )
        self.master.runners.update({"test.echo": _echo, "test.boom": _boom})

    def run_(self, fun: Any, arg: Any = None) -> Any:
        """
        Call the runner command as the req server does.
        """
        return self.master.clientRunner(None, {"fun": fun, "arg": arg or []})  # type: ignore[arg-type]

    def test_runs(self) -> None:
        """
        A runner gets the context and Salt's wire arguments split into
        positional and keyword ones; new and ret events carry the jid.
        """
        reply = self.successResultOf(self.run_("test.echo", [1, {"__kwarg__": True, "a": 2}]))
        self.assertEqual(reply["return"], {"args": [1], "kwargs": {"a": 2}, "master": True})
        tags = [tag for tag, _ in self.events]
        self.assertEqual(tags, [f"salt/run/{reply['jid']}/new", f"salt/run/{reply['jid']}/ret"])
        self.assertIs(self.events[1][1]["success"], True)

    def test_unknown(self) -> None:
        """
        An unknown runner is refused with Salt's wording; a bad name too.
        """
        self.assertEqual(
            str(self.assertRaises(ValueError, self.run_, "no.such")), "'no.such' is not available."
        )
        self.assertRaises(ValueError, self.run_, "../x")
        self.assertRaises(ValueError, self.run_, "test.echo", "not a list")

    def test_failure(self) -> None:
        """
        A runner that raises fails the request and fires a ret event with
        success false; wrong arguments are reported as such.
        """
        self.failureResultOf(self.run_("test.boom"), RuntimeError)
        self.assertIs(self.events[-1][1]["success"], False)
        failure = self.failureResultOf(self.run_("test.boom", ["extra"]), ValueError)
        self.assertIn("Passed invalid arguments to test.boom", str(failure.value))
