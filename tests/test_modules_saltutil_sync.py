# -*- test-case-name: tests.test_modules_saltutil_sync -*-
"""
Tests for C{saltutil.sync_*} and C{saltutil.refresh_modules}
(L{salttwist.modules.saltutil}, L{salttwist.modules.extmods}): custom code
synced from real temporary C{file_roots} through a real
L{LocalFileClient}, then loaded.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules import LoaderContext, extmods, loadFunctions
from salttwist.modules.executor import Executor


def kw(**kwargs: Any) -> dict[str, Any]:
    """
    @return: keyword arguments as they come on the wire.
    """
    return {**kwargs, "__kwarg__": True}


class SyncTests(SynchronousTestCase):
    """
    A minion context whose file client reads real roots (C{base} and
    C{dev}), with a L{Clock} as its reactor (thread work runs at once).
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.base = os.path.join(self.root, "srv", "base")
        self.dev = os.path.join(self.root, "srv", "dev")
        self.cachedir = os.path.join(self.root, "cache")
        for directory in (self.base, self.dev, self.cachedir):
            os.makedirs(directory)
        self.opts: dict[str, Any] = {
            "id": "m1",
            "cachedir": self.cachedir,
            "file_roots": {"base": [self.base], "dev": [self.dev]},
            "grains": {},
        }
        self.reported: list[dict[str, Any]] = []
        self.context = LoaderContext(
            opts=self.opts,
            grains={"id": "m1"},
            reactor=Clock(),
            onGrainsChanged=lambda: self.reported.append(dict(self.context.grains)),
        )
        self.context.fileClient = LocalFileClient(
            FileServer(self.opts), self.cachedir, runSynchronously
        )
        self.executor = Executor(loadFunctions(), self.context, runSynchronously)
        self.context.functions = self.executor.functions
        self.addCleanup(self._forgetModules)

    def _forgetModules(self) -> None:
        for name in [n for n in sys.modules if n.startswith(extmods.PACKAGE + ".")]:
            del sys.modules[name]

    def serve(self, relative: str, text: str, root: str | None = None) -> str:
        """
        Put a file in the roots (C{base} by default).
        """
        path = os.path.join(root or self.base, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def run_(self, fun: str, *arg: Any) -> dict[str, Any]:
        return self.successResultOf(self.executor.run(fun, list(arg)))

    def ret(self, fun: str, *arg: Any) -> Any:
        result = self.run_(fun, *arg)
        self.assertTrue(result["success"], result)
        return result["return"]

    def extmods(self, kind: str) -> list[str]:
        directory = os.path.join(self.cachedir, "extmods", kind)
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []

    def test_syncModulesNewChangedRemoved(self) -> None:
        """
        C{sync_modules} copies a new module and loads it; a second sync
        copies nothing; a changed module is copied and its new code runs; a
        module removed from the roots is removed and unloaded.
        """
        path = self.serve("_modules/hello.py", "def world():\n    return 'one'\n")
        self.assertEqual(self.ret("saltutil.sync_modules"), ["modules.hello"])
        self.assertEqual(self.extmods("modules"), ["hello.py"])
        self.assertEqual(self.ret("hello.world"), "one")

        self.assertEqual(self.ret("saltutil.sync_modules"), [])

        self.serve("_modules/hello.py", "def world():\n    return 'two'\n")
        self.assertEqual(self.ret("saltutil.sync_modules"), ["modules.hello"])
        self.assertEqual(self.ret("hello.world"), "two")

        os.remove(path)
        self.assertEqual(self.ret("saltutil.sync_modules"), [])
        self.assertEqual(self.extmods("modules"), [])
        self.assertEqual(self.run_("hello.world")["retcode"], 254)

    def test_syncAllShape(self) -> None:
        """
        C{sync_all} syncs modules, states, grains and utils and returns
        Salt's shape; custom grains are merged and reported; states are
        copied.
        """
        self.serve("_modules/hello.py", "def world():\n    return __grains__['role']\n")
        self.serve("_grains/role.py", "def role():\n    return {'role': 'custom'}\n")
        self.serve("_states/mystate.py", "def present(name):\n    return {}\n")
        self.serve("_utils/helper.py", "def help():\n    return 1\n")
        self.serve("_runners/myrunner.py", "def go():\n    return 1\n")
        self.assertEqual(
            self.ret("saltutil.sync_all"),
            {
                "modules": ["modules.hello"],
                "states": ["states.mystate"],
                "grains": ["grains.role"],
                "utils": ["utils.helper"],
            },
        )
        self.assertEqual(self.ret("hello.world"), "custom")
        self.assertEqual(self.context.grains["role"], "custom")
        self.assertEqual(self.reported[-1]["role"], "custom")
        self.assertEqual(self.extmods("states"), ["mystate.py"])
        # The minion does not sync runners (the master does).
        self.assertEqual(self.extmods("runners"), [])
        self.assertEqual(
            self.ret("saltutil.sync_all"),
            {"modules": [], "states": [], "grains": [], "utils": []},
        )

    def test_syncGrains(self) -> None:
        """
        C{sync_grains} merges the custom grains at once and reports them.
        """
        self.serve("_grains/role.py", "def role():\n    return {'role': 'custom'}\n")
        self.assertEqual(self.ret("saltutil.sync_grains"), ["grains.role"])
        self.assertEqual(self.ret("grains.get", "role"), "custom")
        self.assertEqual(len(self.reported), 1)

    def test_noRefresh(self) -> None:
        """
        With C{refresh=False} the module is copied but not loaded until
        C{refresh_modules}.
        """
        self.serve("_modules/hello.py", "def world():\n    return 1\n")
        self.assertEqual(self.ret("saltutil.sync_modules", kw(refresh=False)), ["modules.hello"])
        self.assertEqual(self.run_("hello.world")["retcode"], 254)
        self.assertIs(self.ret("saltutil.refresh_modules"), True)
        self.assertEqual(self.ret("hello.world"), 1)

    def test_saltenv(self) -> None:
        """
        C{saltenv} names where to sync from; several saltenvs are merged,
        the first holding a file winning.
        """
        self.serve("_modules/where.py", "def env():\n    return 'dev'\n", root=self.dev)
        self.assertEqual(self.ret("saltutil.sync_modules"), [])
        self.assertEqual(self.ret("saltutil.sync_modules", kw(saltenv="dev")), ["modules.where"])
        self.assertEqual(self.ret("where.env"), "dev")
        self.serve("_modules/where.py", "def env():\n    return 'base'\n")
        self.assertEqual(
            self.ret("saltutil.sync_modules", kw(saltenv="base,dev")), ["modules.where"]
        )
        self.assertEqual(self.ret("where.env"), "base")

    def test_unknownSaltenv(self) -> None:
        """
        A saltenv the file server does not have is an error naming it.
        """
        result = self.run_("saltutil.sync_modules", kw(saltenv="nope"))
        self.assertFalse(result["success"])
        self.assertIn("ERROR: cannot sync _modules from saltenv 'nope'", result["return"])
        self.assertIn("not configured", result["return"])

    def test_noFileClient(self) -> None:
        """
        Without a file client, syncing is an error saying so.
        """
        self.context.fileClient = None
        result = self.run_("saltutil.sync_all")
        self.assertFalse(result["success"])
        self.assertIn("no file client", result["return"])

    def test_whitelist(self) -> None:
        """
        C{extmod_whitelist} keeps only the modules it names, per kind.
        """
        self.serve("_modules/a.py", "def f():\n    return 'a'\n")
        self.serve("_modules/b.py", "def f():\n    return 'b'\n")
        self.serve("_grains/g.py", "def g():\n    return {'g': 1}\n")
        result = self.successResultOf(
            self.executor.run(
                "saltutil.sync_all",
                [{"extmod_whitelist": {"modules": ["a"]}, "__kwarg__": True}],
            )
        )["return"]
        self.assertEqual(result["modules"], ["modules.a"])
        self.assertEqual(result["grains"], ["grains.g"])
        self.assertEqual(self.extmods("modules"), ["a.py"])

    def test_brokenModuleDoesNotStopSync(self) -> None:
        """
        A synced module that fails to import is skipped; the sync and the
        other modules work.
        """
        self.serve("_modules/broken.py", "raise ImportError('no such library')\n")
        self.serve("_modules/good.py", "def f():\n    return 'ok'\n")
        self.assertEqual(self.ret("saltutil.sync_modules"), ["modules.broken", "modules.good"])
        self.assertEqual(self.ret("good.f"), "ok")
        self.assertEqual(self.run_("broken.f")["retcode"], 254)

    def test_refreshPillarAfterGrains(self) -> None:
        """
        C{sync_grains} and C{sync_all} ask for the pillar again without
        waiting for it (the grains may change what its top file matches);
        C{sync_modules} does not, nor does C{refresh=False}.
        """
        from twisted.internet.defer import Deferred

        asked: list[Deferred[Any]] = []

        def refreshPillar() -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            asked.append(d)
            return d

        self.context.refreshPillar = refreshPillar
        self.serve("_grains/role.py", "def role():\n    return {'role': 'custom'}\n")
        self.assertEqual(self.ret("saltutil.sync_modules"), [])
        self.assertEqual(len(asked), 0)
        self.assertEqual(self.ret("saltutil.sync_grains", kw(refresh=False)), ["grains.role"])
        self.assertEqual(len(asked), 0)
        self.assertEqual(self.ret("saltutil.sync_grains"), [])
        self.assertEqual(len(asked), 1)
        self.ret("saltutil.sync_all")
        self.assertEqual(len(asked), 2)

    def test_refreshEvenIfNothingCopied(self) -> None:
        """
        With C{refresh}, the modules are loaded again even when nothing
        was copied, as Salt's C{sync_modules} does.
        """
        directory = os.path.join(self.cachedir, "extmods", "modules")
        os.makedirs(directory)
        with open(os.path.join(directory, "local.py"), "w") as f:
            f.write("def f():\n    return 'local'\n")
        self.assertEqual(self.ret("saltutil.sync_modules", kw(saltenv="dev")), [])
        # Not on the file server: removed, and so not loaded.
        self.assertEqual(self.run_("local.f")["retcode"], 254)
        self.serve("_modules/hello.py", "def world():\n    return 1\n")
        self.assertEqual(self.ret("saltutil.sync_modules", kw(refresh=False)), ["modules.hello"])
        self.assertEqual(self.ret("saltutil.sync_modules"), [])
        self.assertEqual(self.ret("hello.world"), 1)


class MasterlessCallTests(TestCase):
    """
    C{salttwist-call --local saltutil.sync_all} syncs from the minion's own
    C{file_roots}, and a later C{salttwist-call} loads the synced module
    and grain (real processes).
    """

    def setUp(self) -> None:
        self.configDir = os.path.abspath(self.mktemp())
        self.roots = os.path.join(self.configDir, "srv")
        os.makedirs(os.path.join(self.roots, "_modules"))
        os.makedirs(os.path.join(self.roots, "_grains"))
        with open(os.path.join(self.roots, "_modules", "hello.py"), "w") as f:
            f.write("def world():\n    return 'hi ' + __grains__['role']\n")
        with open(os.path.join(self.roots, "_grains", "role.py"), "w") as f:
            f.write("def role():\n    return {'role': 'custom'}\n")
        with open(os.path.join(self.configDir, "minion"), "w") as f:
            f.write(
                f"root_dir: {self.configDir}\nid: caller1\n"
                f"file_roots:\n  base:\n    - {self.roots}\n"
            )

    async def call(self, *args: str) -> Any:
        out, err, code = await getProcessOutputAndValue(
            sys.executable,
            ["-m", "salttwist.cli.call", "-c", self.configDir, *args, "--out", "json"],
            env=dict(os.environ),
        )
        self.assertEqual(code, 0, (out, err))
        return json.loads(out)["local"]

    async def test_syncThenCall(self) -> None:
        """
        The masterless sync returns Salt's shape; the next call has the
        custom module and grain.
        """
        self.assertEqual(
            await self.call("--local", "saltutil.sync_all"),
            {"modules": ["modules.hello"], "states": [], "grains": ["grains.role"], "utils": []},
        )
        self.assertEqual(await self.call("--local", "hello.world"), "hi custom")
        self.assertEqual(await self.call("--local", "grains.get", "role"), "custom")


class ConcurrentSyncTests(TestCase):
    """
    Syncs running at once, in real threads of the real reactor, do not
    trip over each other's copies.
    """

    async def test_twoSyncsAtOnce(self) -> None:
        """
        Two C{sync_all} jobs started together both succeed; between them
        every module is copied once and loads.
        """
        from twisted.internet import reactor
        from twisted.internet.defer import gatherResults

        from salttwist.blocking import threadRunner

        root = os.path.abspath(self.mktemp())
        base = os.path.join(root, "srv")
        cachedir = os.path.join(root, "cache")
        for n in range(20):
            path = os.path.join(base, "_modules", f"mod{n}.py")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(f"def n():\n    return {n}\n")
        os.makedirs(cachedir)
        opts = {"id": "m1", "cachedir": cachedir, "file_roots": {"base": [base]}, "grains": {}}
        context = LoaderContext(opts=opts, grains={"id": "m1"}, reactor=reactor)
        runBlocking = threadRunner(reactor)
        context.fileClient = LocalFileClient(FileServer(opts), cachedir, runBlocking)
        executor = Executor(loadFunctions(), context, runBlocking)
        context.functions = executor.functions
        self.addCleanup(
            lambda: [
                sys.modules.pop(name)
                for name in list(sys.modules)
                if name.startswith(extmods.PACKAGE + ".")
            ]
        )
        results = await gatherResults(
            [executor.run("saltutil.sync_all", []), executor.run("saltutil.sync_all", [])]
        )
        for result in results:
            self.assertTrue(result["success"], result)
        copied = sorted(results[0]["return"]["modules"] + results[1]["return"]["modules"])
        self.assertEqual(copied, sorted(f"modules.mod{n}" for n in range(20)))
        ran = await executor.run("mod7.n", [])
        self.assertEqual(ran["return"], 7)
