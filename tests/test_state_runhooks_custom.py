"""
Tests for the runner's hooks with a custom state module written for Salt
(C{mod_aggregate(low, chunks, running)}, C{mod_init(low)}), run by
L{salttwist.state.apply.sls} from a real state tree with the minion's
C{state_aggregate} option.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.config import loadMinionConfig
from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.state import apply as stateapply
from salttwist.state.extstates import stateFunctions
from tests._statectx import makeLoaderContext

BUNDLE = '''\
"""A Salt-style module whose states can be merged."""

import os


def mod_init(low):
    with open(os.path.join(__pillar__["out"], "init.log"), "a") as f:
        f.write(low["__id__"] + "\\n")
    return True


def mod_aggregate(low, chunks, running):
    names = [low["name"]]
    for chunk in chunks:
        tag = "_|-".join([chunk["state"], chunk["__id__"], chunk["name"], chunk["fun"]])
        if chunk is low or chunk.get("__agg__") or tag in running:
            continue
        names.append(chunk["name"])
        chunk["__agg__"] = True
    low["items"] = names
    return low


def present(name, items=None):
    path = os.path.join(__pillar__["out"], "present.log")
    if os.path.exists(path) and name in open(path).read().split():
        return {"name": name, "result": True, "changes": {}, "comment": "already there"}
    with open(path, "a") as f:
        f.write(" ".join(items or [name]) + "\\n")
    return {"name": name, "result": True, "changes": {"added": items or [name]}, "comment": "added"}
'''

SLS = """\
one:
  bundle.present: []

two:
  bundle.present: []

three:
  bundle.present:
    - aggregate: False
"""


class CustomHooksTests(TestCase):
    """
    A custom module in C{extension_modules/states/} with Salt's hooks.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.out = os.path.join(self.root, "out")
        os.makedirs(self.out)
        srv = os.path.join(self.root, "srv")
        os.makedirs(srv)
        with open(os.path.join(srv, "bundle.sls"), "w") as f:
            f.write(SLS)
        statesDir = os.path.join(self.root, "extmods", "states")
        os.makedirs(statesDir)
        with open(os.path.join(statesDir, "bundle.py"), "w") as f:
            f.write(BUNDLE)
        self.srv = srv

    def makeRun(self, **opts: Any) -> stateapply.StateRun:
        config = loadMinionConfig(
            self.root,
            overrides={
                "root_dir": self.root,
                "id": "web1",
                "file_roots": {"base": [self.srv]},
                "extension_modules": os.path.join(self.root, "extmods"),
                **opts,
            },
        )
        grains = {"id": "web1"}
        pillar = {"out": self.out}
        loader = makeLoaderContext(config, grains, pillar)
        return stateapply.StateRun(
            files=FileServer.fromConfig(config),
            opts=loader.opts,
            minionId="web1",
            grains=grains,
            pillar=pillar,
            salt=SaltFunctions(loader),
            reactor=loader.reactor,
            states=stateFunctions(config),
        )

    def read(self, name: str) -> list[str]:
        with open(os.path.join(self.out, name)) as f:
            return f.read().splitlines()

    async def test_aggregated(self) -> None:
        """
        With C{state_aggregate: [bundle]}, the first state adds both
        mergeable names at once, the second finds its name there, the one
        with C{aggregate: False} runs alone; C{mod_init} ran once, before
        the first.
        """
        ret = await deferToThread(
            stateapply.sls, self.makeRun(state_aggregate=["bundle"]), "bundle"
        )
        byId = {entry["__id__"]: entry for entry in ret.values()}
        self.assertEqual(byId["one"]["changes"], {"added": ["one", "two"]}, ret)
        self.assertEqual(byId["two"]["comment"], "already there")
        self.assertEqual(byId["three"]["changes"], {"added": ["three"]})
        self.assertEqual(self.read("present.log"), ["one two", "three"])
        self.assertEqual(self.read("init.log"), ["one"])

    async def test_notAggregated(self) -> None:
        """
        Without the option each state adds its own name.
        """
        await deferToThread(stateapply.sls, self.makeRun(), "bundle")
        self.assertEqual(self.read("present.log"), ["one", "two", "three"])
