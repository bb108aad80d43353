"""
Tests for L{salttwist.state.runafter} through L{StateRunner}: refreshes
(C{reload_modules}, C{reload_grains}, C{reload_pillar},
C{force_reload_modules}) and C{fire_event}.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.state.runner import StateRunner
from salttwist.states import StateContext, loadStates
from tests.test_state_runner import chunk


class AfterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.grains = {"os": "old"}
        self.pillar = {"role": "old"}

        def recording(name: str, value: Any = True) -> Any:
            def function(*args: Any, **kwargs: Any) -> Any:
                self.calls.append((name, args, kwargs))
                return value

            return function

        salt = {
            name: recording(name)
            for name in (
                "saltutil.refresh_grains",
                "saltutil.refresh_pillar",
                "saltutil.refresh_modules",
                "event.fire_master",
            )
        }
        salt["grains.items"] = recording("grains.items", {"os": "new"})
        salt["pillar.items"] = recording("pillar.items", {"role": "new"})
        self.base = StateContext(
            salt=salt,
            opts={"id": "m1"},
            grains=self.grains,
            pillar=self.pillar,
            jid="20261126200000000000",
        )
        testStates = loadStates(("test",))
        self.states = {key: testStates[key] for key in list(testStates)}

    def runChunks(self, chunks: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        runner = StateRunner(
            self.states, lambda low: dataclasses.replace(self.base, low=low), **kwargs
        )
        return runner.run(chunks)

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]

    def test_reloadModulesOnChange(self) -> None:
        """
        C{reload_modules} reloads the modules after a state that changed
        something, not after one that did not.
        """
        self.runChunks(
            [
                chunk("test", "succeed_without_changes", "a", reload_modules=True),
                chunk("test", "succeed_with_changes", "b", reload_modules=True),
            ]
        )
        self.assertEqual(self.names(), ["saltutil.refresh_modules"])

    def test_forceReloadModules(self) -> None:
        """
        C{force_reload_modules} reloads them after a state without
        changes.
        """
        self.runChunks([chunk("test", "succeed_without_changes", "a", force_reload_modules=True)])
        self.assertEqual(self.names(), ["saltutil.refresh_modules"])

    def test_reloadPillarAndGrains(self) -> None:
        """
        C{reload_grains} and C{reload_pillar} fetch them again, show the
        new values to the rest of the run, and reload the modules when the
        state changed something.
        """
        seen = []

        def look(ctx: StateContext, name: str) -> dict[str, Any]:
            seen.append((dict(ctx.grains), dict(ctx.pillar)))
            return {"name": name, "result": True, "changes": {}, "comment": ""}

        self.states["rec.look"] = look
        self.runChunks(
            [
                chunk("test", "succeed_with_changes", "a", reload_grains=True, reload_pillar=True),
                chunk("rec", "look", "b"),
            ]
        )
        self.assertEqual(
            self.names(),
            [
                "saltutil.refresh_grains",
                "grains.items",
                "saltutil.refresh_pillar",
                "pillar.items",
                "saltutil.refresh_modules",
            ],
        )
        self.assertEqual(seen, [({"os": "new"}, {"role": "new"})])

    def test_noRefreshForPrereqTestRun(self) -> None:
        """
        A prereq target's test run does not refresh anything.
        """
        self.runChunks(
            [
                chunk("test", "succeed_without_changes", "stop", prereq=["deploy"]),
                chunk("test", "succeed_with_changes", "deploy", reload_modules=True),
            ]
        )
        self.assertEqual(self.names(), ["saltutil.refresh_modules"])

    def test_fireEvent(self) -> None:
        """
        C{fire_event: True} fires the state's return to the master under
        C{salt/state_result/<jid>/<minion>/<name>}; a string replaces the
        name.
        """
        ret = self.runChunks(
            [
                chunk("test", "succeed_with_changes", "a", name="thing", fire_event=True),
                chunk("test", "nop", "b", fire_event="deploy/done"),
                chunk("test", "nop", "c"),
            ]
        )
        fired = [(args, kwargs) for name, args, kwargs in self.calls if name == "event.fire_master"]
        self.assertEqual(len(fired), 2)
        (data, tag), kwargs = fired[0]
        self.assertEqual(tag, "salt/state_result/20261126200000000000/m1/thing")
        self.assertEqual(data, {"ret": ret["test_|-a_|-thing_|-succeed_with_changes"]})
        self.assertEqual(kwargs, {"preload": {"jid": "20261126200000000000"}})
        self.assertEqual(fired[1][0][1], "salt/state_result/20261126200000000000/m1/deploy/done")

    def test_noEventWhenLocal(self) -> None:
        """
        A C{--local} run (or one without a job) fires nothing.
        """
        self.base = dataclasses.replace(self.base, opts={"id": "m1", "local": True})
        self.runChunks([chunk("test", "nop", "a", fire_event=True)])
        self.base = dataclasses.replace(self.base, opts={"id": "m1"}, jid=None)
        self.runChunks([chunk("test", "nop", "a", fire_event=True)])
        self.assertEqual(self.calls, [])

    def test_failingRefreshKeepsReturn(self) -> None:
        """
        A refresh that fails is logged; the state's return stands.
        """

        def broken() -> None:
            raise RuntimeError("no master")

        self.base = dataclasses.replace(
            self.base, salt=dict(self.base.salt, **{"saltutil.refresh_modules": broken})
        )
        ret = self.runChunks([chunk("test", "succeed_with_changes", "a", reload_modules=True)])
        self.assertIs(ret["test_|-a_|-a_|-succeed_with_changes"]["result"], True)
