# -*- test-case-name: tests.test_modules_sys -*-
"""
Tests for L{salttwist.modules.sysmod} (Salt's C{sys}) and for the loader's
rules every module follows: virtual names, documentation, CLI examples.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.master.core import runSynchronously
from salttwist.modules import MODULES, LoaderContext, loadFunctions, needsContext, sysmod
from salttwist.modules.executor import Executor


def _sysctlShow() -> str:
    """
    A stand-in function of a module whose name starts like C{sys}.

    CLI Example:

        salttwist '*' sysctl.show
    """
    return ""


class SysTests(SynchronousTestCase):
    """
    C{sys.list_modules}, C{list_functions}, C{doc} and C{argspec} describe
    the loaded functions.
    """

    def setUp(self) -> None:
        """
        A context whose functions are the real modules plus a C{sysctl}
        module, to check that C{sys} does not match it.
        """
        self.functions = loadFunctions()
        self.functions["sysctl.show"] = _sysctlShow
        self.context = LoaderContext(opts={}, grains={}, reactor=Clock())
        self.context.functions = self.functions

    def test_listModules(self) -> None:
        """
        C{sys.list_modules} lists every module by its virtual name; globs
        filter.
        """
        modules = sysmod.list_modules(self.context)
        for name in ("cmd", "disk", "file", "grains", "network", "pkg", "status", "sys", "test"):
            self.assertIn(name, modules)
        self.assertNotIn("sysmod", modules)
        self.assertNotIn("filemod", modules)
        self.assertEqual(modules, sorted(modules))
        self.assertEqual(
            sysmod.list_modules(self.context, "s*"),
            ["saltutil", "service", "shadow", "slsutil", "state", "status", "sys", "sysctl"],
        )
        self.assertEqual(sysmod.list_modules(self.context, "sys"), ["sys"])

    def test_listFunctions(self) -> None:
        """
        C{sys.list_functions} lists all functions, a module's (C{sys} does
        not include C{sysctl}), or those matching a glob.
        """
        self.assertEqual(sysmod.list_functions(self.context), sorted(self.functions))
        self.assertEqual(
            sysmod.list_functions(self.context, "sys"),
            ["sys.argspec", "sys.doc", "sys.list_functions", "sys.list_modules"],
        )
        self.assertEqual(
            sysmod.list_functions(self.context, "sys.list_*"),
            ["sys.list_functions", "sys.list_modules"],
        )
        self.assertEqual(sysmod.list_functions(self.context, "sys", "sysctl")[-1], "sysctl.show")

    def test_docEveryFunction(self) -> None:
        """
        C{sys.doc} gives non-empty documentation for every loaded function.
        """
        docs = sysmod.doc(self.context)
        self.assertEqual(sorted(docs), sorted(self.functions))
        empty = [name for name, text in docs.items() if not text.strip()]
        self.assertEqual(empty, [])

    def test_docSelect(self) -> None:
        """
        C{sys.doc} of a module, of a function and of a glob.
        """
        self.assertEqual(sorted(sysmod.doc(self.context, "test.ping")), ["test.ping"])
        self.assertEqual(
            sorted(sysmod.doc(self.context, "sys")),
            ["sys.argspec", "sys.doc", "sys.list_functions", "sys.list_modules"],
        )
        self.assertEqual(
            sorted(sysmod.doc(self.context, "cmd.run*")),
            ["cmd.run", "cmd.run_all", "cmd.run_stderr", "cmd.run_stdout"],
        )

    def test_docPlainText(self) -> None:
        """
        The documentation is dedented and free of epytext markup, braces
        inside the markup kept.
        """
        text = sysmod.doc(self.context, "cmd.run_all")["cmd.run_all"]
        self.assertIn('{"pid", "retcode", "stdout", "stderr"}', text)
        self.assertNotIn("C{", text)
        self.assertTrue(text.startswith("Run cmd and return"), text)

    def test_plainDoc(self) -> None:
        """
        L{sysmod._plainDoc} strips C{C{}}, C{L{}}, C{I{}} and C{B{}}, nested
        too, but not braces after a letter of a word.
        """
        self.assertEqual(
            sysmod._plainDoc("  Use C{a} and L{b.C} and B{I{x}} or C{{1: 2}}; ABC{x}.\n"),
            "Use a and b.C and x or {1: 2}; ABC{x}.",
        )
        self.assertEqual(sysmod._plainDoc(None), "")

    def test_argspec(self) -> None:
        """
        C{sys.argspec} gives Salt's argument description, without the
        loader's context argument.
        """
        spec = sysmod.argspec(self.context, "test.echo")
        self.assertEqual(
            spec,
            {
                "test.echo": {
                    "args": ["text"],
                    "defaults": None,
                    "varargs": None,
                    "kwargs": None,
                    "kwonlyargs": None,
                    "kwonlydefaults": None,
                }
            },
        )
        sleep = sysmod.argspec(self.context, "test.sleep")["test.sleep"]
        self.assertEqual(sleep["args"], ["length"])
        arg = sysmod.argspec(self.context, "test.arg")["test.arg"]
        self.assertEqual((arg["varargs"], arg["kwargs"]), (True, True))
        run = sysmod.argspec(self.context, "cmd.run")["cmd.run"]
        self.assertEqual(run["args"][:3], ["cmd", "cwd", "stdin"])
        self.assertIn("timeout", run["args"])

    def test_argspecModuleAndGlob(self) -> None:
        """
        C{sys.argspec} of a module or a glob covers its functions; without
        an argument, all of them.
        """
        self.assertEqual(
            sorted(sysmod.argspec(self.context, "sys")),
            ["sys.argspec", "sys.doc", "sys.list_functions", "sys.list_modules"],
        )
        self.assertEqual(
            sorted(sysmod.argspec(self.context, "test.r*")),
            [
                "test.rand_sleep",
                "test.retcode",
            ],
        )
        self.assertEqual(sorted(sysmod.argspec(self.context)), sorted(self.functions))

    def test_throughExecutor(self) -> None:
        """
        Through the executor, C{sys.list_functions} uses the functions the
        minion loaded (C{context.functions}).
        """
        executor = Executor(self.functions, self.context, runSynchronously)
        result = self.successResultOf(executor.run("sys.list_functions", ["sysctl"]))
        self.assertEqual(result["return"], ["sysctl.show"])


class LoaderRulesTests(SynchronousTestCase):
    """
    Every module in L{MODULES} follows the loader's rules.
    """

    def test_everyFunctionHasCliExample(self) -> None:
        """
        Every loaded function has a docstring with a C{CLI Example:} line
        naming the function itself.
        """
        missing = []
        for name, function in loadFunctions().items():
            doc = function.__doc__ or ""
            if "CLI Example" not in doc or f"salttwist '*' {name}" not in doc:
                missing.append(name)
        self.assertEqual(missing, [])

    def test_virtualNames(self) -> None:
        """
        Modules load under their C{__virtualname__}: C{sysmod} as C{sys},
        C{filemod} as C{file}.
        """
        functions = loadFunctions()
        self.assertIn("sys.doc", functions)
        self.assertIn("file.read", functions)
        self.assertFalse([n for n in functions if n.startswith(("sysmod.", "filemod."))])

    def test_noImportedOrPrivateNames(self) -> None:
        """
        Only a module's own public functions load: no helpers imported from
        elsewhere, no C{_private} ones.
        """
        for name, function in loadFunctions().items():
            module = name.split(".")[0]
            self.assertFalse(name.split(".")[1].startswith("_"), name)
            self.assertTrue(function.__module__.startswith("salttwist.modules."), name)
            self.assertNotIn(module, ("_process",))

    def test_everyModuleLoads(self) -> None:
        """
        Every module of L{MODULES} imports and contributes functions.
        """
        functions = loadFunctions()
        for name in MODULES:
            module = importlib.import_module(f"salttwist.modules.{name}")
            virtual = getattr(module, "__virtualname__", name)
            self.assertTrue([n for n in functions if n.startswith(virtual + ".")], name)

    def test_contextFirst(self) -> None:
        """
        A function marked L{needsContext} takes the context as its first
        parameter.
        """
        for name, function in loadFunctions().items():
            if getattr(function, "needsContext", False):
                first = next(iter(inspect.signature(function).parameters))
                self.assertEqual(first, "context", name)

    def test_needsContextMarks(self) -> None:
        """
        L{needsContext} marks a function and returns it unchanged.
        """

        def f(context: Any) -> None:
            """
            Nothing.
            """

        self.assertIs(needsContext(f), f)
        self.assertTrue(f.needsContext)  # type: ignore[attr-defined]


class LazyFunctionsTests(SynchronousTestCase):
    """
    L{salttwist.modules.LazyFunctions}, what L{loadFunctions} returns:
    a module is imported when one of its functions is first looked up.
    """

    def setUp(self) -> None:
        """
        A package of three modules, one with a C{__virtualname__}, each of
        which notes its import in C{sys.lazy_loaded}.
        """
        import os
        import sys

        self.directory = os.path.abspath(self.mktemp())
        package = os.path.join(self.directory, "salttwist_lazy_modules")
        os.makedirs(package)
        sources = {
            "__init__.py": "",
            "first.py": "def one():\n    return 1\ndef _hidden():\n    pass\n",
            "second.py": "def two():\n    return 2\n",
            "systools.py": "__virtualname__ = 'tools'\ndef three():\n    return 3\n",
        }
        for name, text in sources.items():
            with open(os.path.join(package, name), "w") as f:
                module = name.removesuffix(".py")
                f.write("import sys\n")
                f.write(f"sys.__dict__.setdefault('lazy_loaded', []).append({module!r})\n")
                f.write(text)
        sys.path.insert(0, self.directory)
        self.addCleanup(sys.path.remove, self.directory)
        for name in ("", ".first", ".second", ".systools"):
            self.addCleanup(sys.modules.pop, "salttwist_lazy_modules" + name, None)
        self.addCleanup(lambda: sys.__dict__.pop("lazy_loaded", None))
        self.sys = sys

    def functions(self) -> Any:
        from salttwist.modules import LazyFunctions

        return LazyFunctions("salttwist_lazy_modules", ("first", "second", "systools"))

    def loaded(self) -> list[str]:
        return [m for m in self.sys.__dict__.get("lazy_loaded", []) if m != "__init__"]

    def test_nothingImportedUntilLookedUp(self) -> None:
        """
        Making the mapping imports no module.
        """
        self.functions()
        self.assertEqual(self.loaded(), [])

    def test_lookupImportsItsModuleOnly(self) -> None:
        """
        Looking up C{first.one} imports C{first} alone, and gives its
        function, which works.
        """
        functions = self.functions()
        self.assertEqual(functions["first.one"](), 1)
        self.assertEqual(functions.get("first.one")(), 1)
        self.assertEqual(self.loaded(), ["first"])
        self.assertEqual(functions.loaded(), ["first"])

    def test_virtualNameImportsTheRest(self) -> None:
        """
        A name whose module is not named so (C{tools.*} is in C{systools})
        is found by importing the other modules.
        """
        functions = self.functions()
        self.assertEqual(functions["tools.three"](), 3)
        self.assertEqual(sorted(self.loaded()), ["first", "second", "systools"])

    def test_missingName(self) -> None:
        """
        A function no module has is missing after every module was
        imported: C{get} gives L{None}, indexing raises L{KeyError}.
        """
        functions = self.functions()
        self.assertIsNone(functions.get("first.nope"))
        self.assertRaises(KeyError, functions.__getitem__, "nothing.here")
        self.assertNotIn("first._hidden", functions)
        self.assertEqual(sorted(self.loaded()), ["first", "second", "systools"])

    def test_listingLoadsAll(self) -> None:
        """
        Listing or counting the functions imports every module and gives
        what L{publicFunctions} gives.
        """
        from salttwist.modules import publicFunctions

        functions = self.functions()
        self.assertEqual(len(functions), 3)
        expected = publicFunctions("salttwist_lazy_modules", ("first", "second", "systools"))
        self.assertEqual(dict(functions), expected)
        self.assertEqual(sorted(functions), ["first.one", "second.two", "tools.three"])

    def test_setNameKept(self) -> None:
        """
        A function set by name is kept when its module is imported later,
        and can be deleted.
        """
        functions = self.functions()
        functions["first.one"] = lambda: "mine"
        functions["extra.fun"] = lambda: "extra"
        self.assertEqual(functions["first.one"](), "mine")
        self.assertEqual(len(functions), 4)
        self.assertEqual(functions["first.one"](), "mine")
        del functions["extra.fun"]
        self.assertNotIn("extra.fun", functions)

    def test_realModules(self) -> None:
        """
        L{loadFunctions} has the same functions as the eager
        L{publicFunctions} over L{MODULES}; C{test.ping} is found by
        importing only C{test}.
        """
        from salttwist.modules import publicFunctions

        functions = loadFunctions()
        self.assertTrue(functions["test.ping"]())
        self.assertEqual(functions.loaded(), ["test"])
        self.assertEqual(dict(functions), publicFunctions("salttwist.modules", MODULES))
