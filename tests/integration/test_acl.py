# -*- test-case-name: tests.integration.test_acl -*-
"""
C{publisher_acl} end to end: a real master and minions, and the real
C{salttwist} and C{salttwist-run} commands run as the unprivileged user
C{nobody} (through C{setpriv}), as an admin would let a colleague publish.

These tests need root (to run a command as another user and to give
C{nobody} its key), C{setpriv}, the user C{nobody}, and a virtualenv and
test directory that C{nobody} can read; they are skipped, saying which is
missing, where the machine does not allow that.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import time
from typing import Any

from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SkipTest, TestCase

import salttwist
from salttwist.master.acl import Account, unreachableDirectory
from tests.integration.harness import (
    Cluster,
    CommandResult,
    binPath,
    childEnvironment,
    makeTraversable,
    runCommand,
    waitFor,
)

ACL_USER = "nobody"
MINIONS = ("minion1", "minion2")
ACL = {ACL_USER: ["test.ping", {"minion1": ["test.echo"]}]}


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class PublisherAclTests(TestCase):
    """
    The user C{nobody}, named in C{publisher_acl}, publishes what it is
    allowed and is told why anything else is refused.
    """

    timeout = 120

    async def setUp(self) -> None:
        """
        Skip unless this machine can run the CLI as C{nobody}; then start a
        master whose C{publisher_acl} names C{nobody}, with the directories
        an admin opens for it (searchable, not listable), and two minions.
        """
        if os.geteuid() != 0:
            raise SkipTest("needs root, to run salttwist as another user")
        self.setpriv = shutil.which("setpriv")
        if self.setpriv is None:
            raise SkipTest("needs setpriv (util-linux) to run salttwist as another user")
        try:
            self.account = pwd.getpwnam(ACL_USER)
        except KeyError:
            raise SkipTest(f"needs the user {ACL_USER!r}") from None
        # The checkout (on sys.path) may be a directory only root can search
        # and list, a fresh temporary clone's say: nobody's python must find
        # the salttwist package in it.
        checkout = os.path.dirname(os.path.dirname(os.path.abspath(salttwist.__file__)))
        makeTraversable(checkout)
        mode = stat.S_IMODE(os.stat(checkout).st_mode)
        if not mode & stat.S_IROTH:
            os.chmod(checkout, mode | stat.S_IROTH | stat.S_IXOTH)
        probe = await self.runAs(self.account, ["python", "-c", "import salttwist"])
        if probe.code != 0:
            raise SkipTest(f"{ACL_USER} cannot run this virtualenv's python:\n{probe}")
        self.cluster = Cluster(self)
        self.openDirectories()
        self.cluster.writeMasterConfig(publisher_acl=ACL)
        os.chmod(os.path.join(self.cluster.masterDir, "master"), 0o644)
        await self.cluster.startReady(MINIONS)

    def openDirectories(self) -> None:
        """
        Make the config directory readable and every directory on the way
        to C{cachedir} and C{sock_dir} searchable by others, as the README
        tells the admin to; skip if a directory this test does not own is
        in the way.
        """
        baseDir = os.path.realpath(self.cluster.baseDir)
        linkHolder = os.path.dirname(self.cluster.baseDir)
        os.chmod(linkHolder, 0o711)
        config = self.cluster.masterConfig()
        for directory in (config["cachedir"], config["sock_dir"]):
            os.makedirs(directory, mode=0o711, exist_ok=True)
            current = directory
            while current.startswith(self.cluster.baseDir):
                os.chmod(current, os.stat(current).st_mode & 0o777 | 0o711)
                current = os.path.dirname(current)
        # trial runs with umask 077: open the test's own directories, from
        # its temporary directory up to trial's working directory.
        os.chmod(baseDir, 0o755)
        top = os.getcwd()
        current = os.path.dirname(baseDir)
        while current.startswith(top + os.sep) or current == top:
            os.chmod(current, os.stat(current).st_mode & 0o777 | 0o711)
            current = os.path.dirname(current)
        account = Account(ACL_USER, self.account.pw_uid, self.account.pw_gid)
        for path in (baseDir, linkHolder):
            blocked = unreachableDirectory(path, account, [self.account.pw_gid])
            if blocked is not None:
                raise SkipTest(f"{ACL_USER} cannot search {blocked}, which this test does not own")

    async def runAs(self, account: pwd.struct_passwd, argv: list[str]) -> CommandResult:
        """
        Run console script C{argv[0]} of the virtualenv as C{account}, from
        C{/}, with standard input closed.
        """
        command = [
            f"--reuid={account.pw_uid}",
            f"--regid={account.pw_gid}",
            "--clear-groups",
            binPath(argv[0]),
            *argv[1:],
        ]
        start = time.monotonic()
        try:
            out, err, code = await getProcessOutputAndValue(
                self.setpriv, command, env=childEnvironment(), path="/", reactor=_reactor()
            )
        except tuple as e:
            out, err, signal = e.args
            code = -signal
        return CommandResult(
            [self.setpriv, *command],
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            code,
            time.monotonic() - start,
        )

    async def salt(self, *args: str) -> CommandResult:
        """
        Run C{salttwist -c MASTER_DIR ARGS} as C{nobody}.
        """
        return await self.runAs(self.account, ["salttwist", "-c", self.cluster.masterDir, *args])

    async def test_allowedJobs(self) -> None:
        """
        The master gave C{nobody} its own key (mode 0400, owned by it);
        with it C{nobody} runs C{test.ping} everywhere and C{test.echo} on
        C{minion1}, the one minion its entry allows it on, and the job is
        recorded as C{nobody}'s.
        """
        keyPath = os.path.join(self.cluster.masterConfig()["cachedir"], f".{ACL_USER}_key")
        info = os.stat(keyPath)
        self.assertEqual((stat.S_IMODE(info.st_mode), info.st_uid), (0o400, self.account.pw_uid))

        result = await self.salt("*", "test.ping", "--out", "json", "--static")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(json.loads(result.out), {"minion1": True, "minion2": True})

        result = await self.salt("minion1", "test.echo", "hello", "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(json.loads(result.out), {"minion1": "hello"})

        async def recordedAsNobody() -> bool:
            jobs = await runCommand(
                ["salttwist-run", "-c", self.cluster.masterDir, "--out", "json", "jobs.list_jobs"]
            )
            if jobs.code != 0:
                return False
            return any(
                job.get("Function") == "test.echo" and job.get("User") == ACL_USER
                for job in json.loads(jobs.out).values()
            )

        await waitFor(recordedAsNobody, "the job recorded as nobody's", context=self.cluster.logs)

    async def test_refusals(self) -> None:
        """
        A function outside the ACL, an allowed function on a minion outside
        its target, and a runner are each refused with a message that says
        who may not run what where; the command exits 2 (master refused) or
        1 (runner refused).
        """
        result = await self.salt("minion1", "cmd.run", "id")
        self.assertEqual(result.code, 2, self.cluster.explain(result))
        self.assertIn(
            f"Authorization error occurred: user {ACL_USER} is not permitted to run cmd.run",
            result.err,
        )
        self.assertIn("test.ping on every minion", result.err)

        result = await self.salt("*", "test.echo", "hello")
        self.assertEqual(result.code, 2, self.cluster.explain(result))
        self.assertIn(f"user {ACL_USER} is not permitted to run test.echo on minion2", result.err)
        self.assertIn("only on minions matching 'minion1'", result.err)

        result = await self.runAs(
            self.account, ["salttwist-run", "-c", self.cluster.masterDir, "manage.up"]
        )
        self.assertEqual(result.code, 1, self.cluster.explain(result))
        self.assertIn(f"user {ACL_USER} may not run the runner manage.up", result.err)

    async def test_userWithoutKey(self) -> None:
        """
        A user the ACL does not name is told it may not publish, and why.
        """
        others = [
            entry
            for entry in pwd.getpwall()
            if entry.pw_uid not in (0, self.account.pw_uid) and entry.pw_name != ACL_USER
        ]
        if not others:
            raise SkipTest("no second unprivileged user on this machine")
        other = others[0]
        result = await self.runAs(
            other, ["salttwist", "-c", self.cluster.masterDir, "*", "test.ping"]
        )
        self.assertEqual(result.code, 2, self.cluster.explain(result))
        self.assertIn(f"user {other.pw_name} may not publish", result.err)
        self.assertIn("publisher_acl", result.err)
