# -*- test-case-name: tests.test_states_service_flows -*-
"""
Tests for L{salttwist.states.service}: C{service.running} and
C{service.dead} step by step (the service missing, already there, test
mode, the start or stop failing or not taking, C{init_delay}, the boot
setting), each direction over the real service module and a real init
script whose actions can be made to fail or do nothing.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.states import StateContext
from tests._initscript import daemonPid, installScript, newName
from tests._statectx import makeStateContext, runState

#: Put before the script's actions: an action fails (exit 1) while a file
#: C{fail-<action>} is in the state directory, and does nothing but
#: succeed while a file C{noop-<action>} is.
_HOOKS = """\
[ -f {state}/fail-$1 ] && exit 1
[ -f {state}/noop-$1 ] && exit 0
case "$1" in
"""


class ServiceFlowTests(TestCase):
    """
    Each step of C{service.running} and C{service.dead}, with Salt's
    results, comments and changes.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.n = newName()
        initDir = os.path.join(self.root, "init.d")
        self.state = installScript(self, initDir, self.n)
        path = os.path.join(initDir, self.n)
        with open(path) as f:
            script = f.read()
        with open(path, "w") as f:
            f.write(script.replace('case "$1" in\n', _HOOKS.format(state=self.state), 1))

    def ctx(self, test: bool = False) -> StateContext:
        return makeStateContext(
            test=test,
            opts={
                "providers": {"service": "sysvinit"},
                "service_init_dir": os.path.join(self.root, "init.d"),
                "service_rc_dir": self.root,
            },
        )

    def flag(self, name: str, on: bool = True) -> None:
        """
        Make the script's action fail or do nothing (C{fail-stop},
        C{noop-start}, ...), or (C{on=False}) no longer.
        """
        path = os.path.join(self.state, name)
        if on:
            open(path, "w").close()
        elif os.path.exists(path):
            os.unlink(path)

    def enabledLinks(self) -> list[str]:
        directory = os.path.join(self.root, "rc2.d")
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []

    async def apply(self, fun: str, test: bool = False, **args: Any) -> tuple[Any, ...]:
        ret = await runState(f"service.{fun}", name=self.n, ctx=self.ctx(test=test), **args)
        return ret["result"], ret["comment"], ret["changes"]

    async def test_deadMissing(self) -> None:
        """
        C{service.dead} of a service that does not exist: content, or in
        test mode it would have been stopped.
        """
        self.n = f"{self.n}-none"
        self.assertEqual(
            await self.apply("dead"), (True, f"The named service {self.n} is not available", {})
        )
        self.assertEqual(
            await self.apply("dead", test=True),
            (
                None,
                f"Service {self.n} not present; if created in this state run,"
                " it would have been stopped",
                {},
            ),
        )

    async def test_alreadyThereToggles(self) -> None:
        """
        A service already as wanted only has its boot setting brought to
        C{enable}, said as in the desired state.
        """
        n = self.n
        self.assertEqual(
            await self.apply("dead", enable=True),
            (True, f"Service {n} has been enabled, and is in the desired state", {n: True}),
        )
        self.assertEqual(self.enabledLinks(), [f"S01{n}"])
        self.assertEqual(
            await self.apply("dead", enable=True), (True, f"The service {n} is already dead", {})
        )
        await self.apply("running")
        self.assertEqual(
            await self.apply("running", enable=False),
            (True, f"Service {n} has been disabled, and is in the desired state", {n: True}),
        )
        self.assertEqual(
            await self.apply("running", enable=True, test=True),
            (None, f"Service {n} set to be enabled", {}),
        )
        self.assertEqual(self.enabledLinks(), [f"K01{n}"])

    async def test_deadStops(self) -> None:
        """
        C{service.dead} of a running service stops it; with C{enable} it
        also sets the boot setting, and C{init_delay} is waited but not
        said.
        """
        n = self.n
        await self.apply("running")
        self.assertEqual(
            await self.apply("dead", enable=True, init_delay=0.1),
            (True, f"Service {n} has been enabled, and is dead", {n: True}),
        )
        self.assertIsNone(daemonPid(self.state))
        await self.apply("running")
        self.assertEqual(await self.apply("dead"), (True, f"Service {n} was killed", {n: False}))

    async def test_actionFails(self) -> None:
        """
        A start or stop that fails: the state fails; with C{enable} the
        boot setting is brought there all the same and said.
        """
        n = self.n
        self.flag("fail-start")
        self.assertEqual(
            await self.apply("running", enable=True),
            (False, f"Service {n} has been enabled, and is dead", {n: True}),
        )
        self.flag("fail-start", False)
        await self.apply("running")
        self.flag("fail-stop")
        self.assertEqual(await self.apply("dead"), (False, f"Service {n} failed to die", {}))
        self.assertEqual(
            await self.apply("dead", enable=False),
            (False, f"Service {n} has been disabled, and is running", {n: True}),
        )
        self.assertIsNotNone(daemonPid(self.state))

    async def test_actionDoesNotTake(self) -> None:
        """
        A start or stop that succeeds but leaves the service as it was:
        the state fails, with no changes; with C{enable}, the boot setting
        is set and said.
        """
        n = self.n
        self.flag("noop-start")
        self.assertEqual(await self.apply("running"), (False, f"Service {n} failed to start", {}))
        self.assertEqual(
            await self.apply("running", enable=True, init_delay=0.1),
            (
                False,
                f"Service {n} has been enabled, and is dead\nDelayed return for 0.1 seconds",
                {n: True},
            ),
        )
        self.flag("noop-start", False)
        await self.apply("running")
        self.flag("noop-stop")
        self.assertEqual(await self.apply("dead"), (False, f"Service {n} failed to die", {}))
        self.assertEqual(
            await self.apply("dead", enable=False),
            (False, f"Service {n} has been disabled, and is running", {n: True}),
        )
        self.assertEqual(
            await self.apply("dead", enable=False),
            (False, f"Service {n} is already disabled, and is running", {}),
        )
        self.assertIsNotNone(daemonPid(self.state))
