"""
The compiler's low chunks run by L{StateRunner}: SLS files compiled by
L{salttwist.state.compiler} (the contract between the two), each run's
order, results and comments as Salt 3008.5 gave them for the same SLS
(C{salt-call --local state.sls}, recorded here).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.config import loadMinionConfig
from salttwist.fileserver.server import FileServer
from salttwist.state.compiler import compileHigh, compileLow
from salttwist.state.runner import StateRunner
from salttwist.states import StateContext, loadStates

C1 = """\
A:
  test.succeed_with_changes:
    - require:
      - test: C
B:
  test.succeed_without_changes:
    - require_in:
      - test: A
C:
  test.fail_without_changes
D:
  test.succeed_without_changes:
    - onfail:
      - test: C
E:
  test.succeed_without_changes:
    - onchanges:
      - test: A
F:
  test.succeed_without_changes:
    - watch:
      - test: G
G:
  test.succeed_with_changes
H:
  test.succeed_without_changes:
    - onfail_all:
      - test: C
      - test: G
I:
  test.succeed_without_changes:
    - onfail_any:
      - test: C
      - test: G
J:
  test.succeed_without_changes:
    - require_any:
      - test: C
      - test: G
K:
  test.succeed_without_changes:
    - onchanges_any:
      - test: B
      - test: G
L:
  test.succeed_without_changes:
    - prereq:
      - test: G
M:
  test.nop:
    - listen:
      - test: G
N:
  test.configurable_test_state:
    - changes: False
    - result: True
O:
  test.succeed_without_changes:
    - watch_any:
      - test: C
      - test: G
"""

C2 = """\
stop1:
  test.succeed_without_changes:
    - prereq:
      - test: deploy1
deploy1:
  test.succeed_with_changes:
    - require:
      - test: fetch
fetch:
  test.succeed_with_changes
stop2:
  test.fail_without_changes:
    - prereq:
      - test: deploy2
deploy2:
  test.succeed_with_changes
stop3:
  test.succeed_with_changes:
    - prereq:
      - test: deploy3
deploy3:
  test.succeed_without_changes
stop4:
  test.succeed_with_changes:
    - prereq:
      - test: deploy4
deploy4:
  test.fail_without_changes
pre5:
  test.succeed_with_changes:
    - prereq:
      - test: mid5
mid5:
  test.succeed_with_changes:
    - prereq:
      - test: end5
end5:
  test.succeed_without_changes
w6:
  test.succeed_without_changes:
    - prereq:
      - test: t6
t6:
  test.succeed_without_changes:
    - watch:
      - test: fetch
chain_a:
  test.fail_with_changes
chain_b:
  test.succeed_without_changes:
    - require:
      - test: chain_a
chain_c:
  test.succeed_without_changes:
    - watch:
      - test: chain_b
      - test: fetch
chain_d:
  test.succeed_without_changes:
    - onfail:
      - test: chain_b
on7:
  test.succeed_without_changes:
    - onchanges:
      - test: chain_a
"""

C4 = """\
include:
  - c4lib
n:
  test.succeed_without_changes:
    - names:
      - one
      - two:
        - comment: second
    - require:
      - sls: c4lib
m:
  test.succeed_without_changes:
    - listen:
      - test: lib1
      - test: one
    - watch:
      - test: lib1
p:
  test.succeed_with_changes:
    - onfail:
      - sls: c4lib
q:
  test.nop:
    - listen:
      - test: p
r:
  test.fail_without_changes:
    - failhard: True
    - require:
      - test: p
s:
  test.succeed_without_changes
"""

C4LIB = """\
lib1:
  test.succeed_with_changes
lib2:
  test.fail_without_changes
"""

#: What Salt 3008.5 returned, in run order: (id, result, comment).
SALT_C1 = [
    ("B", True, "Success!"),
    ("C", False, "Failure!"),
    ("A", False, "One or more requisite failed: c1.C"),
    ("D", True, "Success!"),
    ("E", True, "State was not run because none of the onchanges reqs changed"),
    ("L", True, "Success!"),
    ("G", True, "Success!"),
    ("F", True, "Watch statement fired."),
    ("H", True, "State was not run because onfail req did not change"),
    ("I", True, "Success!"),
    ("J", True, "Success!"),
    ("K", True, "Success!"),
    ("M", True, "Success!"),
    ("N", True, ""),
    ("O", True, "Watch statement fired."),
    ("listener_M", True, "Watch statement fired."),
]

SALT_C2 = [
    ("fetch", True, "Success!"),
    ("stop1", True, "Success!"),
    ("deploy1", True, "Success!"),
    ("stop2", False, "Failure!"),
    ("deploy2", None, "If we weren't testing, this would be successful with changes"),
    ("stop3", True, "No changes detected"),
    ("deploy3", True, "Success!"),
    ("stop4", False, "One or more requisite failed: c2.deploy4"),
    ("deploy4", False, "If we weren't testing, this would be a failure!"),
    ("mid5", True, "No changes detected"),
    ("pre5", True, "No changes detected"),
    ("end5", True, "Success!"),
    ("w6", True, "No changes detected"),
    ("t6", True, "Watch statement fired."),
    ("chain_a", False, "Failure!"),
    ("chain_b", False, "One or more requisite failed: c2.chain_a"),
    ("chain_c", False, "One or more requisite failed: c2.chain_b"),
    ("chain_d", True, "Success!"),
    ("on7", True, "State was not run because none of the onchanges reqs changed"),
]

SALT_C4 = [
    ("lib1", True, "Success!"),
    ("lib2", False, "Failure!"),
    ("n", False, "One or more requisite failed: c4lib.lib2"),
    ("n", False, "One or more requisite failed: c4lib.lib2"),
    ("m", True, "Watch statement fired."),
    ("p", True, "Success!"),
    ("q", True, "Success!"),
    ("r", False, "Failure!"),
    ("listener_m", True, "Watch statement fired."),
    ("listener_q", True, "Watch statement fired."),
]


class CompiledRunTests(SynchronousTestCase):
    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        srv = os.path.join(root, "srv")
        os.makedirs(srv)
        for name, text in {"c1": C1, "c2": C2, "c4": C4, "c4lib": C4LIB}.items():
            with open(os.path.join(srv, f"{name}.sls"), "w") as f:
                f.write(text)
        self.opts = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": "m1",
                "file_roots": {"base": [srv]},
                "cachedir": os.path.join(root, "cache"),
            },
        )
        self.files = FileServer.fromConfig(self.opts)
        testStates = loadStates(("test",))
        self.states = {key: testStates[key] for key in list(testStates)}

    def runSls(self, sls: str, **kwargs: Any) -> list[tuple[str, Any, str]]:
        variables = {"salt": {}, "grains": {}, "pillar": {}, "opts": self.opts}
        high, errors = compileHigh(self.files, {"base": [sls]}, variables, self.opts)
        self.assertEqual(errors, [])
        chunks, errors = compileLow(high, self.opts, lambda s: f"{s}.mod_watch" in self.states)
        self.assertEqual(errors, [])
        base = StateContext(salt={}, opts=self.opts, test=kwargs.get("test", False))
        runner = StateRunner(self.states, lambda low: dataclasses.replace(base, low=low), **kwargs)
        ret = runner.run(chunks)
        rows = sorted(ret.values(), key=lambda v: v["__run_num__"])
        self.assertEqual([v["__run_num__"] for v in rows], list(range(len(rows))))
        return [(v["__id__"], v["result"], v["comment"]) for v in rows]

    def test_requisites(self) -> None:
        """
        require, require_in, onfail (_any, _all), onchanges (_any), watch
        (_any), prereq and listen as Salt runs them.
        """
        self.assertEqual(self.runSls("c1"), SALT_C1)

    def test_prereqs(self) -> None:
        """
        prereq: would change, would not, the prereq state failing, the
        target's test run failing, chains, a watching target; and
        failures down a chain.
        """
        self.assertEqual(self.runSls("c2"), SALT_C2)

    def test_includesNamesFailhard(self) -> None:
        """
        An included SLS required as a whole, names, listen, and a chunk's
        failhard (the listeners still run after it).
        """
        self.assertEqual(self.runSls("c4"), SALT_C4)

    def test_failhardOption(self) -> None:
        """
        The failhard option stops at the first failure (Salt: C{B}, C{C}).
        """
        self.assertEqual(
            self.runSls("c1", failhard=True),
            [("B", True, "Success!"), ("C", False, "Failure!")],
        )
