"""
Tests for L{salttwist.states.test}, Salt's C{test} state module, called as
a state run calls it (in a thread, with a real L{StateContext}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.states import StateContext
from salttwist.states import test as teststate
from tests._statectx import makeStateContext, runState

CHANGES = {"testing": {"old": "Unchanged", "new": "Something pretended to change"}}


def ctx(test: bool = False, **kwargs: Any) -> StateContext:
    return StateContext(salt={}, opts={}, test=test, **kwargs)


class SimpleStatesTests(SynchronousTestCase):
    def test_nop(self) -> None:
        """
        C{nop} succeeds without changes, whatever its arguments.
        """
        self.assertEqual(
            teststate.nop(ctx(), "foo", something="else"),
            {"name": "foo", "changes": {}, "result": True, "comment": "Success!"},
        )

    def test_succeedWithoutChanges(self) -> None:
        """
        C{succeed_without_changes} succeeds, in test mode too; C{comment}
        may be given.
        """
        for test in (False, True):
            ret = teststate.succeed_without_changes(ctx(test), "foo", comment="fine")
            self.assertEqual(ret, {"name": "foo", "changes": {}, "result": True, "comment": "fine"})

    def test_failWithoutChanges(self) -> None:
        """
        C{fail_without_changes} fails; in test mode with Salt's comment.
        """
        self.assertEqual(
            teststate.fail_without_changes(ctx(), "foo"),
            {"name": "foo", "changes": {}, "result": False, "comment": "Failure!"},
        )
        ret = teststate.fail_without_changes(ctx(True), "foo")
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["comment"], "If we weren't testing, this would be a failure!")

    def test_succeedWithChanges(self) -> None:
        """
        C{succeed_with_changes} reports Salt's pretend changes; in test
        mode C{result: None}.
        """
        self.assertEqual(
            teststate.succeed_with_changes(ctx(), "foo"),
            {"name": "foo", "changes": CHANGES, "result": True, "comment": "Success!"},
        )
        self.assertEqual(
            teststate.succeed_with_changes(ctx(True), "foo"),
            {
                "name": "foo",
                "changes": CHANGES,
                "result": None,
                "comment": "If we weren't testing, this would be successful with changes",
            },
        )

    def test_failWithChanges(self) -> None:
        """
        C{fail_with_changes} fails with changes; in test mode C{None}.
        """
        self.assertEqual(
            teststate.fail_with_changes(ctx(), "foo"),
            {"name": "foo", "changes": CHANGES, "result": False, "comment": "Failure!"},
        )
        ret = teststate.fail_with_changes(ctx(True), "foo")
        self.assertIsNone(ret["result"])
        self.assertEqual(ret["comment"], "If we weren't testing, this would be failed with changes")

    def test_showNotification(self) -> None:
        """
        C{show_notification} succeeds with its text; without text it is
        an error.
        """
        self.assertEqual(
            teststate.show_notification(ctx(), "n", text="hello"),
            {"name": "n", "changes": {}, "result": True, "comment": "hello"},
        )
        error = self.assertRaises(ValueError, teststate.show_notification, ctx(), "n")
        self.assertEqual(str(error), "Missing required argument text.")


class ConfigurableTests(SynchronousTestCase):
    def test_defaults(self) -> None:
        """
        By default: changes, result True, empty comment.
        """
        self.assertEqual(
            teststate.configurable_test_state(ctx(), "c"),
            {"name": "c", "changes": CHANGES, "result": True, "comment": ""},
        )

    def test_chosen(self) -> None:
        """
        C{changes}, C{result}, C{comment} and C{warnings} are as given.
        """
        ret = teststate.configurable_test_state(
            ctx(), "c", changes=False, result=False, comment="bar.baz", warnings="A warning"
        )
        self.assertEqual(
            ret,
            {
                "name": "c",
                "changes": {},
                "result": False,
                "comment": "bar.baz",
                "warnings": ["A warning"],
            },
        )
        ret = teststate.configurable_test_state(ctx(), "c", warnings=["a", "b"])
        self.assertEqual(ret["warnings"], ["a", "b"])

    def test_random(self) -> None:
        """
        C{"Random"} picks changes and result at random.
        """
        seen = set()
        for _ in range(64):
            ret = teststate.configurable_test_state(ctx(), "c", changes="Random", result="random")
            seen.add((bool(ret["changes"]), ret["result"]))
        self.assertEqual(len(seen), 4)

    def test_testMode(self) -> None:
        """
        In test mode: C{None} with changes, C{True} without, C{False}
        only with C{allow_test_mode_failure}; an empty comment is
        C{"This is a test"}.
        """
        ret = teststate.configurable_test_state(ctx(True), "c", result=False)
        self.assertIsNone(ret["result"])
        self.assertEqual(ret["comment"], "This is a test")
        ret = teststate.configurable_test_state(ctx(True), "c", changes=False, comment="x")
        self.assertIs(ret["result"], True)
        self.assertEqual(ret["comment"], "x")
        ret = teststate.configurable_test_state(
            ctx(True), "c", result=False, allow_test_mode_failure=True
        )
        self.assertIs(ret["result"], False)

    def test_badArguments(self) -> None:
        """
        Values other than True, False or "Random" are refused in Salt's
        words.
        """
        error = self.assertRaises(
            ValueError, teststate.configurable_test_state, ctx(), "c", changes="maybe"
        )
        self.assertIn("'changes' with invalid arguments", str(error))
        error = self.assertRaises(
            ValueError, teststate.configurable_test_state, ctx(), "c", result="maybe"
        )
        self.assertIn("'result' with invalid arguments", str(error))
        error = self.assertRaises(
            ValueError, teststate.configurable_test_state, ctx(), "c", warnings=3
        )
        self.assertIn("'warnings' with invalid arguments", str(error))


class ModWatchTests(SynchronousTestCase):
    def test_changedRequisites(self) -> None:
        """
        C{mod_watch} lists the watched states that changed.
        """
        a = {"state": "test", "__id__": "a", "name": "a", "fun": "succeed_with_changes"}
        b = {"state": "test", "__id__": "b", "name": "b", "fun": "nop"}
        low = {
            "__reqs__": {"watch": [a, b]},
            "__running__": {
                "test_|-a_|-a_|-succeed_with_changes": {"changes": {"x": 1}},
                "test_|-b_|-b_|-nop": {"changes": {}},
            },
        }
        ret = teststate.mod_watch(ctx(low=low), "w", sfun="nop")
        self.assertEqual(
            ret,
            {
                "name": "w",
                "result": True,
                "comment": "Watch statement fired.",
                "changes": {"Requisites with changes": ["test: a"]},
            },
        )

    def test_overrides(self) -> None:
        """
        C{result}, C{comment} and C{changes} may be given.
        """
        ret = teststate.mod_watch(ctx(), "w", result=False, comment="no", changes={"a": 1})
        self.assertEqual(ret, {"name": "w", "result": False, "comment": "no", "changes": {"a": 1}})


class CheckPillarTests(TestCase):
    @inlineCallbacks
    def test_checkPillar(self) -> Any:
        """
        C{check_pillar} checks presence and types of pillar keys through
        C{pillar.get}.
        """
        context = makeStateContext(pillar={"foo": 1, "bar": "x", "lst": [1]})
        ret = yield runState(
            "test.check_pillar",
            "p",
            ctx=context,
            present=["foo", "gone"],
            integer="bar",
            listing=["lst"],
        )
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            'Pillar key "gone" is missing.\nPillar key "bar" is not <class \'int\'>.\n',
        )
        ok = yield runState("test.check_pillar", "p", ctx=context, integer="foo", verbose=True)
        self.assertIs(ok["result"], True)
        self.assertEqual(ok["comment"], "Those keys passed the check:\n- foo (<class 'int'>)\n")

    def test_nothingToCheck(self) -> None:
        """
        Without keys to check it is an error.
        """
        self.assertRaises(ValueError, teststate.check_pillar, ctx(), "p")
