"""
Tests for L{salttwist.state.runhooks} and the runner's use of it:
C{mod_aggregate} with C{state_aggregate}, C{mod_init}, C{umask} and
C{state_max_parallel}.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.state.runhooks import MAX_GROUP, AggregateGroups, aggregateAllowed, umaskOf
from salttwist.state.runner import StateRunner
from salttwist.states import StateContext, loadStates
from salttwist.states.pkg import mod_aggregate as pkgAggregate
from tests.test_state_runner import chunk


class HookStates:
    """
    State modules C{agg} (with C{mod_aggregate}), C{plain} (without) and
    C{init} (with C{mod_init}) that record what they are called with.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.initReturns: list[Any] = []
        self.lock = threading.Lock()

    def record(self, fun: str, name: str, kwargs: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append((fun, name, kwargs))

    def functions(self) -> dict[str, Callable[..., Any]]:
        def install(ctx: StateContext, name: str, names: Any = None, **kw: Any) -> dict:
            self.record("agg.install", name, {"names": names})
            return {"name": name, "result": True, "changes": {}, "comment": "ok"}

        def mod_aggregate(ctx: StateContext, low: dict, chunks: list, running: dict) -> dict:
            self.record("agg.mod_aggregate", low["name"], {"chunks": [c["name"] for c in chunks]})
            names = [low["name"]]
            for other in chunks:
                if other is low or other.get("__agg__"):
                    continue
                names.append(other["name"])
                other["__agg__"] = True
            low["names"] = names
            return low

        def plainOk(ctx: StateContext, name: str, **kw: Any) -> dict:
            self.record("plain.ok", name, {})
            return {"name": name, "result": True, "changes": {}, "comment": "ok"}

        def initOk(ctx: StateContext, name: str, **kw: Any) -> dict:
            self.record("init.ok", name, {})
            return {"name": name, "result": True, "changes": {}, "comment": "ok"}

        def mod_init(ctx: StateContext, low: dict) -> Any:
            self.record("init.mod_init", low["name"], {"test": ctx.test})
            return self.initReturns.pop(0) if self.initReturns else True

        return {
            "agg.install": install,
            "agg.mod_aggregate": mod_aggregate,
            "plain.ok": plainOk,
            "init.ok": initOk,
            "init.mod_init": mod_init,
        }


class HookTestMixin:
    def setUp(self) -> None:
        self.hooks = HookStates()
        self.states: dict[str, Callable[..., Any]] = dict(self.hooks.functions())
        testStates = loadStates(("test",))
        for key in list(testStates):
            self.states[key] = testStates[key]
        self.opts: dict[str, Any] = {}

    def runChunks(self, chunks: list[dict[str, Any]], **kwargs: Any) -> dict[str, dict[str, Any]]:
        base = StateContext(salt={}, opts=self.opts)
        runner = StateRunner(self.states, lambda low: dataclasses.replace(base, low=low), **kwargs)
        return runner.run(chunks)

    def byId(self, ret: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {v["__id__"]: v for v in ret.values()}

    def installs(self) -> list[tuple[str, Any]]:
        return [(name, kw["names"]) for fun, name, kw in self.hooks.calls if fun == "agg.install"]


class AggregateAllowedTests(SynchronousTestCase):
    states = {"pkg.mod_aggregate": object(), "pkg.installed": object()}

    def test_option(self) -> None:
        """
        C{True} or a list naming the module allows a chunk whose module
        has a C{mod_aggregate}; C{False}, another list or a string do not.
        """
        low = chunk("pkg", "installed", "vim")
        self.assertTrue(aggregateAllowed(low, True, self.states))
        self.assertTrue(aggregateAllowed(low, ["pkg"], self.states))
        self.assertFalse(aggregateAllowed(low, ["file"], self.states))
        self.assertFalse(aggregateAllowed(low, False, self.states))
        self.assertFalse(aggregateAllowed(low, "pkg", self.states))
        self.assertFalse(aggregateAllowed(low, None, self.states))

    def test_chunkOverrides(self) -> None:
        """
        A chunk's own C{aggregate} wins over the option.
        """
        self.assertTrue(
            aggregateAllowed(chunk("pkg", "installed", "a", aggregate=True), False, self.states)
        )
        self.assertFalse(
            aggregateAllowed(chunk("pkg", "installed", "a", aggregate=False), True, self.states)
        )

    def test_noHook(self) -> None:
        """
        A module without C{mod_aggregate} never aggregates.
        """
        self.assertFalse(aggregateAllowed(chunk("file", "managed", "/x"), True, self.states))


class AggregateGroupsTests(SynchronousTestCase):
    def groups(self, chunks: list[dict[str, Any]]) -> AggregateGroups:
        self.byTag = {f"{c['state']}_|-{c['__id__']}_|-{c['name']}_|-{c['fun']}": c for c in chunks}
        return AggregateGroups(self.byTag, list(self.byTag), lambda low: low["state"] == "agg")

    def names(self, chunks: list[dict[str, Any]]) -> list[str]:
        return [c["name"] for c in chunks]

    def test_ready(self) -> None:
        """
        A chunk is offered the chunks of its module that are ready,
        itself first; not those of other modules, not those merged.
        """
        chunks = [chunk("agg", "install", n) for n in "abcd"]
        chunks.append(chunk("plain", "ok", "e"))
        chunks[3]["__agg__"] = True
        groups = self.groups(chunks)
        found = groups.chunksFor(
            "agg_|-b_|-b_|-install", lambda tag: "_|-c_|-" not in tag, lambda tag: False
        )
        self.assertEqual(self.names(found), ["b", "a"])
        self.assertIs(found[0], self.byTag["agg_|-b_|-b_|-install"])

    def test_alone(self) -> None:
        """
        With no other chunk ready, or for a chunk not allowed to
        aggregate, there is nothing.
        """
        groups = self.groups(
            [chunk("agg", "install", "a"), chunk("agg", "install", "b"), chunk("plain", "ok", "c")]
        )
        self.assertEqual(
            groups.chunksFor("agg_|-a_|-a_|-install", lambda tag: False, lambda tag: False), []
        )
        self.assertEqual(
            groups.chunksFor("plain_|-c_|-c_|-ok", lambda tag: True, lambda tag: False), []
        )

    def test_waiting(self) -> None:
        """
        A chunk whose requisites have not all run is not offered (its
        readiness not even asked) until L{AggregateGroups.ran} says they
        have; then it is offered in run order.
        """
        chunks = [chunk("agg", "install", n) for n in "abc"]
        chunks.append(chunk("plain", "ok", "x"))
        byTag = {f"{c['state']}_|-{c['__id__']}_|-{c['name']}_|-{c['fun']}": c for c in chunks}
        tags = list(byTag)
        deps = {tags[1]: [("require", tags[3])], tags[2]: [("prereq", tags[3])]}
        groups = AggregateGroups(byTag, tags, lambda low: low["state"] == "agg", deps)
        asked: list[str] = []

        def ready(tag: str) -> bool:
            asked.append(tag)
            return True

        never = lambda tag: False  # noqa: E731
        self.assertEqual(self.names(groups.chunksFor(tags[0], ready, never)), ["a", "c"])
        self.assertEqual(asked, [tags[2]])
        groups.ran(tags[3])
        self.assertEqual(self.names(groups.chunksFor(tags[0], ready, never)), ["a", "b", "c"])

    def test_cap(self) -> None:
        """
        At most 500 chunks are merged, as Salt.
        """
        groups = self.groups([chunk("agg", "install", f"n{i}") for i in range(600)])
        found = groups.chunksFor("agg_|-n0_|-n0_|-install", lambda tag: True, lambda tag: False)
        self.assertEqual(len(found), MAX_GROUP)


class RunnerAggregateTests(HookTestMixin, SynchronousTestCase):
    def test_aggregated(self) -> None:
        """
        With C{state_aggregate: True}, the first chunk of a module with
        C{mod_aggregate} takes the others; they still run after it.
        """
        self.opts["state_aggregate"] = True
        ret = self.runChunks([chunk("agg", "install", n) for n in ("a", "b", "c")])
        self.assertEqual(self.installs(), [("a", ["a", "b", "c"]), ("b", None), ("c", None)])
        self.assertEqual(len(ret), 3)
        self.assertTrue(all(r["result"] for r in ret.values()))
        hooks = [c for c in self.hooks.calls if c[0] == "agg.mod_aggregate"]
        self.assertEqual(hooks, [("agg.mod_aggregate", "a", {"chunks": ["a", "b", "c"]})])

    def test_off(self) -> None:
        """
        Without the option nothing is aggregated and C{aggregate} is not
        passed to the state function.
        """
        self.runChunks([chunk("agg", "install", n) for n in ("a", "b")])
        self.assertEqual(self.installs(), [("a", None), ("b", None)])
        self.assertNotIn("agg.mod_aggregate", [c[0] for c in self.hooks.calls])

    def test_perChunk(self) -> None:
        """
        C{aggregate: True} on chunks aggregates them without the option;
        C{aggregate: False} keeps a chunk out with it.
        """
        self.runChunks(
            [
                chunk("agg", "install", "a", aggregate=True),
                chunk("agg", "install", "b"),
                chunk("agg", "install", "c", aggregate=True),
            ]
        )
        self.assertEqual(self.installs(), [("a", ["a", "c"]), ("b", None), ("c", None)])
        self.hooks.calls.clear()
        self.opts["state_aggregate"] = ["agg"]
        self.runChunks(
            [chunk("agg", "install", "a"), chunk("agg", "install", "b", aggregate=False)]
        )
        self.assertEqual(self.installs(), [("a", None), ("b", None)])

    def test_requisitesRespected(self) -> None:
        """
        A chunk that requires a member is not merged into it (it would
        run before its requisite).
        """
        self.opts["state_aggregate"] = True
        self.runChunks(
            [
                chunk("agg", "install", "a"),
                chunk("test", "succeed_without_changes", "between", require=[{"agg": "a"}]),
                chunk("agg", "install", "b", require=["between"]),
                chunk("agg", "install", "c"),
            ]
        )
        self.assertEqual(self.installs(), [("a", ["a", "c"]), ("b", None), ("c", None)])

    def test_requisiteNotRunYet(self) -> None:
        """
        A chunk that requires a state which has not run yet is not merged
        into an earlier one (Salt 3008 merges it: saltstack/salt#65304);
        it runs, and aggregates, after its requisite.
        """
        self.opts["state_aggregate"] = True
        self.runChunks(
            [
                chunk("agg", "install", "a"),
                chunk("test", "succeed_without_changes", "x"),
                chunk("agg", "install", "c", require=["x"]),
                chunk("agg", "install", "d", require=["x"]),
            ]
        )
        self.assertEqual(self.installs(), [("a", None), ("c", ["c", "d"]), ("d", None)])

    def test_requisiteFailed(self) -> None:
        """
        A chunk whose requisite failed, or that waits for changes that
        did not happen, is not merged: it will not run.
        """
        self.opts["state_aggregate"] = True
        ret = self.runChunks(
            [
                chunk("test", "fail_without_changes", "f"),
                chunk("test", "succeed_without_changes", "quiet"),
                chunk("agg", "install", "a"),
                chunk("agg", "install", "b", require=["f"]),
                chunk("agg", "install", "c", onchanges=["quiet"]),
                chunk("agg", "install", "d"),
            ]
        )
        self.assertEqual(self.installs(), [("a", ["a", "d"]), ("d", None)])
        self.assertIs(self.byId(ret)["b"]["result"], False)

    def test_longChain(self) -> None:
        """
        A chain of 500 aggregated chunks, each requiring the one before,
        runs without merging any (each waits for the one before).
        """
        self.opts["state_aggregate"] = True
        chunks = [chunk("agg", "install", "n0")]
        chunks += [chunk("agg", "install", f"n{i}", require=[f"n{i - 1}"]) for i in range(1, 500)]
        ret = self.runChunks(chunks)
        self.assertEqual(len(ret), 500)
        self.assertEqual({names for _, names in self.installs()}, {None})

    def test_pkgHook(self) -> None:
        """
        C{pkg.mod_aggregate} through the runner: one C{pkg.installed}
        gets every package.
        """
        seen: list[tuple[str, Any]] = []

        def installed(
            ctx: StateContext, name: str, pkgs: Any = None, version: Any = None, **kw: Any
        ) -> dict:
            seen.append((name, pkgs))
            return {"name": name, "result": True, "changes": {}, "comment": "ok"}

        self.states["pkg.installed"] = installed
        self.states["pkg.mod_aggregate"] = loadStates(("pkg",))["pkg.mod_aggregate"]
        self.opts["state_aggregate"] = ["pkg"]
        self.runChunks(
            [
                chunk("pkg", "installed", "vim"),
                chunk("pkg", "installed", "tools", pkgs=["curl", {"jq": "1.6-2"}]),
                chunk("pkg", "installed", "git", version="1:2.39"),
            ]
        )
        self.assertEqual(
            seen,
            [
                ("vim", ["vim", "curl", {"jq": "1.6-2"}, {"git": "1:2.39"}]),
                ("tools", ["curl", {"jq": "1.6-2"}]),
                ("git", None),
            ],
        )


class PkgAggregateTests(SynchronousTestCase):
    """
    L{salttwist.states.pkg.mod_aggregate} on chunks.
    """

    ctx = StateContext(salt={}, opts={})

    def test_merge(self) -> None:
        """
        Names (with their versions) and C{pkgs} of the others join
        C{low}'s own package in C{pkgs}; the others are marked
        C{__agg__} and lose their C{version}.
        """
        low = chunk("pkg", "installed", "vim", version="2:9.0")
        b = chunk("pkg", "installed", "git", version="1:2.39")
        c = chunk("pkg", "installed", "tools", pkgs=["curl", {"jq": "1.6"}, "vim"])
        ret = pkgAggregate(self.ctx, low, [low, b, c], {})
        self.assertIs(ret, low)
        self.assertEqual(low["pkgs"], [{"vim": "2:9.0"}, {"git": "1:2.39"}, "curl", {"jq": "1.6"}])
        self.assertNotIn("version", low)
        self.assertTrue(b["__agg__"] and c["__agg__"])
        self.assertNotIn("version", b)
        self.assertEqual(c["pkgs"], ["curl", {"jq": "1.6"}, "vim"])

    def test_leftAlone(self) -> None:
        """
        Chunks already run or merged, of another function, C{fromrepo},
        with C{hold}, or pinning a merged package at another version are
        not merged; with none merged C{low} is unchanged.
        """
        low = chunk("pkg", "installed", "vim", version="2")
        others = [
            chunk("pkg", "installed", "ran"),
            chunk("pkg", "installed", "merged", __agg__=True),
            chunk("pkg", "latest", "latest"),
            chunk("pkg", "installed", "repo", fromrepo="backports"),
            chunk("pkg", "installed", "held", hold=True),
            chunk("pkg", "installed", "clash", pkgs=[{"vim": "3"}]),
            chunk("file", "installed", "notpkg"),
        ]
        before = dict(low)
        pkgAggregate(self.ctx, low, [low, *others], {"pkg_|-ran_|-ran_|-installed": {}})
        self.assertEqual(low, before)
        self.assertEqual([o["name"] for o in others if o.get("__agg__")], ["merged"])

    def test_sources(self) -> None:
        """
        C{sources} merge only with C{sources}.
        """
        low = chunk("pkg", "installed", "a", sources=[{"a": "/tmp/a.deb"}])
        b = chunk("pkg", "installed", "b", sources=[{"b": "/tmp/b.deb"}])
        c = chunk("pkg", "installed", "c")
        pkgAggregate(self.ctx, low, [low, b, c], {})
        self.assertEqual(low["sources"], [{"a": "/tmp/a.deb"}, {"b": "/tmp/b.deb"}])
        self.assertNotIn("__agg__", c)

    def test_otherFunction(self) -> None:
        """
        Functions other than installed, latest, removed and purged are
        not aggregated.
        """
        low = chunk("pkg", "uptodate", "up")
        other = chunk("pkg", "uptodate", "up2")
        pkgAggregate(self.ctx, low, [low, other], {})
        self.assertNotIn("pkgs", low)
        self.assertNotIn("__agg__", other)


class ModInitTests(HookTestMixin, SynchronousTestCase):
    def test_oncePerModule(self) -> None:
        """
        A module's C{mod_init} runs once, before its first chunk, with
        that chunk and its context.
        """
        self.runChunks(
            [
                chunk("plain", "ok", "p"),
                chunk("init", "ok", "a"),
                chunk("init", "ok", "b"),
            ],
            test=False,
        )
        self.assertEqual(
            [(fun, name) for fun, name, _ in self.hooks.calls],
            [("plain.ok", "p"), ("init.mod_init", "a"), ("init.ok", "a"), ("init.ok", "b")],
        )

    def test_againUntilTrue(self) -> None:
        """
        A C{mod_init} that returns something false is called again before
        the next chunk of its module, as Salt does.
        """
        self.hooks.initReturns = [False, True]
        self.runChunks([chunk("init", "ok", n) for n in "abc"])
        self.assertEqual(
            [name for fun, name, _ in self.hooks.calls if fun == "init.mod_init"], ["a", "b"]
        )

    def test_missingFunction(self) -> None:
        """
        A chunk whose function does not exist does not call its module's
        C{mod_init}; a raising C{mod_init} does not stop the run.
        """

        def broken(ctx: StateContext, low: dict) -> Any:
            raise RuntimeError("no database")

        ret = self.runChunks([chunk("init", "missing", "x")])
        self.assertEqual(self.hooks.calls, [])
        self.assertIs(next(iter(ret.values()))["result"], False)
        self.states["init.mod_init"] = broken
        ret = self.runChunks([chunk("init", "ok", "y")])
        self.assertIs(next(iter(ret.values()))["result"], True)

    def test_beforePrereqTestRun(self) -> None:
        """
        A C{prereq} target's test run comes after its module's
        C{mod_init}, as Salt's C{call_chunk} calls it for that run too.
        """
        self.runChunks(
            [
                chunk("plain", "ok", "pre", prereq=[{"init": "target"}]),
                chunk("init", "ok", "target"),
            ]
        )
        self.assertEqual(
            [(fun, name) for fun, name, _ in self.hooks.calls],
            [("init.mod_init", "target"), ("init.ok", "target"), ("init.ok", "target")],
        )

    def test_eachRun(self) -> None:
        """
        Each run calls C{mod_init} again.
        """
        self.runChunks([chunk("init", "ok", "a")])
        self.runChunks([chunk("init", "ok", "b")])
        self.assertEqual(
            [name for fun, name, _ in self.hooks.calls if fun == "init.mod_init"], ["a", "b"]
        )


class OptionTests(SynchronousTestCase):
    """
    The minion options of the runner's hooks.
    """

    def load(self, text: str) -> dict[str, Any]:
        from salttwist.config import loadMinionConfig

        configDir = self.mktemp()
        os.makedirs(configDir)
        with open(os.path.join(configDir, "minion"), "w") as f:
            f.write(text)
        return loadMinionConfig(configDir)

    def test_stateAggregate(self) -> None:
        """
        C{state_aggregate} is false by default, and takes a boolean or a
        list of state modules; anything else is refused, named.
        """
        from salttwist.config import ConfigError

        self.assertIs(self.load("")["state_aggregate"], False)
        self.assertIs(self.load("state_aggregate: true\n")["state_aggregate"], True)
        self.assertEqual(self.load("state_aggregate: [pkg]\n")["state_aggregate"], ["pkg"])
        error = self.assertRaises(ConfigError, self.load, "state_aggregate: pkg\n")
        self.assertIn("'state_aggregate'", str(error))
        self.assertIn("a boolean or a list of state module names", str(error))

    def test_stateMaxParallel(self) -> None:
        """
        C{state_max_parallel} is 0 (no limit) by default and a count.
        """
        from salttwist.config import ConfigError

        self.assertEqual(self.load("")["state_max_parallel"], 0)
        self.assertEqual(self.load("state_max_parallel: 3\n")["state_max_parallel"], 3)
        error = self.assertRaises(ConfigError, self.load, "state_max_parallel: -1\n")
        self.assertIn("'state_max_parallel'", str(error))


class MaxParallelTests(HookTestMixin, SynchronousTestCase):
    """
    C{state_max_parallel} limits the C{parallel: True} states running at
    once; the others wait, in order, and every one runs.
    """

    def setUp(self) -> None:
        super().setUp()
        self.active = 0
        self.peak = 0
        self.started: list[str] = []
        self.barrier: threading.Barrier | None = None

        def slot(ctx: StateContext, name: str, **kw: Any) -> dict:
            with self.hooks.lock:
                self.active += 1
                self.peak = max(self.peak, self.active)
                self.started.append(name)
            try:
                if self.barrier is not None:
                    # Two at a time meet here: proves the limit lets two
                    # run together (the timeout only ends a broken run).
                    self.barrier.wait(timeout=30)
            finally:
                with self.hooks.lock:
                    self.active -= 1
            return {"name": name, "result": True, "changes": {}, "comment": "slot"}

        self.states["slot.run"] = slot

    def test_limit(self) -> None:
        """
        With C{state_max_parallel: 2}, four parallel states run two at a
        time, started in order, and the plain state after them runs too.
        """
        self.opts["state_max_parallel"] = 2
        self.barrier = threading.Barrier(2)
        ret = self.runChunks(
            [
                *[chunk("slot", "run", n, parallel=True) for n in "abcd"],
                chunk("plain", "ok", "after"),
            ]
        )
        self.assertEqual(self.peak, 2)
        self.assertEqual(self.started[:2], ["a", "b"] if self.started[0] == "a" else ["b", "a"])
        self.assertEqual(sorted(self.started[2:]), ["c", "d"])
        entries = sorted(ret.values(), key=lambda r: r["__run_num__"])
        self.assertEqual([r["__id__"] for r in entries], ["a", "b", "c", "d", "after"])
        self.assertTrue(all(r["result"] is True for r in entries))
        self.assertTrue(all(r.get("__parallel__") for r in entries[:4]))

    def test_one(self) -> None:
        """
        With C{state_max_parallel: 1} the parallel states run one after
        another; a dependent waits for its requisite as always.
        """
        self.opts["state_max_parallel"] = 1
        ret = self.runChunks(
            [
                chunk("slot", "run", "a", parallel=True),
                chunk("slot", "run", "b", parallel=True),
                chunk("slot", "run", "c", parallel=True, require=["a"]),
            ]
        )
        self.assertEqual(self.peak, 1)
        self.assertEqual(self.started, ["a", "b", "c"])
        self.assertEqual(len(ret), 3)

    def test_unlimited(self) -> None:
        """
        Without the option (0), parallel states all start at once: four
        meet at one barrier.
        """
        self.barrier = threading.Barrier(4)
        ret = self.runChunks([chunk("slot", "run", n, parallel=True) for n in "abcd"])
        self.assertEqual(self.peak, 4)
        self.assertTrue(all(r["result"] is True for r in ret.values()))


class UmaskTests(HookTestMixin, SynchronousTestCase):
    """
    A chunk's C{umask}: its state function runs under it.
    """

    def setUp(self) -> None:
        super().setUp()
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

        def touch(ctx: StateContext, name: str, **kw: Any) -> dict:
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write("x")
            return {"name": name, "result": True, "changes": {"new": path}, "comment": "made"}

        self.states["touch.file"] = touch
        old = os.umask(0o022)
        self.addCleanup(os.umask, old)

    def mode(self, name: str) -> int:
        return os.stat(os.path.join(self.dir, name)).st_mode & 0o777

    def test_umask(self) -> None:
        """
        A file made under C{umask: "077"} is 0600; the umask is restored
        afterwards, so the next state's file is 0644. C{27} (a YAML
        number) is read as octal, as Salt.
        """
        ret = self.runChunks(
            [
                chunk("touch", "file", "private", umask="077"),
                chunk("touch", "file", "shared"),
                chunk("touch", "file", "group", umask=27),
            ]
        )
        self.assertEqual(self.mode("private"), 0o600)
        self.assertEqual(self.mode("shared"), 0o644)
        self.assertEqual(self.mode("group"), 0o640)
        self.assertTrue(all(r["result"] for r in ret.values()))
        self.assertEqual(os.umask(0o022), 0o022)

    def test_parallelNotApplied(self) -> None:
        """
        A C{parallel} state does not get its umask (as in Salt: the umask
        is the process's, and parallel states run together), but a bad
        one still fails it.
        """
        ret = self.runChunks(
            [
                chunk("touch", "file", "par", umask="077", parallel=True),
                chunk("touch", "file", "badpar", umask="9", parallel=True),
            ]
        )
        self.assertEqual(self.mode("par"), 0o644)
        self.assertEqual(self.byId(ret)["badpar"]["comment"], "Invalid umask: 9\n")

    def test_restoredAfterFailure(self) -> None:
        """
        The umask is restored when the state raises.
        """

        def boom(ctx: StateContext, name: str) -> dict:
            raise OSError("disk gone")

        self.states["touch.boom"] = boom
        ret = self.runChunks([chunk("touch", "boom", "b", umask="077")])
        self.assertIs(next(iter(ret.values()))["result"], False)
        self.assertEqual(os.umask(0o022), 0o022)

    def test_invalid(self) -> None:
        """
        A umask that is not octal fails the state, not called, with
        Salt's words.
        """
        ret = self.runChunks([chunk("touch", "file", "bad", umask="0999")])
        entry = next(iter(ret.values()))
        self.assertIs(entry["result"], False)
        self.assertEqual(entry["comment"], "Invalid umask: 0999\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "bad")))

    def test_umaskOf(self) -> None:
        """
        L{umaskOf} reads the digits as octal; none is L{None}; a boolean
        or more than 0777 is refused.
        """
        self.assertEqual(umaskOf({"umask": "022"}), 0o022)
        self.assertEqual(umaskOf({"umask": 77}), 0o077)
        self.assertIsNone(umaskOf({}))
        for bad in (True, "abc", "1777", "-1"):
            self.assertRaises(ValueError, umaskOf, {"umask": bad})


class AutoReloadTests(SynchronousTestCase):
    """
    Salt's automatic module reload after states whose changes may bring
    new modules (L{salttwist.state.runafter.changesNeedReload}).
    """

    def setUp(self) -> None:
        self.calls: list[str] = []
        salt = {"saltutil.refresh_modules": lambda: self.calls.append("refresh") or True}
        self.base = StateContext(salt=salt, opts={})

        def changed(ctx: StateContext, name: str, **kw: Any) -> dict:
            return {"name": name, "result": True, "changes": {"new": name}, "comment": "done"}

        def same(ctx: StateContext, name: str, **kw: Any) -> dict:
            return {"name": name, "result": True, "changes": {}, "comment": "in place"}

        self.states = {
            f"{module}.{fun}": changed
            for module, fun in (
                ("pkg", "installed"),
                ("pip", "installed"),
                ("file", "managed"),
                ("file", "recurse"),
                ("file", "symlink"),
                ("file", "directory"),
                ("service", "running"),
            )
        }
        self.states["pkg.latest"] = same

    def refreshes(self, low: dict[str, Any]) -> int:
        self.calls.clear()
        StateRunner(self.states, lambda c: dataclasses.replace(self.base, low=c)).run([low])
        return len(self.calls)

    def test_packages(self) -> None:
        """
        A C{pkg} or C{pip} state that changed something reloads the
        modules; one that changed nothing does not.
        """
        self.assertEqual(self.refreshes(chunk("pkg", "installed", "python3-yaml")), 1)
        self.assertEqual(self.refreshes(chunk("pip", "installed", "requests")), 1)
        self.assertEqual(self.refreshes(chunk("pkg", "latest", "vim")), 0)

    def test_files(self) -> None:
        """
        C{file.managed} of a module file, C{file.recurse} and
        C{file.symlink} into a C{bin} reload them; other files and
        states do not.
        """
        self.assertEqual(self.refreshes(chunk("file", "managed", "/srv/_modules/x.py")), 1)
        self.assertEqual(self.refreshes(chunk("file", "managed", "/usr/lib/x.so")), 1)
        self.assertEqual(self.refreshes(chunk("file", "managed", "/etc/motd")), 0)
        self.assertEqual(self.refreshes(chunk("file", "recurse", "/opt/app")), 1)
        self.assertEqual(self.refreshes(chunk("file", "symlink", "/usr/local/bin/tool")), 1)
        self.assertEqual(self.refreshes(chunk("file", "symlink", "/etc/alternatives/x")), 0)
        self.assertEqual(self.refreshes(chunk("file", "directory", "/srv/x.py")), 0)
        self.assertEqual(self.refreshes(chunk("service", "running", "nginx")), 0)

    def test_once(self) -> None:
        """
        C{reload_modules: True} on a package state reloads once.
        """
        self.assertEqual(self.refreshes(chunk("pkg", "installed", "x", reload_modules=True)), 1)

    def test_newPackageImportable(self) -> None:
        """
        L{refreshImports} makes a package written into a directory of the
        path after a failed import importable.
        """
        import importlib
        import sys

        from salttwist.state.runafter import refreshImports

        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        sys.path.append(directory)
        self.addCleanup(sys.path.remove, directory)
        name = "salttwist_autoreload_probe"
        self.addCleanup(sys.modules.pop, name, None)
        # Fill the finder's cache of the (empty) directory.
        self.assertRaises(ImportError, importlib.import_module, name)
        os.makedirs(os.path.join(directory, name))
        with open(os.path.join(directory, name, "__init__.py"), "w") as f:
            f.write("VALUE = 42\n")
        refreshImports()
        self.assertEqual(importlib.import_module(name).VALUE, 42)

    def test_newSiteDirectory(self) -> None:
        """
        L{refreshImports} adds a site directory that appeared since the
        start to the path (not one that does not exist).
        """
        import site
        import sys

        from salttwist.state.runafter import refreshImports

        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        missing = os.path.join(directory, "not-there")
        self.patch(site, "getsitepackages", lambda: [directory, missing])
        self.addCleanup(lambda: directory in sys.path and sys.path.remove(directory))
        refreshImports()
        self.assertIn(directory, sys.path)
        self.assertNotIn(missing, sys.path)
