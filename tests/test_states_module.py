"""
Tests for L{salttwist.states.module}: real execution functions called
through both of Salt's forms of C{module.run}.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.states._keywords import STATE_KEYWORDS, stateArguments
from salttwist.states.module import _result
from tests._statectx import runState


class CurrentFormTests(TestCase):
    """
    C{module.run} with functions as arguments.
    """

    async def test_ping(self) -> None:
        """
        C{- test.ping: []}: the return is the change, the comment Salt's.
        """
        ret = await runState("module.run", "ping it", **{"test.ping": []})
        self.assertEqual(
            ret,
            {
                "name": ["test.ping"],
                "result": True,
                "changes": {"test.ping": True},
                "comment": "test.ping: True",
            },
        )

    async def test_arguments(self) -> None:
        """
        Plain values are positional, one-key maps keywords; a map naming a
        required parameter takes its place. Several functions run in
        order.
        """
        target = os.path.abspath(self.mktemp())
        ret = await runState(
            "module.run",
            "x",
            **{
                "test.arg": ["a", "b", {"k": "v"}],
                "cmd.run": [{"cmd": f"echo made > {target}"}],
                "test.echo": [{"text": "hi"}],
            },
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"]["test.arg"], {"args": ["a", "b"], "kwargs": {"k": "v"}})
        self.assertEqual(ret["changes"]["test.echo"], "hi")
        with open(target) as f:
            self.assertEqual(f.read(), "made\n")
        self.assertEqual(ret["comment"].split(", ")[-1], "test.echo: hi")

    async def test_dictArguments(self) -> None:
        """
        A map of arguments works as a list of one-key maps.
        """
        ret = await runState("module.run", "x", **{"test.echo": {"text": "m"}})
        self.assertEqual(ret["changes"], {"test.echo": "m"})

    async def test_falseFails(self) -> None:
        """
        A C{False} return fails the state; a non-zero C{retcode} in a map
        too.
        """
        ret = await runState("module.run", "x", **{"file.file_exists": ["/nonexistent/x"]})
        self.assertEqual((ret["result"], ret["comment"]), (False, "'file.file_exists': False"))
        ret = await runState("module.run", "x", **{"cmd.run_all": ["exit 2"]})
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["comment"], "'cmd.run_all' failed: (error message N/A)")

    async def test_exception(self) -> None:
        """
        An exception fails the state with its message; a missing argument
        likewise.
        """
        ret = await runState("module.run", "x", **{"test.exception": ["boom"]})
        self.assertEqual((ret["result"], ret["comment"]), (False, "'test.exception' failed: boom"))
        ret = await runState("module.run", "x", **{"test.echo": []})
        self.assertIs(ret["result"], False)
        self.assertIn("'test.echo' failed:", ret["comment"])
        self.assertIn("text", ret["comment"])

    async def test_unavailable(self) -> None:
        """
        An unknown function: Salt's words, nothing run.
        """
        ret = await runState("module.run", "x", **{"nope.nope": [], "test.ping": []})
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, "Unavailable function: nope.nope.")
        )

    async def test_testMode(self) -> None:
        """
        Test mode calls nothing.
        """
        target = os.path.abspath(self.mktemp())
        ret = await runState(
            "module.run", "x", test=True, **{"cmd.run": [f"touch {target}"], "test.ping": []}
        )
        self.assertEqual(
            (ret["result"], ret["comment"]), (None, "Functions cmd.run, test.ping to be executed.")
        )
        self.assertFalse(os.path.exists(target))

    async def test_requisitesIgnored(self) -> None:
        """
        Requisites and internal keys that reach the function are not taken
        for functions (nor for the legacy form).
        """
        ret = await runState(
            "module.run",
            "x",
            require=[{"file": "y"}],
            __id__="x",
            sfun="run",
            **{"test.ping": []},
        )
        self.assertEqual(ret["changes"], {"test.ping": True})

    async def test_duplicateSuffix(self) -> None:
        """
        C{func:suffix} calls C{func} again (Salt's way to call one twice).
        """
        ret = await runState(
            "module.run", "x", **{"test.echo": ["one"], "test.echo:again": ["two"]}
        )
        self.assertEqual(ret["changes"], {"test.echo": "one", "test.echo:again": "two"})


class LegacyFormTests(TestCase):
    """
    C{module.run} with C{name} the function.
    """

    async def test_arg(self) -> None:
        """
        C{args} and C{kwargs} go to C{*args} and C{**kwargs}; changes are
        C{{"ret": ...}}.
        """
        ret = await runState("module.run", "test.arg", args=[1, 2], kwargs={"a": "b"})
        self.assertEqual(
            ret,
            {
                "name": "test.arg",
                "result": True,
                "changes": {"ret": {"args": [1, 2], "kwargs": {"a": "b"}}},
                "comment": "Module function test.arg executed",
            },
        )

    async def test_namedArguments(self) -> None:
        """
        The function's own parameters are the state's arguments, C{m_name}
        for one called C{name}; defaults fill the rest.
        """
        ret = await runState("module.run", "test.echo", text="hello")
        self.assertEqual(ret["changes"], {"ret": "hello"})
        ret = await runState("module.run", "cmd.run", cmd="echo legacy")
        self.assertEqual(ret["changes"], {"ret": "legacy"})

    async def test_missingArgument(self) -> None:
        """
        A required argument not given: Salt's words.
        """
        ret = await runState("module.run", "test.echo")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "The following arguments are missing: text"),
        )

    async def test_unavailable(self) -> None:
        """
        An unknown function: Salt's words.
        """
        ret = await runState("module.run", "nope.nope")
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, "Module function nope.nope is not available")
        )

    async def test_exception(self) -> None:
        """
        An exception fails the state.
        """
        ret = await runState("module.run", "test.exception", message="bad")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "Module function test.exception threw an exception. Exception: bad"),
        )

    async def test_falseReturn(self) -> None:
        """
        A C{False} return fails the state, the return still shown.
        """
        ret = await runState("module.run", "file.file_exists", path="/nonexistent/y")
        self.assertEqual((ret["result"], ret["changes"]), (False, {"ret": False}))

    async def test_testMode(self) -> None:
        """
        Test mode: Salt's words, nothing called.
        """
        ret = await runState("module.run", "test.echo", text="x", test=True)
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (None, "Module function test.echo is set to execute", {}),
        )


class WaitTests(TestCase):
    """
    C{module.wait} and C{module.mod_watch}.
    """

    async def test_wait(self) -> None:
        """
        C{module.wait} calls nothing.
        """
        target = os.path.abspath(self.mktemp())
        ret = await runState("module.wait", "x", **{"cmd.run": [f"touch {target}"]})
        self.assertEqual((ret["result"], ret["changes"]), (True, {}))
        self.assertFalse(os.path.exists(target))

    async def test_modWatch(self) -> None:
        """
        C{mod_watch} calls the functions, whatever C{sfun}.
        """
        target = os.path.abspath(self.mktemp())
        ret = await runState(
            "module.mod_watch", "x", sfun="wait", **{"cmd.run": [f"touch {target}"]}
        )
        self.assertIs(ret["result"], True, ret)
        self.assertTrue(os.path.exists(target))


class HelperTests(SynchronousTestCase):
    """
    The result rule and the keywords left out.
    """

    def test_result(self) -> None:
        """
        Salt's reading of a return.
        """
        self.assertIs(_result(False), False)
        self.assertIs(_result(None), True)
        self.assertIs(_result({"a": {"result": False}}), False)
        self.assertIs(_result({"retcode": 1}), False)
        self.assertIs(_result({"retcode": 0, "x": {}}), True)
        self.assertIs(_result(""), True)

    def test_stateArguments(self) -> None:
        """
        Requisites, runner keys and C{__x__} keys are dropped.
        """
        self.assertEqual(
            stateArguments({"require_in": 1, "onlyif": 2, "__sls__": 3, "text": 4}), {"text": 4}
        )
        self.assertIn("watch_any", STATE_KEYWORDS)
