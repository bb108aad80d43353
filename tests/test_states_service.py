# -*- test-case-name: tests.test_states_service -*-
"""
Tests for L{salttwist.states.service}: the states over the real service
module and a real init script (in a temporary init directory: the
sysvinit provider's C{service_init_dir} and C{service_rc_dir}).
"""

from __future__ import annotations

import os

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.state.runner import StateRunner
from salttwist.states import StateContext, loadStates
from tests._initscript import actions, daemonPid, installScript, newName
from tests._statectx import makeStateContext, runState


class ServiceStateTests(TestCase):
    """
    C{service.running}, C{dead}, C{enabled}, C{disabled}, C{mod_watch}.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.name = self.n = newName()
        self.state = installScript(self, os.path.join(self.root, "init.d"), self.name)

    def ctx(self, test: bool = False) -> StateContext:
        return makeStateContext(
            test=test,
            opts={
                "providers": {"service": "sysvinit"},
                "service_init_dir": os.path.join(self.root, "init.d"),
                "service_rc_dir": self.root,
            },
        )

    def enabledLinks(self) -> list[str]:
        directory = os.path.join(self.root, "rc2.d")
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []

    async def test_running(self) -> None:
        """
        A dead service is started (test mode only says it would be); a
        running one is left alone.
        """
        n = self.n
        preview = await runState("service.running", name=n, ctx=self.ctx(test=True))
        self.assertEqual(
            (preview["result"], preview["comment"], preview["changes"]),
            (None, f"Service {n} is set to start", {}),
        )
        self.assertIsNone(daemonPid(self.state))
        ret = await runState("service.running", name=n, ctx=self.ctx())
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, f"Started service {n}", {n: True}),
        )
        self.assertIsNotNone(daemonPid(self.state))
        again = await runState("service.running", name=n, ctx=self.ctx())
        self.assertEqual(
            (again["result"], again["comment"], again["changes"]),
            (True, f"The service {n} is already running", {}),
        )

    async def test_runningEnable(self) -> None:
        """
        C{enable: True} starts and enables; then both are in place;
        C{init_delay} is said.
        """
        n = self.n
        ret = await runState("service.running", name=n, enable=True, init_delay=0.1, ctx=self.ctx())
        self.assertTrue(ret["result"])
        self.assertEqual(
            ret["comment"],
            f"Service {n} has been enabled, and is running\nDelayed return for 0.1 seconds",
        )
        self.assertEqual(ret["changes"], {n: True})
        self.assertEqual(self.enabledLinks(), [f"S01{n}"])
        again = await runState("service.running", name=n, enable=True, ctx=self.ctx())
        self.assertEqual(again["comment"], f"The service {n} is already running")
        disable = await runState("service.running", name=n, enable=False, ctx=self.ctx())
        self.assertEqual(
            (disable["comment"], disable["changes"]),
            (f"Service {n} has been disabled, and is in the desired state", {n: True}),
        )
        self.assertEqual(self.enabledLinks(), [f"K01{n}"])

    async def test_runningFails(self) -> None:
        """
        A start that fails is a failed state.
        """
        open(os.path.join(self.state, "fail-start"), "w").close()
        ret = await runState("service.running", name=self.n, ctx=self.ctx())
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, f"Service {self.n} failed to start")
        )

    async def test_unavailable(self) -> None:
        """
        A service that does not exist fails, or in test mode would have
        been started; C{dead} is content.
        """
        n = f"{self.n}-none"
        ret = await runState("service.running", name=n, ctx=self.ctx())
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, f"The named service {n} is not available")
        )
        preview = await runState("service.running", name=n, ctx=self.ctx(test=True))
        self.assertEqual(
            (preview["result"], preview["comment"]),
            (
                None,
                f"Service {n} not present; if created in this state run,"
                " it would have been started",
            ),
        )
        dead = await runState("service.dead", name=n, ctx=self.ctx())
        self.assertTrue(dead["result"])

    async def test_enabledOption(self) -> None:
        """
        C{enabled} (for C{enable}) is refused with Salt's hint.
        """
        ret = await runState("service.running", name=self.n, enabled=True, ctx=self.ctx())
        self.assertFalse(ret["result"])
        self.assertIn('Perhaps "enable" option was intended?', ret["comment"])

    async def test_dead(self) -> None:
        """
        A running service is stopped (test mode says it would be).
        """
        n = self.n
        await runState("service.running", name=n, ctx=self.ctx())
        preview = await runState("service.dead", name=n, ctx=self.ctx(test=True))
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, f"Service {n} is set to be killed")
        )
        self.assertIsNotNone(daemonPid(self.state))
        ret = await runState("service.dead", name=n, enable=False, ctx=self.ctx())
        self.assertEqual(ret["result"], True)
        self.assertEqual(ret["comment"], f"Service {n} is already disabled, and is dead")
        self.assertEqual(ret["changes"], {n: False})
        self.assertIsNone(daemonPid(self.state))
        again = await runState("service.dead", name=n, ctx=self.ctx())
        self.assertEqual(again["comment"], f"The service {n} is already dead")

    async def test_enabledDisabled(self) -> None:
        """
        C{service.enabled} and C{service.disabled} set the boot links only.
        """
        n = self.n
        preview = await runState("service.enabled", name=n, ctx=self.ctx(test=True))
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, f"Service {n} set to be enabled")
        )
        self.assertEqual(self.enabledLinks(), [])
        ret = await runState("service.enabled", name=n, ctx=self.ctx())
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, f"Service {n} has been enabled, and is in the desired state", {n: True}),
        )
        again = await runState("service.enabled", name=n, ctx=self.ctx())
        self.assertEqual(
            again["comment"], f"Service {n} is already enabled, and is in the desired state"
        )
        off = await runState("service.disabled", name=n, ctx=self.ctx())
        self.assertEqual(
            off["comment"], f"Service {n} has been disabled, and is in the desired state"
        )
        self.assertEqual(self.enabledLinks(), [f"K01{n}"])
        self.assertIsNone(daemonPid(self.state))

    async def test_modWatch(self) -> None:
        """
        A watch restarts a running service, reloads it with C{reload},
        stops and starts it with C{full_restart}, starts a dead one; test
        mode only says so.
        """
        n = self.n
        await runState("service.running", name=n, ctx=self.ctx())
        pid = daemonPid(self.state)
        preview = await runState(
            "service.mod_watch", name=n, sfun="running", ctx=self.ctx(test=True)
        )
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, "Service is set to be restarted")
        )
        self.assertEqual(daemonPid(self.state), pid)
        ret = await runState("service.mod_watch", name=n, sfun="running", ctx=self.ctx())
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]), (True, "Service restarted", {n: True})
        )
        self.assertNotEqual(daemonPid(self.state), pid)
        reload = await runState(
            "service.mod_watch", name=n, sfun="running", reload=True, ctx=self.ctx()
        )
        self.assertEqual(reload["comment"], "Service reloaded")
        self.assertEqual(actions(self.state)[-1], "reload")
        full = await runState(
            "service.mod_watch", name=n, sfun="running", full_restart=True, ctx=self.ctx()
        )
        self.assertEqual(full["comment"], "Service fully restarted")
        self.assertEqual(actions(self.state)[-2:], ["stop", "start"])
        stop = await runState("service.mod_watch", name=n, sfun="dead", ctx=self.ctx())
        self.assertEqual(stop["comment"], "Service stopped")
        self.assertIsNone(daemonPid(self.state))
        start = await runState("service.mod_watch", name=n, sfun="running", ctx=self.ctx())
        self.assertEqual(start["comment"], "Service started")
        self.assertIsNotNone(daemonPid(self.state))
        other = await runState("service.mod_watch", name=n, sfun="enabled", ctx=self.ctx())
        self.assertEqual(
            (other["result"], other["comment"]),
            (False, "Unable to trigger watch for service.enabled"),
        )

    async def test_watchThroughRunner(self) -> None:
        """
        Run by the state runner, a C{service.running} watching a state
        that changed is restarted (reloaded with C{reload: True}) by its
        C{mod_watch}; one watching a state without changes is only kept
        running.
        """
        n = self.n
        ctx = self.ctx()

        def chunk(state: str, fun: str, ident: str, order: int, **args: object) -> dict:
            return {
                "state": state,
                "fun": fun,
                "__id__": ident,
                "name": ident,
                "__sls__": "svc",
                "__env__": "base",
                "order": order,
                **args,
            }

        chunks = [
            chunk("test", "succeed_with_changes", "conf", 1),
            chunk("test", "succeed_without_changes", "same", 2),
            chunk("service", "running", n, 3, watch=[{"test": "conf"}]),
        ]
        runner = StateRunner(loadStates(), lambda low: ctx)
        await runState("service.running", name=n, ctx=ctx)
        pid = daemonPid(self.state)
        ret = await deferToThread(runner.run, chunks)
        service = ret[f"service_|-{n}_|-{n}_|-running"]
        self.assertEqual(
            (service["result"], service["comment"], service["changes"]),
            (True, "Service restarted", {n: True}),
        )
        self.assertNotEqual(daemonPid(self.state), pid)
        chunks[2]["reload"] = True
        ret = await deferToThread(runner.run, chunks)
        self.assertEqual(ret[f"service_|-{n}_|-{n}_|-running"]["comment"], "Service reloaded")
        self.assertEqual(actions(self.state)[-1], "reload")
        chunks[2]["watch"] = [{"test": "same"}]
        ret = await deferToThread(runner.run, chunks)
        self.assertEqual(
            ret[f"service_|-{n}_|-{n}_|-running"]["comment"], f"The service {n} is already running"
        )
