# -*- test-case-name: tests.test_states_cmd_call -*-
"""
Tests for L{salttwist.states.cmd}'s C{cmd.call} and C{cmd.wait_call}:
Python functions given by the state's data, called directly and from a
real C{#!py} SLS run by a state run.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.state import apply as stateapply
from salttwist.states import loadStates
from tests._statectx import makeStateContext
from tests.test_state_apply import ApplyTestCase, writeTree


def runState(name: str, *args: Any, test: bool = False, **kwargs: Any) -> Any:
    """
    Call a state function in a thread, as a state run does (keyword
    arguments passed through a closure: C{deferToThread} takes C{func}
    itself).
    """
    function = loadStates()[name]
    ctx = makeStateContext(test=test)
    return deferToThread(lambda: function(ctx, *args, **kwargs))


class CallTests(TestCase):
    """
    C{cmd.call}, C{cmd.wait_call} and C{cmd.mod_watch} of them.
    """

    def setUp(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def record(self, value: Any) -> Any:
        """
        @return: a function recording its arguments and returning C{value}.
        """

        def function(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((args, kwargs))
            return value

        return function

    async def test_returnValues(self) -> None:
        """
        A value other than a mapping is C{changes["retval"]}; the result is
        its truth (C{True} for L{None}) and a string is the comment too.
        """
        ret = await runState("cmd.call", "c", func=self.record("done"), args=[1, 2], kws={"k": 3})
        self.assertEqual(
            ret, {"name": "c", "changes": {"retval": "done"}, "result": True, "comment": "done"}
        )
        self.assertEqual(self.calls, [((1, 2), {"k": 3})])
        ret = await runState("cmd.call", "c", func=self.record(None))
        self.assertEqual(
            ret, {"name": "c", "changes": {"retval": None}, "result": True, "comment": ""}
        )
        ret = await runState("cmd.call", "c", func=self.record(0))
        self.assertEqual(ret["result"], False)
        self.assertEqual(ret["changes"], {"retval": 0})

    async def test_mapping(self) -> None:
        """
        A mapping returned is laid over the default return.
        """
        ret = await runState(
            "cmd.call", "c", func=self.record({"result": True, "comment": "mine"}), args=("a",)
        )
        self.assertEqual(ret, {"name": "c", "changes": {}, "result": True, "comment": "mine"})

    async def test_testMode(self) -> None:
        """
        As in Salt, the function is called in test mode too, and the
        C{cmd.run} options are accepted and ignored.
        """
        ret = await runState(
            "cmd.call", "c", func=self.record(True), test=True, cwd="/nonexistent", stateful=True
        )
        self.assertEqual(ret["result"], True)
        self.assertEqual(len(self.calls), 1)

    async def test_badArguments(self) -> None:
        """
        A C{func} that is not callable (a string from YAML), C{args} that is
        not a list or C{kws} not a mapping fail the state saying so.
        """
        ret = await runState("cmd.call", "c", func="os.getcwd")
        self.assertEqual(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "cmd.call needs a Python callable as func, not str "
            "(it is for SLS files rendered by the py renderer)",
        )
        ret = await runState("cmd.call", "c", func=self.record(1), args="ab")
        self.assertEqual(ret["comment"], "cmd.call's args must be a list, not str")
        ret = await runState("cmd.call", "c", func=self.record(1), kws=[1])
        self.assertEqual(ret["comment"], "cmd.call's kws must be a mapping, not list")
        self.assertEqual(self.calls, [])

    async def test_raises(self) -> None:
        """
        An exception from the function reaches the caller (the state
        runner turns it into a failed state).
        """

        def boom() -> None:
            raise ValueError("boom")

        d = runState("cmd.call", "c", func=boom)
        await self.assertFailure(d, ValueError)

    async def test_waitCall(self) -> None:
        """
        C{cmd.wait_call} calls nothing; C{mod_watch} of C{wait_call} or
        C{call} calls the function, and without C{func} fails as Salt's.
        """
        ret = await runState("cmd.wait_call", "c", func=self.record(1))
        self.assertEqual(ret, {"name": "c", "changes": {}, "result": True, "comment": ""})
        self.assertEqual(self.calls, [])
        ret = await runState("cmd.mod_watch", "c", sfun="wait_call", func=self.record(7))
        self.assertEqual(ret["changes"], {"retval": 7})
        self.assertEqual(len(self.calls), 1)
        ret = await runState("cmd.mod_watch", "c", sfun="call")
        self.assertEqual(
            ret,
            {
                "name": "c",
                "changes": {},
                "result": False,
                "comment": "cmd.call needs a named parameter func",
            },
        )


PY_SLS = """\
#!py
import os


def touch(path, mode=None):
    with open(path, "w") as f:
        f.write("called")
    return {"result": True, "comment": "touched", "changes": {"path": path}}


def fail():
    raise RuntimeError("the function failed")


def run():
    out = pillar["out"]
    return {
        "made": {"cmd.call": [{"func": touch}, {"args": [os.path.join(out, "made")]}]},
        "watcher": {
            "cmd.wait_call": [
                {"func": touch},
                {"args": [os.path.join(out, "watched")]},
                {"watch": [{"cmd": "made"}]},
            ]
        },
        "broken": {"cmd.call": [{"func": fail}]},
    }
"""


class PySlsTests(ApplyTestCase):
    """
    C{cmd.call} from a C{#!py} SLS, through a whole state run.
    """

    def setUp(self) -> None:
        super().setUp()
        writeTree(self.base, {"pycall.sls": PY_SLS})

    async def test_run(self) -> None:
        """
        The function is called with its arguments; a C{cmd.wait_call}
        watching it is called by C{mod_watch}; a function raising fails
        its state.
        """
        ret = await deferToThread(stateapply.sls, self.makeRun(), "pycall")
        byId = {value["__id__"]: value for value in ret.values()}
        self.assertEqual(byId["made"]["result"], True)
        self.assertEqual(byId["made"]["comment"], "touched")
        self.assertEqual(byId["watcher"]["result"], True)
        for name in ("made", "watched"):
            with open(os.path.join(self.out, name)) as f:
                self.assertEqual(f.read(), "called")
        self.assertEqual(byId["broken"]["result"], False)
        self.assertIn("the function failed", byId["broken"]["comment"])
