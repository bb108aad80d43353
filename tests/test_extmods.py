# -*- test-case-name: tests.test_extmods -*-
"""
Tests for L{salttwist.modules.extmods}: copying synced files into
C{extension_modules}, and loading custom execution modules, utils and
grains from real files.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.internet.threads import deferToThread
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.master.core import runSynchronously
from salttwist.modules import LoaderContext, extmods, loadFunctions, needsContext, onReactor
from salttwist.modules.executor import Executor


def write(path: str, text: str) -> str:
    """
    Write C{text} (dedented) to C{path}, making its folders.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def logged(observer: EventLoggingObserver) -> str:
    """
    @return: every event the observer saw, formatted, one a line.
    """
    return "\n".join(formatEvent(event) for event in observer)


class InstallSyncedTests(SynchronousTestCase):
    """
    L{extmods.installSynced} copies new and changed files, removes the
    ones the file server no longer has, and names them as Salt does.
    """

    def setUp(self) -> None:
        base = self.mktemp()
        self.cache = os.path.join(base, "cache", "files", "base", "_modules")
        self.devCache = os.path.join(base, "cache", "files", "dev", "_modules")
        self.dest = os.path.join(base, "extmods", "modules")

    def sync(self, *envs: tuple[str, list[str]], **kwargs: Any) -> extmods.SyncResult:
        return extmods.installSynced("modules", list(envs), self.dest, **kwargs)

    def test_newChangedRemoved(self) -> None:
        """
        A new file is copied and listed; an unchanged one is neither copied
        nor listed; a changed one is; one the file server dropped is
        removed, not listed, but counts as a change.
        """
        one = write(os.path.join(self.cache, "one.py"), "def f():\n    return 1\n")
        two = write(os.path.join(self.cache, "two.py"), "def f():\n    return 2\n")
        result = self.sync((self.cache, [one, two]))
        self.assertEqual(result.changed, ["modules.one", "modules.two"])
        self.assertEqual(result.removed, [])
        with open(os.path.join(self.dest, "one.py")) as f:
            self.assertEqual(f.read(), "def f():\n    return 1\n")

        again = self.sync((self.cache, [one, two]))
        self.assertEqual((again.changed, again.removed, again.touched), ([], [], False))

        write(two, "def f():\n    return 22\n")
        changed = self.sync((self.cache, [one, two]))
        self.assertEqual(changed.changed, ["modules.two"])
        with open(os.path.join(self.dest, "two.py")) as f:
            self.assertIn("22", f.read())

        os.remove(one)
        removed = self.sync((self.cache, [two]))
        self.assertEqual(removed.changed, [])
        self.assertEqual(removed.removed, ["one.py"])
        self.assertTrue(removed.touched)
        self.assertEqual(os.listdir(self.dest), ["two.py"])

    def test_nestedAndOtherFiles(self) -> None:
        """
        Files in folders are named with dots; files that are not C{.py}
        are not synced.
        """
        nested = write(os.path.join(self.cache, "pkg", "inner.py"), "X = 1\n")
        text = write(os.path.join(self.cache, "README.txt"), "hello\n")
        result = self.sync((self.cache, [nested, text]))
        self.assertEqual(result.changed, ["modules.pkg.inner"])
        self.assertFalse(os.path.exists(os.path.join(self.dest, "README.txt")))

    def test_firstSaltenvWins(self) -> None:
        """
        With several saltenvs, a file of the first one wins.
        """
        base = write(os.path.join(self.cache, "m.py"), "WHERE = 'base'\n")
        dev = write(os.path.join(self.devCache, "m.py"), "WHERE = 'dev'\n")
        devOnly = write(os.path.join(self.devCache, "d.py"), "WHERE = 'dev'\n")
        result = self.sync((self.cache, [base]), (self.devCache, [dev, devOnly]))
        self.assertEqual(sorted(result.changed), ["modules.d", "modules.m"])
        with open(os.path.join(self.dest, "m.py")) as f:
            self.assertIn("base", f.read())

    def test_whitelistBlacklist(self) -> None:
        """
        A whitelist keeps only the modules it names, a blacklist drops the
        ones it names; a module dropped so is removed from the
        destination.
        """
        a = write(os.path.join(self.cache, "a.py"), "A = 1\n")
        b = write(os.path.join(self.cache, "b.py"), "B = 1\n")
        self.assertEqual(self.sync((self.cache, [a, b]), whitelist={"a"}).changed, ["modules.a"])
        result = self.sync((self.cache, [a, b]), blacklist={"a"})
        self.assertEqual(result.changed, ["modules.b"])
        self.assertEqual(result.removed, ["a.py"])

    def test_noClean(self) -> None:
        """
        With C{clean} off (C{clean_dynamic_modules: False}), files the
        file server dropped stay.
        """
        a = write(os.path.join(self.cache, "a.py"), "A = 1\n")
        self.sync((self.cache, [a]))
        result = self.sync((self.cache, []), clean=False)
        self.assertEqual(result.removed, [])
        self.assertTrue(os.path.exists(os.path.join(self.dest, "a.py")))

    def test_outsideCacheRefused(self) -> None:
        """
        A fetched path outside its cache folder is refused, naming it.
        """
        outside = write(os.path.join(self.devCache, "x.py"), "X = 1\n")
        error = self.assertRaises(extmods.CommandExecutionError, self.sync, (self.cache, [outside]))
        self.assertIn(outside, str(error))


class ArgumentTests(SynchronousTestCase):
    """
    The saltenv and white/blacklist arguments, in Salt's forms.
    """

    def test_saltenvs(self) -> None:
        """
        C{saltenv} is a name, a comma-separated list or a list; by default
        the C{saltenv} option, else C{base}.
        """
        self.assertEqual(extmods.saltenvList(None, {}), ["base"])
        self.assertEqual(extmods.saltenvList(None, {"saltenv": "dev"}), ["dev"])
        self.assertEqual(extmods.saltenvList("base, dev,base", {}), ["base", "dev"])
        self.assertEqual(extmods.saltenvList(["dev"], {}), ["dev"])
        self.assertRaises(extmods.CommandExecutionError, extmods.saltenvList, 3, {})
        self.assertRaises(extmods.CommandExecutionError, extmods.saltenvList, ",", {})

    def test_nameLists(self) -> None:
        """
        A white/blacklist maps kinds to names, or is a comma-separated
        string of names for the kind synced.
        """
        self.assertIsNone(extmods.nameList(None, "modules", "w"))
        self.assertEqual(extmods.nameList("a,b", "modules", "w"), {"a", "b"})
        self.assertEqual(extmods.nameList({"modules": ["a"]}, "modules", "w"), {"a"})
        self.assertIsNone(extmods.nameList({"grains": ["a"]}, "modules", "w"))
        error = self.assertRaises(
            extmods.CommandExecutionError, extmods.nameList, 3, "modules", "extmod_whitelist"
        )
        self.assertIn("extmod_whitelist", str(error))

    def test_extensionModulesDir(self) -> None:
        """
        C{extension_modules}, or C{cachedir/extmods} when unset.
        """
        self.assertEqual(extmods.extensionModulesDir({"cachedir": "/c"}), "/c/extmods")
        self.assertEqual(
            extmods.extensionModulesDir({"cachedir": "/c", "extension_modules": "/e"}), "/e"
        )


class LoaderTests(SynchronousTestCase):
    """
    Custom execution modules load from their files beside the built-in
    ones, with Salt's dunders, C{__virtual__} and isolation of failures.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.extDir = os.path.join(self.root, "extmods")
        self.modules = os.path.join(self.extDir, "modules")
        self.opts = {"cachedir": self.root, "id": "m1", "color": "blue"}
        self.context = LoaderContext(
            opts=self.opts, grains={"id": "m1", "os": "Linux"}, reactor=Clock()
        )
        self.executor = Executor(loadFunctions(), self.context, runSynchronously)
        self.context.functions = self.executor.functions
        self.observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.addCleanup(self._forgetModules)

    def _forgetModules(self) -> None:
        for name in [n for n in sys.modules if n.startswith(extmods.PACKAGE + ".")]:
            del sys.modules[name]

    def module(self, name: str, text: str, kind: str = "modules") -> str:
        return write(os.path.join(self.extDir, kind, f"{name}.py"), text)

    def load(self) -> extmods.Extensions:
        extensions = extmods.loadExtensions(self.context)
        extmods.installExtensions(self.context, extensions)
        return extensions

    def call(self, fun: str, *arg: Any) -> dict[str, Any]:
        return self.successResultOf(self.executor.run(fun, list(arg)))

    def test_dunders(self) -> None:
        """
        A custom module sees C{__opts__}, C{__grains__}, C{__pillar__} as
        it is at call time, C{__salt__} (built-in functions), a
        C{__context__} shared by the modules of one load and
        C{__utils__}.
        """
        self.module(
            "hello",
            """
            def world():
                return {
                    "color": __opts__["color"],
                    "os": __grains__["os"],
                    "pillar": dict(__pillar__),
                    "ping": __salt__["test.ping"](),
                    "echo": __salt__["test.echo"]("x"),
                    "util": __utils__["helpers.double"](21),
                }

            def remember(value):
                __context__["seen"] = value
                return True
            """,
        )
        self.module(
            "other",
            """
            def seen():
                return __context__.get("seen")
            """,
        )
        self.module("helpers", "def double(n):\n    return n * 2\n", kind="utils")
        self.load()
        self.context.pillar = {"secret": "s3"}
        self.assertEqual(
            self.call("hello.world")["return"],
            {
                "color": "blue",
                "os": "Linux",
                "pillar": {"secret": "s3"},
                "ping": True,
                "echo": "x",
                "util": 42,
            },
        )
        # The pillar is read when used, not when the module loaded.
        self.context.pillar = {"secret": "new"}
        self.assertEqual(self.call("hello.world")["return"]["pillar"], {"secret": "new"})
        self.assertTrue(self.call("hello.remember", "v")["return"])
        self.assertEqual(self.call("other.seen")["return"], "v")

    def test_moduleLevelDundersOverwritten(self) -> None:
        """
        A module that sets C{__salt__} itself gets the loader's after it
        ran, as in Salt.
        """
        self.module(
            "own",
            """
            __salt__ = {}

            def ping():
                return __salt__["test.ping"]()
            """,
        )
        self.load()
        self.assertEqual(self.call("own.ping")["return"], True)

    def test_customFunctionsRunInThreads(self) -> None:
        """
        Custom functions are not marked to run on the reactor: the executor
        runs them in a thread. C{sys.argspec} shows their own arguments.
        """
        self.module("blocking", "def work(a, b=2, *rest, c=3, **more):\n    return 1\n")
        self.load()
        function = self.context.functions["blocking.work"]
        self.assertFalse(getattr(function, "runsOnReactor", False))
        spec = self.call("sys.argspec", "blocking.work")["return"]["blocking.work"]
        self.assertEqual((spec["args"], spec["defaults"]), (["a", "b"], [2]))
        self.assertEqual((spec["kwonlyargs"], spec["kwonlydefaults"]), (["c"], {"c": 3}))
        self.assertEqual((spec["varargs"], spec["kwargs"]), (True, True))

    def test_jobPillarOverride(self) -> None:
        """
        A job's C{pillar=} override is what a custom function's
        C{__pillar__} holds during that job only; a function called through
        C{__salt__} during the job sees it too.
        """
        self.module(
            "pil",
            """
            def show():
                return dict(__pillar__)

            def nested():
                return __salt__["pil.show"]()
            """,
        )
        self.load()
        self.context.pillar = {"a": 1, "b": {"c": 2}}
        override = {"pillar": {"b": {"d": 3}}, "__kwarg__": True}
        self.assertEqual(self.call("pil.show", override)["return"], {"a": 1, "b": {"c": 2, "d": 3}})
        self.assertEqual(
            self.call("pil.nested", override)["return"], {"a": 1, "b": {"c": 2, "d": 3}}
        )
        self.assertEqual(self.call("pil.show")["return"], {"a": 1, "b": {"c": 2}})

    def test_virtual(self) -> None:
        """
        C{__virtual__} returning C{False} or C{(False, reason)} skips the
        module (logged with the reason); a string names it; without it,
        C{__virtualname__} or the file name does.
        """
        self.module("off", "def __virtual__():\n    return False\ndef f():\n    return 1\n")
        self.module(
            "offwhy",
            "def __virtual__():\n    return (False, 'no widget here')\ndef f():\n    return 1\n",
        )
        self.module("named", "def __virtual__():\n    return 'renamed'\ndef f():\n    return 1\n")
        self.module(
            "vname",
            "__virtualname__ = 'vn'\ndef __virtual__():\n    return True\ndef f():\n    return 2\n",
        )
        self.module("plain", "def f():\n    return 3\n")
        self.load()
        functions = self.context.functions
        self.assertNotIn("off.f", functions)
        self.assertNotIn("offwhy.f", functions)
        self.assertEqual(self.call("renamed.f")["return"], 1)
        self.assertNotIn("named.f", functions)
        self.assertEqual(self.call("vn.f")["return"], 2)
        self.assertEqual(self.call("plain.f")["return"], 3)
        self.assertIn("no widget here", logged(self.observer))

    def test_funcAliasAndPrivate(self) -> None:
        """
        C{__func_alias__} renames a function; names starting with C{_} and
        functions imported from elsewhere are not loaded.
        """
        self.module(
            "aliased",
            """
            from os.path import join
            __func_alias__ = {"list_": "list"}

            def list_():
                return [1]

            def _hidden():
                return 0
            """,
        )
        self.load()
        self.assertEqual(self.call("aliased.list")["return"], [1])
        for name in ("aliased.list_", "aliased._hidden", "aliased.join"):
            self.assertNotIn(name, self.context.functions)

    def test_brokenModulesIsolated(self) -> None:
        """
        A module with a syntax error, one that raises on import, one whose
        C{__virtual__} raises and one that calls C{sys.exit} are each
        logged with their path and skipped; the others load.
        """
        paths = [
            self.module("syntax", "def f(:\n"),
            self.module("raises", "raise RuntimeError('boom at import')\n"),
            self.module("badvirtual", "def __virtual__():\n    return 1 / 0\n"),
            self.module("exits", "import sys\nsys.exit(3)\n"),
        ]
        self.module("good", "def f():\n    return 'ok'\n")
        self.load()
        self.assertEqual(self.call("good.f")["return"], "ok")
        text = logged(self.observer)
        for path in paths:
            self.assertIn(path, text)
        self.assertIn("boom at import", text)
        self.assertIn("SyntaxError", text)
        self.assertNotIn(f"{extmods.PACKAGE}.modules.raises", sys.modules)

    def test_overrideBuiltin(self) -> None:
        """
        A custom module named as a built-in one replaces it whole (logged),
        as Salt lets it; the other built-in modules stay.
        """
        path = self.module("test", "def ping():\n    return 'custom pong'\n")
        self.load()
        self.assertEqual(self.call("test.ping")["return"], "custom pong")
        self.assertNotIn("test.echo", self.context.functions)
        self.assertNotIn("test.echo", list(self.context.functions))
        self.assertEqual(self.call("test.echo", "x")["retcode"], 254)
        self.assertIn("grains.items", self.context.functions)
        self.assertIn(
            f"custom module {path} replaces the built-in module test", logged(self.observer)
        )

    def test_reloadReplaces(self) -> None:
        """
        A reload replaces the custom functions: a changed module's new
        code runs, a removed module's functions are gone and a hidden
        built-in module is back.
        """
        path = self.module("test", "def ping():\n    return 'custom'\n")
        self.module("mine", "def f():\n    return 1\n")
        self.load()
        os.remove(path)
        self.module("mine", "def f():\n    return 2\n")
        self.successResultOf(extmods.reloadExtensions(self.context))
        self.assertEqual(self.call("mine.f")["return"], 2)
        self.assertIs(self.call("test.ping")["return"], True)
        self.assertIn("test.echo", self.context.functions)

    def test_listedBySys(self) -> None:
        """
        C{sys.list_functions} and C{sys.list_modules} include custom
        modules.
        """
        self.module("hello", '"""Hello."""\ndef world():\n    """Say hi."""\n    return 1\n')
        self.load()
        self.assertIn("hello.world", self.call("sys.list_functions")["return"])
        self.assertIn("hello", self.call("sys.list_modules")["return"])

    def test_autoloadWithoutCustomModulesStaysLazy(self) -> None:
        """
        With nothing synced, loading the custom modules at start imports
        no built-in module (the minion starts as lazily as before).
        """
        extmods.autoloadExtensions(self.context)
        self.assertEqual(self.context.functions.loaded(), [])

    def test_saltFunctionsAdapt(self) -> None:
        """
        C{__salt__} gives a function that takes the loader context its
        context, and unwraps a L{Retcode}.
        """
        functions = extmods.SaltFunctions(self.context)
        self.assertEqual(functions["grains.get"]("os"), "Linux")
        self.assertIn("test.ping", functions)
        self.assertNotIn("no.such", functions)
        self.assertEqual(len(functions), len(list(functions)))


class SaltFromThreadTests(TestCase):
    """
    C{__salt__} called from a thread (where custom functions run) calls a
    function that runs on the reactor there, and waits for its result.
    """

    def test_onReactorFunctionFromThread(self) -> None:
        """
        A function marked L{onReactor} returning a coroutine, called through
        C{__salt__} from a thread, runs on the reactor thread and its
        result comes back.
        """
        from twisted.internet import reactor
        from twisted.python.threadable import isInIOThread

        @onReactor
        @needsContext
        async def where(context: LoaderContext) -> tuple[bool, str]:
            return isInIOThread(), context.opts["id"]

        context = LoaderContext(opts={"id": "m9"}, grains={}, reactor=reactor)
        context.functions = {"here.where": where}
        functions = extmods.SaltFunctions(context)
        d = deferToThread(functions["here.where"])
        d.addCallback(self.assertEqual, (True, "m9"))
        return d


class GrainsTests(SynchronousTestCase):
    """
    Custom grain modules: merged over the core grains, under the grains
    file and the config's.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.extDir = os.path.join(self.root, "extmods")
        os.makedirs(self.root)
        self.confFile = os.path.join(self.root, "minion")
        self.opts: dict[str, Any] = {
            "cachedir": self.root,
            "id": "m1",
            "conf_file": self.confFile,
            "grains": {"fromconfig": "config"},
        }
        self.changes: list[dict[str, Any]] = []
        self.context = LoaderContext(
            opts=self.opts,
            grains={"id": "m1", "kernel": "Linux", "fromconfig": "config"},
            reactor=Clock(),
            onGrainsChanged=lambda: self.changes.append(dict(self.context.grains)),
        )
        self.context.functions = loadFunctions()
        self.observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def grainModule(self, name: str, text: str) -> str:
        return write(os.path.join(self.extDir, "grains", f"{name}.py"), text)

    def test_runGrainModules(self) -> None:
        """
        Each public function returning a dict is merged; one taking
        C{grains} gets the grains so far; one that raises, or returns
        something else, is logged and skipped.
        """
        self.grainModule(
            "role",
            """
            def role():
                return {"role": "custom"}

            def derived(grains):
                return {"derived": grains["kernel"] + "-" + grains["role"]}

            def broken():
                raise ValueError("no role")

            def notadict():
                return ["x"]

            def _private():
                return {"private": True}
            """,
        )
        modules = extmods.loadExtensionModules(
            os.path.join(self.extDir, "grains"), "grains", {"__opts__": self.opts}
        )
        custom = extmods.runGrainModules(modules, {"kernel": "Linux"})
        self.assertEqual(custom, {"role": "custom", "derived": "Linux-custom"})
        text = logged(self.observer)
        self.assertIn("no role", text)
        self.assertIn("notadict", text)

    def test_precedence(self) -> None:
        """
        Custom grains override core grains; the grains file and the
        config's C{grains:} override custom grains.
        """
        write(os.path.join(self.root, "grains"), "fromfile: file\n")
        merged = extmods.mergeGrains(
            {"kernel": "Linux", "fromfile": "core", "fromconfig": "core"},
            {"kernel": "Custom", "fromfile": "custom", "fromconfig": "custom", "new": 1},
            self.opts,
        )
        self.assertEqual(
            merged, {"kernel": "Custom", "fromfile": "file", "fromconfig": "config", "new": 1}
        )

    def test_autoload(self) -> None:
        """
        At start, custom grains are merged into the context's grains (the
        same mapping).
        """
        self.grainModule("role", "def role():\n    return {'role': 'custom', 'kernel': 'K'}\n")
        grains = self.context.grains
        extmods.autoloadExtensions(self.context)
        self.assertIs(self.context.grains, grains)
        self.assertEqual(grains["role"], "custom")
        self.assertEqual(grains["kernel"], "K")
        self.assertEqual(grains["fromconfig"], "config")

    def test_reloadReportsChangedGrains(self) -> None:
        """
        A reload gathers the grains again with the custom ones and reports
        them once when they changed, not when they did not; a custom grain
        whose module is gone is gone.
        """
        path = self.grainModule("role", "def role():\n    return {'role': 'custom'}\n")
        self.successResultOf(extmods.reloadExtensions(self.context))
        self.assertEqual(len(self.changes), 1)
        self.assertEqual(self.changes[0]["role"], "custom")
        self.assertEqual(self.changes[0]["id"], "m1")
        self.successResultOf(extmods.reloadExtensions(self.context))
        self.assertEqual(len(self.changes), 1)
        os.remove(path)
        self.successResultOf(extmods.reloadExtensions(self.context))
        self.assertEqual(len(self.changes), 2)
        self.assertNotIn("role", self.context.grains)

    def test_refreshGrainsKeepsCustom(self) -> None:
        """
        C{saltutil.refresh_grains} gathers the custom grains too.
        """
        self.grainModule("role", "def role():\n    return {'role': 'custom'}\n")
        executor = Executor(self.context.functions, self.context, runSynchronously)
        result = self.successResultOf(executor.run("saltutil.refresh_grains", []))
        self.assertIs(result["return"], True)
        self.assertEqual(self.context.grains["role"], "custom")
        self.assertEqual(self.changes[-1]["role"], "custom")


class MasterSyncTests(SynchronousTestCase):
    """
    C{salttwist-run saltutil.sync_runners} / C{sync_all}: custom runners
    copied from the master's own file roots into its C{cachedir/extmods}
    and loaded into its runner map (the one its runner dispatch and
    reactor use), and loaded again at the next start.
    """

    def setUp(self) -> None:
        from salttwist.config import loadMasterConfig

        self.root = os.path.abspath(self.mktemp())
        self.base = os.path.join(self.root, "srv", "salt")
        os.makedirs(self.base)
        self.config = loadMasterConfig(
            self.root, overrides={"root_dir": self.root, "file_roots": {"base": [self.base]}}
        )
        self.master = self.makeMaster()
        self.addCleanup(self._forgetModules)

    def _forgetModules(self) -> None:
        for name in [n for n in sys.modules if n.startswith(extmods.PACKAGE + ".")]:
            del sys.modules[name]

    def makeMaster(self) -> Any:
        from salttwist import crypt
        from salttwist.events.bus import LocalEventBus
        from salttwist.master.core import Master
        from salttwist.master.keys import MasterKeys
        from salttwist.pki.keystore import InMemoryKeyStore

        key = crypt.generatePrivateKey()
        return Master(
            self.config,
            MasterKeys(key, crypt.publicKeyToPem(key.public_key()), b"r" * 32),
            InMemoryKeyStore(),
            LocalEventBus(),
            runSynchronously,
            Clock(),
        )

    def serve(self, relative: str, text: str) -> str:
        return write(os.path.join(self.base, relative), text)

    def runner(self, fun: str, *arg: Any) -> Any:
        reply = self.successResultOf(self.master.clientRunner(None, {"fun": fun, "arg": list(arg)}))
        return reply["return"]

    def test_syncRunners(self) -> None:
        """
        A synced runner is copied, loaded at once with C{__opts__} and
        C{__utils__}, and runs in a thread of the master; it is loaded
        again at the next start; removed from the roots, it is gone.
        """
        path = self.serve(
            "_runners/hello.py",
            """
            def world(name="you"):
                '''Say hello.'''
                return __utils__["shout.loud"](f"hello {name} from {__opts__['root_dir']}")
            """,
        )
        self.serve("_utils/shout.py", "def loud(text):\n    return text.upper()\n")
        self.assertEqual(
            self.runner("saltutil.sync_all"),
            {"runners": ["runners.hello"], "utils": ["utils.shout"]},
        )
        expected = f"HELLO ME FROM {self.root.upper()}"
        self.assertEqual(self.runner("hello.world", {"name": "me", "__kwarg__": True}), expected)
        self.assertIn("runners", os.listdir(os.path.join(self.config["cachedir"], "extmods")))

        restarted = self.makeMaster()
        self.assertIn("hello.world", restarted.runners)

        os.remove(path)
        self.assertEqual(self.runner("saltutil.sync_runners"), [])
        self.assertNotIn("hello.world", self.master.runners)
        self.assertIs(self.master.runners, self.master.runnerDispatch.runners)
        self.assertIn("jobs.list_jobs", self.master.runners)

    def test_unknownSaltenv(self) -> None:
        """
        A saltenv the master's file server does not have is an error
        naming it.
        """
        failure = self.failureResultOf(
            self.master.clientRunner(
                None,
                {"fun": "saltutil.sync_runners", "arg": [{"saltenv": "nope", "__kwarg__": True}]},
            ),
            ValueError,
        )
        self.assertIn("cannot sync _runners from saltenv 'nope'", str(failure.value))

    def test_overrideBuiltinRunner(self) -> None:
        """
        A custom runner module named as a built-in one replaces it whole.
        """
        self.serve("_runners/manage.py", "def up():\n    return ['custom']\n")
        self.assertEqual(self.runner("saltutil.sync_runners"), ["runners.manage"])
        self.assertEqual(self.runner("manage.up"), ["custom"])
        self.assertNotIn("manage.down", self.master.runners)
