# -*- test-case-name: tests.integration.test_states -*-
"""
Integration tests of the state system (issue 21): a real master serving a
state tree from C{file_roots}, real minions that fetch, render and apply
it, driven by the installed C{salttwist} command.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.events.client import listenEvents
from salttwist.master.service import EVENT_PUB_SOCKET
from tests.integration.harness import Cluster, runCommand, waitFor

MINIONS = ("minion1", "minion2")


def writeFile(root: str, relative: str, data: str) -> str:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)
    return path


TOP = """\
base:
  '*':
    - web
  'minion2':
    - extra
"""

WEB = """\
include:
  - .conf

hello:
  test.succeed_with_changes: []

marker:
  cmd.run:
    - name: echo {{ pillar.get('port', 80) }} > {{ pillar['out'] }}/{{ grains['id'] }}
    - creates: {{ pillar['out'] }}/{{ grains['id'] }}
    - require:
      - test: hello
"""

CONF = """\
{% from "web/map.jinja" import web with context %}
web_conf:
  test.configurable_test_state:
    - name: {{ web.user }}
    - changes: False
"""

MAP = """\
{% set web = {'user': 'www-' ~ grains['id']} %}
"""

EXTRA = """\
extra:
  test.nop: []
"""

FAILING = """\
ok_first:
  test.succeed_without_changes: []

broken:
  test.fail_without_changes:
    - comment: it broke
"""

BAD = """\
broken: [
  unclosed
"""

FILES = """\
site_conf:
  file.managed:
    - name: {{ pillar['out'] }}/{{ grains['id'] }}.conf
    - source: salt://files/site.conf.j2
    - template: jinja
    - mode: "0640"

reload:
  cmd.run:
    - name: touch {{ pillar['out'] }}/{{ grains['id'] }}.reloaded
    - onchanges:
      - file: site_conf
"""

SLOW = """\
slow:
  cmd.run:
    - name: sleep 3

after_slow:
  cmd.run:
    - name: touch {{ pillar['out'] }}/after-slow
"""


GREET = """\
def hello(name, who):
    return {
        "name": name,
        "result": True,
        "changes": {},
        "comment": "hello " + who + " from " + __grains__["id"] + " in " + __env__,
    }
"""


class StatesTests(TestCase):
    """
    A master serving a state tree and two minions.
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        self.out = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(self.out)
        writeFile(self.roots, "top.sls", TOP)
        writeFile(self.roots, "web/init.sls", WEB)
        writeFile(self.roots, "web/conf.sls", CONF)
        writeFile(self.roots, "web/map.jinja", MAP)
        writeFile(self.roots, "extra.sls", EXTRA)
        writeFile(self.roots, "failing.sls", FAILING)
        writeFile(self.roots, "bad.sls", BAD)
        writeFile(self.roots, "files/init.sls", FILES)
        writeFile(self.roots, "files/site.conf.j2", "listen {{ grains['id'] }}:80\n")
        writeFile(self.roots, "slow.sls", SLOW)
        writeFile(self.roots, "_states/greet.py", GREET)
        writeFile(self.roots, "greet.sls", "world:\n  greet.hello:\n    - who: ops\n")
        self.pillarRoot = pillarRoot = os.path.join(self.cluster.baseDir, "srv", "pillar")
        writeFile(pillarRoot, "top.sls", "base:\n  '*':\n    - common\n")
        writeFile(pillarRoot, "common.sls", f"out: {self.out}\n")
        self.cluster.writeMasterConfig(
            file_roots={"base": [self.roots]}, pillar_roots={"base": [pillarRoot]}
        )
        await self.cluster.startReady(MINIONS)

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def salt(self, target: str, *args: str, code: int = 0) -> dict[str, Any]:
        """
        Run C{salttwist TARGET ARGS --out json}, which must exit with
        C{code}.

        @return: the returns by minion.
        """
        result = await self.cluster.salt(target, *args, "--out", "json", "--static")
        self.assertEqual(result.code, code, self.cluster.explain(result))
        return json.loads(result.out)

    def written(self, minionId: str) -> str | None:
        try:
            with open(os.path.join(self.out, minionId)) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    async def test_highstate(self) -> None:
        """
        C{state.apply}: each minion applies what the top gives it, renders
        Jinja with its grains and pillar and a map file, and returns
        Salt's shape; the command ran on both; a second run changes
        nothing.
        """
        returns = await self.salt("*", "state.apply")
        self.assertEqual(sorted(returns), list(MINIONS))
        one, two = returns["minion1"], returns["minion2"]
        self.assertEqual(
            sorted(one),
            sorted(
                [
                    "test_|-hello_|-hello_|-succeed_with_changes",
                    "test_|-web_conf_|-www-minion1_|-configurable_test_state",
                    f"cmd_|-marker_|-echo 80 > {self.out}/minion1_|-run",
                ]
            ),
        )
        self.assertIn("test_|-extra_|-extra_|-nop", two)
        for ret in one.values():
            self.assertEqual(ret["result"], True, ret)
            self.assertEqual(
                set(ret) >= {"name", "changes", "comment", "duration", "start_time", "__run_num__"},
                True,
                ret,
            )
        self.assertEqual(
            one["test_|-web_conf_|-www-minion1_|-configurable_test_state"]["__sls__"], "web.conf"
        )
        self.assertEqual(self.written("minion1"), "80")
        self.assertEqual(self.written("minion2"), "80")

        again = await self.salt("minion1", "state.apply")
        marker = again["minion1"][f"cmd_|-marker_|-echo 80 > {self.out}/minion1_|-run"]
        self.assertEqual(marker["changes"], {})
        self.assertIn("exists", marker["comment"])

    async def test_slsTestAndPillar(self) -> None:
        """
        C{state.sls web test=True} changes nothing; C{pillar=} overrides
        the pillar of one run; each run compiles the pillar afresh.
        """
        returns = await self.salt("minion1", "state.sls", "web", "test=True")
        marker = returns["minion1"][f"cmd_|-marker_|-echo 80 > {self.out}/minion1_|-run"]
        self.assertIsNone(marker["result"])
        self.assertIsNone(self.written("minion1"))

        await self.salt("minion1", "state.sls", "web", 'pillar={"port": 8080}')
        self.assertEqual(self.written("minion1"), "8080")

        # As Salt's, a state run compiles the pillar afresh: a pillar file
        # changed since the minion's last refresh is seen.
        writeFile(self.pillarRoot, "common.sls", f"out: {self.out}\nport: 9090\n")
        await self.salt("minion2", "state.sls", "web")
        self.assertEqual(self.written("minion2"), "9090")

    async def test_failures(self) -> None:
        """
        A failing state makes the command fail (the minion's retcode 2)
        and says why; an SLS that does not render gives the error, runs
        nothing.
        """
        returns = await self.salt("minion1", "state.sls", "failing", code=1)
        broken = returns["minion1"]["test_|-broken_|-broken_|-fail_without_changes"]
        self.assertEqual((broken["result"], broken["comment"]), (False, "it broke"))

        returns = await self.salt("minion1", "state.sls", "bad,web", code=1)
        errors = returns["minion1"]
        self.assertIsInstance(errors, list)
        self.assertIn("bad", "\n".join(errors))
        self.assertIsNone(self.written("minion1"))

    async def test_fileManaged(self) -> None:
        """
        C{file.managed} with a templated C{salt://} source writes the file
        with its mode and a diff; the C{onchanges} command runs only when
        the file changed.
        """
        conf = os.path.join(self.out, "minion1.conf")
        reloaded = os.path.join(self.out, "minion1.reloaded")
        returns = await self.salt("minion1", "state.sls", "files")
        managed = returns["minion1"][f"file_|-site_conf_|-{conf}_|-managed"]
        self.assertEqual(managed["result"], True, managed)
        self.assertTrue(managed["changes"], managed)
        with open(conf) as f:
            self.assertEqual(f.read(), "listen minion1:80\n")
        self.assertEqual(os.stat(conf).st_mode & 0o777, 0o640)
        self.assertTrue(os.path.exists(reloaded))
        os.unlink(reloaded)

        returns = await self.salt("minion1", "state.sls", "files")
        managed = returns["minion1"][f"file_|-site_conf_|-{conf}_|-managed"]
        self.assertEqual(managed["changes"], {}, managed)
        self.assertFalse(os.path.exists(reloaded))

    async def test_oneRunAtATime(self) -> None:
        """
        While a state run goes on, another is refused with Salt's words
        (and C{state.running} names it); C{queue=True} waits for it.
        """
        started = await self.cluster.salt("minion1", "state.sls", "slow", "--async")
        self.assertEqual(started.code, 0, self.cluster.explain(started))
        jid = started.out.strip().rsplit(" ", 1)[-1]
        refused = await self.salt("minion1", "state.apply", code=1)
        self.assertEqual(len(refused["minion1"]), 1, refused)
        self.assertIn('The function "state.sls" is running as PID', refused["minion1"][0])
        self.assertIn(f"with jid {jid}", refused["minion1"][0])
        running = await self.salt("minion1", "state.running")
        self.assertEqual(running["minion1"], refused["minion1"])
        queued = await self.salt("minion1", "state.sls", "extra", "queue=True")
        self.assertIn("test_|-extra_|-extra_|-nop", queued["minion1"])
        self.assertTrue(os.path.exists(os.path.join(self.out, "after-slow")))

    async def test_killJob(self) -> None:
        """
        C{saltutil.kill_job} stops a state run: the states after the one
        running are not run.
        """
        started = await self.cluster.salt("minion1", "state.sls", "slow", "--async")
        jid = started.out.strip().rsplit(" ", 1)[-1]
        killed = await self.salt("minion1", "saltutil.kill_job", jid)
        self.assertTrue(killed["minion1"], killed)
        await self.salt("minion1", "test.sleep", "4")
        self.assertFalse(os.path.exists(os.path.join(self.out, "after-slow")))
        running = await self.salt("minion1", "state.running")
        self.assertEqual(running["minion1"], [])

    async def test_saltCall(self) -> None:
        """
        C{salttwist-call state.sls} beside the running minion: the state
        tree and pillar come over its own session from the master.
        """
        result = await runCommand(
            [
                "salttwist-call",
                "-c",
                self.cluster.minionDir("minion2"),
                "state.sls",
                "web",
                "--out",
                "json",
                "--retcode-passthrough",
            ],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        ret = json.loads(result.out)["local"]
        self.assertIn("test_|-web_conf_|-www-minion2_|-configurable_test_state", ret)
        self.assertEqual(self.written("minion2"), "80")

    async def test_customState(self) -> None:
        """
        A custom state module of the file server's C{_states}, synced by
        C{sync_mods=states}, runs with Salt's dunders.
        """
        returns = await self.salt("minion1", "state.sls", "greet", "sync_mods=states")
        ret = returns["minion1"]["greet_|-world_|-world_|-hello"]
        self.assertEqual(ret["comment"], "hello ops from minion1 in base", ret)

    async def test_show(self) -> None:
        """
        C{state.show_top}, C{state.show_lowstate}, C{state.show_sls}:
        what would run, nothing run.
        """
        returns = await self.salt("*", "state.show_top")
        self.assertEqual(returns["minion1"], {"base": ["web"]})
        self.assertEqual(returns["minion2"], {"base": ["web", "extra"]})

        low = (await self.salt("minion1", "state.show_lowstate"))["minion1"]
        self.assertEqual(
            [(c["state"], c["__id__"], c["fun"]) for c in low],
            [
                ("test", "web_conf", "configurable_test_state"),
                ("test", "hello", "succeed_with_changes"),
                ("cmd", "marker", "run"),
            ],
        )
        high = (await self.salt("minion1", "state.show_sls", "web"))["minion1"]
        self.assertEqual(high["marker"]["__sls__"], "web")
        self.assertIsNone(self.written("minion1"))

    async def test_progressEvents(self) -> None:
        """
        With C{state_events=True} each finished state is an event on the
        master's bus, C{salt/job/<jid>/prog/<minion>/<n>}, with its return
        and the number of states.
        """
        seen: list[tuple[str, Any]] = []
        proto = await listenEvents(
            _reactor(),
            os.path.join(self.cluster.sockDir, EVENT_PUB_SOCKET),
            ["salt/job/"],
            lambda tag, data: seen.append((tag, data)),
        )
        self.addCleanup(proto.transport.loseConnection)
        await self.salt("minion1", "state.apply", "state_events=True")

        def progress() -> list[tuple[str, Any]]:
            return [(tag, data) for tag, data in seen if "/prog/minion1/" in tag]

        await waitFor(
            lambda: len(progress()) == 3, "three progress events", context=self.cluster.logs
        )
        numbers = sorted(int(tag.rsplit("/", 1)[1]) for tag, _ in progress())
        self.assertEqual(numbers, [0, 1, 2])
        tag, data = progress()[0]
        self.assertEqual(data["id"], "minion1")
        self.assertEqual(data["data"]["len"], 3)
        self.assertIn("result", data["data"]["ret"])


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
