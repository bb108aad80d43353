"""
Tests for L{salttwist.state.apply}: a state run from the top file to the
states' returns, over a real state tree (a file server of temporary
roots), with real state functions (C{test.*}, C{cmd.run}) run in a thread.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.config import loadMinionConfig
from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.state import apply as stateapply
from tests._statectx import makeLoaderContext


def writeTree(root: str, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


TOP = """\
base:
  'web*':
    - web
  'db*':
    - match: glob
    - db
"""

WEB = """\
include:
  - common

hello:
  test.succeed_with_changes: []

marker:
  cmd.run:
    - name: touch {{ pillar['out'] }}/web-{{ grains['id'] }}
    - creates: {{ pillar['out'] }}/web-{{ grains['id'] }}
    - require:
      - test: hello
"""

COMMON = """\
common:
  test.succeed_without_changes:
    - name: {{ salt['test.echo']('common-name') }}
"""

DB = """\
db_broken:
  test.fail_without_changes: []
"""

BAD = """\
broken:
  test.nop:
    - name: [unclosed
"""


class ApplyTestCase(TestCase):
    """
    A state tree in C{base}, a minion's loader context, and a
    L{StateRun} over them.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        self.base = os.path.join(root, "srv")
        self.out = os.path.join(root, "out")
        os.makedirs(self.out)
        writeTree(
            self.base,
            {
                "top.sls": TOP,
                "web/init.sls": WEB,
                "common.sls": COMMON,
                "db.sls": DB,
                "bad.sls": BAD,
            },
        )
        self.opts = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": "web1",
                "file_roots": {"base": [self.base]},
                "cachedir": os.path.join(root, "cache"),
            },
        )
        self.files = FileServer.fromConfig(self.opts)

    def makeRun(self, minionId: str = "web1", **kwargs: Any) -> stateapply.StateRun:
        grains = {"id": minionId, "os_family": "Debian"}
        pillar = {"out": self.out}
        loader = makeLoaderContext(dict(self.opts, id=minionId), grains, pillar)
        defaults: dict[str, Any] = {
            "files": self.files,
            "opts": loader.opts,
            "minionId": minionId,
            "grains": grains,
            "pillar": pillar,
            "salt": SaltFunctions(loader),
            "reactor": loader.reactor,
            "jid": "20261126193000000000",
        }
        defaults.update(kwargs)
        return stateapply.StateRun(**defaults)


class HighstateTests(ApplyTestCase):
    """
    L{stateapply.highstate} and the C{show} steps.
    """

    async def test_highstate(self) -> None:
        """
        The top gives C{web1} the SLS C{web} (which includes C{common}):
        every state runs, required ones first, with Salt's return shape;
        the command made its file.
        """
        ret = await deferToThread(stateapply.highstate, self.makeRun())
        self.assertIsInstance(ret, dict, ret)
        tags = list(ret)
        self.assertEqual(
            sorted(tags),
            sorted(
                [
                    "test_|-common_|-common-name_|-succeed_without_changes",
                    "test_|-hello_|-hello_|-succeed_with_changes",
                    f"cmd_|-marker_|-touch {self.out}/web-web1_|-run",
                ]
            ),
        )
        hello = ret["test_|-hello_|-hello_|-succeed_with_changes"]
        self.assertEqual(hello["result"], True)
        self.assertEqual(hello["__sls__"], "web")
        self.assertEqual(hello["__id__"], "hello")
        self.assertIn("duration", hello)
        self.assertIn("start_time", hello)
        self.assertEqual(sorted(r["__run_num__"] for r in ret.values()), list(range(len(ret))))
        marker = ret[f"cmd_|-marker_|-touch {self.out}/web-web1_|-run"]
        self.assertEqual(marker["result"], True, marker)
        self.assertGreater(marker["__run_num__"], hello["__run_num__"])
        self.assertTrue(os.path.exists(os.path.join(self.out, "web-web1")))
        self.assertTrue(stateapply.checkResult(ret))

    async def test_testMode(self) -> None:
        """
        A dry run changes nothing: the command is not run, states that
        would change say C{None}.
        """
        ret = await deferToThread(stateapply.highstate, self.makeRun(test=True))
        self.assertFalse(os.path.exists(os.path.join(self.out, "web-web1")))
        self.assertIsNone(ret["test_|-hello_|-hello_|-succeed_with_changes"]["result"])
        marker = ret[f"cmd_|-marker_|-touch {self.out}/web-web1_|-run"]
        self.assertIsNone(marker["result"], marker)
        self.assertTrue(stateapply.checkResult(ret))

    async def test_failed(self) -> None:
        """
        A failing state makes L{checkResult} false.
        """
        ret = await deferToThread(stateapply.highstate, self.makeRun("db1"))
        self.assertEqual(
            ret["test_|-db_broken_|-db_broken_|-fail_without_changes"]["result"], False
        )
        self.assertFalse(stateapply.checkResult(ret))

    async def test_noMatches(self) -> None:
        """
        A minion the top does not match gets Salt's "No Top file" return,
        a failure.
        """
        ret = await deferToThread(stateapply.highstate, self.makeRun("other"))
        self.assertEqual(list(ret), [stateapply.NO_STATES_TAG])
        self.assertEqual(
            ret[stateapply.NO_STATES_TAG]["comment"],
            "No Top file or master_tops data matches found. Please see master log for details.",
        )
        self.assertFalse(stateapply.checkResult(ret))

    async def test_exclude(self) -> None:
        """
        C{exclude} leaves out the states of an SLS (glob) and ids.
        """
        ret = await deferToThread(
            stateapply.highstate, self.makeRun(), [{"sls": "comm*"}, {"id": "marker"}]
        )
        self.assertEqual(list(ret), ["test_|-hello_|-hello_|-succeed_with_changes"])

    async def test_showTop(self) -> None:
        """
        The top's matches of the minion.
        """
        self.assertEqual(
            await deferToThread(stateapply.showTop, self.makeRun("db1")), ({"base": ["db"]}, [])
        )

    async def test_showHighstate(self) -> None:
        """
        The high data of the SLS the top gives, rendered (nothing runs).
        """
        high, errors = await deferToThread(stateapply.showHighstate, self.makeRun())
        self.assertEqual(errors, [])
        self.assertEqual(sorted(high), ["common", "hello", "marker"])
        self.assertEqual(high["hello"]["__sls__"], "web")
        self.assertEqual(high["hello"]["__env__"], "base")
        self.assertIn("succeed_with_changes", high["hello"]["test"])
        self.assertFalse(os.path.exists(os.path.join(self.out, "web-web1")))

    async def test_showLowstate(self) -> None:
        """
        The low chunks in execution order.
        """
        chunks, errors = await deferToThread(stateapply.showLowstate, self.makeRun())
        self.assertEqual(errors, [])
        self.assertEqual(
            [(c["state"], c["__id__"], c["fun"]) for c in chunks],
            [
                ("test", "common", "succeed_without_changes"),
                ("test", "hello", "succeed_with_changes"),
                ("cmd", "marker", "run"),
            ],
        )
        self.assertEqual(chunks[2]["require"], [{"test": "hello"}])


class SlsTests(ApplyTestCase):
    """
    L{stateapply.sls}, L{stateapply.single}, L{stateapply.slsId}.
    """

    async def test_sls(self) -> None:
        """
        C{mods} as C{"a,b"}: both SLS run.
        """
        ret = await deferToThread(stateapply.sls, self.makeRun(), "common,db")
        self.assertEqual(
            sorted(ret),
            [
                "test_|-common_|-common-name_|-succeed_without_changes",
                "test_|-db_broken_|-db_broken_|-fail_without_changes",
            ],
        )

    async def test_badSls(self) -> None:
        """
        An SLS that does not render: the errors, nothing runs.
        """
        ret = await deferToThread(stateapply.sls, self.makeRun(), ["bad", "web"])
        self.assertIsInstance(ret, list)
        self.assertTrue(any("bad" in error for error in ret), ret)
        self.assertFalse(os.path.exists(os.path.join(self.out, "web-web1")))

    async def test_missingSls(self) -> None:
        """
        An SLS the tree lacks is Salt's error.
        """
        ret = await deferToThread(stateapply.sls, self.makeRun(), "nosuch")
        self.assertEqual(ret, ["No matching sls found for 'nosuch' in env 'base'"])

    async def test_single(self) -> None:
        """
        One state function called directly.
        """
        path = os.path.join(self.out, "single")
        ret = await deferToThread(stateapply.single, self.makeRun(), "cmd.run", f"touch {path}")
        self.assertEqual(list(ret), [f"cmd_|-touch {path}_|-touch {path}_|-run"])
        self.assertTrue(os.path.exists(path))
        self.assertEqual(
            await deferToThread(stateapply.single, self.makeRun(), "nodot", "x"),
            ["Invalid function passed to state.single: 'nodot' (not module.function)"],
        )

    async def test_slsId(self) -> None:
        """
        One id of an SLS, with what it requires; nothing else.
        """
        ret = await deferToThread(stateapply.slsId, self.makeRun(), "marker", "web")
        self.assertEqual(
            sorted(ret),
            sorted(
                [
                    "test_|-hello_|-hello_|-succeed_with_changes",
                    f"cmd_|-marker_|-touch {self.out}/web-web1_|-run",
                ]
            ),
        )
        self.assertEqual(await deferToThread(stateapply.slsId, self.makeRun(), "nope", "web"), {})

    async def test_progressAndCancel(self) -> None:
        """
        C{onStateDone} hears each state; once C{cancelled} is true no more
        states run (the return holds those that ran).
        """
        heard: list[tuple[str, int, int]] = []
        stop = threading.Event()

        def done(tag: str, ret: dict, finished: int, total: int) -> None:
            heard.append((tag, finished, total))
            stop.set()

        run = self.makeRun(onStateDone=done, cancelled=stop.is_set)
        ret = await deferToThread(stateapply.sls, run, "web")
        self.assertEqual(heard[0][1:], (1, 3))
        self.assertFalse(os.path.exists(os.path.join(self.out, "web-web1")))
        self.assertEqual(len(ret), 1, ret)


class HelperTests(TestCase):
    """
    L{stateapply.splitMods}, L{stateapply.applyExclude},
    L{stateapply.checkResult}.
    """

    def test_splitMods(self) -> None:
        self.assertEqual(stateapply.splitMods("a, b,,a"), ["a", "b"])
        self.assertEqual(stateapply.splitMods(["x", 5]), ["x", "5"])
        self.assertEqual(stateapply.splitMods(None), [])
        self.assertRaises(ValueError, stateapply.splitMods, {"a": 1})

    def test_applyExclude(self) -> None:
        high = {"a": {"__sls__": "web.a"}, "b": {"__sls__": "db"}, "c": {"__sls__": "db"}}
        self.assertEqual(list(stateapply.applyExclude(high, "web.*")), ["b", "c"])
        self.assertEqual(list(stateapply.applyExclude(high, [{"id": "c"}])), ["a", "b"])
        self.assertEqual(list(stateapply.applyExclude(high, None)), ["a", "b", "c"])

    def test_checkResultOnfail(self) -> None:
        """
        A failure handled by an C{onfail} state that succeeded is no
        failure; one whose handler failed is.
        """
        failed = {"result": False, "__id__": "a", "changes": {}}
        chunks = [
            {"state": "test", "__id__": "a", "name": "a", "fun": "fail_without_changes"},
            {
                "state": "test",
                "__id__": "h",
                "name": "h",
                "fun": "succeed_without_changes",
                "onfail": [{"test": "a"}],
            },
        ]
        handlerTag = "test_|-h_|-h_|-succeed_without_changes"
        returns = {"test_|-a_|-a_|-fail_without_changes": failed, handlerTag: {"result": True}}
        self.assertTrue(stateapply.checkResult(returns, chunks))
        returns[handlerTag] = {"result": False}
        self.assertFalse(stateapply.checkResult(returns, chunks))
        self.assertFalse(stateapply.checkResult({"x_|-a_|-a_|-f": failed}))
        self.assertFalse(stateapply.checkResult({}))
        self.assertFalse(stateapply.checkResult(["error"]))


CLEAN = """\
managed_conf:
  file.managed:
    - name: {{ pillar['out'] }}/conf.d/keep.conf
    - contents: kept

conf_dir:
  file.directory:
    - name: {{ pillar['out'] }}/conf.d
    - clean: True
    - require:
      - file: managed_conf
"""


class LowstateSharedTests(ApplyTestCase):
    """
    The run's low chunks are Salt's C{__lowstate__} in C{__context__}.
    """

    async def test_directoryCleanKeepsRequiredById(self) -> None:
        """
        C{file.directory} with C{clean: True} keeps the file of a state it
        requires by id (found through the run's low chunks) and removes
        the others.
        """
        writeTree(self.base, {"clean.sls": CLEAN})
        os.makedirs(os.path.join(self.out, "conf.d"))
        stray = os.path.join(self.out, "conf.d", "stray.conf")
        with open(stray, "w") as f:
            f.write("stray")
        ret = await deferToThread(stateapply.sls, self.makeRun(), "clean")
        self.assertIsInstance(ret, dict, ret)
        self.assertTrue(all(r["result"] for r in ret.values()), ret)
        self.assertFalse(os.path.exists(stray))
        with open(os.path.join(self.out, "conf.d", "keep.conf")) as f:
            self.assertEqual(f.read(), "kept\n")
