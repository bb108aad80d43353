"""
Tests for L{salttwist.modules.state}: the C{state.*} execution functions
run as a minion runs a job (through its L{Executor}, in a thread), over a
real state tree read through a L{LocalFileClient}, with real states.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.blocking import threadRunner
from salttwist.config import loadMinionConfig
from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.grains import coreGrains
from salttwist.minion.jobs import RunningJob
from salttwist.modules import LoaderContext, loadFunctions
from salttwist.modules import state as statemod
from salttwist.modules.executor import Executor

JID = "20261126193000000001"


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def writeTree(root: str, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


FILES = {
    "top.sls": "base:\n  '*':\n    - web\n",
    "web.sls": """\
site:
  cmd.run:
    - name: echo {{ pillar['port'] }} > {{ pillar['out'] }}/port
    - unless: grep -qx {{ pillar['port'] }} {{ pillar['out'] }}/port

greeting:
  test.succeed_with_changes: []
""",
    "fail.sls": "broken:\n  test.fail_without_changes: []\n",
    "bad.sls": "broken: [\n",
}


class StateModuleTests(TestCase):
    """
    The functions through an L{Executor}, as the minion runs a job.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        self.base = os.path.join(root, "srv")
        self.out = os.path.join(root, "out")
        os.makedirs(self.out)
        writeTree(self.base, FILES)
        config = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": "web1",
                "file_client": "local",
                "file_roots": {"base": [self.base]},
            },
        )
        reactor = _reactor()
        runBlocking = threadRunner(reactor)
        self.context = LoaderContext(
            config,
            coreGrains("web1", {}, None),
            reactor,
            pillar={"port": 80, "out": self.out},
        )
        self.context.fileClient = LocalFileClient(
            FileServer.fromConfig(config), config["cachedir"], runBlocking
        )
        self.events: list[tuple[str, Any]] = []

        def fireMaster(tag: str, data: Any) -> Deferred[dict[str, Any]]:
            self.events.append((tag, data))
            return Deferred.fromCoroutine(_answer())

        async def _answer() -> dict[str, Any]:
            return {"ret": True}

        self.context.fireMaster = fireMaster
        self.executor = Executor(loadFunctions(), self.context, runBlocking)
        self.context.functions = self.executor.functions
        self.portFile = os.path.join(self.out, "port")

    def call(self, fun: str, *args: Any, jid: str = JID, **kwargs: Any) -> Deferred[dict]:
        arg: list[Any] = list(args)
        if kwargs:
            arg.append({"__kwarg__": True, **kwargs})
        return self.executor.run(fun, arg, jid)

    def readPort(self) -> str:
        with open(self.portFile) as f:
            return f.read().strip()

    async def test_applyHighstate(self) -> None:
        """
        C{state.apply} without names: the highstate; its retcode 0; the
        command's effect is there.
        """
        result = await self.call("state.apply")
        self.assertEqual(result["retcode"], 0, result)
        ret = result["return"]
        self.assertEqual(len(ret), 2, ret)
        self.assertEqual(self.readPort(), "80")
        self.assertTrue(all(r["result"] is True for r in ret.values()), ret)

    async def test_pillarOverride(self) -> None:
        """
        C{pillar=} reaches the templates, for this run only.
        """
        result = await self.call("state.sls", "web", pillar={"port": 8080})
        self.assertEqual(result["retcode"], 0, result)
        self.assertEqual(self.readPort(), "8080")
        self.assertEqual(self.context.pillar["port"], 80)
        result = await self.call("state.sls", "web", pillar="port")
        self.assertEqual(result["retcode"], 1)
        self.assertIn("Pillar data must be formatted as a dictionary", result["return"])

    async def test_freshPillar(self) -> None:
        """
        A job's run compiles the pillar afresh (as Salt's), giving the
        compiler the saltenv, pillarenv and override; a pillar that cannot
        be fetched fails the run with retcode 5.
        """
        asked: list[dict[str, Any]] = []

        def fetchPillar(**kwargs: Any) -> Deferred[dict[str, Any]]:
            asked.append(kwargs)
            return succeed({"port": 81, "out": self.out, **(kwargs["override"] or {})})

        self.context.fetchPillar = fetchPillar
        result = await self.call("state.apply")
        self.assertEqual(result["retcode"], 0, result)
        self.assertEqual(self.readPort(), "81")
        self.assertEqual(asked, [{"saltenv": None, "pillarenv": None, "override": None}])
        await self.call("state.sls", "web", pillar={"port": 82}, pillarenv="dev")
        self.assertEqual(self.readPort(), "82")
        self.assertEqual(
            asked[1], {"saltenv": "base", "pillarenv": "dev", "override": {"port": 82}}
        )

        self.context.fetchPillar = lambda **kwargs: fail(ConnectionError("no master"))
        result = await self.call("state.apply")
        self.assertEqual(
            result["return"],
            [
                "Pillar failed to render with the following messages:",
                "ConnectionError: no master",
            ],
        )
        self.assertEqual(result["retcode"], 5)

    async def test_callerPillar(self) -> None:
        """
        Without a jid (C{salttwist-call}) the pillar fetched at the call's
        start is used.
        """
        self.context.fetchPillar = lambda **kwargs: fail(ConnectionError("not used"))
        result = await self.executor.run("state.apply", [])
        self.assertEqual(result["retcode"], 0, result)
        self.assertEqual(self.readPort(), "80")

    async def test_testMode(self) -> None:
        """
        C{test=True} (and C{state.test}) change nothing.
        """
        for result in [
            await self.call("state.apply", "web", test=True),
            await self.call("state.test"),
        ]:
            self.assertEqual(result["retcode"], 0, result)
            self.assertFalse(os.path.exists(self.portFile))
            results = {r["result"] for r in result["return"].values()}
            self.assertEqual(results, {None})

    async def test_testOption(self) -> None:
        """
        The C{test} option makes every run a dry run unless C{test=False}.
        """
        self.context.opts["test"] = True
        await self.call("state.apply")
        self.assertFalse(os.path.exists(self.portFile))
        await self.call("state.apply", test=False)
        self.assertTrue(os.path.exists(self.portFile))

    async def test_failedState(self) -> None:
        """
        A failing state: retcode 2, the returns.
        """
        result = await self.call("state.sls", "fail")
        self.assertEqual(result["retcode"], 2)
        self.assertEqual(
            result["return"]["test_|-broken_|-broken_|-fail_without_changes"]["result"], False
        )

    async def test_compileErrors(self) -> None:
        """
        An SLS that does not render or is missing: the errors, retcode 1.
        """
        result = await self.call("state.sls", "bad")
        self.assertEqual(result["retcode"], 1)
        self.assertIsInstance(result["return"], list)
        self.assertIn("bad", "\n".join(result["return"]))
        result = await self.call("state.apply", "nosuch")
        self.assertEqual(
            result["return"], ["No matching sls found for 'nosuch' in env 'base'"], result
        )
        self.assertEqual(result["retcode"], 1)

    async def test_pillarErrors(self) -> None:
        """
        A pillar carrying C{_errors}: Salt's words and retcode 5.
        """
        self.context.pillar = {"_errors": ["pillar top: boom"]}
        result = await self.call("state.apply")
        self.assertEqual(
            result["return"],
            ["Pillar failed to render with the following messages:", "pillar top: boom"],
        )
        self.assertEqual(result["retcode"], 5)

    async def test_show(self) -> None:
        """
        C{show_top}, C{show_sls}, C{show_highstate}, C{show_lowstate},
        C{show_low_sls} run nothing.
        """
        self.assertEqual((await self.call("state.show_top"))["return"], {"base": ["web"]})
        high = (await self.call("state.show_sls", "web"))["return"]
        self.assertEqual(list(high), ["site", "greeting"])
        self.assertEqual(high["greeting"]["__sls__"], "web")
        self.assertEqual((await self.call("state.show_highstate"))["return"], high)
        shown = await self.call("state.show_lowstate")
        self.assertEqual(shown["retcode"], 0, shown)
        low = shown["return"]
        self.assertEqual([c["__id__"] for c in low], ["site", "greeting"])
        self.assertEqual((await self.call("state.show_low_sls", "web"))["return"], low)
        self.assertFalse(os.path.exists(self.portFile))
        bad = await self.call("state.show_sls", "bad")
        self.assertEqual(bad["retcode"], 1)

    async def test_single(self) -> None:
        """
        C{state.single} runs one state function with its arguments.
        """
        path = os.path.join(self.out, "single")
        result = await self.call("state.single", "cmd.run", f"touch {path}", cwd=self.out)
        self.assertEqual(result["retcode"], 0, result)
        self.assertTrue(os.path.exists(path))
        result = await self.call("state.single", "nodot", "x")
        self.assertEqual(
            result, {"return": "Invalid function passed", "retcode": 1, "success": False}
        )

    async def test_slsId(self) -> None:
        """
        C{state.sls_id} runs one id; an id the SLS lacks is Salt's error.
        """
        result = await self.call("state.sls_id", "greeting", "web")
        self.assertEqual(
            list(result["return"]), ["test_|-greeting_|-greeting_|-succeed_with_changes"]
        )
        self.assertFalse(os.path.exists(self.portFile))
        result = await self.call("state.sls_id", "nope", "web")
        self.assertEqual(result["retcode"], 1)
        self.assertIn(
            "No matches for ID 'nope' found in SLS 'web' within saltenv 'base'", result["return"]
        )

    async def test_customStatesSynced(self) -> None:
        """
        A highstate syncs the custom modules of the saltenvs it applies
        first (Salt's C{autoload_dynamic_modules}): a C{_states} module of
        the file server is run without a C{saltutil.sync_states}.
        """
        writeTree(
            self.base,
            {
                "_states/greet.py": (
                    "def hello(name):\n"
                    "    return {'name': name, 'result': True, 'changes': {},\n"
                    "            'comment': 'hello ' + __grains__['id']}\n"
                ),
                "top.sls": "base:\n  '*':\n    - greet\n",
                "greet.sls": "world:\n  greet.hello: []\n",
            },
        )
        result = await self.call("state.apply")
        self.assertEqual(result["retcode"], 0, result)
        self.assertEqual(result["return"]["greet_|-world_|-world_|-hello"]["comment"], "hello web1")

    async def test_syncMods(self) -> None:
        """
        C{state.sls ... sync_mods=states} syncs the custom states first.
        """
        writeTree(
            self.base,
            {
                "_states/greet3.py": (
                    "def hello(name):\n"
                    "    return {'name': name, 'result': True, 'changes': {}, 'comment': 'hi'}\n"
                ),
                "greet3.sls": "world:\n  greet3.hello: []\n",
            },
        )
        result = await self.call("state.sls", "greet3", sync_mods="states")
        self.assertEqual(result["retcode"], 0, result)

    async def test_noFileClient(self) -> None:
        """
        A minion without a file client: the error, retcode 1.
        """
        self.context.fileClient = None
        result = await self.call("state.apply")
        self.assertEqual(
            result["return"], ["this minion has no file client: its state tree cannot be read"]
        )
        self.assertEqual(result["retcode"], 1)

    async def test_noAutoload(self) -> None:
        """
        Without C{autoload_dynamic_modules} nothing is synced: the custom
        state is not there.
        """
        self.context.opts["autoload_dynamic_modules"] = False
        writeTree(
            self.base,
            {
                "_states/greet2.py": "def hello(name):\n    return {}\n",
                "top.sls": "base:\n  '*':\n    - greet2\n",
                "greet2.sls": "world:\n  greet2.hello: []\n",
            },
        )
        result = await self.call("state.apply")
        self.assertEqual(result["retcode"], 2, result)
        comment = result["return"]["greet2_|-world_|-world_|-hello"]["comment"]
        self.assertIn("State 'greet2.hello' was not found in SLS 'greet2'", comment)

    async def test_stateEvents(self) -> None:
        """
        C{state_events=True}: Salt's progress event for each state.
        """
        result = await self.call("state.apply", state_events=True)
        self.assertEqual(result["retcode"], 0, result)
        await deferToThread(lambda: None)
        tags = sorted(tag for tag, _ in self.events)
        self.assertEqual(tags, [f"salt/job/{JID}/prog/web1/0", f"salt/job/{JID}/prog/web1/1"])
        data = dict(self.events)[f"salt/job/{JID}/prog/web1/0"]
        self.assertEqual(data["len"], 2)
        self.assertEqual(data["ret"]["__run_num__"], 0)
        self.events.clear()
        await self.call("state.apply")
        self.assertEqual(self.events, [])

    async def test_oneRunAtATime(self) -> None:
        """
        While a state run holds the minion's slot another is refused with
        Salt's words, retcode 1, and C{state.running} says so; with
        C{queue=True} it waits for the slot.
        """
        other = statemod._Active("state.highstate", "20261126192959123456", os.getpid())
        self.assertEqual(statemod._SLOTS.take(self.context.running, other, False, False), [])
        released = False
        try:
            result = await self.call("state.apply")
            words = (
                f'The function "state.highstate" is running as PID {os.getpid()} and was '
                "started at 2026, Nov 26 19:29:59.123456 with jid 20261126192959123456"
            )
            self.assertEqual(result, {"return": [words], "retcode": 1, "success": False})
            self.assertEqual((await self.call("state.running"))["return"], [words])
            self.assertFalse(os.path.exists(self.portFile))
            concurrent = await self.call("state.show_top", concurrent=True)
            self.assertEqual(concurrent["retcode"], 0)

            queued = self.call("state.apply", queue=True)
            await deferToThread(threading.Event().wait, 0.3)
            self.assertNoResult(queued)
            waiting = [queued]
            for n in range(statemod.MAX_QUEUED - 1):
                waiting.append(self.call("state.show_top", queue=True, jid=f"{JID[:-2]}1{n}"))
            await deferToThread(threading.Event().wait, 0.3)
            refused = await self.call("state.show_top", queue=True, jid=f"{JID[:-2]}20")
            self.assertEqual(refused["return"], [words])
            statemod._SLOTS.give(self.context.running, other.jid)
            released = True
            for result in [await d for d in waiting]:
                self.assertEqual(result["retcode"], 0, result)
            self.assertEqual((await self.call("state.running"))["return"], [])
        finally:
            if not released:
                statemod._SLOTS.give(self.context.running, other.jid)

    async def test_killedWhileQueued(self) -> None:
        """
        A queued run whose job is killed stops waiting and runs nothing.
        """
        other = statemod._Active("state.highstate", "20261126192959123456", os.getpid())
        statemod._SLOTS.take(self.context.running, other, False, False)
        self.addCleanup(statemod._SLOTS.give, self.context.running, other.jid)
        job = RunningJob({"jid": JID, "fun": "state.apply"}, Deferred(), 0.0)
        self.context.running[JID] = job
        queued = self.call("state.apply", queue=True)
        await deferToThread(threading.Event().wait, 0.2)
        self.assertNoResult(queued)
        job.killedBy = "SIGTERM"
        result = await queued
        self.assertEqual(result["retcode"], 1, result)
        self.assertFalse(os.path.exists(self.portFile))
        bad = await self.call("state.apply", queue="soon")
        self.assertIn("queue must be True, False or a number of runs", bad["return"])

    async def test_killed(self) -> None:
        """
        A job killed (C{saltutil.kill_job}) runs no more states.
        """
        job = RunningJob({"jid": JID, "fun": "state.apply"}, Deferred(), 0.0)
        job.killedBy = "SIGKILL"
        self.context.running[JID] = job
        await self.call("state.apply")
        self.assertFalse(os.path.exists(self.portFile))

    async def test_killedAndGone(self) -> None:
        """
        A job killed while it runs leaves the running jobs (the minion's
        job side answers at once); its run stops all the same.
        """
        job = RunningJob({"jid": JID, "fun": "state.apply"}, Deferred(), 0.0)
        self.context.running[JID] = job
        run = statemod._cancelled(self.context, JID)
        self.assertFalse(run())
        del self.context.running[JID]
        self.assertTrue(run())

    async def test_killedBeforeFirstLook(self) -> None:
        """
        A job killed before its run first looked (it was still fetching its
        pillar or compiling) runs no states: the minion remembers the kill.
        """
        self.context.killed[JID] = "SIGKILL"
        self.assertTrue(statemod._cancelled(self.context, JID)())
        await self.call("state.apply")
        self.assertFalse(os.path.exists(self.portFile))
        self.assertFalse(statemod._cancelled(self.context, "20260101000000000001")())


class HelperTests(TestCase):
    """
    The module's small helpers.
    """

    def test_jidTime(self) -> None:
        self.assertEqual(statemod._jidTime("20261126193028123456"), "2026, Nov 26 19:30:28.123456")
        self.assertEqual(statemod._jidTime("req"), "req")
