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
from zope.interface.verify import verifyObject

from salttwist import crypt, grains
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.interfaces import IRunnerMaster
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.modules import loadFunctions
from salttwist.pki.keystore import InMemoryKeyStore
from salttwist.runners import RunnerContext, loadRunners
from salttwist.runners import salt as saltRunners

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

    def test_runnerMaster(self) -> None:
        """
        The master a runner gets provides L{IRunnerMaster}, the whole of
        what runners use.
        """
        masters: list[Any] = []
        self.master.runners["test.grab"] = lambda context: masters.append(context.master)
        self.successResultOf(self.run_("test.grab"))
        self.assertTrue(verifyObject(IRunnerMaster, masters[0]))

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


class RegisteredRunnersTests(SynchronousTestCase):
    """
    The master loads Salt's runner modules.
    """

    def test_loaded(self) -> None:
        """
        The C{jobs}, C{manage} and C{salt} runners are registered under
        Salt's names.
        """
        names = set(loadRunners())
        for name in (
            "jobs.active",
            "jobs.lookup_jid",
            "jobs.list_job",
            "jobs.list_jobs",
            "jobs.print_job",
            "jobs.exit_success",
            "manage.status",
            "manage.up",
            "manage.down",
            "manage.present",
            "manage.not_present",
            "manage.joined",
            "manage.not_joined",
            "manage.list_state",
            "manage.list_not_state",
            "salt.cmd",
        ):
            self.assertIn(name, names)
        self.assertFalse([n for n in names if n.split(".")[1].startswith("_")])


class SaltCmdTests(SynchronousTestCase):
    """
    C{salt.cmd} runs an execution module function in the master.
    """

    def setUp(self) -> None:
        """
        A master whose C{runBlocking} records what it runs; the master's
        grains are fixed (gathering real ones reads the host and asks DNS).
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(root, overrides={"root_dir": root})
        self.blocking: list[Any] = []

        def runBlocking(f: Any, *args: Any, **kwargs: Any) -> Any:
            self.blocking.append(f)
            return runSynchronously(f, *args, **kwargs)

        self.master = Master(
            config,
            MasterKeys(MASTER_KEY, crypt.publicKeyToPem(MASTER_KEY.public_key()), b"r" * 32),
            InMemoryKeyStore(),
            LocalEventBus(),
            runBlocking,
            Clock(),
        )
        self.grainsOpts: list[dict[str, Any]] = []

        def masterGrains(opts: dict[str, Any]) -> dict[str, Any]:
            self.grainsOpts.append(opts)
            return {"id": "host.example_master", "os": "Debian"}

        self.patch(saltRunners, "_masterGrains", masterGrains)

    def run_(self, arg: list[Any]) -> Any:
        """
        Run C{salt.cmd} with wire arguments C{arg}.
        """
        return self.master.clientRunner(None, {"fun": "salt.cmd", "arg": arg})  # type: ignore[arg-type]

    def test_function(self) -> None:
        """
        The function's return is the runner's return; positional and
        keyword arguments reach it, Salt's C{__pub_*} keys do not.
        """
        reply = self.successResultOf(
            self.run_(["test.arg", 1, "two", {"__kwarg__": True, "a": 3, "__pub_jid": "x"}])
        )
        self.assertEqual(reply["return"], {"args": [1, "two"], "kwargs": {"a": 3}})
        echo = self.successResultOf(self.run_(["test.echo", "hi"]))
        self.assertEqual(echo["return"], "hi")

    def test_grains(self) -> None:
        """
        Functions see the master's grains (gathered off the reactor thread)
        and its config, with the master's id.
        """
        reply = self.successResultOf(self.run_(["grains.item", "id", "os"]))
        self.assertEqual(reply["return"], {"id": "host.example_master", "os": "Debian"})
        self.assertIn(saltRunners._masterGrains, self.blocking)
        self.assertEqual(self.grainsOpts[0]["cachedir"], self.master.config["cachedir"])

    def test_blockingInThreads(self) -> None:
        """
        A function not marked C{onReactor} runs through C{runBlocking}; one
        marked so does not.
        """
        functions = loadFunctions()
        self.successResultOf(self.run_(["test.fib", 5]))
        self.assertIn(functions["test.fib"], self.blocking)
        self.successResultOf(self.run_(["test.ping"]))
        self.assertNotIn(functions["test.ping"], self.blocking)

    def test_retcodeValue(self) -> None:
        """
        A function returning a value with a retcode returns the value.
        """
        reply = self.successResultOf(self.run_(["test.retcode", 3]))
        self.assertIs(reply["return"], True)

    def test_unavailable(self) -> None:
        """
        An unknown function returns Salt's message instead of failing.
        """
        reply = self.successResultOf(self.run_(["nope.nope"]))
        self.assertEqual(reply["return"], "'nope.nope' is not available.")

    def test_exception(self) -> None:
        """
        A function that raises fails the runner with Salt's message for it.
        """
        failure = self.failureResultOf(self.run_(["test.exception", "oops"]), ValueError)
        self.assertEqual(
            str(failure.value), "The minion function caused an exception: Exception: oops"
        )
        self.flushLoggedErrors(Exception)

    def test_badArguments(self) -> None:
        """
        Arguments the function does not take are reported with its name.
        """
        failure = self.failureResultOf(self.run_(["test.ping", "extra"]), ValueError)
        self.assertIn("Passed invalid arguments to test.ping", str(failure.value))
        missing = self.failureResultOf(self.run_([]), ValueError)
        self.assertIn("Passed invalid arguments to salt.cmd", str(missing.value))

    def test_masterGrains(self) -> None:
        """
        The master's grains are the host's core grains with Salt's master
        id, C{<fqdn>_master}, unless the config names one.
        """
        self.patch(grains, "getFqdn", lambda: "host.example")
        self.patch(grains, "coreGrains", lambda minionId, config: {"id": minionId})
        self.assertEqual(self.masterGrainsOriginal({}), {"id": "host.example_master"})
        self.assertEqual(self.masterGrainsOriginal({"id": "boss"}), {"id": "boss"})

    masterGrainsOriginal = staticmethod(saltRunners._masterGrains)
