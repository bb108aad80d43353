# -*- test-case-name: tests.integration.test_client_api -*-
"""
Integration tests of Salt's Python API (L{salttwist.client}): a real master
and two minions, driven by Python programs that use the API.

The synchronous facades run the global reactor in a thread of their own,
and trial's global reactor already runs the tests in the main thread: so
each program runs in a child process (C{python -c SCRIPT}), prints what the
API returned as JSON, and exits, which also shows that a program using the
facades ends by itself.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster, childEnvironment, installedPython

MINIONS = ("minion1", "minion2")

#: The start of every program: the answers go to stdout as JSON.
_PRELUDE = """
import json, sys
def show(value):
    sys.stdout.write(json.dumps(value))
"""

CMD = """
from salttwist.client import LocalClient
local = LocalClient(sys.argv[1])
show({
    "ping": local.cmd("*", "test.ping"),
    "kwarg": local.cmd("minion1", "test.kwarg", kwarg={"a": 1, "b": "x"}),
    "arg": local.cmd(
        ["minion1", "minion2"], "test.arg", ["one", 2], tgt_type="list", kwarg={"k": "v"}
    ),
    "full": local.cmd("*", "test.retcode", [3], full_return=True),
    "noMatch": local.cmd("nobody*", "test.ping"),
    "asyncNoMatch": local.cmd_async("nobody*", "test.ping"),
})
"""

ASYNC_THEN_CACHE = """
import time
from salttwist.client import LocalClient
local = LocalClient(sys.argv[1])
jid = local.cmd_async("*", "test.echo", ["cached"])
deadline = time.monotonic() + 20
while True:
    returns = local.get_cache_returns(jid)
    if len(returns) == 2 or time.monotonic() > deadline:
        break
    time.sleep(0.1)
show({"jid": jid, "returns": returns})
"""

ITER = """
from salttwist.client import LocalClient
local = LocalClient(sys.argv[1])
show(list(local.cmd_iter("*", "test.echo", ["hi"])))
"""

BATCH = """
from salttwist.client import LocalClient
local = LocalClient(sys.argv[1])
show(list(local.cmd_batch("*", "test.echo", ["b"], batch=1)))
"""

RUNNER = """
from salttwist.client import RunnerClient
from salttwist.config import loadMasterConfig
show({
    "up": RunnerClient(sys.argv[1]).cmd("manage.up"),
    "fromOpts": RunnerClient(loadMasterConfig(sys.argv[1])).cmd_sync(
        {"fun": "manage.up", "tgt": "minion1"}
    ),
})
"""

CALLER = """
from salttwist.client import Caller
caller = Caller(sys.argv[1])
show({
    "echo": caller.cmd("test.echo", "hi"),
    "shell": caller.cmd("cmd.run", "echo from-a-child-process"),
    "grain": caller.cmd("grains.item", "id"),
})
"""

TWISTED_PROGRAM = """
from twisted.internet import defer, task
from salttwist.client import LocalClient, ReactorThreadError
from salttwist.client.local import LocalClient as Core
from salttwist.config import loadMasterConfig

async def main(reactor):
    core = Core(loadMasterConfig(sys.argv[1]), reactor)
    result = await core.run("*", "test.ping", [])
    published = await core.publish("minion1", "test.echo", ["later"])
    up = await core.runner("manage.up", [])
    try:
        LocalClient(sys.argv[1]).cmd("*", "test.ping")
        refused = None
    except ReactorThreadError as e:
        refused = str(e)
    show({
        "returns": {m: d["return"] for m, d in result.returns.items()},
        "published": published["minions"],
        "up": up["return"],
        "refused": refused,
    })

task.react(lambda reactor: defer.Deferred.fromCoroutine(main(reactor)))
"""


async def runProgram(script: str, *args: str, cwd: str | None = None) -> Any:
    """
    Run C{script} (after L{_PRELUDE}) with the installed copy's interpreter
    and C{args}.

    @return: the JSON value it printed.
    @raise AssertionError: if it failed or printed something else.
    """
    from twisted.internet import reactor

    out, err, code = await getProcessOutputAndValue(
        installedPython(),
        ["-c", _PRELUDE + script, *args],
        env=childEnvironment(),
        path=cwd,
        reactor=reactor,
    )
    text = f"exit code {code}\n--- stdout ---\n{out.decode()}\n--- stderr ---\n{err.decode()}"
    if code != 0:
        raise AssertionError(f"the program failed: {text}")
    try:
        return json.loads(out)
    except ValueError:
        raise AssertionError(f"the program printed no JSON: {text}") from None


class ClientAPITestCase(TestCase):
    """
    A master and two minions, their keys accepted, for each test.
    """

    timeout = 120

    async def setUp(self) -> None:
        """
        Start the master and both minions.
        """
        self.cluster = Cluster(self)
        await self.cluster.startReady(MINIONS)

    async def program(self, script: str, *args: str) -> Any:
        """
        Run C{script} with the master's config directory (or C{args}); a
        failure message carries the daemons' logs.
        """
        cluster = self.cluster
        try:
            return await runProgram(script, *(args or (cluster.masterDir,)), cwd=cluster.baseDir)
        except AssertionError as e:
            self.fail(f"{e}\n{cluster.logs()}")


class LocalClientTests(ClientAPITestCase):
    """
    L{salttwist.client.LocalClient} against a real master.
    """

    async def test_cmd(self) -> None:
        """
        C{cmd} returns each minion's return: C{test.ping}, keyword
        arguments through C{kwarg}, positional ones with a list target,
        C{full_return}'s shape; C{{}} and C{0} when nothing matched.
        """
        answers = await self.program(CMD)
        self.assertEqual(answers["ping"], {"minion1": True, "minion2": True})
        self.assertEqual(answers["kwarg"], {"minion1": {"a": 1, "b": "x"}})
        self.assertEqual(
            answers["arg"],
            {m: {"args": ["one", 2], "kwargs": {"k": "v"}} for m in MINIONS},
        )
        full = answers["full"]
        self.assertEqual(sorted(full), list(MINIONS))
        jids = {full[m]["jid"] for m in MINIONS}
        self.assertEqual(len(jids), 1)
        self.assertEqual(len(jids.pop()), 20)
        for minionId in MINIONS:
            self.assertEqual((full[minionId]["ret"], full[minionId]["retcode"]), (True, 3))
        self.assertEqual(answers["noMatch"], {})
        self.assertEqual(answers["asyncNoMatch"], 0)

    async def test_asyncThenCache(self) -> None:
        """
        C{cmd_async} returns the jid at once; C{get_cache_returns} then
        reads both returns from the master's job cache.
        """
        answers = await self.program(ASYNC_THEN_CACHE)
        self.assertTrue(answers["jid"].isdigit() and len(answers["jid"]) == 20, answers)
        self.assertEqual(answers["returns"], {m: {"ret": "cached"} for m in MINIONS})

    async def test_iter(self) -> None:
        """
        C{cmd_iter} yields each minion's return once, as
        C{{minion: {"ret", "retcode", "jid"}}}, all of one job.
        """
        items = await self.program(ITER)
        self.assertEqual(sorted(next(iter(item)) for item in items), list(MINIONS))
        jids = set()
        for item in items:
            ((minionId, data),) = item.items()
            self.assertEqual((data["ret"], data["retcode"]), ("hi", 0))
            jids.add(data["jid"])
        self.assertEqual(len(jids), 1)

    async def test_batch(self) -> None:
        """
        C{cmd_batch} with a batch of one runs on each minion in turn and
        yields C{{minion: return}}.
        """
        items = await self.program(BATCH)
        self.assertEqual(items, [{"minion1": "b"}, {"minion2": "b"}])

    async def test_twistedProgram(self) -> None:
        """
        A Twisted program uses the L{Deferred} core on its own reactor
        (C{run}, C{publish}, C{runner});
        the synchronous facade, called on that reactor's thread, refuses
        with L{ReactorThreadError} instead of hanging.
        """
        answers = await self.program(TWISTED_PROGRAM)
        self.assertEqual(answers["returns"], {"minion1": True, "minion2": True})
        self.assertEqual(answers["published"], ["minion1"])
        self.assertEqual(answers["up"], list(MINIONS))
        self.assertIn("salttwist.client.local.LocalClient", answers["refused"])


class RunnerClientTests(ClientAPITestCase):
    """
    L{salttwist.client.RunnerClient} against a real master.
    """

    async def test_manageUp(self) -> None:
        """
        C{cmd("manage.up")} lists both connected minions; C{cmd_sync} with
        low data (given a loaded config) passes C{tgt} on.
        """
        answers = await self.program(RUNNER)
        self.assertEqual(answers, {"up": list(MINIONS), "fromOpts": ["minion1"]})


class CallerTests(TestCase):
    """
    L{salttwist.client.Caller} runs a minion's modules here; no master is
    needed.
    """

    timeout = 60

    async def test_cmd(self) -> None:
        """
        C{cmd} returns the function's return: C{test.echo}, C{cmd.run}
        (a child process, reaped without the reactor's signal handler) and
        the config's id as a grain.
        """
        configDir = os.path.abspath(self.mktemp())
        os.makedirs(configDir)
        with open(os.path.join(configDir, "minion"), "w") as f:
            f.write(f"root_dir: {configDir}\nid: caller1\n")
        answers = await runProgram(CALLER, configDir, cwd=configDir)
        self.assertEqual(
            answers,
            {"echo": "hi", "shell": "from-a-child-process", "grain": {"id": "caller1"}},
        )
