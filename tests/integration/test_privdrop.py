# -*- test-case-name: tests.integration.test_privdrop -*-
"""
The C{user} option on a real master: started as root with C{user: nobody},
it binds its sockets, then it and its worker processes run as C{nobody},
and minions and the (root) C{salttwist} command still work with it.
"""

from __future__ import annotations

import json
import os
import pwd
import stat

from twisted.trial.unittest import SkipTest

from salttwist.daemon import RunAs, unsearchableParent
from tests.integration.harness import installedPython, makeTraversable, waitFor
from tests.integration.test_end_to_end import IntegrationTestCase


def _uids(pid: int) -> list[int]:
    """
    @return: the real, effective, saved and file-system uids of C{pid}.
    """
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return [int(field) for field in line.split()[1:]]
    raise AssertionError(f"no Uid line for {pid}")


def _children(pid: int) -> list[int]:
    """
    @return: the pids of C{pid}'s child processes.
    """
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # The command name may hold spaces: the fields follow ")".
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry))
    return children


class PrivilegeDropTests(IntegrationTestCase):
    """
    C{user: nobody} on a master started as root.
    """

    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise SkipTest("switching users needs root")
        try:
            self.nobody = pwd.getpwnam("nobody")
        except KeyError:
            raise SkipTest("there is no user nobody") from None
        super().setUp()
        # The daemons see their directories through a link in a 0700
        # directory of root's, and under trial's temporary directory.
        makeTraversable(os.path.realpath(self.cluster.baseDir))
        makeTraversable(os.path.dirname(self.cluster.baseDir))

    async def test_masterRunsAsNobody(self) -> None:
        """
        The master runs as nobody (every uid), its private directories and
        key files belong to nobody, a minion still authenticates and
        C{salttwist '*' test.ping} (run as root, reading the nobody-owned
        C{.root_key}) gets its answer.
        """
        cluster = self.cluster
        cluster.writeMasterConfig(user="nobody", worker_threads=1)
        await cluster.startReady(("minion1",))
        master = cluster.master
        assert master is not None and master.pid is not None
        uid = self.nobody.pw_uid
        self.assertEqual(_uids(master.pid), [uid] * 4, cluster.logs())
        config = cluster.masterConfig()
        for path in (
            config["pki_dir"],
            os.path.join(config["pki_dir"], "master.pem"),
            config["cachedir"],
            os.path.join(config["cachedir"], ".root_key"),
            config["sock_dir"],
        ):
            self.assertEqual(os.stat(path).st_uid, uid, path)
        rootKey = os.path.join(config["cachedir"], ".root_key")
        self.assertEqual(stat.S_IMODE(os.stat(rootKey).st_mode), 0o600)

        result = await cluster.salt("--out", "json", "*", "test.ping")
        self.assertEqual(result.code, 0, cluster.explain(result))
        self.assertEqual(json.loads(result.out), {"minion1": True}, cluster.explain(result))

    async def test_workersRunAsNobody(self) -> None:
        """
        The master's worker processes, spawned after the switch, run as
        nobody too.
        """
        interpreter = os.path.realpath(installedPython())
        runAs = RunAs("nobody", self.nobody.pw_uid, self.nobody.pw_gid)
        blocked = unsearchableParent(interpreter, runAs)
        if blocked is not None or not os.stat(interpreter).st_mode & stat.S_IXOTH:
            raise SkipTest(f"nobody cannot run {interpreter} (blocked at {blocked})")
        cluster = self.cluster
        cluster.writeMasterConfig(user="nobody", worker_threads=2)
        master = await cluster.startMaster()
        assert master.pid is not None
        masterPid = master.pid

        def workers() -> list[int] | None:
            children = _children(masterPid)
            return children if len(children) >= 2 else None

        children = await waitFor(workers, "the master's worker processes", context=cluster.logs)
        for child in children:
            self.assertEqual(
                _uids(child), [self.nobody.pw_uid] * 4, f"worker {child}\n{cluster.logs()}"
            )
