# -*- test-case-name: tests.test_modules_state_options -*-
"""
Tests for L{salttwist.modules.state}: what each public C{state.*} function
passes on to its run (C{test}, C{pillar}, C{saltenv}, C{pillarenv},
C{state_events}, C{exclude}, C{sync_mods}) and to the minion's state slot
(C{queue}, C{concurrent}), and what it leaves out, function by function.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.trial.unittest import TestCase

from salttwist.modules import state as statemod
from salttwist.modules.sysmod import _argspec
from tests import test_modules_state as statetests

#: Every option at once, each with a value that is not its default.
OPTIONS = {
    "test": True,
    "pillar": {"port": 83},
    "saltenv": "base",
    "pillarenv": "dev",
    "state_events": True,
}

#: Each function, its positional arguments, and what its run is built
#: with when called with L{OPTIONS}: C{(test, pillar, saltenv, pillarenv,
#: stateEvents, defaultSaltenv)}. A function without a C{pillar} argument
#: (C{state.show_top}) has the executor merge the override into its
#: context's pillar instead (not into a pillar fetched afresh).
EVERY = {
    "state.apply": ((), (True, {"port": 83}, "base", "dev", True, None)),
    "state.apply web": (("web",), (True, {"port": 83}, "base", "dev", True, "base")),
    "state.test": ((), (True, {"port": 83}, "base", "dev", True, None)),
    "state.test web": (("web",), (True, {"port": 83}, "base", "dev", True, "base")),
    "state.highstate": ((), (True, {"port": 83}, "base", "dev", True, None)),
    "state.sls": (("web",), (True, {"port": 83}, "base", "dev", True, "base")),
    "state.sls_id": (("greeting", "web"), (True, {"port": 83}, "base", "dev", True, "base")),
    "state.single": (
        ("test.succeed_with_changes", "x"),
        (True, {"port": 83}, "base", None, True, "base"),
    ),
    "state.show_top": ((), (None, None, "base", None, None, None)),
    "state.show_highstate": ((), (None, {"port": 83}, "base", "dev", None, None)),
    "state.show_lowstate": ((), (None, {"port": 83}, "base", "dev", None, None)),
    "state.show_sls": (("web",), (True, {"port": 83}, "base", "dev", None, "base")),
    "state.show_low_sls": (("web",), (True, {"port": 83}, "base", "dev", None, "base")),
}


class OptionsTests(TestCase):
    """
    The options of each function, through an L{Executor
    <salttwist.modules.executor.Executor>} as the minion runs a job.
    """

    # The tree, context and executor of the module's other tests.
    setUp = statetests.StateModuleTests.setUp
    call = statetests.StateModuleTests.call

    def recordRuns(self) -> list[tuple[Any, ...]]:
        """
        @return: a list that gets what each run is built with (the real
            run is built all the same).
        """
        built: list[tuple[Any, ...]] = []
        buildRun = statemod._buildRun

        def recording(context: Any, jid: str, **kwargs: Any) -> Any:
            built.append(
                tuple(
                    kwargs[key]
                    for key in (
                        "test",
                        "pillar",
                        "saltenv",
                        "pillarenv",
                        "stateEvents",
                        "defaultSaltenv",
                    )
                )
            )
            return buildRun(context, jid, **kwargs)

        self.patch(statemod, "_buildRun", recording)
        return built

    async def test_runOptions(self) -> None:
        """
        Each function builds its run with the options its signature names
        (C{state.test} with those among its keyword arguments, C{test}
        forced); the others are left out. The pillar compiled for the run
        is asked for with the run's saltenv, pillarenv and override.
        """
        built = self.recordRuns()
        asked: list[dict[str, Any]] = []

        def fetchPillar(**kwargs: Any) -> Deferred[dict[str, Any]]:
            asked.append(kwargs)
            return succeed({"port": 81, "out": self.out, **(kwargs["override"] or {})})

        self.context.fetchPillar = fetchPillar
        for label, (args, expected) in EVERY.items():
            fun = label.split()[0]
            del built[:], asked[:]
            result = await self.call(fun, *args, **OPTIONS)
            self.assertEqual(built, [expected], (label, result))
            _, pillar, saltenv, pillarenv, _, _ = expected
            self.assertEqual(
                asked, [{"saltenv": saltenv, "pillarenv": pillarenv, "override": pillar}], label
            )
        self.assertFalse(os.path.exists(self.portFile))

    async def test_stateTestPillar(self) -> None:
        """
        C{state.test pillar=...} renders with the override, in the pillar
        compiled afresh for a job as without a master to ask (as Salt's,
        whose C{state.test} passes every argument on to C{state.apply}).
        """
        asked: list[Any] = []

        def fetchPillar(**kwargs: Any) -> Deferred[dict[str, Any]]:
            asked.append(kwargs["override"])
            return succeed({"port": 81, "out": self.out, **(kwargs["override"] or {})})

        for fetch in [fetchPillar, None]:
            self.context.fetchPillar = fetch
            result = await self.call("state.test", "web", pillar={"port": 84})
            names = [ret["name"] for ret in result["return"].values()]
            self.assertIn(f"echo 84 > {self.portFile}", names, result)
        self.assertEqual(asked, [{"port": 84}])
        self.assertFalse(os.path.exists(self.portFile))

    async def test_stateTestForcesTest(self) -> None:
        """
        C{state.test} runs in test mode even when given C{test=False}.
        """
        built = self.recordRuns()
        await self.call("state.test", test=False)
        await self.call("state.test", "web", test=False)
        self.assertEqual([run[0] for run in built], [True, True])
        self.assertFalse(os.path.exists(self.portFile))

    async def test_defaults(self) -> None:
        """
        Called bare, each function builds its run with the defaults: no
        test, pillar override, saltenv, pillarenv nor state events.
        """
        built = self.recordRuns()
        for label, (args, expected) in EVERY.items():
            del built[:]
            testValue = True if label.startswith("state.test") else None
            await self.call(label.split()[0], *args)
            self.assertEqual(built, [(testValue, None, None, None, None, expected[5])], label)

    async def test_exclude(self) -> None:
        """
        C{exclude} reaches the run of C{state.apply} (highstate or SLS),
        C{state.test}, C{state.highstate} and C{state.sls}.
        """
        for fun, args in [
            ("state.apply", ()),
            ("state.apply", ("web",)),
            ("state.test", ()),
            ("state.test", ("web",)),
            ("state.highstate", ()),
            ("state.sls", ("web",)),
        ]:
            result = await self.call(fun, *args, exclude=[{"id": "site"}])
            self.assertEqual(
                list(result["return"]),
                ["test_|-greeting_|-greeting_|-succeed_with_changes"],
                (fun, args, result),
            )
        self.assertFalse(os.path.exists(self.portFile))

    async def test_syncMods(self) -> None:
        """
        C{sync_mods} is taken by the SLS runs (C{state.sls}, C{state.apply}
        and C{state.test} with names) and left out of the highstate runs.
        """
        synced: list[Any] = []
        syncMods = statemod._syncMods

        def recording(run: Any, kinds: Any) -> None:
            if kinds:
                synced.append(kinds)
            syncMods(run, kinds)

        self.patch(statemod, "_syncMods", recording)
        for fun, args in [
            ("state.sls", ("web",)),
            ("state.apply", ("web",)),
            ("state.test", ("web",)),
            ("state.apply", ()),
            ("state.test", ()),
            ("state.highstate", ()),
        ]:
            del synced[:]
            await self.call(fun, *args, test=True, sync_mods="states")
            expected = ["states"] if args else []
            self.assertEqual(synced, expected, (fun, args))

    async def test_slot(self) -> None:
        """
        Every function but C{state.running} takes the minion's state slot:
        while another run holds it each is refused (retcode 1), runs with
        C{concurrent=True}, and with a C{queue} that is not a number says
        so.
        """
        other = statemod._Active("state.highstate", "20261126192959123456", os.getpid())
        self.assertEqual(statemod._SLOTS.take(self.context.running, other, False, False), [])
        self.addCleanup(statemod._SLOTS.give, self.context.running, other.jid)
        for label, (args, _) in EVERY.items():
            fun = label.split()[0]
            refused = await self.call(fun, *args, test=True)
            self.assertEqual(refused["retcode"], 1, label)
            self.assertIn('The function "state.highstate" is running', refused["return"][0])
            ran = await self.call(fun, *args, test=True, concurrent=True)
            self.assertEqual(ran["retcode"], 0, (label, ran))
            bad = await self.call(fun, *args, test=True, queue="soon")
            self.assertIn("queue must be True, False or a number of runs", bad["return"], label)
        self.assertFalse(os.path.exists(self.portFile))

    async def test_badArguments(self) -> None:
        """
        A missing positional argument is Python's own words about the
        function, as for any execution function.
        """
        result = await self.call("state.sls")
        self.assertEqual(
            result["return"],
            "Passed invalid arguments to state.sls: sls() missing 1 required "
            "positional argument: 'mods'",
        )


class SignatureTests(TestCase):
    """
    The functions keep Salt's signatures and their docstrings, which
    C{sys.argspec} and C{sys.doc} show.
    """

    def test_signatures(self) -> None:
        """
        C{sys.argspec} shows each function's own arguments.
        """
        self.assertEqual(
            _argspec(statemod.sls),
            {
                "args": [
                    "mods",
                    "test",
                    "exclude",
                    "queue",
                    "pillar",
                    "saltenv",
                    "pillarenv",
                    "state_events",
                    "concurrent",
                    "sync_mods",
                ],
                "defaults": [None, None, False, None, None, None, None, False, None],
                "varargs": None,
                "kwargs": True,
                "kwonlyargs": None,
                "kwonlydefaults": None,
            },
        )
        self.assertEqual(_argspec(statemod.show_top)["args"], ["queue", "saltenv", "concurrent"])
        self.assertEqual(_argspec(statemod.test)["args"], ["mods"])
        self.assertEqual(_argspec(statemod.test)["kwonlyargs"], ["pillar"])
        self.assertEqual(
            _argspec(statemod.single)["args"],
            ["fun", "name", "test", "queue", "pillar", "saltenv", "concurrent", "state_events"],
        )

    def test_docs(self) -> None:
        """
        Each public function has its own docstring with a CLI example
        naming it, and is marked as taking the job's id.
        """
        for name in [
            "apply_",
            "test",
            "highstate",
            "sls",
            "sls_id",
            "single",
            "show_top",
            "show_highstate",
            "show_lowstate",
            "show_sls",
            "show_low_sls",
            "running",
        ]:
            function = getattr(statemod, name)
            self.assertIn(f"state.{name.rstrip('_')}", function.__doc__, name)
            self.assertTrue(function.needsJid, name)
            self.assertEqual(function.__module__, statemod.__name__)
