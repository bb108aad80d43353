# -*- test-case-name: tests.test_modules_service_dispatch -*-
"""
Tests for L{salttwist.modules.service}: each function reaches the same
action of either provider, C{no_block} going to systemd only: the
commands run are recorded (and run for real) for systemd, which does not
run on the test machine; the sysvinit provider runs a real init script in
a temporary root.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, service
from tests._initscript import actions, daemonPid, installScript, newName
from tests._statectx import makeLoaderContext


class SystemdDispatchTests(SynchronousTestCase):
    """
    The functions with the systemd provider: the C{systemctl} command
    lines they run.
    """

    def setUp(self) -> None:
        # A unit no machine has: systemctl, where it runs at all, only
        # says it is not there.
        self.unit = newName()
        self.context = makeLoaderContext({"providers": {"service": "systemd"}})
        self.ran: list[list[str]] = []
        runQuiet = service._runQuiet

        def recording(argv: list[str], *args: Any) -> tuple[int, str]:
            self.ran.append(list(argv))
            return runQuiet(argv, *args)

        self.patch(service, "_runQuiet", recording)

    def commands(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> list[list[str]]:
        """
        @return: the command lines C{function} ran.
        """
        del self.ran[:]
        try:
            function(self.context, self.unit, *args, **kwargs)
        except CommandExecutionError:
            pass  # No systemctl on this machine: the command was tried all the same.
        return self.ran

    def test_actions(self) -> None:
        """
        start, stop and restart are C{systemctl [--no-block] <verb>};
        reload and force_reload the same without C{--no-block};
        full_restart a stop then a start.
        """
        unit = f"{self.unit}.service"
        for function, verb in [
            (service.start, "start"),
            (service.stop, "stop"),
            (service.restart, "restart"),
        ]:
            self.assertEqual(self.commands(function), [["systemctl", verb, unit]])
            self.assertEqual(
                self.commands(function, no_block=True),
                [["systemctl", "--no-block", verb, unit]],
            )
        self.assertEqual(self.commands(service.reload_), [["systemctl", "reload", unit]])
        self.assertEqual(self.commands(service.force_reload), [["systemctl", "force-reload", unit]])
        self.assertEqual(
            self.commands(service.full_restart),
            [["systemctl", "stop", unit], ["systemctl", "start", unit]],
        )

    def test_queries(self) -> None:
        """
        status asks C{is-active}, enabled C{is-enabled}, disabled lists the
        unit files first.
        """
        unit = f"{self.unit}.service"
        self.assertEqual(
            self.commands(service.status), [["systemctl", "is-active", "--quiet", unit]]
        )
        self.assertEqual(self.commands(service.enabled), [["systemctl", "is-enabled", unit]])
        ran = self.commands(service.disabled)
        self.assertEqual(ran[0][:2], ["systemctl", "list-unit-files"])
        self.assertNotIn(["systemctl", "is-enabled", unit], ran)


class SysvDispatchTests(SynchronousTestCase):
    """
    The functions with the sysvinit provider over a temporary root:
    C{no_block} is taken and has no effect.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.name = newName()
        initDir = os.path.join(self.root, "init.d")
        self.state = installScript(self, initDir, self.name)
        self.context = makeLoaderContext(
            {
                "service_init_dir": initDir,
                "service_rc_dir": self.root,
                "providers": {"service": "sysvinit"},
            }
        )

    def test_actions(self) -> None:
        """
        Each function runs the script's action, with or without
        C{no_block}.
        """
        c, name = self.context, self.name
        self.assertTrue(service.start(c, name, no_block=True))
        self.assertIsNotNone(daemonPid(self.state))
        self.assertTrue(service.restart(c, name, no_block=True))
        self.assertTrue(service.restart(c, name))
        self.assertTrue(service.reload_(c, name))
        self.assertTrue(service.force_reload(c, name))
        self.assertTrue(service.stop(c, name, no_block=True))
        self.assertIsNone(daemonPid(self.state))
        self.assertFalse(service.reload_(c, name))
        self.assertEqual(
            actions(self.state),
            ["start", "restart", "restart", "reload", "force-reload", "stop", "reload"],
        )

    def test_bootQueries(self) -> None:
        """
        enabled and disabled follow the boot links; a service that does
        not exist is neither.
        """
        c, name = self.context, self.name
        self.assertEqual((service.enabled(c, name), service.disabled(c, name)), (False, True))
        service.enable(c, name)
        self.assertEqual((service.enabled(c, name), service.disabled(c, name)), (True, False))
        none = f"{name}-none"
        self.assertEqual((service.enabled(c, none), service.disabled(c, none)), (False, False))


class ProviderShapeTests(SynchronousTestCase):
    """
    Both providers answer L{service.ServiceProvider} alike, which the
    functions rely on instead of asking which provider they have.
    """

    def test_sameMethods(self) -> None:
        """
        Each method of the protocol has the same signature on both.
        """
        methods = [
            name
            for name, value in vars(service.ServiceProvider).items()
            if callable(value) and not name.startswith("_")
        ]
        self.assertEqual(
            sorted(methods),
            ["action", "disable", "enable", "getAll", "getEnabled", "isEnabled", "status"],
        )
        for provider in (service.SysvProvider, service.SystemdProvider):
            for name in methods:
                self.assertEqual(
                    inspect.signature(getattr(provider, name)),
                    inspect.signature(getattr(service.ServiceProvider, name)),
                    (provider, name),
                )
