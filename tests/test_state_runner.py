"""
Tests for L{salttwist.state.runner}: hand-written low chunks run through
L{StateRunner} with the real C{test} states and small recording states.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.state.runner import StateRunner, singleChunk, stateTag
from salttwist.states import StateContext, loadStates


def chunk(
    state: str, fun: str, id_: str, *, name: str | None = None, sls: str = "web", **kw: Any
) -> dict[str, Any]:
    """
    @return: a low chunk as the compiler writes it.
    """
    low = {
        "state": state,
        "__id__": id_,
        "name": name if name is not None else id_,
        "fun": fun,
        "__sls__": sls,
        "__env__": "base",
    }
    low.update(kw)
    return low


class Recorder:
    """
    State functions C{rec.*} that record each call (function, name,
    arguments, test mode) in order.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], bool]] = []
        self.lock = threading.Lock()

    def _record(self, fun: str, ctx: StateContext, name: str, kwargs: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append((fun, name, dict(kwargs), ctx.test))

    def order(self) -> list[str]:
        return [f"{fun}:{name}" for fun, name, _, _ in self.calls]

    def functions(self) -> dict[str, Callable[..., Any]]:
        def ok(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
            self._record("ok", ctx, name, kwargs)
            return {"name": name, "result": True, "changes": {}, "comment": "fine"}

        def changed(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
            self._record("changed", ctx, name, kwargs)
            if ctx.test:
                return {
                    "name": name,
                    "result": None,
                    "changes": {"new": name},
                    "comment": "would change",
                }
            return {"name": name, "result": True, "changes": {"new": name}, "comment": "changed"}

        def fail(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
            self._record("fail", ctx, name, kwargs)
            return {"name": name, "result": False, "changes": {}, "comment": "broken"}

        def boom(ctx: StateContext, name: str) -> dict[str, Any]:
            self._record("boom", ctx, name, {})
            raise RuntimeError("the disk is on fire")

        def narrow(ctx: StateContext, name: str, mode: str = "644") -> dict[str, Any]:
            self._record("narrow", ctx, name, {"mode": mode})
            return {"name": name, "result": True, "changes": {}, "comment": f"mode {mode}"}

        def mod_watch(
            ctx: StateContext, name: str, sfun: str | None = None, **kwargs: Any
        ) -> dict[str, Any]:
            self._record("mod_watch", ctx, name, dict(kwargs, sfun=sfun))
            return {
                "name": name,
                "result": True,
                "changes": {"restarted": True},
                "comment": "restarted",
            }

        return {
            "rec.ok": ok,
            "rec.changed": changed,
            "rec.fail": fail,
            "rec.boom": boom,
            "rec.narrow": narrow,
            "rec.mod_watch": mod_watch,
        }


class RunnerTestMixin:
    """
    Runs chunks with the C{test} states and a L{Recorder}.
    """

    def setUp(self) -> None:
        self.recorder = Recorder()
        self.states: dict[str, Callable[..., Any]] = dict(self.recorder.functions())
        allStates = loadStates(("test",))
        for key in list(allStates):
            self.states[key] = allStates[key]
        self.base = StateContext(salt={}, opts={})
        self.done: list[tuple[str, int, int]] = []

    def contextFor(self, low: dict[str, Any]) -> StateContext:
        return dataclasses.replace(self.base, low=low, saltenv=low.get("__env__", "base"))

    def runner(self, **kwargs: Any) -> StateRunner:
        kwargs.setdefault(
            "onStateDone", lambda tag, ret, done, total: self.done.append((tag, done, total))
        )
        return StateRunner(self.states, self.contextFor, **kwargs)

    def runChunks(self, chunks: list[dict[str, Any]], **kwargs: Any) -> dict[str, dict[str, Any]]:
        if kwargs.get("test"):
            self.base = dataclasses.replace(self.base, test=True)
        return self.runner(**kwargs).run(chunks)

    def byId(self, ret: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {v["__id__"]: v for v in ret.values()}


class TagTests(SynchronousTestCase):
    def test_stateTag(self) -> None:
        """
        A tag is state, id, name and function joined by C{_|-}.
        """
        low = chunk("file", "managed", "nginx_conf", name="/etc/nginx/nginx.conf")
        self.assertEqual(stateTag(low), "file_|-nginx_conf_|-/etc/nginx/nginx.conf_|-managed")

    def test_singleChunk(self) -> None:
        """
        L{singleChunk} is the chunk of C{state.single}: the name is also
        the id, the arguments are top-level keys.
        """
        low = singleChunk("file.managed", "/etc/x", saltenv="dev", source="salt://x")
        self.assertEqual(
            low,
            {
                "state": "file",
                "fun": "managed",
                "__id__": "/etc/x",
                "name": "/etc/x",
                "__env__": "dev",
                "__sls__": None,
                "source": "salt://x",
            },
        )

    def test_singleChunkBadFunction(self) -> None:
        """
        A function that is not C{module.function} is refused, named.
        """
        error = self.assertRaises(ValueError, singleChunk, "managed", "/etc/x")
        self.assertIn("'managed'", str(error))


class ReturnShapeTests(RunnerTestMixin, SynchronousTestCase):
    def test_shape(self) -> None:
        """
        Each state's return has Salt's keys: name, result, comment,
        changes, duration (ms), start_time (local HH:MM:SS.ffffff),
        __run_num__, __sls__, __id__.
        """
        ret = self.runChunks([chunk("test", "succeed_with_changes", "a", name="thing")])
        entry = ret["test_|-a_|-thing_|-succeed_with_changes"]
        self.assertEqual(
            set(entry),
            {
                "name",
                "result",
                "comment",
                "changes",
                "duration",
                "start_time",
                "__run_num__",
                "__sls__",
                "__id__",
            },
        )
        self.assertEqual(entry["name"], "thing")
        self.assertIs(entry["result"], True)
        self.assertEqual(entry["comment"], "Success!")
        self.assertEqual(entry["__sls__"], "web")
        self.assertEqual(entry["__id__"], "a")
        self.assertEqual(entry["__run_num__"], 0)
        self.assertIsInstance(entry["duration"], float)
        self.assertRegex(entry["start_time"], r"^\d\d:\d\d:\d\d\.\d{6}$")

    def test_durationFromClock(self) -> None:
        """
        C{duration} is the clock's time across the call, in milliseconds;
        C{start_time} is the clock's time when the state started.
        """
        times = iter([1000.0, 1000.25, 1000.5, 1000.5, 1000.5])
        ret = self.runChunks([chunk("rec", "ok", "a")], clock=lambda: next(times))
        entry = ret["rec_|-a_|-a_|-ok"]
        self.assertEqual(entry["duration"], 250.0)
        self.assertTrue(entry["start_time"].endswith(":40.000000"), entry["start_time"])

    def test_runNumInOrder(self) -> None:
        """
        C{__run_num__} counts up in execution order, and the result keeps
        that order.
        """
        chunks = [chunk("rec", "ok", i) for i in "abc"]
        ret = self.runChunks(chunks)
        self.assertEqual([v["__run_num__"] for v in ret.values()], [0, 1, 2])
        self.assertEqual(self.recorder.order(), ["ok:a", "ok:b", "ok:c"])

    def test_onStateDone(self) -> None:
        """
        C{onStateDone(tag, ret, done, total)} is called after each state.
        """
        self.runChunks([chunk("rec", "ok", "a"), chunk("rec", "ok", "b")])
        self.assertEqual(self.done, [("rec_|-a_|-a_|-ok", 1, 2), ("rec_|-b_|-b_|-ok", 2, 2)])

    def test_warnings(self) -> None:
        """
        A state's warnings are kept in its return.
        """
        ret = self.runChunks([chunk("test", "configurable_test_state", "a", warnings="careful")])
        self.assertEqual(ret["test_|-a_|-a_|-configurable_test_state"]["warnings"], ["careful"])


class ArgumentTests(RunnerTestMixin, SynchronousTestCase):
    def test_onlyAcceptedArguments(self) -> None:
        """
        A state function without C{**kwargs} gets only the parameters it
        names.
        """
        ret = self.runChunks(
            [chunk("rec", "narrow", "a", mode="600", owner="root", group="adm", require=[])]
        )
        self.assertEqual(self.recorder.calls, [("narrow", "a", {"mode": "600"}, False)])
        self.assertIs(ret["rec_|-a_|-a_|-narrow"]["result"], True)

    def test_unusedArgumentsWarned(self) -> None:
        """
        Arguments the function does not take are named in a warning, in
        Salt's words (Salt refuses the call).
        """
        ret = self.runChunks(
            [
                chunk("rec", "narrow", "a", owner="root", group="adm"),
                chunk("rec", "narrow", "b", owner="root"),
                chunk("rec", "narrow", "c", mode="600"),
            ]
        )
        self.assertEqual(
            ret["rec_|-a_|-a_|-narrow"]["warnings"],
            ["'owner' and 'group' are invalid keyword arguments for 'rec.narrow'"],
        )
        self.assertEqual(
            ret["rec_|-b_|-b_|-narrow"]["warnings"],
            ["'owner' is an invalid keyword argument for 'rec.narrow'"],
        )
        self.assertNotIn("warnings", ret["rec_|-c_|-c_|-narrow"])

    def test_kwargsWithoutRunnerKeys(self) -> None:
        """
        A state function taking C{**kwargs} gets every argument of the
        chunk but the runner's keys, requisites and dunder keys.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "b"),
                chunk(
                    "rec",
                    "ok",
                    "a",
                    source="salt://x",
                    mode="644",
                    order=10001,
                    require=[{"rec": "b"}],
                    unless=[],
                    retry=False,
                    failhard=False,
                    parallel=False,
                    fire_event=False,
                ),
            ]
        )
        self.assertEqual(
            self.recorder.calls[1], ("ok", "a", {"source": "salt://x", "mode": "644"}, False)
        )

    def test_missingParameter(self) -> None:
        """
        A required parameter the chunk does not give fails the state with
        Salt's comment.
        """

        def needs(ctx: StateContext, name: str, source: str) -> dict[str, Any]:
            raise AssertionError("not called")

        self.states["rec.needs"] = needs
        ret = self.runChunks([chunk("rec", "needs", "a")])
        entry = ret["rec_|-a_|-a_|-needs"]
        self.assertIs(entry["result"], False)
        self.assertEqual(entry["comment"], "Missing parameter source for state rec.needs\n")

    def test_missingFunction(self) -> None:
        """
        A state function that does not exist fails with Salt's comment.
        """
        ret = self.runChunks([chunk("rec", "absent", "a")])
        entry = ret["rec_|-a_|-a_|-absent"]
        self.assertIs(entry["result"], False)
        self.assertEqual(
            entry["comment"],
            "State 'rec.absent' was not found in SLS 'web'\n"
            "Reason: 'rec.absent' is not available.\n",
        )

    def test_missingFunctionSingle(self) -> None:
        """
        Outside an SLS (C{state.single}) the comment names only the state.
        """
        ret = self.runChunks([singleChunk("rec.absent", "a")])
        self.assertEqual(
            ret["rec_|-a_|-a_|-absent"]["comment"], "Specified state 'rec.absent' was not found\n"
        )

    def test_exception(self) -> None:
        """
        An exception in a state fails it; the comment has Salt's words
        and the error.
        """
        ret = self.runChunks([chunk("rec", "boom", "a"), chunk("rec", "ok", "b")])
        entry = ret["rec_|-a_|-a_|-boom"]
        self.assertIs(entry["result"], False)
        self.assertTrue(
            entry["comment"].startswith("An exception occurred in this state: Traceback")
        )
        self.assertIn("RuntimeError: the disk is on fire", entry["comment"])
        self.assertIs(ret["rec_|-b_|-b_|-ok"]["result"], True)

    def test_notADict(self) -> None:
        """
        A state returning something other than a dict fails, named.
        """
        self.states["rec.odd"] = lambda ctx, name: "yes"
        ret = self.runChunks([chunk("rec", "odd", "a")])
        entry = ret["rec_|-a_|-a_|-odd"]
        self.assertIs(entry["result"], False)
        self.assertIn("'rec.odd' returned a str, not a dict", entry["comment"])

    def test_contextPerChunk(self) -> None:
        """
        Each state gets the context L{StateRunner}'s C{contextFor} makes
        for its chunk.
        """
        seen = []

        def look(ctx: StateContext, name: str) -> dict[str, Any]:
            seen.append((ctx.low["__id__"], ctx.saltenv))
            return {"name": name, "result": True, "changes": {}, "comment": ""}

        self.states["rec.look"] = look
        self.runChunks([chunk("rec", "look", "a"), chunk("rec", "look", "b", __env__="dev")])
        self.assertEqual(seen, [("a", "base"), ("b", "dev")])


class OrderTests(RunnerTestMixin, SynchronousTestCase):
    def test_requireRunsFirst(self) -> None:
        """
        A chunk whose required state has not run yet runs it first.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "a", require=[{"rec": "b"}]), chunk("rec", "ok", "b")]
        )
        self.assertEqual(self.recorder.order(), ["ok:b", "ok:a"])
        self.assertEqual(ret["rec_|-b_|-b_|-ok"]["__run_num__"], 0)
        self.assertEqual(ret["rec_|-a_|-a_|-ok"]["__run_num__"], 1)
        self.assertEqual(list(ret), ["rec_|-b_|-b_|-ok", "rec_|-a_|-a_|-ok"])

    def test_requireByName(self) -> None:
        """
        A requisite matches a chunk's name as well as its id.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "a", require=[{"rec": "/etc/b"}]),
                chunk("rec", "ok", "b", name="/etc/b"),
            ]
        )
        self.assertEqual(self.recorder.order(), ["ok:/etc/b", "ok:a"])

    def test_requireGlob(self) -> None:
        """
        A requisite value may be a glob.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "a", require=[{"rec": "pkg-*"}]),
                chunk("rec", "ok", "pkg-1"),
                chunk("rec", "ok", "pkg-2"),
            ]
        )
        self.assertEqual(self.recorder.order(), ["ok:pkg-1", "ok:pkg-2", "ok:a"])

    def test_requireSls(self) -> None:
        """
        C{sls: x} requires every chunk of that SLS.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "a", require=[{"sls": "db"}]),
                chunk("rec", "ok", "b", sls="db"),
                chunk("rec", "ok", "c", sls="db"),
            ]
        )
        self.assertEqual(self.recorder.order(), ["ok:b", "ok:c", "ok:a"])

    def test_requireBareId(self) -> None:
        """
        A bare string requisite matches any state's id or name; a
        C{module.function} key counts as the module.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "a", require=["b", {"rec.ok": "c"}]),
                chunk("rec", "ok", "b"),
                chunk("rec", "ok", "c"),
            ]
        )
        self.assertEqual(self.recorder.order(), ["ok:b", "ok:c", "ok:a"])

    def test_requireFailed(self) -> None:
        """
        A failed requirement stops the state, Salt's comment naming
        C{<sls>.<id>}.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "b", sls="db"), chunk("rec", "ok", "a", require=[{"rec": "b"}])]
        )
        entry = ret["rec_|-a_|-a_|-ok"]
        self.assertIs(entry["result"], False)
        self.assertEqual(entry["comment"], "One or more requisite failed: db.b")
        self.assertEqual(entry["changes"], {})
        self.assertIs(entry["__state_ran__"], False)
        self.assertEqual(entry["__run_num__"], 1)
        self.assertEqual(self.recorder.order(), ["fail:b"])

    def test_requireFailedChain(self) -> None:
        """
        A failure propagates down a chain of requires.
        """
        ret = self.runChunks(
            [
                chunk("rec", "fail", "a"),
                chunk("rec", "ok", "b", require=[{"rec": "a"}]),
                chunk("rec", "ok", "c", require=[{"rec": "b"}]),
            ]
        )
        self.assertEqual(ret["rec_|-c_|-c_|-ok"]["comment"], "One or more requisite failed: web.b")

    def test_requireAny(self) -> None:
        """
        C{require_any}: one success is enough; all failing fails.
        """
        ret = self.runChunks(
            [
                chunk("rec", "fail", "x"),
                chunk("rec", "ok", "y"),
                chunk("rec", "fail", "z"),
                chunk("rec", "ok", "a", require_any=[{"rec": "x"}, {"rec": "y"}]),
                chunk("rec", "ok", "b", require_any=[{"rec": "x"}, {"rec": "z"}]),
            ]
        )
        self.assertIs(ret["rec_|-a_|-a_|-ok"]["result"], True)
        self.assertEqual(
            ret["rec_|-b_|-b_|-ok"]["comment"], "One or more requisite failed: web.x, web.z"
        )

    def test_notFound(self) -> None:
        """
        A requisite naming no state fails the state with Salt's comment.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "a", require=[{"pkg": "nginx"}], watch=[{"file": "/etc/x"}])]
        )
        entry = ret["rec_|-a_|-a_|-ok"]
        self.assertIs(entry["result"], False)
        self.assertEqual(
            entry["comment"],
            "The following requisites were not found:\n"
            "                   require:\n"
            "                       pkg: nginx\n"
            "                   watch:\n"
            "                       file: /etc/x\n",
        )
        self.assertEqual(self.recorder.calls, [])

    def test_recursion(self) -> None:
        """
        A requisite cycle fails its states with "Recursive requisite
        found" naming the chain; others still run.
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "a", require=[{"rec": "b"}]),
                chunk("rec", "ok", "b", require=[{"rec": "a"}]),
                chunk("rec", "ok", "c"),
            ]
        )
        for tag in ("rec_|-a_|-a_|-ok", "rec_|-b_|-b_|-ok"):
            self.assertIs(ret[tag]["result"], False)
            self.assertIn(
                ret[tag]["comment"],
                (
                    "Recursive requisite found: web.a -> web.b -> web.a",
                    "Recursive requisite found: web.b -> web.a -> web.b",
                ),
            )
        self.assertEqual(self.recorder.order(), ["ok:c"])

    def test_selfRequireBySls(self) -> None:
        """
        A state requiring its own SLS does not require itself.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "b"), chunk("rec", "ok", "a", require=[{"sls": "web"}])]
        )
        self.assertIs(ret["rec_|-a_|-a_|-ok"]["result"], True)


class WatchTests(RunnerTestMixin, SynchronousTestCase):
    def test_watchChanged(self) -> None:
        """
        A watched state that changed makes the watcher run, then its
        module's C{mod_watch} with the chunk's arguments and C{sfun}; its
        return is the watcher's.
        """
        ret = self.runChunks(
            [
                chunk("rec", "changed", "conf"),
                chunk("rec", "ok", "svc", enable=True, watch=[{"rec": "conf"}]),
            ]
        )
        self.assertEqual(self.recorder.order(), ["changed:conf", "ok:svc", "mod_watch:svc"])
        self.assertEqual(self.recorder.calls[2][2], {"enable": True, "sfun": "ok"})
        entry = ret["rec_|-svc_|-svc_|-ok"]
        self.assertEqual(entry["comment"], "restarted")
        self.assertEqual(entry["changes"], {"restarted": True})
        self.assertEqual(entry["__run_num__"], 1)

    def test_sfunThroughKwargs(self) -> None:
        """
        A C{mod_watch} taking only C{**kwargs} gets C{sfun} there.
        """
        seen = []

        def mod_watch(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
            seen.append(kwargs)
            return {"name": name, "result": True, "changes": {}, "comment": "ok"}

        self.states["rec.mod_watch"] = mod_watch
        self.runChunks([chunk("rec", "changed", "conf"), chunk("rec", "ok", "svc", watch=["conf"])])
        self.assertEqual(seen, [{"sfun": "ok"}])

    def test_watchUnchanged(self) -> None:
        """
        A watched state without changes is a plain require.
        """
        self.runChunks(
            [chunk("rec", "ok", "conf"), chunk("rec", "ok", "svc", watch=[{"rec": "conf"}])]
        )
        self.assertEqual(self.recorder.order(), ["ok:conf", "ok:svc"])

    def test_watcherChangedItself(self) -> None:
        """
        When the watching state made changes itself, C{mod_watch} is not
        run.
        """
        self.runChunks(
            [
                chunk("rec", "changed", "conf"),
                chunk("rec", "changed", "svc", watch=[{"rec": "conf"}]),
            ]
        )
        self.assertEqual(self.recorder.order(), ["changed:conf", "changed:svc"])

    def test_watchFailed(self) -> None:
        """
        A failed watched state fails the watcher as a require does.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "conf"), chunk("rec", "ok", "svc", watch=[{"rec": "conf"}])]
        )
        self.assertEqual(
            ret["rec_|-svc_|-svc_|-ok"]["comment"], "One or more requisite failed: web.conf"
        )

    def test_watchWithoutModWatch(self) -> None:
        """
        A watch from a state module without C{mod_watch} is a require.
        """
        del self.states["rec.mod_watch"]
        ret = self.runChunks(
            [chunk("rec", "changed", "conf"), chunk("rec", "ok", "svc", watch=[{"rec": "conf"}])]
        )
        self.assertEqual(self.recorder.order(), ["changed:conf", "ok:svc"])
        self.assertEqual(ret["rec_|-svc_|-svc_|-ok"]["comment"], "fine")

    def test_testModWatch(self) -> None:
        """
        The C{test} module's C{mod_watch} lists the watched states that
        changed, as Salt's.
        """
        ret = self.runChunks(
            [
                chunk("test", "succeed_with_changes", "a"),
                chunk("test", "succeed_without_changes", "b"),
                chunk("test", "succeed_without_changes", "w", watch=[{"test": "a"}, {"test": "b"}]),
            ]
        )
        entry = ret["test_|-w_|-w_|-succeed_without_changes"]
        self.assertEqual(entry["comment"], "Watch statement fired.")
        self.assertEqual(entry["changes"], {"Requisites with changes": ["test: a"]})

    def test_watchAny(self) -> None:
        """
        C{watch_any}: one watched state succeeding is enough; a change
        fires C{mod_watch}.
        """
        ret = self.runChunks(
            [
                chunk("rec", "fail", "x"),
                chunk("rec", "changed", "y"),
                chunk("rec", "ok", "svc", watch_any=[{"rec": "x"}, {"rec": "y"}]),
            ]
        )
        self.assertEqual(ret["rec_|-svc_|-svc_|-ok"]["comment"], "restarted")


class OnchangesOnfailTests(RunnerTestMixin, SynchronousTestCase):
    def test_onchangesNoChange(self) -> None:
        """
        C{onchanges} without a change: not run, result True, Salt's
        comment.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "a"), chunk("rec", "ok", "b", onchanges=[{"rec": "a"}])]
        )
        entry = ret["rec_|-b_|-b_|-ok"]
        self.assertIs(entry["result"], True)
        self.assertEqual(
            entry["comment"], "State was not run because none of the onchanges reqs changed"
        )
        self.assertEqual(self.recorder.order(), ["ok:a"])

    def test_onchangesChanged(self) -> None:
        """
        C{onchanges} with a change runs the state (no C{mod_watch}).
        """
        self.runChunks(
            [chunk("rec", "changed", "a"), chunk("rec", "ok", "b", onchanges=[{"rec": "a"}])]
        )
        self.assertEqual(self.recorder.order(), ["changed:a", "ok:b"])

    def test_onchangesFailedTarget(self) -> None:
        """
        A failed onchanges target counts as no change.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "a"), chunk("rec", "ok", "b", onchanges=[{"rec": "a"}])]
        )
        self.assertIs(ret["rec_|-b_|-b_|-ok"]["result"], True)
        self.assertEqual(self.recorder.order(), ["fail:a"])

    def test_onchangesAll(self) -> None:
        """
        C{onchanges} with several targets runs when any changed (Salt);
        C{onchanges_any} likewise.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "a"),
                chunk("rec", "changed", "b"),
                chunk("rec", "ok", "c", onchanges=[{"rec": "a"}, {"rec": "b"}]),
                chunk("rec", "ok", "d", onchanges_any=[{"rec": "a"}, {"rec": "b"}]),
            ]
        )
        self.assertEqual(self.recorder.order(), ["ok:a", "changed:b", "ok:c", "ok:d"])

    def test_onfailNotFailed(self) -> None:
        """
        C{onfail} when the target succeeded: not run, Salt's comment.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "a"), chunk("rec", "ok", "b", onfail=[{"rec": "a"}])]
        )
        entry = ret["rec_|-b_|-b_|-ok"]
        self.assertIs(entry["result"], True)
        self.assertEqual(entry["comment"], "State was not run because onfail req did not change")
        self.assertEqual(self.recorder.order(), ["ok:a"])

    def test_onfailFailed(self) -> None:
        """
        C{onfail} runs the state when its target failed.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "a"), chunk("rec", "ok", "b", onfail=[{"rec": "a"}])]
        )
        self.assertIs(ret["rec_|-b_|-b_|-ok"]["result"], True)
        self.assertEqual(self.recorder.order(), ["fail:a", "ok:b"])

    def test_onfailAnyAndAll(self) -> None:
        """
        C{onfail_any} runs when one target failed; C{onfail_all} only when
        all did.
        """
        ret = self.runChunks(
            [
                chunk("rec", "fail", "a"),
                chunk("rec", "ok", "b"),
                chunk("rec", "ok", "any", onfail_any=[{"rec": "a"}, {"rec": "b"}]),
                chunk("rec", "ok", "all", onfail_all=[{"rec": "a"}, {"rec": "b"}]),
            ]
        )
        self.assertIn("ok:any", self.recorder.order())
        self.assertNotIn("ok:all", self.recorder.order())
        self.assertEqual(
            ret["rec_|-all_|-all_|-ok"]["comment"],
            "State was not run because onfail req did not change",
        )


class PrereqTests(RunnerTestMixin, SynchronousTestCase):
    def test_prereqWouldChange(self) -> None:
        """
        C{prereq}: the target runs in test mode first; as it would change,
        the prereq state runs, then the target for real.
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "stop", prereq=[{"rec": "deploy"}]),
                chunk("rec", "changed", "deploy"),
            ]
        )
        self.assertEqual(
            [(fun, name, test) for fun, name, _, test in self.recorder.calls],
            [("changed", "deploy", True), ("ok", "stop", False), ("changed", "deploy", False)],
        )
        self.assertEqual(ret["rec_|-stop_|-stop_|-ok"]["__run_num__"], 0)
        self.assertEqual(ret["rec_|-deploy_|-deploy_|-changed"]["__run_num__"], 1)
        self.assertEqual(ret["rec_|-deploy_|-deploy_|-changed"]["comment"], "changed")

    def test_prereqFlagInTestRun(self) -> None:
        """
        The target's test run sees C{__prereq__} in its chunk (Salt's
        C{__low__}); its real run does not.
        """
        seen = []

        def look(ctx: StateContext, name: str) -> dict[str, Any]:
            seen.append((ctx.test, ctx.low.get("__prereq__", False)))
            return {
                "name": name,
                "result": None if ctx.test else True,
                "changes": {"a": 1},
                "comment": "",
            }

        self.states["rec.look"] = look
        self.runChunks(
            [chunk("rec", "ok", "stop", prereq=["deploy"]), chunk("rec", "look", "deploy")]
        )
        self.assertEqual(seen, [(True, True), (False, False)])

    def test_prereqNoChange(self) -> None:
        """
        When the target would not change, the prereq state is not run:
        result True, "No changes detected".
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "stop", prereq=[{"rec": "deploy"}]), chunk("rec", "ok", "deploy")]
        )
        entry = ret["rec_|-stop_|-stop_|-ok"]
        self.assertIs(entry["result"], True)
        self.assertEqual(entry["comment"], "No changes detected")
        self.assertEqual(
            [(name, test) for _, name, _, test in self.recorder.calls],
            [("deploy", True), ("deploy", False)],
        )

    def test_prereqFails(self) -> None:
        """
        When the prereq state fails, the target is not run: its return is
        its test-mode return without changes (Salt).
        """
        ret = self.runChunks(
            [
                chunk("rec", "fail", "stop", prereq=[{"rec": "deploy"}]),
                chunk("rec", "changed", "deploy"),
            ]
        )
        self.assertEqual(
            [(name, test) for _, name, _, test in self.recorder.calls],
            [("deploy", True), ("stop", False)],
        )
        entry = ret["rec_|-deploy_|-deploy_|-changed"]
        self.assertIsNone(entry["result"])
        self.assertEqual(entry["changes"], {})
        self.assertEqual(entry["__run_num__"], 1)

    def test_prereqTargetTestFails(self) -> None:
        """
        When the target's test run fails, the prereq state fails naming
        it.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "stop", prereq=[{"rec": "deploy"}]), chunk("rec", "fail", "deploy")]
        )
        self.assertEqual(
            ret["rec_|-stop_|-stop_|-ok"]["comment"], "One or more requisite failed: web.deploy"
        )

    def test_prereqTargetRequirementsFirst(self) -> None:
        """
        The target's own requirements run before its test run.
        """
        self.runChunks(
            [
                chunk("rec", "ok", "stop", prereq=[{"rec": "deploy"}]),
                chunk("rec", "changed", "deploy", require=[{"rec": "fetch"}]),
                chunk("rec", "ok", "fetch"),
            ]
        )
        self.assertEqual(
            [(name, test) for _, name, _, test in self.recorder.calls],
            [("fetch", False), ("deploy", True), ("stop", False), ("deploy", False)],
        )

    def test_prereqChainNoChange(self) -> None:
        """
        A prereq chain whose last target would not change: the middle
        state is final at its test run ("No changes detected"), before
        the first (Salt's order).
        """
        ret = self.runChunks(
            [
                chunk("rec", "changed", "first", prereq=["middle"]),
                chunk("rec", "changed", "middle", prereq=["last"]),
                chunk("rec", "ok", "last"),
            ]
        )
        self.assertEqual(
            [(v["__id__"], v["comment"]) for v in ret.values()],
            [
                ("middle", "No changes detected"),
                ("first", "No changes detected"),
                ("last", "fine"),
            ],
        )

    def test_prereqChainChanges(self) -> None:
        """
        A prereq chain whose last target would change runs in order.
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "first", prereq=["middle"]),
                chunk("rec", "changed", "middle", prereq=["last"]),
                chunk("rec", "changed", "last"),
            ]
        )
        self.assertEqual([v["__id__"] for v in ret.values()], ["first", "middle", "last"])
        self.assertEqual([v["result"] for v in ret.values()], [True, True, True])

    def test_prereqWatcherTestRun(self) -> None:
        """
        A target that watches a state that already changed, and would not
        change itself, means "No changes detected" for the prereq state
        (Salt: its mod_watch is not foreseen).
        """
        ret = self.runChunks(
            [
                chunk("rec", "changed", "fetch"),
                chunk("rec", "ok", "stop", prereq=["svc"]),
                chunk("rec", "ok", "svc", watch=["fetch"]),
            ]
        )
        self.assertEqual(ret["rec_|-stop_|-stop_|-ok"]["comment"], "No changes detected")
        self.assertEqual(ret["rec_|-svc_|-svc_|-ok"]["comment"], "restarted")

    def test_prereqWatcherRequisitesFirst(self) -> None:
        """
        The target's watched state runs before the target's test run even
        when listed after both (Salt's order); the target's test run
        without changes means "No changes detected".
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "stop", prereq=["svc"]),
                chunk("rec", "ok", "svc", watch=["fetch"]),
                chunk("rec", "changed", "fetch"),
            ]
        )
        self.assertEqual([v["__id__"] for v in ret.values()], ["fetch", "stop", "svc"])
        self.assertEqual(ret["rec_|-stop_|-stop_|-ok"]["comment"], "No changes detected")
        self.assertEqual(ret["rec_|-svc_|-svc_|-ok"]["comment"], "restarted")

    def test_longChain(self) -> None:
        """
        A long chain of requisites listed backwards runs without deep
        recursion.
        """
        count = 3000
        chunks = [
            chunk("rec", "ok", f"c{i}", require=[f"c{i + 1}"] if i + 1 < count else [])
            for i in range(count)
        ]
        ret = self.runChunks(chunks)
        self.assertEqual(len(ret), count)
        self.assertEqual(self.recorder.order()[:2], [f"ok:c{count - 1}", f"ok:c{count - 2}"])
        self.assertTrue(all(v["result"] is True for v in ret.values()))


class ListenTests(RunnerTestMixin, SynchronousTestCase):
    def test_listenChanged(self) -> None:
        """
        C{listen}: after every chunk, C{mod_watch} for the listener whose
        target changed, under Salt's C{listener_<id>} tag.
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "svc", listen=[{"rec": "conf"}]),
                chunk("rec", "changed", "conf"),
                chunk("rec", "ok", "last"),
            ]
        )
        self.assertEqual(
            self.recorder.order(), ["ok:svc", "changed:conf", "ok:last", "mod_watch:svc"]
        )
        entry = ret["rec_|-listener_svc_|-svc_|-mod_watch"]
        self.assertEqual(entry["comment"], "restarted")
        self.assertEqual(entry["__run_num__"], 3)
        self.assertEqual(entry["__id__"], "listener_svc")
        self.assertEqual(self.recorder.calls[3][2], {"sfun": "ok"})

    def test_listenUnchanged(self) -> None:
        """
        No change, no listener run.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "svc", listen=[{"rec": "conf"}]), chunk("rec", "ok", "conf")]
        )
        self.assertEqual(len(ret), 2)

    def test_listenAfterFailhard(self) -> None:
        """
        Listeners still run after a failhard stop (Salt).
        """
        ret = self.runChunks(
            [
                chunk("rec", "changed", "conf"),
                chunk("rec", "ok", "svc", listen=["conf"]),
                chunk("rec", "fail", "bad"),
                chunk("rec", "ok", "never"),
            ],
            failhard=True,
        )
        self.assertEqual(
            list(ret),
            [
                "rec_|-conf_|-conf_|-changed",
                "rec_|-svc_|-svc_|-ok",
                "rec_|-bad_|-bad_|-fail",
                "rec_|-listener_svc_|-svc_|-mod_watch",
            ],
        )

    def test_noListenAfterCancel(self) -> None:
        """
        A cancelled run runs no listeners.
        """
        ret = self.runChunks(
            [chunk("rec", "changed", "conf"), chunk("rec", "ok", "svc", listen=["conf"])],
            cancelled=lambda: len(self.recorder.calls) >= 2,
        )
        self.assertEqual(len(ret), 2)

    def test_listenMissing(self) -> None:
        """
        A listen naming no state gives Salt's Listen_Error entry.
        """
        ret = self.runChunks([chunk("rec", "ok", "svc", listen=[{"rec": "nothere"}])])
        entry = ret["Listen_Error_|-listen_nothere_|-listen_rec_|-Listen_Error"]
        self.assertEqual(entry["comment"], "Referenced state rec: nothere does not exist")
        self.assertIs(entry["result"], False)


class ChecksTests(RunnerTestMixin, SynchronousTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self.codes: dict[str, int] = {}

        def retcode(cmd: str, **kwargs: Any) -> int:
            self.commands.append((cmd, kwargs))
            return self.codes.get(cmd, 0)

        self.base = dataclasses.replace(
            self.base,
            salt={"cmd.retcode": retcode, "file.file_exists": lambda path: path == "/yes"},
        )

    def test_unlessTrue(self) -> None:
        """
        C{unless} whose command succeeds skips the state: result True,
        Salt's comment; the command runs through C{cmd.retcode} with
        C{python_shell=True}.
        """
        ret = self.runChunks([chunk("rec", "ok", "a", unless="test -e /x", cwd="/tmp")])
        entry = ret["rec_|-a_|-a_|-ok"]
        self.assertIs(entry["result"], True)
        self.assertEqual(entry["comment"], "unless condition is true")
        self.assertEqual(self.recorder.calls, [])
        self.assertEqual(
            self.commands,
            [("test -e /x", {"ignore_retcode": True, "python_shell": True, "cwd": "/tmp"})],
        )

    def test_unlessFalse(self) -> None:
        """
        C{unless} whose command fails runs the state; with a list, any
        false condition runs it.
        """
        self.codes["false"] = 1
        self.runChunks(
            [
                chunk("rec", "ok", "a", unless="false"),
                chunk("rec", "ok", "b", unless=["true", "false"]),
            ]
        )
        self.assertEqual(self.recorder.order(), ["ok:a", "ok:b"])

    def test_onlyif(self) -> None:
        """
        C{onlyif}: every condition must succeed for the state to run;
        otherwise result True, Salt's comment.
        """
        self.codes["false"] = 1
        ret = self.runChunks(
            [
                chunk("rec", "ok", "a", onlyif=["true", "false"]),
                chunk("rec", "ok", "b", onlyif="true"),
            ]
        )
        self.assertEqual(ret["rec_|-a_|-a_|-ok"]["comment"], "onlyif condition is false")
        self.assertIs(ret["rec_|-a_|-a_|-ok"]["result"], True)
        self.assertEqual(self.recorder.order(), ["ok:b"])

    def test_functionForm(self) -> None:
        """
        Salt's C{fun:} form calls an execution function; a true return is
        a true condition.
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "a", onlyif=[{"fun": "file.file_exists", "path": "/no"}]),
                chunk("rec", "ok", "b", unless=[{"fun": "file.file_exists", "args": ["/yes"]}]),
                chunk("rec", "ok", "c", onlyif=[{"fun": "file.file_exists", "path": "/yes"}]),
            ]
        )
        self.assertEqual(ret["rec_|-a_|-a_|-ok"]["comment"], "onlyif condition is false")
        self.assertEqual(ret["rec_|-b_|-b_|-ok"]["comment"], "unless condition is true")
        self.assertEqual(self.recorder.order(), ["ok:c"])

    def test_creates(self) -> None:
        """
        C{creates}: the state is skipped when its files exist.
        """
        here = self.mktemp()
        with open(here, "w"):
            pass
        ret = self.runChunks(
            [
                chunk("rec", "ok", "a", creates=[here]),
                chunk("rec", "ok", "b", creates=here),
                chunk("rec", "ok", "c", creates=[here, here + ".missing"]),
            ]
        )
        self.assertEqual(ret["rec_|-a_|-a_|-ok"]["comment"], "All files in creates exist")
        self.assertEqual(ret["rec_|-b_|-b_|-ok"]["comment"], f"{here} exists")
        self.assertEqual(self.recorder.order(), ["ok:c"])

    def test_skippedNoModWatch(self) -> None:
        """
        A watcher skipped by C{unless} does not run C{mod_watch}.
        """
        ret = self.runChunks(
            [
                chunk("rec", "changed", "conf"),
                chunk("rec", "ok", "svc", unless="true", watch=["conf"]),
            ]
        )
        self.assertEqual(self.recorder.order(), ["changed:conf"])
        self.assertEqual(ret["rec_|-svc_|-svc_|-ok"]["comment"], "unless condition is true")

    def test_checkCmd(self) -> None:
        """
        C{check_cmd} decides the result after the state ran.
        """
        self.codes["false"] = 1
        ret = self.runChunks([chunk("rec", "ok", "a", check_cmd="false")])
        self.assertIs(ret["rec_|-a_|-a_|-ok"]["result"], False)
        self.assertEqual(
            ret["rec_|-a_|-a_|-ok"]["comment"], "check_cmd determined the state failed"
        )


class RetryTests(RunnerTestMixin, SynchronousTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.slept: list[float] = []
        self.results = [False, False, True]

        def flaky(ctx: StateContext, name: str) -> dict[str, Any]:
            result = self.results.pop(0)
            return {"name": name, "result": result, "changes": {}, "comment": f"got {result}"}

        self.states["rec.flaky"] = flaky

    def test_retryUntilSuccess(self) -> None:
        """
        C{retry}: the state is run again after C{interval} seconds until
        its result is C{until}, up to C{attempts} runs; the comment notes
        each attempt.
        """
        ret = self.runChunks(
            [chunk("rec", "flaky", "a", retry={"attempts": 5, "interval": 3})],
            sleep=self.slept.append,
        )
        entry = ret["rec_|-a_|-a_|-flaky"]
        self.assertIs(entry["result"], True)
        self.assertEqual(self.slept, [3, 3])
        self.assertEqual(
            entry["comment"],
            'Attempt 1: Returned a result of "False", with the following comment: "got False"\n'
            'Attempt 2: Returned a result of "False", with the following comment: "got False"\n'
            "got True",
        )
        self.assertEqual(entry["__run_num__"], 0)
        self.assertGreaterEqual(entry["duration"], 6000)

    def test_retryAttempts(self) -> None:
        """
        At most C{attempts} runs.
        """
        ret = self.runChunks(
            [chunk("rec", "flaky", "a", retry={"attempts": 2, "interval": 1})],
            sleep=self.slept.append,
        )
        self.assertIs(ret["rec_|-a_|-a_|-flaky"]["result"], False)
        self.assertEqual(self.slept, [1])

    def test_retrySplay(self) -> None:
        """
        C{splay} adds a random number of seconds up to it.
        """
        self.runChunks(
            [chunk("rec", "flaky", "a", retry={"attempts": 3, "interval": 2, "splay": 10})],
            sleep=self.slept.append,
            randint=lambda low, high: high,
        )
        self.assertEqual(self.slept, [12, 12])

    def test_retryDefaults(self) -> None:
        """
        C{retry: True}: Salt's defaults, 2 attempts 30 seconds apart.
        """
        self.runChunks([chunk("rec", "flaky", "a", retry=True)], sleep=self.slept.append)
        self.assertEqual(self.slept, [30])

    def test_retryTestMode(self) -> None:
        """
        In test mode the state is not retried; the comment says it would
        be.
        """
        ret = self.runChunks(
            [chunk("rec", "flaky", "a", retry={"attempts": 3})], test=True, sleep=self.slept.append
        )
        self.assertEqual(self.slept, [])
        self.assertEqual(
            ret["rec_|-a_|-a_|-flaky"]["comment"],
            "got False  The state would be retried every 30 seconds "
            "(with a splay of up to 0 seconds) a maximum of 3 times "
            "or until a result of True is returned",
        )


class StopTests(RunnerTestMixin, SynchronousTestCase):
    def test_failhardOption(self) -> None:
        """
        With C{failhard}, the first failure stops the run; later states
        are not in the result.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "a"), chunk("rec", "fail", "b"), chunk("rec", "ok", "c")],
            failhard=True,
        )
        self.assertEqual(list(ret), ["rec_|-a_|-a_|-ok", "rec_|-b_|-b_|-fail"])

    def test_failhardChunk(self) -> None:
        """
        A chunk's own C{failhard} stops the run when it fails.
        """
        ret = self.runChunks(
            [
                chunk("rec", "fail", "a"),
                chunk("rec", "fail", "b", failhard=True),
                chunk("rec", "ok", "c"),
            ]
        )
        self.assertEqual(len(ret), 2)

    def test_failhardChunkOff(self) -> None:
        """
        C{failhard: False} on a chunk overrides the option.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "a", failhard=False), chunk("rec", "ok", "c")], failhard=True
        )
        self.assertEqual(len(ret), 2)

    def test_failhardInRequisite(self) -> None:
        """
        A failhard failure of a required state stops the run before the
        requiring state.
        """
        ret = self.runChunks(
            [
                chunk("rec", "ok", "a", require=["b"]),
                chunk("rec", "fail", "b"),
                chunk("rec", "ok", "c"),
            ],
            failhard=True,
        )
        self.assertEqual(list(ret), ["rec_|-b_|-b_|-fail"])

    def test_failhardNotInTestMode(self) -> None:
        """
        failhard does not stop a test run.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "a"), chunk("rec", "ok", "c")], failhard=True, test=True
        )
        self.assertEqual(len(ret), 2)

    def test_cancelled(self) -> None:
        """
        C{cancelled()} is checked between chunks: when true the run stops.
        """
        ret = self.runChunks(
            [chunk("rec", "ok", "a"), chunk("rec", "ok", "b"), chunk("rec", "ok", "c")],
            cancelled=lambda: len(self.recorder.calls) >= 2,
        )
        self.assertEqual(list(ret), ["rec_|-a_|-a_|-ok", "rec_|-b_|-b_|-ok"])


class TestModeTests(RunnerTestMixin, SynchronousTestCase):
    def test_testMode(self) -> None:
        """
        In a test run, states see C{ctx.test}; would-be changes give
        C{result: None}.
        """
        ret = self.runChunks([chunk("rec", "changed", "a")], test=True)
        self.assertIsNone(ret["rec_|-a_|-a_|-changed"]["result"])
        self.assertEqual(self.recorder.calls[0][3], True)

    def test_chunkTestTrue(self) -> None:
        """
        A chunk's C{test: True} runs it in test mode in a real run.
        """
        self.runChunks([chunk("rec", "ok", "a", test=True), chunk("rec", "ok", "b")])
        self.assertEqual([c[3] for c in self.recorder.calls], [True, False])

    def test_chunkTestFalse(self) -> None:
        """
        A chunk's C{test: False} runs it for real in a test run.
        """
        self.runChunks([chunk("rec", "ok", "a", test=False), chunk("rec", "ok", "b")], test=True)
        self.assertEqual([c[3] for c in self.recorder.calls], [False, True])

    def test_watchInTestMode(self) -> None:
        """
        In test mode a watched state that would change still makes the
        watcher's C{mod_watch} run (in test mode).
        """
        self.runChunks(
            [chunk("rec", "changed", "conf"), chunk("rec", "ok", "svc", watch=["conf"])], test=True
        )
        self.assertEqual(self.recorder.order(), ["changed:conf", "ok:svc", "mod_watch:svc"])


class ParallelTests(RunnerTestMixin, SynchronousTestCase):
    def test_parallel(self) -> None:
        """
        C{parallel: True} states run in threads at the same time; a
        dependent waits for them; their returns are marked
        C{__parallel__}.
        """
        barrier = threading.Barrier(2, timeout=10)

        def meet(ctx: StateContext, name: str) -> dict[str, Any]:
            barrier.wait()
            return {
                "name": name,
                "result": True,
                "changes": {"met": name},
                "comment": threading.current_thread().name,
            }

        self.states["rec.meet"] = meet
        ret = self.runChunks(
            [
                chunk("rec", "meet", "a", parallel=True),
                chunk("rec", "meet", "b", parallel=True),
                chunk("rec", "ok", "c", require=["a", "b"]),
            ]
        )
        a, b, c = ret["rec_|-a_|-a_|-meet"], ret["rec_|-b_|-b_|-meet"], ret["rec_|-c_|-c_|-ok"]
        self.assertIs(a["__parallel__"], True)
        self.assertIs(b["__parallel__"], True)
        self.assertEqual(a["changes"], {"met": "a"})
        self.assertEqual(a["comment"], "state-parallel")
        self.assertIs(c["result"], True)
        self.assertEqual([a["__run_num__"], b["__run_num__"], c["__run_num__"]], [0, 1, 2])
        self.assertNotIn("__parallel__", c)

    def test_parallelFailureSeenByDependent(self) -> None:
        """
        A dependent sees a parallel state's real result.
        """
        ret = self.runChunks(
            [chunk("rec", "fail", "a", parallel=True), chunk("rec", "ok", "b", require=["a"])]
        )
        self.assertEqual(ret["rec_|-b_|-b_|-ok"]["comment"], "One or more requisite failed: web.a")

    def test_parallelJoinedAtEnd(self) -> None:
        """
        The run returns only when every parallel state has returned.
        """
        ret = self.runChunks([chunk("rec", "changed", "a", parallel=True)])
        self.assertIs(ret["rec_|-a_|-a_|-changed"]["result"], True)
        self.assertEqual(self.done, [("rec_|-a_|-a_|-changed", 1, 1)])


class TestStatesThroughRunnerTests(RunnerTestMixin, SynchronousTestCase):
    def test_failWithChangesTest(self) -> None:
        """
        The C{test} states through the runner in a test run.
        """
        ret = self.runChunks(
            [
                chunk("test", "fail_with_changes", "a"),
                chunk("test", "fail_without_changes", "b"),
                chunk("test", "nop", "c", something="else"),
            ],
            test=True,
        )
        entries = self.byId(ret)
        self.assertIsNone(entries["a"]["result"])
        self.assertIs(entries["b"]["result"], False)
        self.assertEqual(entries["b"]["comment"], "If we weren't testing, this would be a failure!")
        self.assertIs(entries["c"]["result"], True)
        self.assertTrue(all(re.match(r"\d\d:", e["start_time"]) for e in entries.values()))


class RobustnessTests(RunnerTestMixin, SynchronousTestCase):
    def test_contextFails(self) -> None:
        """
        When no context can be made for a chunk, that state fails with the
        error; the run goes on.
        """

        def contextFor(low: dict[str, Any]) -> StateContext:
            if low["__id__"] == "a":
                raise KeyError("no saltenv 'nowhere'")
            return self.base

        runner = StateRunner(self.states, contextFor)
        ret = runner.run([chunk("rec", "ok", "a"), chunk("rec", "ok", "b")])
        self.assertIs(ret["rec_|-a_|-a_|-ok"]["result"], False)
        self.assertIn("no saltenv 'nowhere'", ret["rec_|-a_|-a_|-ok"]["comment"])
        self.assertIs(ret["rec_|-b_|-b_|-ok"]["result"], True)

    def test_cancelledStopsRetry(self) -> None:
        """
        A cancelled run makes no more retry attempts.
        """
        slept: list[float] = []
        ret = self.runChunks(
            [
                chunk("rec", "fail", "a", retry={"attempts": 10, "interval": 1}),
                chunk("rec", "ok", "b"),
            ],
            sleep=slept.append,
            cancelled=lambda: len(slept) >= 2,
        )
        self.assertEqual(slept, [1, 1])
        self.assertEqual(list(ret), ["rec_|-a_|-a_|-fail"])
        self.assertEqual(self.recorder.order(), ["fail:a", "fail:a"])

    def test_parallelWatch(self) -> None:
        """
        A parallel watcher whose watched state changed runs its
        C{mod_watch} in its thread.
        """
        ret = self.runChunks(
            [
                chunk("rec", "changed", "conf"),
                chunk("rec", "ok", "svc", parallel=True, watch=["conf"]),
            ]
        )
        entry = ret["rec_|-svc_|-svc_|-ok"]
        self.assertEqual(entry["comment"], "restarted")
        self.assertIs(entry["__parallel__"], True)

    def test_runnerTestForcesTest(self) -> None:
        """
        A runner made with C{test=True} runs states in test mode even if
        the context says otherwise.
        """
        self.runner(test=True).run([chunk("rec", "ok", "a")])
        self.assertEqual(self.recorder.calls[0][3], True)

    def test_inputNotChanged(self) -> None:
        """
        The chunks given are not changed by a run.
        """
        chunks = [chunk("rec", "ok", "a", watch=["b"]), chunk("rec", "changed", "b")]
        before = [dict(c) for c in chunks]
        self.runChunks(chunks)
        self.assertEqual(chunks, before)


class DisabledRequisitesTests(RunnerTestMixin, SynchronousTestCase):
    """
    Salt's C{disabled_requisites}: the kinds named are not checked at run
    time (Salt's dependency graph leaves them out).
    """

    def chunks(self) -> list[dict[str, Any]]:
        return [
            chunk("test", "fail_without_changes", "a"),
            chunk("test", "succeed_without_changes", "b", require=[{"test": "a"}]),
        ]

    def test_checkedByDefault(self) -> None:
        """
        Without the option, a failed C{require} stops the state.
        """
        ret = self.byId(self.runChunks(self.chunks()))
        self.assertIs(ret["b"]["result"], False)
        self.assertIn("One or more requisite failed", ret["b"]["comment"])

    def test_disabledKindIgnored(self) -> None:
        """
        With C{require} disabled (a list or one kind), the state runs
        although the state it requires failed.
        """
        for disabled in (["require"], "require"):
            ret = self.byId(self.runChunks(self.chunks(), disabledRequisites=disabled))
            self.assertIs(ret["b"]["result"], True, disabled)

    def test_otherKindsStillChecked(self) -> None:
        """
        Disabling C{onchanges} leaves C{require} checked.
        """
        ret = self.byId(self.runChunks(self.chunks(), disabledRequisites=["onchanges"]))
        self.assertIs(ret["b"]["result"], False)

    def test_minionOption(self) -> None:
        """
        C{disabled_requisites} is a minion option: empty by default, one
        kind or a list; anything else is refused, named.
        """
        from salttwist.config import ConfigError, loadMinionConfig

        def load(text: str) -> dict[str, Any]:
            configDir = self.mktemp()
            os.makedirs(configDir)
            with open(os.path.join(configDir, "minion"), "w") as f:
                f.write(text)
            return loadMinionConfig(configDir)

        self.assertEqual(load("")["disabled_requisites"], [])
        self.assertEqual(load("disabled_requisites: require\n")["disabled_requisites"], ["require"])
        self.assertEqual(
            load("disabled_requisites: [watch, onchanges]\n")["disabled_requisites"],
            ["watch", "onchanges"],
        )
        error = self.assertRaises(ConfigError, load, "disabled_requisites: 3\n")
        self.assertIn("'disabled_requisites'", str(error))
