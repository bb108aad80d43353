# -*- test-case-name: tests.test_minion_parts -*-
"""
Tests for the minion's parts that work without a master:
L{salttwist.minion.replay}, L{salttwist.modules.executor} and the execution
modules it loads.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.args import parseArgs
from salttwist.master.core import runSynchronously
from salttwist.minion.replay import ReplayGuard
from salttwist.modules import LoaderContext, Retcode, loadFunctions, onReactor
from salttwist.modules.executor import EX_UNAVAILABLE, Executor

JID = "20240506070809123456"
OTHER_JID = "20240506070809123457"


class ReplayGuardTests(SynchronousTestCase):
    """
    L{ReplayGuard} refuses publications seen before or stamped outside the
    window.
    """

    def setUp(self) -> None:
        """
        Make a guard with a 600-second window on a clock at a realistic time.
        """
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.guard = ReplayGuard(self.clock, window=600)

    def now(self) -> float:
        """
        @return: the clock's time.
        """
        return self.clock.seconds()

    def test_fresh(self) -> None:
        """
        A new jid stamped now is accepted.
        """
        self.assertIsNone(self.guard.check(JID, self.now()))
        self.assertIsNone(self.guard.check(OTHER_JID, int(self.now())))

    def test_sameJid(self) -> None:
        """
        A jid already accepted is refused, even with another timestamp.
        """
        self.assertIsNone(self.guard.check(JID, self.now()))
        reason = self.guard.check(JID, self.now())
        self.assertIsNotNone(reason)
        self.assertIn(JID, reason)
        self.clock.advance(300)
        self.assertIsNotNone(self.guard.check(JID, self.now()))

    def test_tooOld(self) -> None:
        """
        A timestamp more than the window in the past is refused; one just
        inside it is accepted.
        """
        self.assertIsNotNone(self.guard.check(JID, self.now() - 601))
        self.assertIsNone(self.guard.check(OTHER_JID, self.now() - 600))

    def test_inFuture(self) -> None:
        """
        A timestamp more than the window in the future is refused; one just
        inside it is accepted.
        """
        self.assertIsNotNone(self.guard.check(JID, self.now() + 601))
        self.assertIsNone(self.guard.check(OTHER_JID, self.now() + 600))

    def test_refusedNotRecorded(self) -> None:
        """
        A publication refused for its timestamp does not burn its jid.
        """
        self.assertIsNotNone(self.guard.check(JID, self.now() - 10_000))
        self.assertIsNone(self.guard.check(JID, self.now()))

    def test_missingTimestamp(self) -> None:
        """
        A missing, boolean, string or NaN timestamp is refused.
        """
        for timestamp in [None, True, False, str(self.now()), float("nan"), [self.now()]]:
            self.assertIsNotNone(self.guard.check(JID, timestamp), repr(timestamp))

    def test_forgottenAfterWindow(self) -> None:
        """
        A jid is forgotten once it is older than the window, so the guard's
        memory is bounded by the publication rate, not by uptime; a replay of
        it is still refused, for its timestamp.
        """
        for n in range(100):
            self.assertIsNone(self.guard.check(f"{n:020d}", self.now()))
            self.clock.advance(1)
        self.assertEqual(len(self.guard._seen), 100)
        stampedAt = self.now()
        self.assertIsNone(self.guard.check(JID, stampedAt))
        self.clock.advance(700)
        self.assertIsNotNone(self.guard.check(JID, stampedAt))
        self.assertIsNone(self.guard.check(OTHER_JID, self.now()))
        self.assertEqual(list(self.guard._seen), [OTHER_JID])

    def test_futureStampedRemembered(self) -> None:
        """
        A publication stamped ahead of the minion's clock (the master's clock
        runs fast) is remembered for as long as its timestamp is inside the
        window, so it cannot be replayed once its arrival is older than the
        window.
        """
        stampedAt = self.now() + 500
        self.assertIsNone(self.guard.check(JID, stampedAt))
        self.clock.advance(601)
        self.assertIsNone(self.guard.check(OTHER_JID, self.now()))
        self.assertIsNotNone(self.guard.check(JID, stampedAt))
        self.clock.advance(500)
        self.assertIsNotNone(self.guard.check(JID, stampedAt))
        self.assertIsNone(self.guard.check("00000000000000000001", self.now()))
        self.assertNotIn(JID, self.guard._seen)


@onReactor
def _boom() -> None:
    raise RuntimeError("it broke")


@onReactor
def _typeErrorInside() -> None:
    raise TypeError("unsupported operand")


def _threaded(x: int) -> int:
    return x * 2


class ExecutorTests(SynchronousTestCase):
    """
    L{Executor} runs module functions and shapes their returns as Salt does.
    """

    def setUp(self) -> None:
        """
        Make an executor over the real modules plus a few test functions,
        with a L{Clock} as the reactor and functions "in threads" run at once.
        """
        self.clock = Clock()
        self.context = LoaderContext(
            opts={"id": "web1"},
            grains={"os": "Debian", "a": {"b": {"c": 3}}, "num_cpus": 4},
            reactor=self.clock,
        )
        functions = loadFunctions()
        functions.update(
            {"fail.boom": _boom, "fail.typeerror": _typeErrorInside, "thread.double": _threaded}
        )
        self.threaded: list[Any] = []

        def runInThread(f: Any, *args: Any, **kwargs: Any) -> Any:
            self.threaded.append(f)
            return runSynchronously(f, *args, **kwargs)

        self.executor = Executor(functions, self.context, runInThread)

    def runFunction(self, fun: str, arg: Any) -> dict[str, Any]:
        """
        @return: the result of running C{fun}, which must be immediate.
        """
        return self.successResultOf(self.executor.run(fun, arg))

    def test_explicitRetcode(self) -> None:
        """
        A function returning L{Retcode} sets the job's retcode and
        C{success} from it, and returns the wrapped value.
        """
        self.executor.functions["fail.soft"] = lambda: Retcode("half done", 3)
        self.assertEqual(
            self.runFunction("fail.soft", []),
            {"return": "half done", "retcode": 3, "success": False},
        )

    def test_ping(self) -> None:
        """
        C{test.ping} returns L{True} with retcode 0, on the reactor thread.
        """
        self.assertEqual(
            self.runFunction("test.ping", []), {"return": True, "retcode": 0, "success": True}
        )
        self.assertEqual(self.threaded, [])

    def test_unknown(self) -> None:
        """
        An unknown function returns Salt's "is not available" message with
        retcode 254.
        """
        self.assertEqual(
            self.runFunction("nope.fun", []),
            {"return": "'nope.fun' is not available.", "retcode": 254, "success": False},
        )
        self.assertEqual(EX_UNAVAILABLE, 254)

    def test_wrongArguments(self) -> None:
        """
        Calling a function with the wrong arguments returns Salt's "Passed
        invalid arguments" message with retcode 1.
        """
        result = self.runFunction("test.echo", [])
        self.assertTrue(
            result["return"].startswith("Passed invalid arguments to test.echo: "),
            result["return"],
        )
        self.assertEqual((result["retcode"], result["success"]), (1, False))
        result = self.runFunction("test.ping", [1, 2])
        self.assertTrue(result["return"].startswith("Passed invalid arguments to test.ping: "))

    def test_exception(self) -> None:
        """
        A function that raises returns "The minion function caused an
        exception" naming the exception, with retcode 1, and the failure is
        logged.
        """
        result = self.runFunction("fail.boom", [])
        self.assertEqual(
            result,
            {
                "return": "The minion function caused an exception: RuntimeError: it broke",
                "retcode": 1,
                "success": False,
            },
        )
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_kwargs(self) -> None:
        """
        A map with C{__kwarg__: True} in the argument list becomes keyword
        arguments; other items stay positional.
        """
        result = self.runFunction("test.arg", [1, "two", {"__kwarg__": True, "a": 1, "b": [2]}])
        self.assertEqual(result["return"], {"args": [1, "two"], "kwargs": {"a": 1, "b": [2]}})

    def test_plainMapIsPositional(self) -> None:
        """
        A map without C{__kwarg__: True} is a positional argument.
        """
        result = self.runFunction("test.echo", [{"a": 1, "__kwarg__": "yes"}])
        self.assertEqual(result["return"], {"a": 1, "__kwarg__": "yes"})

    def test_argNotList(self) -> None:
        """
        An argument that is not a list is taken as the one positional
        argument.
        """
        self.assertEqual(self.runFunction("test.echo", "hello")["return"], "hello")

    def test_threaded(self) -> None:
        """
        A function not marked C{onReactor} is handed to C{runInThread}.
        """
        self.assertEqual(self.runFunction("thread.double", [21])["return"], 42)
        self.assertEqual(self.threaded, [_threaded])

    def test_sleep(self) -> None:
        """
        C{test.sleep} waits on the context's reactor: its result comes only
        after the clock has advanced by the length.
        """
        d = self.executor.run("test.sleep", [2])
        self.assertNoResult(d)
        self.clock.advance(1.5)
        self.assertNoResult(d)
        self.clock.advance(0.5)
        self.assertEqual(self.successResultOf(d), {"return": True, "retcode": 0, "success": True})

    def test_callOnReactorGivesTheResult(self) -> None:
        """
        L{Executor.call} gives the shaped result itself, not a L{Deferred},
        for a function run on the reactor that returns a value, for an
        unknown function and for one that raises (logged as by C{run}).
        """
        self.assertEqual(
            self.executor.call("test.ping", []), {"return": True, "retcode": 0, "success": True}
        )
        self.assertEqual(
            self.executor.call("nope.fun", []),
            {"return": "'nope.fun' is not available.", "retcode": 254, "success": False},
        )
        result = self.executor.call("fail.boom", [])
        self.assertEqual(
            result["return"], "The minion function caused an exception: RuntimeError: it broke"
        )
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_callDeferredWhenNotDone(self) -> None:
        """
        L{Executor.call} gives a L{Deferred} for a function run in a thread,
        one that returns a L{Deferred}, and one that returns a coroutine;
        each fires with the shaped result.
        """

        async def later() -> int:
            return 7

        def coroutineFunction() -> Any:
            return later()

        coroutineFunction.runsOnReactor = True  # type: ignore[attr-defined]
        self.executor.functions["co.seven"] = coroutineFunction
        threaded = self.executor.call("thread.double", [21])
        self.assertIsInstance(threaded, Deferred)
        self.assertEqual(self.successResultOf(threaded)["return"], 42)
        sleeping = self.executor.call("test.sleep", [1])
        self.assertIsInstance(sleeping, Deferred)
        self.clock.advance(1)
        self.assertIs(self.successResultOf(sleeping)["return"], True)
        co = self.executor.call("co.seven", [])
        self.assertIsInstance(co, Deferred)
        self.assertEqual(self.successResultOf(co), {"return": 7, "retcode": 0, "success": True})

    def test_grainsGet(self) -> None:
        """
        C{grains.get} reads a grain, C{a:b} looks into nested maps, and a
        missing key gives the default.
        """
        self.assertEqual(self.runFunction("grains.get", ["os"])["return"], "Debian")
        self.assertEqual(self.runFunction("grains.get", ["a:b"])["return"], {"c": 3})
        self.assertEqual(self.runFunction("grains.get", ["a:b:c"])["return"], 3)
        self.assertEqual(self.runFunction("grains.get", ["a:x"])["return"], "")
        self.assertEqual(self.runFunction("grains.get", ["os:x", "dflt"])["return"], "dflt")

    def test_grainsItems(self) -> None:
        """
        C{grains.items} returns a copy of every grain; C{grains.item} the
        named ones.
        """
        self.assertEqual(self.runFunction("grains.items", [])["return"], self.context.grains)
        self.assertEqual(
            self.runFunction("grains.item", ["os", "missing"])["return"],
            {"os": "Debian", "missing": ""},
        )

    def test_typeErrorInside(self) -> None:
        """
        A L{TypeError} raised inside a function is reported as invalid
        arguments, as Salt does.
        """
        result = self.runFunction("fail.typeerror", [])
        self.assertEqual(
            result["return"], "Passed invalid arguments to fail.typeerror: unsupported operand"
        )


class ParseArgsTests(SynchronousTestCase):
    """
    L{parseArgs} splits Salt's wire argument list.
    """

    def test_split(self) -> None:
        """
        Maps with C{__kwarg__: True} become keyword arguments (without the
        marker); everything else stays positional, in order.
        """
        self.assertEqual(
            parseArgs([1, {"__kwarg__": True, "a": 1}, "x", {"b": 2}, {"__kwarg__": True, "c": 3}]),
            ([1, "x", {"b": 2}], {"a": 1, "c": 3}),
        )

    def test_empty(self) -> None:
        """
        No arguments give nothing.
        """
        self.assertEqual(parseArgs([]), ([], {}))

    def test_truthyMarkerNotEnough(self) -> None:
        """
        Only C{__kwarg__} equal to L{True} marks keyword arguments.
        """
        self.assertEqual(parseArgs([{"__kwarg__": 1, "a": 1}]), ([{"__kwarg__": 1, "a": 1}], {}))


class LoadFunctionsTests(SynchronousTestCase):
    """
    L{loadFunctions} collects the execution modules' functions.
    """

    def test_names(self) -> None:
        """
        The loaded functions include C{test.ping}, C{cmd.run} and
        C{grains.items}, and no private or imported names.
        """
        functions = loadFunctions()
        for name in ["test.ping", "test.echo", "test.sleep", "cmd.run", "cmd.run_all"]:
            self.assertIn(name, functions)
        self.assertIn("grains.items", functions)
        self.assertIn("grains.get", functions)
        self.assertFalse([name for name in functions if "._" in name])
        self.assertNotIn("test.deferLater", functions)
        self.assertNotIn("cmd.getProcessOutputAndValue", functions)
        self.assertTrue(all(callable(f) for f in functions.values()))
