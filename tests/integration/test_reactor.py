# -*- test-case-name: tests.integration.test_reactor -*-
"""
Integration test of the reactor: a real C{salttwist-master} process with a
C{reactor} for C{salt/minion/*/start}, and twenty simulated minions (the
real minion stack of the benchmark swarm (C{benchmarks/swarmlib.py}): their own keys, real
authentication, real TCP) that start at once.
"""

from __future__ import annotations

import json
import os
import re

from twisted.internet.defer import gatherResults
from twisted.trial.unittest import TestCase

from benchmarks.swarmlib import Swarm, acceptKeys, ensureKeys, minionIdFor
from tests.integration.harness import (
    Cluster,
    EventWatcher,
    runCommand,
    seedKeyPair,
    waitFor,
)

MINION_COUNT = 20
REACTION = """\
echo_back:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - arg:
      - reacted {{ data['id'] }}
announce:
  event.send:
    - tag: myco/reacted/{{ data['id'] }}
    - data:
        id: {{ data['id'] }}
        from: {{ tag }}
"""
RETURN_TAG = re.compile(r"\Asalt/job/\d{20}/ret/(?P<id>.+)\Z")


class ReactorTests(TestCase):
    """
    Every minion that starts makes the master react, however many start at
    once.
    """

    timeout = 180

    async def test_twentyMinionsStartingAtOnce(self) -> None:
        """
        With a reactor answering C{salt/minion/*/start} with a C{local}
        job to that minion and an C{event.send}, twenty minions starting at
        once each get their own job (its return reaches the bus, and
        C{salttwist-run jobs.list_jobs} lists twenty jobs run by user
        C{Reactor}, one per minion) and each cause their own event; no
        reaction fails.
        """
        from twisted.internet import reactor

        cluster = Cluster(self)
        reactionFile = os.path.join(cluster.masterDir, "reactor", "start.sls")
        os.makedirs(os.path.dirname(reactionFile))
        with open(reactionFile, "w") as f:
            f.write(REACTION)
        cluster.writeMasterConfig(reactor=[{"salt/minion/*/start": ["reactor/start.sls"]}])
        keysDir = os.path.join(cluster.baseDir, "keys")
        ensureKeys(keysDir, MINION_COUNT)
        seedKeyPair(cluster.masterPkiDir, "master", "master")
        await cluster.startMaster()
        assert cluster.ports is not None
        ids = [(i, minionIdFor("r-", i)) for i in range(MINION_COUNT)]
        acceptKeys(cluster.masterPkiDir, keysDir, ids, 2048)

        watcher = EventWatcher()
        await watcher.connect(cluster.sockDir, ("salt/", "myco/"))
        self.addCleanup(watcher.close)

        swarm = Swarm(
            reactor,
            os.path.join(cluster.baseDir, "swarm"),
            keysDir,
            [i for i, _ in ids],
            "127.0.0.1",
            cluster.ports["ret_port"],
            idPrefix="r-",
        )

        async def stopSwarm() -> None:
            protocols = [p for m in swarm.minions for p in (m.req, m.pub) if p is not None]
            swarm.stop()
            await gatherResults([p.lost for p in protocols])

        self.addCleanup(stopSwarm)
        swarm.start()

        minionIds = {minionId for _, minionId in ids}

        def seen() -> tuple[set[str], set[str]]:
            tags = list(watcher.tags)
            if "salt/reactor/error" in tags:
                self.fail(f"a reaction failed\n{cluster.logs()}")
            announced = {t[len("myco/reacted/") :] for t in tags if t.startswith("myco/reacted/")}
            returned = {m.group("id") for m in map(RETURN_TAG.match, tags) if m}
            return announced, returned

        await waitFor(
            lambda: seen() == (minionIds, minionIds),
            f"{MINION_COUNT} announcements and job returns",
            timeout=120,
            context=lambda: f"seen (announced, returned): {seen()}\n{cluster.logs()}",
        )
        self.assertEqual(swarm.status()["returns"], MINION_COUNT)

        async def listedJobs() -> dict[str, dict[str, object]] | None:
            result = await runCommand(
                [
                    "salttwist-run",
                    "-c",
                    cluster.masterDir,
                    "jobs.list_jobs",
                    "search_function=test.echo",
                    "--out",
                    "json",
                ],
                cwd=cluster.baseDir,
            )
            self.assertEqual(result.code, 0, cluster.explain(result))
            jobs = json.loads(result.out)
            return jobs if len(jobs) == MINION_COUNT else None

        jobs = await waitFor(listedJobs, "twenty jobs in the job cache", context=cluster.logs)
        self.assertEqual(
            sorted((job["Target"], job["Arguments"], job["User"]) for job in jobs.values()),
            sorted((m, [f"reacted {m}"], "Reactor") for m in minionIds),
        )
