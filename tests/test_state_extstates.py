"""
Tests for L{salttwist.state.extstates}: custom state modules, written for
Salt, synced into C{extension_modules/states/} and run by a state run.
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

CUSTOM = '''\
"""A Salt-style custom state module."""

__virtualname__ = "motd"


def __virtual__():
    return __virtualname__


def present(name, text="hello"):
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    wanted = text + " " + __pillar__["who"] + " on " + __grains__["id"]
    current = open(name).read() if __salt__["file.file_exists"](name) else None
    if current == wanted:
        ret["comment"] = "in " + __env__ + ": already there"
        return ret
    if __opts__["test"]:
        ret["result"] = None
        ret["changes"] = {"new": wanted}
        ret["comment"] = "would be written"
        return ret
    with open(name, "w") as f:
        f.write(wanted)
    __context__["written"] = __low__["__id__"]
    ret["changes"] = {"new": wanted}
    ret["comment"] = "written"
    return ret


def echoed(name):
    inner = __states__["test.succeed_with_changes"](name=name)
    inner["comment"] = "inner said: " + inner["comment"] + "; context: " + str(
        __context__.get("written")
    )
    return inner
'''

SLS = """\
motd_file:
  motd.present:
    - name: {out}/motd
    - text: hi

echo:
  motd.echoed:
    - require:
      - motd: motd_file
"""


class CustomStatesTests(TestCase):
    """
    A custom module in C{extension_modules/states/}, run by L{stateapply.sls}.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        self.out = os.path.join(root, "out")
        os.makedirs(self.out)
        srv = os.path.join(root, "srv")
        os.makedirs(srv)
        with open(os.path.join(srv, "motd.sls"), "w") as f:
            f.write(SLS.format(out=self.out))
        self.opts = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": "web1",
                "file_roots": {"base": [srv]},
                "extension_modules": os.path.join(root, "extmods"),
            },
        )
        self.statesDir = os.path.join(root, "extmods", "states")
        os.makedirs(self.statesDir)
        with open(os.path.join(self.statesDir, "custom_motd.py"), "w") as f:
            f.write(CUSTOM)
        self.files = FileServer.fromConfig(self.opts)

    def makeRun(self, **kwargs: Any) -> stateapply.StateRun:
        grains = {"id": "web1"}
        pillar = {"who": "ops"}
        loader = makeLoaderContext(self.opts, grains, pillar)
        return stateapply.StateRun(
            files=self.files,
            opts=loader.opts,
            minionId="web1",
            grains=grains,
            pillar=pillar,
            salt=SaltFunctions(loader),
            reactor=loader.reactor,
            states=stateFunctions(self.opts),
            **kwargs,
        )

    async def test_run(self) -> None:
        """
        The custom state runs with Salt's dunders: C{__pillar__},
        C{__grains__}, C{__salt__}, C{__opts__["test"]}, C{__env__},
        C{__low__}, C{__context__} and C{__states__}.
        """
        motd = os.path.join(self.out, "motd")
        ret = await deferToThread(stateapply.sls, self.makeRun(test=True), "motd")
        first = ret[f"motd_|-motd_file_|-{motd}_|-present"]
        self.assertEqual((first["result"], first["comment"]), (None, "would be written"))
        self.assertFalse(os.path.exists(motd))

        ret = await deferToThread(stateapply.sls, self.makeRun(), "motd")
        first = ret[f"motd_|-motd_file_|-{motd}_|-present"]
        self.assertEqual(first["comment"], "written", first)
        with open(motd) as f:
            self.assertEqual(f.read(), "hi ops on web1")
        echo = ret["motd_|-echo_|-echo_|-echoed"]
        self.assertEqual(echo["comment"], "inner said: Success!; context: motd_file", echo)
        self.assertTrue(echo["changes"])

        ret = await deferToThread(stateapply.sls, self.makeRun(), "motd")
        self.assertEqual(
            ret[f"motd_|-motd_file_|-{motd}_|-present"]["comment"], "in base: already there"
        )

    def test_reloaded(self) -> None:
        """
        The same functions while nothing changed; loaded again once a file
        changed; the built-in states are there too.
        """
        first = stateFunctions(self.opts)
        self.assertIs(stateFunctions(self.opts), first)
        self.assertIn("motd.present", first)
        self.assertIn("test.nop", first)
        with open(os.path.join(self.statesDir, "custom_motd.py"), "a") as f:
            f.write("\n\ndef absent(name):\n    return {}\n")
        second = stateFunctions(self.opts)
        self.assertIsNot(second, first)
        self.assertIn("motd.absent", second)
