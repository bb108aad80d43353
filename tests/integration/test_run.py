# -*- test-case-name: tests.integration.test_run -*-
"""
Integration tests of C{salttwist-run}: real master and minion daemons on
127.0.0.1, driven with the real C{salttwist}, C{salttwist-run} and
C{salttwist-key} commands.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import (
    DEADLINE,
    Cluster,
    CommandResult,
    DaemonProcess,
    runCommand,
    sleep,
    waitFor,
)

MINIONS = ("minion1", "minion2")
START_TIME = re.compile(r"\A\d{4}, [A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2}\.\d{6}\Z")


class RunTestCase(TestCase):
    """
    A trial test case on the real reactor with a master and two minions
    ready; every wait of the harness has its own deadline.
    """

    timeout = 120

    async def setUp(self) -> None:
        """
        Start the master and both minions, their keys accepted.
        """
        self.cluster = Cluster(self)
        await self.cluster.startReady(MINIONS)

    async def run_(self, *args: str) -> CommandResult:
        """
        Run C{salttwist-run -c MASTER_DIR ARGS}.
        """
        cluster = self.cluster
        return await runCommand(
            ["salttwist-run", "-c", cluster.masterDir, *args], cwd=cluster.baseDir
        )

    async def runJson(self, *args: str) -> Any:
        """
        Run C{salttwist-run ARGS --out json}, which must succeed.

        @return: the printed return.
        """
        result = await self.run_(*args, "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(result.err, "", str(result))
        return json.loads(result.out)

    async def ping(self) -> None:
        """
        Run C{salttwist '*' test.ping}, which both minions answer.
        """
        ping = await self.cluster.salt("*", "test.ping", "--static", "--out", "json")
        self.assertEqual(ping.code, 0, self.cluster.explain(ping))
        self.assertEqual(json.loads(ping.out), {"minion1": True, "minion2": True}, str(ping))


class JobsRunnerTests(RunTestCase):
    """
    C{salttwist-run jobs.*} reads back what the master's job cache kept.
    """

    async def test_jobs(self) -> None:
        """
        After C{salttwist '*' test.ping}, C{jobs.list_jobs} lists the job in
        Salt's shape, C{jobs.lookup_jid} gives both minions' C{True},
        C{jobs.print_job} the job with each return, and C{jobs.exit_success}
        C{True} for both.
        """
        await self.ping()
        listed = await self.runJson("jobs.list_jobs", "search_function=test.ping")
        self.assertEqual(len(listed), 1, listed)
        [(jid, job)] = listed.items()
        self.assertEqual(
            {key: value for key, value in job.items() if key != "StartTime"},
            {
                "Function": "test.ping",
                "Arguments": [],
                "Target": "*",
                "Target-type": "glob",
                "User": job["User"],
            },
        )
        self.assertRegex(job["StartTime"], START_TIME)
        self.assertEqual(await self.runJson("jobs.list_jobs", "search_function=cmd.*"), {})

        looked = await self.runJson("jobs.lookup_jid", jid)
        self.assertEqual(looked, {"minion1": True, "minion2": True})

        printed = await self.runJson("jobs.print_job", jid)
        self.assertEqual(list(printed), [jid])
        self.assertEqual(printed[jid]["Minions"], list(MINIONS))
        self.assertEqual(
            printed[jid]["Result"],
            {m: {"return": True, "retcode": 0, "success": True} for m in MINIONS},
        )
        self.assertEqual(
            await self.runJson("jobs.exit_success", jid), {"minion1": True, "minion2": True}
        )

    async def test_errors(self) -> None:
        """
        An unknown runner and an invalid jid fail with the master's message
        and exit code 1; the default C{nested} output prints a plain return.
        """
        unknown = await self.run_("nope.nope")
        self.assertEqual(unknown.code, 1, self.cluster.explain(unknown))
        self.assertEqual(unknown.err, "Error: 'nope.nope' is not available.\n", str(unknown))
        invalid = await self.run_("jobs.lookup_jid", "abc")
        self.assertEqual(invalid.code, 1, self.cluster.explain(invalid))
        self.assertIn("invalid jid", invalid.err, str(invalid))
        nested = await self.run_("manage.up")
        self.assertEqual(nested.code, 0, self.cluster.explain(nested))
        self.assertEqual(nested.out, "- minion1\n- minion2\n", str(nested))

    async def test_saltCmd(self) -> None:
        """
        C{salt.cmd} runs an execution module function in the master, with
        the master's grains; a command runs as a process of the master.
        """
        self.assertEqual(await self.runJson("salt.cmd", "test.echo", "hello"), "hello")
        self.assertEqual(await self.runJson("salt.cmd", "cmd.run", "echo hi"), "hi")
        self.assertTrue((await self.runJson("salt.cmd", "grains.get", "id")).endswith("_master"))


class ActiveJobsTests(RunTestCase):
    """
    C{salttwist-run jobs.active} lists the jobs the minions say they are
    running (C{saltutil.running}), however long they have been running.
    """

    async def publishSleep(self, seconds: int) -> str:
        """
        Run C{salttwist minion1 test.sleep SECONDS --async}.

        @return: the job's jid.
        """
        published = await self.cluster.salt("minion1", "test.sleep", str(seconds), "--async")
        self.assertEqual(published.code, 0, self.cluster.explain(published))
        match = re.fullmatch(r"Executed command with job ID: (\d{20})\n", published.out)
        assert match is not None, str(published)
        return match.group(1)

    async def waitUntilNotActive(self, jid: str, timeout: float = DEADLINE) -> None:
        """
        Run C{jobs.active} until it no longer lists C{jid} (for up to
        C{timeout} seconds).
        """
        reports: list[Any] = []

        async def gone() -> bool:
            reports.append(await self.runJson("jobs.active"))
            return jid not in reports[-1]

        await waitFor(
            gone,
            f"jobs.active to stop listing {jid}",
            timeout=timeout,
            context=lambda: str(reports[-1:]),
        )

    async def test_longJob(self) -> None:
        """
        A job still running past the master's C{timeout} (5 s) is listed in
        Salt's shape with the pid of the minion running it and no return
        yet; once it has returned it is not. (The job sleeps 20 s, so that
        a loaded machine still lists it; how long after the publication it
        was listed is printed.)
        """
        jid = await self.publishSleep(20)
        started = time.monotonic()
        await sleep(6)
        active = await self.runJson("jobs.active")
        print(f"\njobs.active answered {time.monotonic() - started:.2f}s after the publication")
        self.assertEqual(list(active), [jid], self.cluster.explain())
        job = active[jid]
        self.assertRegex(job.pop("StartTime"), START_TIME)
        self.assertEqual(
            job,
            {
                "Function": "test.sleep",
                "Arguments": [20],
                "Target": "minion1",
                "Target-type": "glob",
                "User": job["User"],
                "Running": [{"minion1": self.cluster.minions["minion1"].pid}],
                "Returned": [],
            },
        )
        await self.waitUntilNotActive(jid, timeout=20 + DEADLINE)
        self.assertEqual(await self.runJson("jobs.lookup_jid", jid), {"minion1": True})
        self.assertEqual(await self.runJson("jobs.active"), {})

    async def test_goneMinion(self) -> None:
        """
        The job of a minion that is killed while it runs it is no longer
        listed.
        """
        jid = await self.publishSleep(60)
        listed: list[Any] = []

        async def running() -> bool:
            listed.append(await self.runJson("jobs.active"))
            return jid in listed[-1]

        await waitFor(running, f"jobs.active to list {jid}", context=lambda: str(listed[-1:]))
        killed = self.cluster.minions["minion1"]
        killed.sendSignal("KILL")
        await killed.ended
        await self.waitUntilNotActive(jid)


class ManageRunnerTests(RunTestCase):
    """
    C{salttwist-run manage.*} tells which minions are up.
    """

    async def test_status(self) -> None:
        """
        C{manage.status} shows both minions up; once minion2 is killed, it
        is down, C{manage.present} and C{manage.not_present} agree, and
        C{manage.down removekeys=True} deletes its key.
        """
        cluster = self.cluster
        self.assertEqual(await self.runJson("manage.status"), {"up": list(MINIONS), "down": []})
        killed = cluster.minions["minion2"]
        killed.sendSignal("KILL")
        await killed.ended
        statuses: list[Any] = []

        async def minion2Down() -> bool:
            statuses.append(await self.runJson("manage.status"))
            return statuses[-1] == {"up": ["minion1"], "down": ["minion2"]}

        await waitFor(
            minion2Down, "manage.status to show minion2 down", context=lambda: str(statuses[-1:])
        )
        self.assertEqual(await self.runJson("manage.present"), ["minion1"])
        self.assertEqual(await self.runJson("manage.not_present"), ["minion2"])
        self.assertEqual(await self.runJson("manage.down", "removekeys=True"), ["minion2"])
        keys = await cluster.key("-L", "--out", "json")
        self.assertEqual(keys.code, 0, cluster.explain(keys))
        self.assertEqual(json.loads(keys.out)["minions"], ["minion1"], str(keys))


class StateEventTests(RunTestCase):
    """
    C{salttwist-run state.event} streams the master's events.
    """

    async def pingUntil(self, process: DaemonProcess, done: Any, what: str) -> None:
        """
        Run C{test.ping} jobs until C{done()} is true: the command may not
        be subscribed yet when a job runs, so the first events can come
        before it listens.
        """
        deadline = time.monotonic() + DEADLINE
        while not done():
            if time.monotonic() > deadline:
                self.fail(f"timed out waiting for {what}\n{process.describe()}")
            await self.ping()
            await process.waitForExit(0.5)

    async def test_count(self) -> None:
        """
        C{state.event count=1 tagmatch=...} prints the first matching event
        of a job, a return, as C{tag<TAB>json}, and exits 0.
        """
        cluster = self.cluster
        process = cluster.spawn(
            "state.event",
            [
                "salttwist-run",
                "-c",
                cluster.masterDir,
                "state.event",
                "count=1",
                "tagmatch=salt/job/*/ret/*",
            ],
        )
        await self.pingUntil(process, lambda: not process.running, "state.event to end")
        self.assertEqual((process.exitCode, process.signal), (0, None), process.describe())
        lines = process.output().splitlines()
        self.assertEqual(len(lines), 1, process.describe())
        tag, _, data = lines[0].partition("\t")
        self.assertRegex(tag, r"\Asalt/job/\d{20}/ret/minion[12]\Z")
        event = json.loads(data)
        self.assertEqual(event["return"], True)
        self.assertEqual(tag.rsplit("/", 1)[1], event["id"])

    async def test_interrupt(self) -> None:
        """
        Without C{count}, C{state.event} streams until Ctrl-C (SIGINT), then
        exits 0.
        """
        cluster = self.cluster
        process = cluster.spawn(
            "state.event",
            ["salttwist-run", "-c", cluster.masterDir, "state.event", "tagmatch=salt/job/*/new"],
        )
        await self.pingUntil(process, lambda: process.output(), "a salt/job/<jid>/new event")
        self.assertTrue(process.running, process.describe())
        self.assertTrue(process.output().startswith("salt/job/"), process.describe())
        process.sendSignal("INT")
        self.assertTrue(await process.waitForExit(DEADLINE), process.describe())
        self.assertEqual((process.exitCode, process.signal), (0, None), process.describe())
