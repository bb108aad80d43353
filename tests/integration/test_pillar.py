# -*- test-case-name: tests.integration.test_pillar -*-
"""
Integration tests of pillar (issue 20) with real daemons: a master compiling
real C{pillar_roots} (in its worker processes), two minions each given a
different pillar (one holds a secret), a rogue session refused, a refresh
after a top change, render errors, the runners and masterless
C{salttwist-call --local}; the secret is in no master log line and no event
of the master's bus.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.blocking import threadRunner
from salttwist.client.transient import MasterCaller
from salttwist.config import loadMinionConfig
from salttwist.events.client import listenEvents
from salttwist.master.service import EVENT_PUB_SOCKET
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from salttwist.transport.reqclient import RequestError
from tests.integration.harness import Cluster, CommandResult, runCommand, seedKeyPair

MINIONS = ("web1", "db1")
#: The secret only C{db1} may see.
SECRET = "Zq8-pillar-secret-71c3"

TOP = """\
base:
  '*':
    - common
  'web1':
    - web
  'db1':
    - db
"""

FILES = {
    "top.sls": TOP,
    "common.sls": "site: example.org\n",
    "web.sls": (
        "vhosts:\n"
        "{% for n in range(3) %}\n"
        "  site{{ n }}: {{ grains['id'] }}-{{ n }}\n"
        "{% endfor %}\n"
    ),
    "db.sls": f"db:\n  password: {SECRET}\n  port: 5432\n",
}


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def writeTree(root: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def jsonObjects(text: str) -> dict[str, Any]:
    """
    @return: the JSON objects C{salttwist --out json} prints (one per
        minion), merged.
    """
    decoder = json.JSONDecoder()
    merged: dict[str, Any] = {}
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return merged
        value, position = decoder.raw_decode(text, position)
        merged.update(value)


class PillarDeliveryTests(TestCase):
    """
    Pillar compiled on a real master and delivered to real minions.
    """

    timeout = 180

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.pillarRoot = os.path.join(self.cluster.baseDir, "srv", "pillar")
        writeTree(self.pillarRoot, FILES)
        self.cluster.writeMasterConfig(pillar_roots={"base": [self.pillarRoot]}, log_level="debug")
        # As startReady, with the master logging to a file as well.
        self.logFile = os.path.join(self.cluster.baseDir, "master.log")
        cluster = self.cluster
        seedKeyPair(cluster.masterPkiDir, "master", "master")
        store = FilesystemKeyStore(cluster.masterPkiDir)
        for minionId in MINIONS:
            store.putKey(
                ACCEPTED, minionId, seedKeyPair(cluster.minionPkiDir(minionId), "minion", minionId)
            )
        await cluster.startMaster(
            ["salttwist-master", "-c", cluster.masterDir, "--log-file", self.logFile]
        )
        watcher = await cluster.watchEvents()
        for minionId in MINIONS:
            cluster.startMinion(minionId)
        await cluster.waitForStart(watcher, MINIONS)

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def salt(self, *args: str) -> Any:
        """
        Run C{salttwist ARGS --out json}, which must succeed.

        @return: its decoded output.
        """
        result = await self.cluster.salt(*args, "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return jsonObjects(result.out)

    async def run_(self, *args: str) -> Any:
        """
        Run C{salttwist-run ARGS --out json}, which must succeed.
        """
        result = await runCommand(
            ["salttwist-run", "-c", self.cluster.masterDir, *args, "--out", "json"],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return json.loads(result.out)

    def masterLog(self) -> str:
        """
        @return: the master's log file and its output so far.
        """
        with open(self.logFile) as f:
            text = f.read()
        assert self.cluster.master is not None
        return text + self.cluster.master.output()

    async def caller(self, minionId: str) -> MasterCaller:
        """
        @return: a real session to the master, opened with C{minionId}'s own
            key (a transient session, as C{salttwist-call} opens).
        """
        minionDir = self.cluster.minionDir(minionId)
        config = loadMinionConfig(minionDir, overrides={"root_dir": minionDir})
        reactor = _reactor()
        caller = MasterCaller(config, minionId, reactor, threadRunner(reactor), timeout=30)
        self.addCleanup(caller.close)
        await caller.session()
        return caller

    async def test_delivery(self) -> None:
        """
        Each minion sees its own pillar; after a top change a refresh
        brings the new one, with no trace of the secret in the master's
        log or on its bus; a render error reaches the minion as
        C{_errors} and the master's log with file and line, while the other
        minion's pillar is whole.
        """
        items = await self.salt("*", "pillar.items")
        self.assertEqual(
            items["web1"],
            {"site": "example.org", "vhosts": {f"site{n}": f"web1-{n}" for n in range(3)}},
        )
        self.assertEqual(
            items["db1"], {"site": "example.org", "db": {"password": SECRET, "port": 5432}}
        )

        # A refresh after a top change, watched on the bus.
        events: list[tuple[str, Any]] = []
        proto = await listenEvents(
            _reactor(),
            os.path.join(self.cluster.sockDir, EVENT_PUB_SOCKET),
            [],
            lambda tag, data: events.append((tag, data)),
        )
        self.addCleanup(lambda: proto.lost)
        self.addCleanup(proto.transport.loseConnection)
        logBefore = len(self.masterLog())
        writeTree(
            self.pillarRoot,
            {
                "top.sls": TOP + "  'web*':\n    - extra\n",
                "extra.sls": "extra: {{ 6 * 7 }}\n",
                "db.sls": f"db:\n  password: {SECRET}\n  port: 5433\n",
            },
        )
        refreshed = await self.salt("*", "saltutil.refresh_pillar")
        self.assertEqual(refreshed, {"web1": True, "db1": True})
        self.assertEqual(
            await self.salt("db1", "pillar.get", "db:port"), {"db1": 5433}, self.cluster.logs()
        )
        self.assertEqual(await self.salt("web1", "pillar.item", "extra"), {"web1": {"extra": 42}})
        self.assertTrue(events, "no event was seen during the refresh")
        self.assertNotIn(SECRET, repr(events))
        self.assertIn("salt/job/", repr([tag for tag, _ in events]))
        self.assertNotIn(SECRET, self.masterLog())
        # The log shows the compiles (at debug level), not what they gave.
        self.assertIn(
            "pillar for minion db1 compiled: 2 top-level keys", self.masterLog()[logBefore:]
        )

        # A render error: web1 gets _errors, the master logs file and line,
        # db1 is unaffected.
        writeTree(self.pillarRoot, {"extra.sls": "extra: [unclosed\n"})
        self.assertEqual(
            await self.salt("*", "saltutil.refresh_pillar"), {"web1": True, "db1": True}
        )
        web = (await self.salt("web1", "pillar.items"))["web1"]
        self.assertIn("_errors", web)
        self.assertTrue(any("extra" in text for text in web["_errors"]), web)
        log = self.masterLog()
        self.assertIn("pillar for minion web1: ", log)
        self.assertIn("extra.sls, line", log)
        self.assertEqual((await self.salt("db1", "pillar.get", "db:password"))["db1"], SECRET)

    async def test_rogueSessionRefused(self) -> None:
        """
        A real session opened with web1's own key gets web1's pillar, and
        is refused when it asks for db1's; the attempt is logged without
        any pillar value.
        """
        caller = await self.caller("web1")
        own = await caller.request({"cmd": "_pillar", "id": "web1", "grains": {"id": "web1"}})
        self.assertEqual(own["ret"]["vhosts"]["site0"], "web1-0")
        self.assertNotIn(SECRET, repr(own))
        with self.assertRaises(RequestError) as raised:
            await caller.request({"cmd": "_pillar", "id": "db1", "grains": {"id": "db1"}})
        self.assertEqual(
            str(raised.exception), "minion 'web1' may only ask for its own pillar, not for 'db1''s"
        )
        log = self.masterLog()
        self.assertIn("minion 'web1' asked for the pillar of 'db1': refused", log)
        self.assertNotIn(SECRET, log)

    async def test_runners(self) -> None:
        """
        C{salttwist-run pillar.show_pillar} and C{pillar.show_top} show a
        minion's pillar and top as the master compiles them.
        """
        shown = await self.run_("pillar.show_pillar", "db1")
        self.assertEqual(shown["db"]["password"], SECRET)
        self.assertEqual(await self.run_("pillar.show_pillar"), {"site": "example.org"})
        self.assertEqual(await self.run_("pillar.show_top", "web1"), {"base": ["common", "web"]})

    async def test_callOverSession(self) -> None:
        """
        C{salttwist-call pillar.items} beside the running minion fetches the
        minion's pillar over its own transient session.
        """
        minionDir = self.cluster.minionDir("db1")
        result = await runCommand(
            ["salttwist-call", "-c", minionDir, "pillar.get", "db:port", "--out", "json"],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual((result.code, result.err), (0, ""), self.cluster.explain(result))
        self.assertEqual(json.loads(result.out), {"local": 5432})


class MasterlessCallTests(TestCase):
    """
    C{salttwist-call --local} compiles the pillar from the minion config's
    own C{pillar_roots}, with no master.
    """

    timeout = 60

    async def test_local(self) -> None:
        """
        The minion's pillar from local roots, rendered with its grains;
        C{pillar.get} nests; files come from local C{file_roots}.
        """
        base = os.path.abspath(self.mktemp())
        pillarRoot = os.path.join(base, "pillar")
        fileRoot = os.path.join(base, "salt")
        writeTree(pillarRoot, FILES)
        writeTree(fileRoot, {"motd.txt": "hello\n"})
        configDir = os.path.join(base, "conf")
        os.makedirs(configDir)
        with open(os.path.join(configDir, "minion"), "w") as f:
            json.dump(
                {
                    "id": "web1",
                    "root_dir": base,
                    "pillar_roots": {"base": [pillarRoot]},
                    "file_roots": {"base": [fileRoot]},
                },
                f,
            )

        async def call(*args: str) -> CommandResult:
            result = await runCommand(
                ["salttwist-call", "-c", configDir, "--local", *args, "--out", "json"], cwd=base
            )
            self.assertEqual((result.code, result.err), (0, ""), str(result))
            return json.loads(result.out)["local"]

        self.assertEqual(
            await call("pillar.items"),
            {"site": "example.org", "vhosts": {f"site{n}": f"web1-{n}" for n in range(3)}},
        )
        self.assertEqual(await call("pillar.get", "vhosts:site2"), "web1-2")
        self.assertEqual(await call("cp.list_master"), ["motd.txt"])
