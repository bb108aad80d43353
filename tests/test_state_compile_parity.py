# -*- test-case-name: tests.test_state_compile_parity -*-
"""
Parity with real Salt: a formula written as public formulas are
(C{tplroot}, C{map.jinja} with C{grains.filter_by} over an C{import_yaml}
of C{defaults.yaml} and C{osfamilymap.yaml}, C{config.get},
C{pillar.get(merge=True)}, C{defaults.merge}, C{slsutil.merge},
C{{% from tplroot ~ "/map.jinja" import nginx with context %}}, relative
and absolute includes, C{extend}, C{exclude}, C{names} with per-name
arguments, C{use}, C{_in} requisites, C{order: last}, a C{#!py} file)
compiled in-process with the real execution functions must give exactly
the data Salt 3008.5 gave for it (C{tests/formulas/nginx-formula/
expected.json}, whose C{source} says how it was made).
"""

from __future__ import annotations

import json
import os
from typing import Any

import yaml
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.state.compiler import compileHigh, compileHighData, compileLow, renderHigh
from tests._statectx import makeLoaderContext

FORMULA = os.path.join(os.path.dirname(__file__), "formulas", "nginx-formula")


def _plain(data: Any) -> Any:
    """
    @return: C{data} as JSON gives it back (what Salt's C{--out json} shows).
    """
    return json.loads(json.dumps(data))


class NginxFormulaParityTests(SynchronousTestCase):
    """
    The compile on the test's (reactor) thread.
    """

    def setUp(self) -> None:
        with open(os.path.join(FORMULA, "expected.json"), encoding="utf-8") as f:
            self.expected = json.load(f)
        with open(os.path.join(FORMULA, "pillar", "nginx.sls"), encoding="utf-8") as f:
            pillar = yaml.safe_load(f)
        grains = self.expected["grains"]
        context = makeLoaderContext({}, grains, pillar)
        self.variables = {
            "salt": SaltFunctions(context),
            "grains": grains,
            "pillar": pillar,
            "opts": context.opts,
        }
        self.files = FileServer({"file_roots": {"base": [os.path.join(FORMULA, "salt")]}})
        self.opts = {"renderer": "jinja|yaml", "state_auto_order": True}

    def test_showSls(self) -> None:
        """
        The rendered files, before C{extend}/C{exclude}/C{_in} are applied,
        are Salt's C{state.show_sls}, key order included.
        """
        high, errors, _ = renderHigh(self.files, {"base": ["nginx"]}, self.variables, self.opts)
        self.assertEqual(errors, [])
        high = _plain(high)
        self.assertEqual(high, self.expected["show_sls"])
        self.assertEqual(list(high), list(self.expected["show_sls"]))

    def test_high(self) -> None:
        """
        L{compileHigh} is Salt's high data after C{call_high}'s
        C{reconcile_extend}, C{requisite_in} and C{apply_exclude}.
        """
        high, errors = compileHigh(self.files, {"base": ["nginx"]}, self.variables, self.opts)
        self.assertEqual(errors, [])
        self.assertEqual(_plain(high), self.expected["high"])
        self.assertEqual(list(high), list(self.expected["high"]))

    def test_low(self) -> None:
        """
        L{compileLow} gives Salt's chunks in Salt's order.
        """
        high, errors = compileHigh(self.files, {"base": ["nginx"]}, self.variables, self.opts)
        self.assertEqual(errors, [])
        chunks, errors = compileLow(high, self.opts)
        self.assertEqual(errors, [])
        self.assertEqual(_plain(chunks), self.expected["low"])

    def test_both(self) -> None:
        high, chunks, errors = compileHighData(
            self.files, {"base": ["nginx"]}, self.variables, self.opts
        )
        self.assertEqual(errors, [])
        self.assertEqual(_plain(chunks), self.expected["low"])


class InThreadParityTests(TestCase):
    """
    The compile in a thread, as a state run does it: C{pillar.get} and the
    other functions that run on the reactor are waited for from there.
    """

    setUp = NginxFormulaParityTests.setUp

    async def test_inThread(self) -> None:
        high, errors = await deferToThread(
            compileHigh, self.files, {"base": ["nginx"]}, self.variables, self.opts
        )
        self.assertEqual(errors, [])
        self.assertEqual(_plain(high), self.expected["high"])
