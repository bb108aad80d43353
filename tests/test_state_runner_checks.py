"""
Tests for the run conditions of L{salttwist.state.runner} with real
commands: C{unless}, C{onlyif}, C{creates} and C{check_cmd} through the
real C{cmd.retcode} and a real shell, the runner in a thread as a state
run is.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.state.runner import StateRunner
from salttwist.states import StateContext, loadStates
from tests._statectx import makeStateContext
from tests.test_state_runner import chunk


class RealConditionsTests(TestCase):
    def setUp(self) -> None:
        self.base = makeStateContext()
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.written: list[str] = []

        def touch(ctx: StateContext, name: str) -> dict[str, Any]:
            with open(name, "w") as f:
                f.write("x")
            self.written.append(name)
            return {"name": name, "result": True, "changes": {"new": name}, "comment": "written"}

        self.states: dict[str, Any] = {"rec.touch": touch}
        testStates = loadStates(("test",))
        for key in list(testStates):
            self.states[key] = testStates[key]

    def contextFor(self, low: dict[str, Any]) -> StateContext:
        return dataclasses.replace(self.base, low=low)

    def runChunks(self, chunks: list[dict[str, Any]]) -> Any:
        runner = StateRunner(self.states, self.contextFor)
        return deferToThread(runner.run, chunks)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    @inlineCallbacks
    def test_unless(self) -> Any:
        """
        C{unless} runs its shell command; exit 0 skips the state.
        """
        exists, missing = self.path("exists"), self.path("missing")
        with open(exists, "w"):
            pass
        ret = yield self.runChunks(
            [
                chunk("rec", "touch", "a", name=self.path("a"), unless=f"test -e {exists}"),
                chunk("rec", "touch", "b", name=self.path("b"), unless=f"test -e {missing}"),
            ]
        )
        self.assertEqual(self.written, [self.path("b")])
        skipped = ret[f"rec_|-a_|-{self.path('a')}_|-touch"]
        self.assertEqual(skipped["comment"], "unless condition is true")
        self.assertIs(skipped["result"], True)
        self.assertFalse(os.path.exists(self.path("a")))

    @inlineCallbacks
    def test_onlyifShell(self) -> Any:
        """
        C{onlyif} commands go through the shell (pipes, C{&&}), in the
        chunk's C{cwd}.
        """
        with open(self.path("flag"), "w"):
            pass
        ret = yield self.runChunks(
            [
                chunk(
                    "rec",
                    "touch",
                    "a",
                    name=self.path("a"),
                    onlyif="test -e flag && echo ok | grep -q ok",
                    cwd=self.dir,
                ),
                chunk("rec", "touch", "b", name=self.path("b"), onlyif=["true", "exit 3"]),
            ]
        )
        self.assertEqual(self.written, [self.path("a")])
        self.assertEqual(
            ret[f"rec_|-b_|-{self.path('b')}_|-touch"]["comment"], "onlyif condition is false"
        )

    @inlineCallbacks
    def test_functionForm(self) -> Any:
        """
        C{onlyif} with Salt's C{fun:} form calls a real execution function.
        """
        with open(self.path("there"), "w"):
            pass
        yield self.runChunks(
            [
                chunk(
                    "rec",
                    "touch",
                    "a",
                    name=self.path("a"),
                    onlyif=[{"fun": "file.file_exists", "path": self.path("there")}],
                ),
                chunk(
                    "rec",
                    "touch",
                    "b",
                    name=self.path("b"),
                    onlyif=[{"fun": "file.file_exists", "path": self.path("nope")}],
                ),
            ]
        )
        self.assertEqual(self.written, [self.path("a")])

    @inlineCallbacks
    def test_createsAfterFirstRun(self) -> Any:
        """
        C{creates}: a second run skips the state whose file the first
        created.
        """
        target = self.path("made")
        low = chunk("rec", "touch", "a", name=target, creates=target)
        yield self.runChunks([low])
        ret = yield self.runChunks([low])
        self.assertEqual(self.written, [target])
        self.assertEqual(ret[f"rec_|-a_|-{target}_|-touch"]["comment"], f"{target} exists")

    @inlineCallbacks
    def test_checkCmd(self) -> Any:
        """
        C{check_cmd} runs after the state and decides its result.
        """
        target = self.path("checked")
        ret = yield self.runChunks(
            [
                chunk("rec", "touch", "a", name=target, check_cmd=f"test -s {target}"),
                chunk(
                    "rec",
                    "touch",
                    "b",
                    name=self.path("b"),
                    check_cmd=["true", f"test -e {self.path('none')}"],
                ),
            ]
        )
        self.assertIs(ret[f"rec_|-a_|-{target}_|-touch"]["result"], True)
        self.assertEqual(
            ret[f"rec_|-a_|-{target}_|-touch"]["comment"],
            "check_cmd determined the state succeeded",
        )
        self.assertIs(ret[f"rec_|-b_|-{self.path('b')}_|-touch"]["result"], False)
