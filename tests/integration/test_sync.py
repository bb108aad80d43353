# -*- test-case-name: tests.integration.test_sync -*-
"""
Integration tests of custom code through the file server (issue 20): a
real master serving C{file_roots/base/_modules}, C{_grains} and
C{_runners}, a real minion, driven by the real C{salttwist} and
C{salttwist-run} commands.

  - C{salttwist minion1 saltutil.sync_all} syncs a custom execution
    module (using C{__grains__} and C{__salt__["test.ping"]()}) and a
    custom grain module; the module answers at once, the master targets
    the custom grain with C{-G}, and a restarted minion loads both at
    start (C{autoload_dynamic_modules});
  - C{salttwist-run saltutil.sync_runners} syncs a custom runner into the
    master, which runs it at once.
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, CommandResult, EventWatcher, runCommand, waitFor

MINION = "minion1"

HELLO = '''\
"""A custom module, as a Salt shop ships one."""


def world(greeting="hello"):
    """
    Greet from this minion.

    CLI Example: salttwist '*' hello.world
    """
    return {
        "greeting": f"{greeting} from {__grains__['id']}",
        "ping": __salt__["test.ping"](),
        "role": __grains__.get("role"),
    }
'''

ROLE = """\
def role():
    return {"role": "custom"}
"""

RUNNER = """\
def go(name="master"):
    return f"custom runner says hi to {name} on {__opts__['interface']}"
"""


REACTION = """\
answer:
  event.send:
    - tag: myco/reacted/{{ data['id'] }}
"""


class SyncTests(TestCase):
    """
    Custom modules, grains and runners through a real master and minion.
    """

    timeout = 300

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        self.serve("_modules/hello.py", HELLO)
        self.serve("_grains/role.py", ROLE)
        self.serve("_runners/myrunner.py", RUNNER)
        self.serve("reactor/go.sls", REACTION)
        self.cluster.writeMasterConfig(
            file_roots={"base": [self.roots]},
            reactor=[{"myco/go": ["salt://reactor/go.sls", "salt://reactor/missing.sls"]}],
        )
        await self.cluster.startReady((MINION,))

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    def serve(self, relative: str, text: str) -> None:
        path = os.path.join(self.roots, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))

    async def saltJson(self, *args: str) -> tuple[CommandResult, Any]:
        result = await self.cluster.salt(*args, "--out", "json", "--static")
        try:
            return result, json.loads(result.out) if result.out.strip() else None
        except ValueError:
            return result, None

    async def runJson(self, *args: str) -> Any:
        cluster = self.cluster
        result = await runCommand(
            ["salttwist-run", "-c", cluster.masterDir, *args, "--out", "json"],
            cwd=cluster.baseDir,
        )
        self.assertEqual(result.code, 0, cluster.explain(result))
        return json.loads(result.out)

    async def test_syncAllThenUse(self) -> None:
        """
        C{saltutil.sync_all} returns Salt's shape; the custom module then
        runs (with the custom grain and C{__salt__}); C{-G role:custom}
        finds the minion; after a restart the minion loads both at start.
        """
        result, synced = await self.saltJson(MINION, "saltutil.sync_all")
        self.assertEqual(
            synced,
            {
                MINION: {
                    "modules": ["modules.hello"],
                    "states": [],
                    "grains": ["grains.role"],
                    "utils": [],
                }
            },
            self.cluster.explain(result),
        )
        result, hello = await self.saltJson(MINION, "hello.world")
        self.assertEqual(
            hello,
            {MINION: {"greeting": f"hello from {MINION}", "ping": True, "role": "custom"}},
            self.cluster.explain(result),
        )

        async def targeted() -> bool:
            _, found = await self.saltJson("-G", "role:custom", "test.ping")
            return found == {MINION: True}

        await waitFor(targeted, "-G role:custom to find the minion", context=self.cluster.logs)

        result, again = await self.saltJson(MINION, "saltutil.sync_all")
        self.assertEqual(
            again,
            {MINION: {"modules": [], "states": [], "grains": [], "utils": []}},
            self.cluster.explain(result),
        )

        # A restarted minion loads the synced module and grain at start.
        watcher = await self.cluster.watchEvents()
        await self.cluster.minions[MINION].stop()
        self.cluster.startMinion(MINION)
        await self.cluster.waitForStart(watcher, [MINION])
        result, hello = await self.saltJson(MINION, "hello.world", "greeting=hi")
        self.assertEqual(
            hello,
            {MINION: {"greeting": f"hi from {MINION}", "ping": True, "role": "custom"}},
            self.cluster.explain(result),
        )

    async def test_syncRunners(self) -> None:
        """
        C{salttwist-run saltutil.sync_runners} copies the custom runner
        into the master, which runs it at once.
        """
        self.assertEqual(await self.runJson("saltutil.sync_runners"), ["runners.myrunner"])
        said = await self.runJson("myrunner.go", "name=you")
        self.assertEqual(said, "custom runner says hi to you on 127.0.0.1")
        self.assertEqual(await self.runJson("saltutil.sync_all"), {"runners": [], "utils": []})

    async def test_reactorSaltUrl(self) -> None:
        """
        A reaction file given as a C{salt://} URL is read from the master's
        file roots; one the file server does not have fails in
        C{salt/reactor/error}, the other reactions still run.
        """
        watcher = EventWatcher()
        await watcher.connect(self.cluster.sockDir, ("salt/reactor/", "myco/"))
        self.addCleanup(watcher.close)
        result = await self.cluster.salt(MINION, "event.send", "myco/go", "--static")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        await waitFor(
            lambda: {f"myco/reacted/{MINION}", "salt/reactor/error"} <= set(watcher.tags),
            "the salt:// reaction and the error of the missing one",
            context=lambda: f"{watcher.tags}\n{self.cluster.logs()}",
        )
        self.assertIn("salt://reactor/missing.sls", self.cluster.logs())
