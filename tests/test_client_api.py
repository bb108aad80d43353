# -*- test-case-name: tests.test_client_api -*-
"""
Tests for Salt's Python API: the background-reactor bridge
(L{salttwist.client._bridge.ReactorThread}) and the synchronous facades
L{salttwist.client.LocalClient}, L{salttwist.client.Caller} and
L{salttwist.client.RunnerClient}.

The bridge needs a reactor running in another thread, by its nature: each
test runs a private L{SelectReactor} (its waker is a pipe, no socket) in the
bridge's thread, never trial's global reactor, and stops it at the end.
Timeouts run on a L{Clock} advanced on that thread, so no test depends on
wall time. The facades' master side is the L{Deferred} core with C{run},
C{publish} and C{runner} replaced by scripts (the real thing is covered by
L{tests.integration.test_client_api}); L{Caller} runs the real modules.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.python import threadable
from twisted.trial.unittest import SynchronousTestCase

from salttwist.client import Caller, LocalClient, RunnerClient, _bridge, local
from salttwist.client._bridge import ReactorThread, ReactorThreadError
from salttwist.client.batch import parseBatch
from salttwist.client.local import JobResult
from salttwist.client.sync import conditionInput, configDir
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.transport.reqclient import RequestError

#: Seconds a test waits for another thread before it fails (a guard against
#: a hang, never part of what is tested).
GUARD = 30.0

JID = "20261122000000000001"


def _privateReactor(registerAsIOThread: bool = False) -> Any:
    """
    @return: a new reactor, not the global one, that does not register the
        thread running it as Twisted's I/O thread (trial's main thread stays
        that) unless asked to.
    """
    from twisted.internet.selectreactor import SelectReactor

    reactor = SelectReactor()
    reactor._registerAsIOThread = registerAsIOThread
    return reactor


def _drain(generator: Generator[Any, None, Any]) -> tuple[list[Any], Any]:
    """
    @return: the items of C{generator} and the value it returned.
    """
    items: list[Any] = []
    while True:
        try:
            items.append(next(generator))
        except StopIteration as stop:
            return items, stop.value


class _InThread(threading.Thread):
    """
    Calls C{f} in a thread of its own, keeping what it returned or raised.
    """

    def __init__(self, f: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._f = f
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._f()
        except BaseException as e:
            self.error = e


class _BridgeMixin:
    """
    Makes bridges on private reactors, stopped when the test ends.
    """

    def makeBridge(self, clock: Any = None) -> ReactorThread:
        """
        @return: a bridge whose reactor starts on first use.
        """
        reactor = _privateReactor()
        bridge = ReactorThread(reactor, name="test-reactor", reapProcesses=False, clock=clock)

        def stop() -> None:
            self.assertTrue(bridge.stop(GUARD), "the reactor thread did not stop")  # type: ignore[attr-defined]
            reactor.waker.connectionLost(None)

        self.addCleanup(stop)  # type: ignore[attr-defined]
        return bridge


class _Failure(Exception):
    """
    An exception of the tests' own, with an attribute.
    """

    def __init__(self, code: int) -> None:
        super().__init__(f"code {code}")
        self.code = code


class ReactorThreadCallTests(_BridgeMixin, SynchronousTestCase):
    """
    L{ReactorThread.call} runs functions on the reactor thread and returns
    or raises their outcome in the calling thread.
    """

    def test_callFromAnotherThread(self) -> None:
        """
        The first call starts the reactor in a daemon thread; the function
        runs there and its value comes back to the caller.
        """
        bridge = self.makeBridge()
        ident = bridge.call(threading.get_ident)
        self.assertNotEqual(ident, threading.get_ident())
        self.assertEqual(ident, bridge._thread.ident)  # type: ignore[union-attr]
        self.assertTrue(bridge._thread.daemon)  # type: ignore[union-attr]
        self.assertEqual(bridge.call(lambda a, b=0: a + b, 2, b=3), 5)

    def test_waitsForDeferredsAndCoroutines(self) -> None:
        """
        A L{Deferred} result is waited for until it fires later on the
        reactor, and so is a coroutine.
        """
        bridge = self.makeBridge()

        def later() -> Deferred[str]:
            d: Deferred[str] = Deferred()
            bridge.reactor.callLater(0, d.callback, "fired")
            return d

        async def coroutine(x: int) -> int:
            return await succeed(x * 2)

        self.assertEqual(bridge.call(later), "fired")
        self.assertEqual(bridge.call(coroutine, 21), 42)

    def test_exceptionsKeepTheirType(self) -> None:
        """
        What the function raises, or the failure of its L{Deferred}, is
        raised in the caller with its own type and attributes.
        """
        bridge = self.makeBridge()

        def raises() -> None:
            raise _Failure(7)

        error = self.assertRaises(_Failure, bridge.call, raises)
        self.assertEqual(error.code, 7)
        self.assertRaises(KeyError, bridge.call, fail, KeyError("k"))
        self.assertRaises(ValueError, bridge.call, int, "x")

    def test_refusedOnTheReactorThread(self) -> None:
        """
        A blocking call made on the reactor thread raises
        L{ReactorThreadError} (instead of waiting forever for itself), and
        the message points to the L{Deferred} core.
        """
        bridge = self.makeBridge()
        error = self.assertRaises(ReactorThreadError, bridge.call, lambda: bridge.call(int))
        self.assertIn("salttwist.client.local.LocalClient", str(error))
        self.assertRaises(
            ReactorThreadError, bridge.call, lambda: next(bridge.stream(lambda emit: None))
        )
        self.assertTrue(bridge.call(bridge.isReactorThread))
        self.assertFalse(bridge.isReactorThread())

    def test_positionalOnly(self) -> None:
        """
        A keyword argument named like the bridge's own parameter (C{f})
        goes to the function.
        """
        bridge = self.makeBridge()
        self.assertEqual(bridge.call(lambda **kw: kw, f=1), {"f": 1})

    def test_timeout(self) -> None:
        """
        With a timeout, work with no result in time is cancelled and the
        caller gets L{TimeoutError}; not a moment before.
        """
        clock = Clock()
        bridge = self.makeBridge(clock)
        started = threading.Event()
        cancelled: list[bool] = []

        def never() -> Deferred[None]:
            started.set()
            return Deferred(lambda d: cancelled.append(True))

        caller = _InThread(lambda: bridge.callWithTimeout(5, never))
        caller.start()
        self.assertTrue(started.wait(GUARD))
        bridge.call(clock.advance, 4.9)
        self.assertTrue(caller.is_alive())
        bridge.call(clock.advance, 0.1)
        caller.join(GUARD)
        self.assertIsInstance(caller.error, TimeoutError)
        self.assertIn("5 seconds", str(caller.error))
        self.assertEqual(cancelled, [True])

    def test_resultBeforeTimeout(self) -> None:
        """
        A result within the timeout is returned, and the timer is gone.
        """
        clock = Clock()
        bridge = self.makeBridge(clock)
        self.assertEqual(bridge.callWithTimeout(5, succeed, "ok"), "ok")
        self.assertEqual(bridge.call(clock.getDelayedCalls), [])

    def test_stoppedReactor(self) -> None:
        """
        Once stopped, the bridge refuses calls (a reactor cannot be
        restarted), and so does a new bridge on the same reactor.
        """
        bridge = self.makeBridge()
        bridge.call(int)
        self.assertTrue(bridge.stop(GUARD))
        error = self.assertRaises(ReactorThreadError, bridge.call, int)
        self.assertIn("cannot be restarted", str(error))
        other = ReactorThread(bridge.reactor, reapProcesses=False)
        self.assertRaises(ReactorThreadError, other.call, int)

    def test_interruptedCallIsCancelled(self) -> None:
        """
        When the waiting caller is interrupted (Ctrl-C), the work it waited
        for is cancelled on the reactor.
        """
        bridge = self.makeBridge()
        started = threading.Event()
        cancelled: list[bool] = []

        def never() -> Deferred[None]:
            started.set()
            return Deferred(lambda d: cancelled.append(True))

        def interrupted(answers: Any) -> Any:
            self.assertTrue(started.wait(GUARD))
            raise KeyboardInterrupt()

        bridge._wait = interrupted  # type: ignore[method-assign]
        self.assertRaises(KeyboardInterrupt, bridge.call, never)
        del bridge._wait
        bridge.call(int)
        self.assertEqual(cancelled, [True])

    def test_reactorStopsWhileWaiting(self) -> None:
        """
        A caller waiting for work the reactor will never finish gets
        L{ReactorThreadError} when the reactor stops, instead of waiting
        forever.
        """
        self.patch(_bridge, "_LIVENESS_INTERVAL", 0.01)
        bridge = self.makeBridge()
        started = threading.Event()

        def never() -> Deferred[None]:
            started.set()
            return Deferred()

        caller = _InThread(lambda: bridge.call(never))
        caller.start()
        self.assertTrue(started.wait(GUARD))
        self.assertTrue(bridge.stop(GUARD))
        caller.join(GUARD)
        self.assertIsInstance(caller.error, ReactorThreadError)


class ReactorThreadStreamTests(_BridgeMixin, SynchronousTestCase):
    """
    L{ReactorThread.stream} yields what the function emits, as it emits it.
    """

    def test_items(self) -> None:
        """
        Items emitted at once and later are yielded in order; the generator
        returns the function's result.
        """
        bridge = self.makeBridge()

        def produce(emit: Callable[[Any], None], last: int) -> Deferred[str]:
            emit(1)
            emit(2)
            d: Deferred[str] = Deferred()

            def finish() -> None:
                emit(last)
                d.callback("done")

            bridge.reactor.callLater(0, finish)
            return d

        self.assertEqual(_drain(bridge.stream(produce, 3)), ([1, 2, 3], "done"))

    def test_failure(self) -> None:
        """
        The items emitted before a failure are yielded, then the failure is
        raised with its type.
        """
        bridge = self.makeBridge()

        async def produce(emit: Callable[[Any], None]) -> None:
            emit("a")
            raise _Failure(3)

        stream = bridge.stream(produce)
        self.assertEqual(next(stream), "a")
        self.assertRaises(_Failure, next, stream)

    def test_lazyAndCancelledOnClose(self) -> None:
        """
        Nothing runs before the first item is asked for; closing the
        generator early cancels what the function still waits for.
        """
        bridge = self.makeBridge()
        calls: list[str] = []

        def produce(emit: Callable[[Any], None]) -> Deferred[None]:
            calls.append("started")
            emit("first")
            return Deferred(lambda d: calls.append("cancelled"))

        stream = bridge.stream(produce)
        bridge.call(int)
        self.assertEqual(calls, [])
        self.assertEqual(next(stream), "first")
        stream.close()
        # Thread calls run in order: once this one has run, so has the
        # cancellation.
        bridge.call(int)
        self.assertEqual(calls, ["started", "cancelled"])


class ForeignReactorTests(SynchronousTestCase):
    """
    In a Twisted program the reactor already runs, in a thread the bridge
    did not start: the bridge calls into it from other threads and refuses
    calls made on it.
    """

    def test_twistedProgram(self) -> None:
        """
        Calls from another thread run on the program's reactor thread; a
        call on that thread raises L{ReactorThreadError}; L{stop} leaves a
        reactor it did not start alone.
        """
        self.patch(threadable, "ioThread", threadable.ioThread)
        reactor = _privateReactor(registerAsIOThread=True)
        running = threading.Event()
        reactor.callWhenRunning(running.set)
        thread = threading.Thread(
            target=reactor.run, kwargs={"installSignalHandlers": False}, daemon=True
        )
        thread.start()

        def stopProgram() -> None:
            reactor.callFromThread(reactor.stop)
            thread.join(GUARD)
            reactor.waker.connectionLost(None)

        self.addCleanup(stopProgram)
        self.assertTrue(running.wait(GUARD))
        bridge = ReactorThread(reactor, reapProcesses=False)
        self.assertEqual(bridge.call(threading.get_ident), thread.ident)
        self.assertRaises(ReactorThreadError, bridge.call, lambda: bridge.call(int))
        self.assertTrue(bridge.stop())
        self.assertTrue(thread.is_alive())


class ArgumentTests(SynchronousTestCase):
    """
    How the facades read Salt's arguments.
    """

    def test_conditionInput(self) -> None:
        """
        C{kwarg} becomes a trailing C{__kwarg__} map; a number that reads as
        a jid becomes its text; other values stay as they are.
        """
        self.assertEqual(conditionInput(("a", 1), None), ["a", 1])
        self.assertEqual(conditionInput(["a"], {"n": 1}), ["a", {"n": 1, "__kwarg__": True}])
        self.assertEqual(conditionInput([int(JID), True], {}), [JID, True])
        self.assertEqual(conditionInput(None, None), [])

    def test_badInput(self) -> None:
        """
        A string for C{arg} (which Salt would split into characters) or a
        non-dict C{kwarg} is a L{TypeError}.
        """
        self.assertRaises(TypeError, conditionInput, "hello", None)
        self.assertRaises(TypeError, conditionInput, [], ["a=1"])

    def test_configDir(self) -> None:
        """
        C{c_path} may be the config directory or its C{master}/C{minion}
        file; by default it is C{$SALTTWIST_CONFIG_DIR} or
        C{/etc/salttwist}.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        self.assertEqual(configDir(directory, "master"), directory)
        self.assertEqual(configDir(os.path.join(directory, "master"), "master"), directory)
        self.assertEqual(configDir("/etc/salttwist/minion", "minion"), "/etc/salttwist")
        self.patch(os, "environ", {"SALTTWIST_CONFIG_DIR": directory})
        self.assertEqual(configDir(None, "master"), directory)
        self.patch(os, "environ", {})
        self.assertEqual(configDir(None, "master"), "/etc/salttwist")

    def test_batchSpec(self) -> None:
        """
        A batch is a number (or its text) or a percentage.
        """
        self.assertEqual(parseBatch(3), (3, False))
        self.assertEqual(parseBatch("3"), (3, False))
        self.assertEqual(parseBatch("25%"), (25, True))
        for bad in (0, "0", "x", "150%", -1, True, 2.5):
            self.assertRaises(ValueError, parseBatch, bad)


class _ScriptedMaster:
    """
    Stands in for the master behind the L{Deferred} core: C{run},
    C{publish} and C{runner} of L{local.LocalClient} answer from a script
    and record their calls.

    @ivar answering: the minions that answer C{test.ping}; for other jobs,
        those targeted minus C{silent}.
    """

    def __init__(self, testCase: SynchronousTestCase) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.answering: list[str] = ["web1", "web2"]
        self.silent: set[str] = set()
        self.failing: set[str] = set()
        self.value: Any = True
        self.runnerReply: Any = {"jid": JID, "return": None}
        self.runnerCalled = threading.Event()
        master = self

        async def run(
            client: Any,
            tgt: Any,
            fun: str,
            arg: list[Any],
            tgtType: str = "glob",
            timeout: float = 5.0,
            onPublished: Any = None,
            onReturn: Any = None,
            gatherJobTimeout: float = 10.0,
        ) -> JobResult:
            master.calls.append(("run", tgt, fun, arg, tgtType, timeout, gatherJobTimeout))
            return master.run(tgt, fun, onPublished, onReturn)

        async def publish(
            client: Any, tgt: Any, fun: str, arg: list[Any], tgtType: str = "glob"
        ) -> dict[str, Any]:
            master.calls.append(("publish", tgt, fun, arg, tgtType))
            minions = master.targeted(tgt)
            return {"jid": JID if minions else "", "minions": minions}

        async def runner(client: Any, fun: str, arg: list[Any]) -> dict[str, Any]:
            master.calls.append(("runner", fun, arg))
            master.runnerCalled.set()
            reply = master.runnerReply
            if isinstance(reply, Exception):
                raise reply
            if isinstance(reply, Deferred):
                return await reply
            return reply

        testCase.patch(local.LocalClient, "run", run)
        testCase.patch(local.LocalClient, "publish", publish)
        testCase.patch(local.LocalClient, "runner", runner)

    def targeted(self, tgt: Any) -> list[str]:
        if isinstance(tgt, list):
            return list(tgt)
        return list(self.answering) if tgt in ("*", "web*") else []

    def run(self, tgt: Any, fun: str, onPublished: Any, onReturn: Any) -> JobResult:
        minions = self.targeted(tgt)
        if not minions:
            return JobResult("", [])
        if onPublished is not None:
            onPublished(JID, minions)
        result = JobResult(JID, minions)
        for minionId in minions:
            if minionId in self.silent and fun != "test.ping":
                continue
            data = {
                "id": minionId,
                "jid": JID,
                "return": True if fun == "test.ping" else self.value,
                "retcode": 1 if minionId in self.failing else 0,
            }
            result.returns[minionId] = data
            if onReturn is not None:
                onReturn(minionId, data)
        result.missing = [m for m in minions if m not in result.returns]
        return result


class _FacadeTestCase(_BridgeMixin, SynchronousTestCase):
    """
    A master config and a scripted master behind the core.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        self.config = loadMasterConfig(root, overrides={"root_dir": root})
        self.master = _ScriptedMaster(self)
        self.clock = Clock()
        self.bridge = self.makeBridge(self.clock)


class LocalClientCmdTests(_FacadeTestCase):
    """
    L{LocalClient.cmd}, L{LocalClient.cmd_async} and L{LocalClient.run_job}
    have Salt's signatures and return shapes.
    """

    def client(self) -> LocalClient:
        return LocalClient(mopts=self.config, bridge=self.bridge)

    def test_cmd(self) -> None:
        """
        C{cmd} returns each minion's return by id, waiting the master
        config's C{timeout} and C{gather_job_timeout} by default.
        """
        self.assertEqual(self.client().cmd("*", "test.ping"), {"web1": True, "web2": True})
        self.assertEqual(self.master.calls, [("run", "*", "test.ping", [], "glob", 5.0, 10.0)])

    def test_cmdArguments(self) -> None:
        """
        C{arg} and C{kwarg} travel in Salt's wire form; C{timeout},
        C{tgt_type} and C{gather_job_timeout} reach the core.
        """
        self.master.value = "x"
        result = self.client().cmd(
            ["web1"],
            "test.arg",
            ["a", 1],
            timeout=2,
            tgt_type="list",
            kwarg={"k": "v"},
            gather_job_timeout=3,
        )
        self.assertEqual(result, {"web1": "x"})
        self.assertEqual(
            self.master.calls,
            [
                (
                    "run",
                    ["web1"],
                    "test.arg",
                    ["a", 1, {"k": "v", "__kwarg__": True}],
                    "list",
                    2.0,
                    3.0,
                )
            ],
        )

    def test_missingMinionsAreFalse(self) -> None:
        """
        A targeted minion that did not return is C{False}, as in Salt.
        """
        self.master.silent = {"web2"}
        self.master.value = "up"
        self.assertEqual(self.client().cmd("*", "test.echo", ["up"]), {"web1": "up", "web2": False})

    def test_fullReturn(self) -> None:
        """
        With C{full_return}, each return is C{{"ret", "retcode", "jid"}}.
        """
        self.master.failing = {"web2"}
        self.assertEqual(
            self.client().cmd("*", "test.ping", full_return=True),
            {
                "web1": {"ret": True, "retcode": 0, "jid": JID},
                "web2": {"ret": True, "retcode": 1, "jid": JID},
            },
        )

    def test_noMatch(self) -> None:
        """
        When no minion matches, C{cmd} returns C{{}}, C{cmd_async} C{0} and
        C{run_job} C{{}}, as in Salt.
        """
        client = self.client()
        self.assertEqual(client.cmd("nomatch", "test.ping"), {})
        self.assertEqual(client.cmd_async("nomatch", "test.ping"), 0)
        self.assertEqual(client.run_job("nomatch", "test.ping"), {})

    def test_cmdAsync(self) -> None:
        """
        C{cmd_async} publishes without waiting and returns the jid;
        C{run_job} returns the jid and the targeted minions.
        """
        client = self.client()
        self.assertEqual(client.cmd_async("*", "test.sleep", [30], kwarg={"x": 1}), JID)
        self.assertEqual(
            self.master.calls,
            [("publish", "*", "test.sleep", [30, {"x": 1, "__kwarg__": True}], "glob")],
        )
        self.assertEqual(
            client.run_job("*", "test.ping"), {"jid": JID, "minions": ["web1", "web2"]}
        )

    def test_refusedOptions(self) -> None:
        """
        Keyword arguments salttwist does not know (external_auth
        credentials, say), a returner and a chosen jid are refused rather
        than ignored; nothing is published.
        """
        client = self.client()
        error = self.assertRaises(
            TypeError, client.cmd, "*", "test.ping", username="u", eauth="pam"
        )
        self.assertIn("eauth, username", str(error))
        self.assertRaises(ValueError, client.cmd, "*", "test.ping", ret="mysql")
        self.assertRaises(ValueError, client.cmd_async, "*", "test.ping", jid=JID)
        self.assertRaises(TypeError, client.cmd, "*", "test.echo", "hello")
        self.assertEqual(self.master.calls, [])

    def test_masterErrors(self) -> None:
        """
        The core's errors reach the caller with their type.
        """
        self.master.runnerReply = RequestError("invalid jid 'x'")
        self.assertRaises(RequestError, self.client().get_cache_returns, "x")

    def test_contextManager(self) -> None:
        """
        As Salt's, the client is a context manager with C{destroy}.
        """
        with self.client() as client:
            self.assertEqual(client.cmd("web1", "test.ping", tgt_type="glob"), {})

    def test_keepsConnectionsUntilDestroy(self) -> None:
        """
        As Salt's keeps its event subscription, the facade's core keeps its
        connections between calls (C{keepConnected}); C{destroy} closes
        them, on the reactor thread.
        """
        closed: list[str] = []
        self.patch(
            local.LocalClient, "close", lambda core: closed.append(threading.current_thread().name)
        )
        client = self.client()
        client.cmd("*", "test.ping")
        client.cmd("*", "test.ping")
        self.assertTrue(client._client().keepConnected)
        self.assertEqual(closed, [])
        client.destroy()
        self.assertEqual(closed, ["test-reactor"])

    def test_destroyUnused(self) -> None:
        """
        C{destroy} on a client that never made a call does nothing (no
        reactor is started for it).
        """
        client = self.client()
        client.destroy()
        self.assertFalse(self.bridge._alive())


class LocalClientIterTests(_FacadeTestCase):
    """
    L{LocalClient.cmd_iter} yields returns as they arrive.
    """

    def client(self) -> LocalClient:
        return LocalClient(mopts=self.config, bridge=self.bridge)

    def test_iter(self) -> None:
        """
        Each return is yielded as C{{minion: {"ret", "retcode", "jid"}}};
        nothing is published before the first item is asked for.
        """
        returns = self.client().cmd_iter("*", "test.ping", timeout=3)
        self.bridge.call(int)
        self.assertEqual(self.master.calls, [])
        self.assertEqual(
            list(returns),
            [
                {"web1": {"ret": True, "retcode": 0, "jid": JID}},
                {"web2": {"ret": True, "retcode": 0, "jid": JID}},
            ],
        )
        self.assertEqual(self.master.calls, [("run", "*", "test.ping", [], "glob", 3.0, 10.0)])

    def test_pubDataAndExpectedMinions(self) -> None:
        """
        C{yield_pub_data} yields the jid and minions first;
        C{expect_minions} yields C{{"failed": True}} for a minion that did
        not return.
        """
        self.master.silent = {"web2"}
        self.assertEqual(
            list(
                self.client().cmd_iter(
                    "*", "test.echo", ["x"], yield_pub_data=True, expect_minions=True
                )
            ),
            [
                {"jid": JID, "minions": ["web1", "web2"]},
                {"web1": {"ret": True, "retcode": 0, "jid": JID}},
                {"web2": {"failed": True}},
            ],
        )

    def test_noMatch(self) -> None:
        """
        When no minion matches, one C{{}} is yielded, as in Salt.
        """
        self.assertEqual(list(self.client().cmd_iter("nomatch", "test.ping")), [{}])

    def test_badArgumentsAtOnce(self) -> None:
        """
        Bad arguments raise when C{cmd_iter} is called, not at the first
        item.
        """
        self.assertRaises(TypeError, self.client().cmd_iter, "*", "test.ping", token="t")


class LocalClientBatchTests(_FacadeTestCase):
    """
    L{LocalClient.cmd_batch} runs C{salttwist -b}'s batches and yields the
    returns.
    """

    def setUp(self) -> None:
        super().setUp()
        self.master.answering = [f"web{i}" for i in range(1, 6)]

    def client(self) -> LocalClient:
        return LocalClient(mopts=self.config, bridge=self.bridge)

    def test_batches(self) -> None:
        """
        The minions that answer the ping run the job C{batch} at a time, as
        list targets; each return is yielded as C{{minion: return}}.
        """
        self.master.value = "ok"
        returns = list(self.client().cmd_batch("web*", "cmd.run", ["ls"], batch=2))
        self.assertEqual(returns, [{f"web{i}": "ok"} for i in range(1, 6)])
        self.assertEqual(
            [call[1:3] for call in self.master.calls],
            [
                ("web*", "test.ping"),
                (["web1", "web2"], "cmd.run"),
                (["web3", "web4"], "cmd.run"),
                (["web5"], "cmd.run"),
            ],
        )

    def test_percentage(self) -> None:
        """
        A percentage of the answering minions makes a batch (rounded up).
        """
        list(self.client().cmd_batch("web*", "test.ping", batch="40%"))
        self.assertEqual(len(self.master.calls), 4)

    def test_missingAndRetcode(self) -> None:
        """
        A minion of a batch that did not return is yielded as C{{}}; a map
        returned without a C{retcode} gets the job's, as Salt's batch does.
        """
        self.master.value = {"changed": True}
        self.master.silent = {"web2"}
        self.master.failing = {"web1"}
        returns = list(self.client().cmd_batch("web*", "state.apply", batch="2"))
        self.assertEqual(returns[:2], [{"web1": {"changed": True, "retcode": 1}}, {"web2": {}}])
        self.assertEqual(len(returns), 5)

    def test_failhard(self) -> None:
        """
        With C{failhard}, no batch starts after one in which a minion
        failed.
        """
        self.master.failing = {"web2"}
        list(self.client().cmd_batch("web*", "test.ping", batch=2, failhard=True))
        self.assertEqual(len(self.master.calls), 2)

    def test_badBatch(self) -> None:
        """
        A batch that is not a size or percentage is a L{ValueError}, raised
        at once.
        """
        self.assertRaises(ValueError, self.client().cmd_batch, "*", "test.ping", batch="x")


class GetCacheReturnsTests(_FacadeTestCase):
    """
    L{LocalClient.get_cache_returns} reads the job cache through the
    C{jobs.list_job} runner.
    """

    def test_returns(self) -> None:
        """
        Each minion's cached return comes back as C{{minion: {"ret": ...}}}.
        """
        self.master.runnerReply = {
            "jid": "2" * 20,
            "return": {
                "jid": JID,
                "Result": {
                    "web1": {"return": "hi", "retcode": 0, "success": True},
                    "web2": {"return": "ho", "retcode": 0, "success": True},
                },
            },
        }
        client = LocalClient(mopts=self.config, bridge=self.bridge)
        self.assertEqual(
            client.get_cache_returns(int(JID)), {"web1": {"ret": "hi"}, "web2": {"ret": "ho"}}
        )
        self.assertEqual(self.master.calls, [("runner", "jobs.list_job", [JID])])

    def test_unknownJob(self) -> None:
        """
        A job the cache does not know has no returns.
        """
        self.master.runnerReply = {"jid": "2" * 20, "return": {"jid": JID, "Result": {}}}
        client = LocalClient(mopts=self.config, bridge=self.bridge)
        self.assertEqual(client.get_cache_returns(JID), {})


class RunnerClientTests(_FacadeTestCase):
    """
    L{RunnerClient} runs runners in the master as C{salttwist-run} does.
    """

    def test_cmd(self) -> None:
        """
        C{cmd} returns the runner's return; C{arg} and C{kwarg} travel in
        Salt's wire form.
        """
        self.master.runnerReply = {"jid": JID, "return": ["web1"]}
        runner = RunnerClient(self.config, bridge=self.bridge)
        self.assertEqual(runner.cmd("manage.up", ["x"], kwarg={"show_ip": True}), ["web1"])
        self.assertEqual(
            self.master.calls,
            [("runner", "manage.up", ["x", {"show_ip": True, "__kwarg__": True}])],
        )

    def test_fullReturn(self) -> None:
        """
        With C{full_return} the jid and function come along.
        """
        self.master.runnerReply = {"jid": JID, "return": 3}
        runner = RunnerClient(self.config, bridge=self.bridge)
        self.assertEqual(
            runner.cmd("jobs.active", full_return=True),
            {"fun": "jobs.active", "jid": JID, "return": 3, "success": True},
        )

    def test_cmdSync(self) -> None:
        """
        C{cmd_sync} takes Salt's low data: keys other than C{fun}, C{arg}
        and C{kwarg} are keyword arguments of the runner.
        """
        runner = RunnerClient(self.config, bridge=self.bridge)
        runner.cmd_sync({"fun": "jobs.list_jobs", "kwarg": {"a": 1}, "search_target": "web1"})
        self.assertEqual(
            self.master.calls,
            [("runner", "jobs.list_jobs", [{"a": 1, "search_target": "web1", "__kwarg__": True}])],
        )

    def test_failure(self) -> None:
        """
        A runner the master refuses raises L{RequestError}.
        """
        self.master.runnerReply = RequestError("'no.such' is not available.")
        runner = RunnerClient(self.config, bridge=self.bridge)
        self.assertRaises(RequestError, runner.cmd, "no.such")

    def test_timeout(self) -> None:
        """
        With a timeout, C{cmd_sync} stops waiting for a runner that has not
        returned and raises L{TimeoutError}.
        """
        waiting: Deferred[Any] = Deferred()
        self.master.runnerReply = waiting
        runner = RunnerClient(self.config, bridge=self.bridge)
        caller = _InThread(lambda: runner.cmd_sync({"fun": "jobs.active"}, timeout=10))
        caller.start()
        # The runner is called and its timer set in one reactor call, which
        # is over before the next one (this advance) runs.
        self.assertTrue(self.master.runnerCalled.wait(GUARD))
        self.bridge.call(self.clock.advance, 9.9)
        self.assertTrue(caller.is_alive())
        self.bridge.call(self.clock.advance, 0.1)
        caller.join(GUARD)
        self.assertIsInstance(caller.error, TimeoutError)


class CallerTests(_BridgeMixin, SynchronousTestCase):
    """
    L{Caller} runs the minion's execution modules here and returns what
    they return.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        os.makedirs(root)
        with open(os.path.join(root, "minion"), "w") as f:
            f.write(f"root_dir: {root}\nid: caller1\ngrains:\n  role: db\n")
        self.root = root
        self.caller = Caller(os.path.join(root, "minion"), bridge=self.makeBridge())

    def test_cmd(self) -> None:
        """
        Positional and keyword arguments go to the function; functions that
        run on the reactor and in a thread both work; the config's grains
        are there.
        """
        self.assertEqual(self.caller.cmd("test.echo", "hi"), "hi")
        self.assertEqual(
            self.caller.cmd("test.arg", 1, "two", k="v"),
            {"args": [1, "two"], "kwargs": {"k": "v"}},
        )
        self.assertEqual(self.caller.cmd("test.fib", 7)[0], 13)
        self.assertEqual(
            self.caller.cmd("grains.item", "role", "id"), {"role": "db", "id": "caller1"}
        )
        self.assertEqual(self.caller.opts["id"], "caller1")

    def test_retcode(self) -> None:
        """
        A function whose failure is a value returns the value, as Salt's
        C{Caller.cmd}.
        """
        self.assertIs(self.caller.cmd("test.retcode", 3), True)

    def test_errors(self) -> None:
        """
        An unknown function raises L{KeyError}, as Salt's loader; a
        function's own exception reaches the caller.
        """
        error = self.assertRaises(KeyError, self.caller.cmd, "no.such")
        self.assertIn("'no.such' is not available.", str(error))
        try:
            self.caller.cmd("test.exception", "boom")
        except Exception as e:
            self.assertEqual((type(e), str(e)), (Exception, "boom"))
        else:
            self.fail("test.exception did not raise")
        self.assertRaises(TypeError, self.caller.cmd, "test.echo")

    def test_mopts(self) -> None:
        """
        A minion config already loaded may be given instead of a path.
        """
        config = loadMinionConfig(self.root, overrides={"id": "other"})
        caller = Caller(mopts=config, bridge=self.makeBridge())
        self.assertEqual(caller.cmd("grains.item", "id"), {"id": "other"})
