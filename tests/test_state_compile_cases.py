# -*- test-case-name: tests.test_state_compile_cases -*-
"""
Parity with real Salt, case by case: each tree of C{tests/formulas/cases/}
(forms, includes, saltenvs, C{extend}/C{exclude} (by name too), C{_in}
requisites and C{use},
requisites of chunks, order without auto order, and the errors: duplicate
ids, bad forms, unknown requisites, a cycle, missing includes, a render
error) compiled here must give what Salt 3008.5 gave
(C{expected.json}, made by C{salt_expected.py} with Salt's own
C{HighState}): the same data, key order included, and errors that begin
with Salt's words (ours add the file, and for a render error our cause).
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.fileserver.server import FileServer
from salttwist.state.compiler import compileLow, renderHigh, resolveHigh

CASES = os.path.join(os.path.dirname(__file__), "formulas", "cases")

with open(os.path.join(CASES, "expected.json"), encoding="utf-8") as _f:
    EXPECTED: dict[str, Any] = json.load(_f)["cases"]
with open(os.path.join(CASES, "cases.json"), encoding="utf-8") as _f:
    SPECS: dict[str, Any] = json.load(_f)


def _plain(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))


class CaseTestsMixin:
    """
    One test per case, comparing each stage where Salt got to it.
    """

    def assertErrorsLike(self, ours: list[str], salts: list[str]) -> None:
        self.assertEqual(len(ours), len(salts), (ours, salts))  # type: ignore[attr-defined]
        for mine, theirs in zip(ours, salts, strict=True):
            if theirs.startswith("Rendering SLS"):
                head = theirs.split(" failed:")[0]
                self.assertTrue(mine.startswith(head + " failed:"), (mine, theirs))  # type: ignore[attr-defined]
            else:
                self.assertTrue(mine.startswith(theirs), (mine, theirs))  # type: ignore[attr-defined]

    def check(self, case: str) -> None:
        spec = SPECS[case]
        expected = EXPECTED[case]
        opts = {"renderer": "jinja|yaml", "state_auto_order": True}
        opts.update(spec.get("opts", {}))
        roots = {
            env: [os.path.join(CASES, case, env)]
            for env in sorted(os.listdir(os.path.join(CASES, case)))
        }
        files = FileServer({"file_roots": roots})
        variables = {"salt": {}, "grains": {"os": "Debian"}, "pillar": {}, "opts": opts}
        matches = spec.get("matches") or {"base": spec["mods"]}
        high, errors, where = renderHigh(files, matches, variables, opts)
        self.assertEqual(_plain(high), expected["show_sls"])  # type: ignore[attr-defined]
        self.assertEqual(list(high), list(expected["show_sls"]))  # type: ignore[attr-defined]
        self.assertErrorsLike(errors, expected["render_errors"])
        if errors:
            return
        high, errors = resolveHigh(high, opts, where)
        if expected["verify_errors"]:
            self.assertErrorsLike(errors, expected["verify_errors"])
            return
        self.assertErrorsLike(errors, expected["requisite_in_errors"])
        self.assertEqual(_plain(high), expected["high"])  # type: ignore[attr-defined]
        self.assertEqual(list(high), list(expected["high"]))  # type: ignore[attr-defined]
        chunks, errors = compileLow(high, opts)
        self.assertErrorsLike(errors, expected["low_errors"])
        self.assertEqual(_plain(chunks), expected["low"])  # type: ignore[attr-defined]


def _makeTest(case: str) -> Any:
    def test(self: CaseTestsMixin) -> None:
        self.check(case)

    test.__name__ = f"test_{case}"
    test.__doc__ = f"Case C{{{case}}} compiles as Salt compiled it."
    return test


class SaltCaseTests(CaseTestsMixin, SynchronousTestCase):
    pass


for _case in SPECS:
    setattr(SaltCaseTests, f"test_{_case}", _makeTest(_case))
