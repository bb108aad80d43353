# -*- test-case-name: tests.test_modules_pillar -*-
"""
Tests for L{salttwist.modules.pillar} (Salt's C{pillar} module),
C{saltutil.refresh_pillar}, and a job's C{pillar=} override in the
L{Executor}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.blocking import runSynchronously
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    loadFunctions,
    needsContext,
    onReactor,
    saltutil,
)
from salttwist.modules import pillar as pillarmod
from salttwist.modules.executor import Executor

PILLAR = {
    "role": "web",
    "users": {"alice": {"uid": 1000, "groups": ["wheel", "web"]}, "bob": {"uid": 1001}},
    "ports": [80, 443],
    "sites": [{"name": "a.example"}, {"name": "b.example"}],
    "empty": {},
    "7": "seven",
}


def kw(**kwargs: Any) -> dict[str, Any]:
    """
    @return: Salt's wire form of keyword arguments.
    """
    return {"__kwarg__": True, **kwargs}


class PillarModuleTests(SynchronousTestCase):
    """
    The C{pillar} functions read the pillar in memory, with Salt's
    arguments and return shapes.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.fetches: list[dict[str, Any]] = []
        self.context = LoaderContext(
            opts={"id": "m1"}, grains={"id": "m1"}, reactor=self.clock, pillar=dict(PILLAR)
        )
        self.context.fetchPillar = self.fetch
        self.executor = Executor(loadFunctions(), self.context, runSynchronously)

    def fetch(self, **kwargs: Any) -> Deferred[dict[str, Any]]:
        """
        The minion's C{fetchPillar}: records what it was asked, answers a
        pillar naming it.
        """
        self.fetches.append(kwargs)
        return succeed({"fresh": True, "asked": kwargs})

    def run_(self, fun: str, *arg: Any) -> dict[str, Any]:
        return self.successResultOf(self.executor.run(fun, list(arg)))

    def test_items(self) -> None:
        """
        C{pillar.items} is the pillar in memory (a copy), with no fetch;
        with key names it is C{pillar.item}.
        """
        result = pillarmod.items(self.context)
        self.assertEqual(result, PILLAR)
        self.assertIsNot(result, self.context.pillar)
        self.assertEqual(pillarmod.items(self.context, "role"), {"role": "web"})
        self.assertEqual(self.fetches, [])
        self.assertEqual(self.run_("pillar.items")["return"], PILLAR)
        self.assertEqual(self.run_("pillar.data")["return"], PILLAR)

    def test_itemsFresh(self) -> None:
        """
        With C{pillar}, C{pillarenv} or C{saltenv}, C{pillar.items} fetches
        a fresh pillar with those inputs and keeps nothing.
        """
        value = self.successResultOf(pillarmod.items(self.context, pillarenv="dev"))
        self.assertEqual(value["asked"], {"saltenv": None, "pillarenv": "dev", "override": {}})
        ret = self.run_("pillar.items", kw(pillar={"extra": 1}))
        self.assertEqual(
            ret["return"]["asked"], {"saltenv": None, "pillarenv": None, "override": {"extra": 1}}
        )
        self.assertEqual(self.context.pillar, PILLAR)

    def test_itemsFreshRefused(self) -> None:
        """
        A fetch that fails is C{CommandExecutionError}; a C{pillar} that is
        not a mapping is an invocation error; no fetch at all where the
        minion has none.
        """
        self.context.fetchPillar = lambda **kwargs: fail(RuntimeError("no session"))
        self.failureResultOf(pillarmod.items(self.context, saltenv="dev"), CommandExecutionError)
        self.assertRaises(SaltInvocationError, pillarmod.items, self.context, pillar=[1])
        self.context.fetchPillar = None
        self.assertRaises(CommandExecutionError, pillarmod.items, self.context, saltenv="dev")
        ret = self.run_("pillar.items", kw(saltenv="dev"))
        self.assertEqual(ret["retcode"], 1)
        self.assertIn("ERROR: this minion cannot compile its pillar", ret["return"])

    def test_get(self) -> None:
        """
        C{pillar.get} follows C{:} through mappings and lists (a number
        indexes a list, a name finds a mapping in it), with a default.
        """
        get = pillarmod.get
        self.assertEqual(get(self.context, "role"), "web")
        self.assertEqual(get(self.context, "users:alice:uid"), 1000)
        self.assertEqual(get(self.context, "users:alice:groups:1"), "web")
        self.assertEqual(get(self.context, "ports:-1"), 443)
        self.assertEqual(get(self.context, "sites:name"), "a.example")
        self.assertEqual(get(self.context, "7"), "seven")
        self.assertEqual(get(self.context, "users:carol"), "")
        self.assertEqual(get(self.context, "users:carol", default={"uid": 0}), {"uid": 0})
        self.assertEqual(get(self.context, "ports:5", "none"), "none")
        self.assertEqual(get(self.context, "role:x", "none"), "none")
        self.assertEqual(get(self.context, "users.alice.uid", delimiter="."), 1000)
        self.assertEqual(self.run_("pillar.get", "users:bob:uid")["return"], 1001)
        self.assertEqual(self.run_("pillar.fetch", "users:bob:uid")["return"], 1001)

    def test_getMerge(self) -> None:
        """
        With C{merge}, a dict default is merged under the value found (the
        value wins) and a list default is joined with it; the pillar is not
        changed.
        """
        merged = pillarmod.get(
            self.context, "users:alice", default={"uid": 0, "shell": "/bin/sh"}, merge=True
        )
        self.assertEqual(merged, {"uid": 1000, "shell": "/bin/sh", "groups": ["wheel", "web"]})
        self.assertEqual(
            pillarmod.get(self.context, "ports", default=[22, 80], merge=True), [22, 80, 443]
        )
        # A default that cannot merge is skipped: the value comes back.
        self.assertEqual(pillarmod.get(self.context, "role", default=[1], merge=True), "web")
        self.assertEqual(self.context.pillar, PILLAR)

    def test_getFresh(self) -> None:
        """
        C{pillar.get} with C{saltenv} reads a freshly fetched pillar.
        """
        value = self.successResultOf(pillarmod.get(self.context, "asked:saltenv", saltenv="qa"))
        self.assertEqual(value, "qa")

    def test_item(self) -> None:
        """
        C{pillar.item} answers C{{key: value}} for each key, nested keys
        kept as given, the default for those missing.
        """
        self.assertEqual(
            pillarmod.item(self.context, "role", "users:bob:uid", "nope", default=None),
            {"role": "web", "users:bob:uid": 1001, "nope": None},
        )
        self.assertEqual(
            self.run_("pillar.item", "role", "nope")["return"], {"role": "web", "nope": ""}
        )

    def test_raw(self) -> None:
        """
        C{pillar.raw} is the pillar, or one top-level key (C{{}} if
        missing), without nesting.
        """
        self.assertEqual(pillarmod.raw(self.context), PILLAR)
        self.assertEqual(pillarmod.raw(self.context, "ports"), [80, 443])
        self.assertEqual(pillarmod.raw(self.context, "users:alice"), {})

    def test_keys(self) -> None:
        """
        C{pillar.keys} lists the keys of a nested dict; a missing key is a
        C{KeyError} and a value that is not a dict a C{ValueError}, as
        Salt's.
        """
        self.assertEqual(sorted(pillarmod.keys(self.context, "users")), ["alice", "bob"])
        self.assertEqual(pillarmod.keys(self.context, "users:alice"), ["uid", "groups"])
        self.assertRaises(KeyError, pillarmod.keys, self.context, "nope")
        self.assertRaises(ValueError, pillarmod.keys, self.context, "role")
        ret = self.run_("pillar.keys", "nope")
        self.assertEqual(ret["retcode"], 1)
        self.assertIn("Pillar key not found: nope", ret["return"])
        # The executor logs the exception, as Salt's minion does.
        self.assertEqual(len(self.flushLoggedErrors(KeyError)), 1)

    def test_ls(self) -> None:
        """
        C{pillar.ls} lists the top-level keys.
        """
        self.assertEqual(sorted(pillarmod.ls(self.context)), sorted(PILLAR))
        self.assertEqual(pillarmod.ls(self.context, "role"), ["role"])

    def test_obfuscate(self) -> None:
        """
        C{pillar.obfuscate} shows the structure with types for values.
        """
        shown = pillarmod.obfuscate(self.context)
        self.assertEqual(shown["users"]["alice"], {"uid": "<int>", "groups": ["<str>", "<str>"]})
        self.assertEqual(shown["role"], "<str>")

    def test_documented(self) -> None:
        """
        Every function of the module is loaded as C{pillar.*} and has a
        CLI example.
        """
        names = {name for name in self.executor.functions if name.startswith("pillar.")}
        self.assertEqual(
            names,
            {f"pillar.{n}" for n in ("items", "data", "get", "fetch", "item", "raw", "keys")}
            | {"pillar.ls", "pillar.obfuscate"},
        )
        for name in names:
            self.assertIn("CLI Example:", self.executor.functions[name].__doc__)


class RefreshPillarTests(SynchronousTestCase):
    """
    C{saltutil.refresh_pillar} fires C{salt/minion/<id>/refresh} on the
    minion's bus, asks for a refresh and waits for it.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.fired: list[tuple[str, dict[str, Any]]] = []
        self.refreshes: list[Deferred[dict[str, Any]]] = []
        self.context = LoaderContext(opts={"id": "m1"}, grains={"id": "m1"}, reactor=self.clock)
        self.context.fireLocal = lambda tag, data: self.fired.append((tag, data))
        self.context.refreshPillar = self.refresh

    def refresh(self) -> Deferred[dict[str, Any]]:
        d: Deferred[dict[str, Any]] = Deferred()
        self.refreshes.append(d)
        return d

    def test_waits(self) -> None:
        """
        With C{wait} (the default) it answers C{True} once the refresh is
        done.
        """
        d = saltutil.refresh_pillar(self.context)
        self.assertEqual([tag for tag, _ in self.fired], ["salt/minion/m1/refresh"])
        self.assertNoResult(d)
        self.refreshes[0].callback({"a": 1})
        self.assertIs(self.successResultOf(d), True)

    def test_failure(self) -> None:
        """
        A refresh that fails answers C{False}.
        """
        d = saltutil.refresh_pillar(self.context)
        self.refreshes[0].errback(RuntimeError("master gone"))
        self.assertIs(self.successResultOf(d), False)

    def test_timeout(self) -> None:
        """
        A refresh that takes longer than C{timeout} answers C{False}.
        """
        d = saltutil.refresh_pillar(self.context, timeout=5)
        self.clock.advance(4)
        self.assertNoResult(d)
        self.clock.advance(1)
        self.assertIs(self.successResultOf(d), False)

    def test_noWait(self) -> None:
        """
        With C{wait=False} it answers C{True} at once.
        """
        self.assertIs(saltutil.refresh_pillar(self.context, wait=False), True)
        self.refreshes[0].errback(RuntimeError("ignored"))

    def test_cannotRefresh(self) -> None:
        """
        Where the pillar cannot be refreshed, C{False}.
        """
        self.context.refreshPillar = None
        self.assertIs(saltutil.refresh_pillar(self.context), False)


@onReactor
@needsContext
def _readPillar(context: LoaderContext, gate: Deferred[None]) -> Deferred[dict[str, Any]]:
    """
    A module function that reads its context's pillar after C{gate} fires.
    """
    return gate.addCallback(lambda _: context.pillar)


@onReactor
def _takesPillar(pillar: Any = None) -> Any:
    """
    A module function with an argument named C{pillar}.
    """
    return {"given": pillar}


class PillarOverrideTests(SynchronousTestCase):
    """
    A job's C{pillar=} overrides the pillar for that job only.
    """

    def setUp(self) -> None:
        self.context = LoaderContext(
            opts={"id": "m1"},
            grains={},
            reactor=Clock(),
            pillar={"a": {"x": 1, "y": 2}, "b": 1},
        )
        self.gates: list[Deferred[None]] = []
        functions = {"t.read": self.read, "t.takes": _takesPillar, **loadFunctions()}
        self.executor = Executor(functions, self.context, runSynchronously)

    def read(self, context: LoaderContext) -> Deferred[dict[str, Any]]:
        gate: Deferred[None] = Deferred()
        self.gates.append(gate)
        return _readPillar(context, gate)

    read.runsOnReactor = True  # type: ignore[attr-defined]
    read.needsContext = True  # type: ignore[attr-defined]

    def test_isolation(self) -> None:
        """
        Two jobs at once: the one with C{pillar=} sees the override merged
        into the pillar, the other and the shared context do not.
        """
        overridden = self.executor.run("t.read", [kw(pillar={"a": {"y": 20}, "c": 3})])
        plain = self.executor.run("t.read", [])
        for gate in self.gates:
            gate.callback(None)
        self.assertEqual(
            self.successResultOf(overridden)["return"], {"a": {"x": 1, "y": 20}, "b": 1, "c": 3}
        )
        self.assertEqual(self.successResultOf(plain)["return"], {"a": {"x": 1, "y": 2}, "b": 1})
        self.assertEqual(self.context.pillar, {"a": {"x": 1, "y": 2}, "b": 1})

    def test_moduleFunction(self) -> None:
        """
        C{pillar.get} in a job with C{pillar=} reads the override.
        """
        ret = self.successResultOf(
            self.executor.run("pillar.get", ["a:y", kw(pillar={"a": {"y": 9}})])
        )
        self.assertEqual(ret["return"], 9)

    def test_functionTakesPillar(self) -> None:
        """
        A function with its own C{pillar} argument is given it unchanged.
        """
        ret = self.successResultOf(self.executor.run("t.takes", [kw(pillar={"k": 1})]))
        self.assertEqual(ret["return"], {"given": {"k": 1}})

    def test_notADict(self) -> None:
        """
        A C{pillar=} that is not a dict is left to the function (here an
        unexpected argument).
        """
        ret = self.successResultOf(self.executor.run("test.ping", [kw(pillar="x")]))
        self.assertEqual(ret["retcode"], 1)
        self.assertIn("Passed invalid arguments", ret["return"])
