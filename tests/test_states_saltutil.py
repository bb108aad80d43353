# -*- test-case-name: tests.test_states_saltutil -*-
"""
Tests for L{salttwist.states.saltutil} (the C{saltutil.sync_*} states) and
for custom state modules synced or written during a state run: the states
after the sync or the module reload use them
(L{salttwist.state.runafter.refreshAfter},
L{salttwist.state.extstates.refreshStates}).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from typing import Any

from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.state.extstates import refreshStates, stateFunctions
from salttwist.state.runafter import refreshAfter, syncsModules
from salttwist.states import StateContext, loadStates, saltutil

CUSTOM = """\
def present(name):
    return {"name": name, "result": True, "changes": {"custom": name}, "comment": "custom ran"}
"""

OTHER = """\
def present(name):
    return {"name": name, "result": True, "changes": {}, "comment": "other ran"}
"""

RELOAD_SLS = """\
sync:
  saltutil.sync_states: []

use_synced:
  mycustom.present:
    - require:
      - saltutil: sync

write_module:
  file.managed:
    - name: {ext}/states/other.py
    - makedirs: True
    - contents: |
{other}

use_written:
  other.present:
    - require:
      - file: write_module

write_late:
  file.managed:
    - name: {srv}/_states/late.py
    - contents: |
{late}

module_run_sync:
  module.run:
    - name: saltutil.sync_states
    - require:
      - file: write_late

use_late:
  late.present:
    - require:
      - module: module_run_sync
"""


class ReloadDuringRunTests(TestCase):
    """
    A masterless C{salttwist-call --local state.sls} (a real process) whose
    run syncs C{_states} and writes a state module into
    C{extension_modules/states}, then uses them.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.srv = os.path.join(self.root, "srv")
        self.ext = os.path.join(self.root, "ext")
        os.makedirs(os.path.join(self.srv, "_states"))
        with open(os.path.join(self.srv, "_states", "mycustom.py"), "w") as f:
            f.write(CUSTOM)
        other = textwrap.indent(OTHER, " " * 8)
        with open(os.path.join(self.srv, "reload.sls"), "w") as f:
            late = textwrap.indent(OTHER.replace("other ran", "late ran"), " " * 8)
            f.write(RELOAD_SLS.format(ext=self.ext, srv=self.srv, other=other, late=late))
        with open(os.path.join(self.root, "minion"), "w") as f:
            f.write(
                f"root_dir: {self.root}\nid: caller1\nextension_modules: {self.ext}\n"
                f"file_roots:\n  base:\n    - {self.srv}\n"
            )

    async def call(self, *args: str) -> tuple[int, Any]:
        out, err, code = await getProcessOutputAndValue(
            sys.executable,
            ["-m", "salttwist.cli.call", "-c", self.root, "--local", *args, "--out", "json"],
            env=dict(os.environ),
        )
        return code, json.loads(out)["local"] if out else err

    async def test_syncedAndWrittenStatesUsed(self) -> None:
        """
        A C{saltutil.sync_states} state brings C{mycustom}, a
        C{file.managed} of a C{.py} (a module reload, as Salt's) brings
        C{other}: the states after them run those modules. A
        C{module.run} of C{saltutil.sync_states} brings C{late}, put in
        the roots by a state of the run.
        """
        code, returns = await self.call("state.sls", "reload")
        self.assertEqual(code, 0, returns)
        byId = {entry["__id__"]: entry for entry in returns.values()}
        self.assertEqual(byId["sync"]["changes"], {"states": ["states.mycustom"]})
        self.assertEqual(byId["sync"]["comment"], "Updated states.")
        self.assertEqual(byId["use_synced"]["comment"], "custom ran")
        self.assertIs(byId["use_synced"]["result"], True)
        self.assertEqual(byId["use_written"]["comment"], "other ran")
        self.assertEqual(byId["use_late"]["comment"], "late ran")
        self.assertTrue(all(entry["result"] is True for entry in returns.values()), returns)


class SyncStateTests(SynchronousTestCase):
    """
    The C{saltutil.sync_*} states over recorded execution functions.
    """

    def context(self, test: bool = False, fail: bool = False) -> StateContext:
        self.calls: list[tuple[str, dict[str, Any]]] = []

        def fake(name: str, value: Any) -> Any:
            def call(**kwargs: Any) -> Any:
                self.calls.append((name, kwargs))
                if fail:
                    raise OSError("no file server")
                return value

            return call

        functions = {
            "saltutil.sync_states": fake("saltutil.sync_states", ["states.a"]),
            "saltutil.sync_modules": fake("saltutil.sync_modules", []),
            "saltutil.sync_all": fake(
                "saltutil.sync_all", {"modules": [], "states": ["states.a"], "utils": []}
            ),
        }
        return StateContext(salt=functions, opts={}, test=test)

    def test_single(self) -> None:
        """
        A kind's state passes its arguments on; what it synced is the
        changes; nothing synced is no change.
        """
        ret = saltutil.sync_states(self.context(), "s", saltenv="dev", refresh=False)
        self.assertEqual(
            ret,
            {
                "name": "s",
                "result": True,
                "changes": {"states": ["states.a"]},
                "comment": "Updated states.",
            },
        )
        self.assertEqual(
            self.calls, [("saltutil.sync_states", {"refresh": False, "saltenv": "dev"})]
        )
        ret = saltutil.sync_modules(self.context(), "m")
        self.assertEqual((ret["changes"], ret["comment"]), ({}, "No updates to sync"))

    def test_all(self) -> None:
        """
        C{sync_all}: the kinds that synced something are the changes.
        """
        ret = saltutil.sync_all(self.context(), "all")
        self.assertEqual(ret["changes"], {"states": ["states.a"]})
        self.assertEqual(ret["comment"], "Sync performed")

    def test_testMode(self) -> None:
        """
        In test mode nothing is synced: Salt's comment, result None.
        """
        ret = saltutil.sync_states(self.context(test=True), "s")
        self.assertEqual(
            (ret["result"], ret["comment"]), (None, "saltutil.sync_states would have been run")
        )
        ret = saltutil.sync_all(self.context(test=True), "s")
        self.assertEqual(ret["comment"], "saltutil.sync_all would have been run")
        self.assertEqual(self.calls, [])

    def test_failure(self) -> None:
        """
        A sync that raises fails the state, saying why.
        """
        ret = saltutil.sync_states(self.context(fail=True), "s")
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, "Failed to run sync_states: no file server")
        )
        ret = saltutil.sync_all(self.context(fail=True), "s")
        self.assertEqual(ret["comment"], "Failed to run sync_all: no file server")

    def test_loaded(self) -> None:
        """
        The module is one of the built-in state modules.
        """
        states = loadStates()
        for kind in ("all", "states", "modules", "grains", "utils"):
            self.assertIn(f"saltutil.sync_{kind}", states)


class RefreshStatesTests(SynchronousTestCase):
    """
    L{refreshStates} and when L{refreshAfter} calls it.
    """

    def setUp(self) -> None:
        self.ext = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(self.ext, "states"))
        self.opts = {"extension_modules": self.ext, "id": "m1"}

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.ext, "states", f"{name}.py"), "w") as f:
            f.write(text)

    def test_inPlace(self) -> None:
        """
        A run's mapping gains the state modules written since it was
        made, in place; nothing new is no change.
        """
        states = stateFunctions(self.opts)
        self.assertNotIn("mycustom.present", states)
        self.assertFalse(refreshStates(states, self.opts))
        self.write("mycustom", CUSTOM)
        self.assertTrue(refreshStates(states, self.opts))
        self.assertIn("mycustom.present", states)
        self.assertIn("test.nop", states)

    def test_notLazy(self) -> None:
        """
        A plain mapping (a test's) is left alone.
        """
        self.assertFalse(refreshStates({}, self.opts))

    def test_syncsModules(self) -> None:
        """
        The chunks that sync custom modules: C{saltutil.sync_*} states,
        C{module.run} of a C{saltutil.sync_*} function in either syntax.
        """
        self.assertTrue(syncsModules({"state": "saltutil", "fun": "sync_all"}))
        self.assertTrue(
            syncsModules({"state": "module", "fun": "run", "name": "saltutil.sync_states"})
        )
        self.assertTrue(
            syncsModules({"state": "module", "fun": "run", "name": "x", "saltutil.sync_all": []})
        )
        self.assertFalse(syncsModules({"state": "module", "fun": "run", "name": "test.ping"}))
        self.assertFalse(syncsModules({"state": "cmd", "fun": "run", "name": "saltutil.sync_x"}))

    def test_afterSyncState(self) -> None:
        """
        After a sync state that changed something, the context's state
        functions see the new module, without a module reload; one that
        changed nothing leaves them.
        """
        states = stateFunctions(self.opts)
        ctx = StateContext(salt={}, opts=self.opts, states=states)
        self.write("mycustom", CUSTOM)
        low = {"state": "saltutil", "fun": "sync_states", "name": "s"}
        self.assertEqual(refreshAfter(ctx, low, {"changes": {}}), [])
        self.assertNotIn("mycustom.present", states)
        self.assertEqual(refreshAfter(ctx, low, {"changes": {"states": ["states.mycustom"]}}), [])
        self.assertIn("mycustom.present", states)

    def test_afterReload(self) -> None:
        """
        A module reload (C{reload_modules}) loads the state modules again.
        """
        reloaded: list[bool] = []
        states = stateFunctions(self.opts)
        ctx = StateContext(
            salt={"saltutil.refresh_modules": lambda: reloaded.append(True)},
            opts=self.opts,
            states=states,
        )
        self.write("other", OTHER)
        low = {"state": "cmd", "fun": "run", "name": "true", "reload_modules": True}
        self.assertEqual(
            refreshAfter(ctx, low, {"changes": {"retcode": 0}}), ["saltutil.refresh_modules"]
        )
        self.assertEqual(reloaded, [True])
        self.assertIn("other.present", states)
