# -*- test-case-name: tests.test_modules_cron -*-
"""
Tests for L{salttwist.modules.cron}: Salt's crontab format in a spool
directory (the C{cron_spool_dir} option), and the real C{crontab} command
with a test user made for the test and removed after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import cron
from tests._statectx import makeLoaderContext

TAG = "# Lines below here are managed by Salt, do not edit"


def makeCronUser(case: SynchronousTestCase) -> str:
    """
    @return: the name of a real user made for C{case} (removed, with its
        crontab, when the test ends); the test is skipped without the
        C{crontab} command or root.
    """
    if shutil.which("crontab") is None:
        raise case.skipTest("the crontab command is not installed (Debian: apt-get install cron)")
    if os.geteuid() != 0:
        raise case.skipTest("another user's crontab needs root")
    name = f"salttwist-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-r", "-M", "-N", "-s", "/usr/sbin/nologin", name], check=True)
    case.addCleanup(subprocess.run, ["userdel", name], check=True, capture_output=True)
    case.addCleanup(subprocess.run, ["crontab", "-u", name, "-r"], capture_output=True)
    return name


class SpoolTests(SynchronousTestCase):
    """
    The crontab as a file of a spool directory.
    """

    def setUp(self) -> None:
        self.spool = os.path.abspath(self.mktemp())
        self.context = makeLoaderContext({"cron_spool_dir": self.spool})

    def text(self, user: str = "web") -> str:
        with open(os.path.join(self.spool, user)) as f:
            return f.read()

    def test_setJob(self) -> None:
        """
        A new job is written below Salt's tag with its comment and
        identifier; the same job again is present; a changed time updates
        it in place.
        """
        c = self.context
        self.assertEqual(cron.raw_cron(c, "web"), "")
        self.assertEqual(
            cron.set_job(
                c, "web", 5, 2, "*", "*", "1", "/bin/backup", comment="nightly", identifier="backup"
            ),
            "new",
        )
        self.assertEqual(
            self.text(),
            f"{TAG}\n# nightly SALT_CRON_IDENTIFIER:backup\n5 2 * * 1 /bin/backup\n",
        )
        self.assertEqual(oct(os.stat(os.path.join(self.spool, "web")).st_mode & 0o777), "0o600")
        self.assertEqual(
            cron.set_job(
                c,
                "web",
                "5",
                "2",
                "*",
                "*",
                1,
                "/bin/backup",
                comment="nightly",
                identifier="backup",
            ),
            "present",
        )
        self.assertEqual(
            cron.set_job(c, "web", 6, 2, "*", "*", 1, "/bin/backup --all", identifier="backup"),
            "updated",
        )
        self.assertEqual(
            cron.list_tab(c, "web")["crons"],
            [
                {
                    "minute": "6",
                    "hour": "2",
                    "daymonth": "*",
                    "month": "*",
                    "dayweek": "1",
                    "identifier": "backup",
                    "cmd": "/bin/backup --all",
                    "comment": "nightly",
                    "commented": False,
                }
            ],
        )

    def test_noIdentifier(self) -> None:
        """
        Without an identifier a job is known by its command.
        """
        c = self.context
        self.assertEqual(cron.set_job(c, "web", "*", "*", "*", "*", "*", "true"), "new")
        self.assertEqual(self.text(), f"{TAG}\n* * * * * true\n")
        self.assertEqual(cron.set_job(c, "web", "*/5", "*", "*", "*", "*", "true"), "updated")
        self.assertEqual(cron.set_job(c, "web", "*", "*", "*", "*", "*", "false"), "new")
        self.assertEqual(self.text(), f"{TAG}\n*/5 * * * * true\n* * * * * false\n")
        self.assertEqual(cron.rm_job(c, "web", "true"), "removed")
        self.assertEqual(cron.rm_job(c, "web", "true"), "absent")
        self.assertEqual(cron.rm_job(c, "web", "false", minute="3"), "absent")
        self.assertEqual(self.text(), f"{TAG}\n* * * * * false\n")

    def test_commentedAndRandom(self) -> None:
        """
        C{commented} writes C{#DISABLED#}; C{random} picks a value once and
        keeps it.
        """
        c = self.context
        cron.set_job(
            c, "web", "random", "random", "*", "*", "*", "job", commented=True, identifier="j"
        )
        job = cron.list_tab(c, "web")["crons"][0]
        self.assertTrue(job["commented"])
        self.assertIn("#DISABLED#", self.text())
        self.assertTrue(0 <= int(job["minute"]) < 60)
        self.assertTrue(0 <= int(job["hour"]) < 24)
        self.assertEqual(
            cron.set_job(
                c, "web", "random", "random", "*", "*", "*", "job", commented=True, identifier="j"
            ),
            "present",
        )
        self.assertEqual(
            cron.set_job(c, "web", "random", "random", "*", "*", "*", "job", identifier="j"),
            "updated",
        )
        self.assertNotIn("#DISABLED#", self.text())
        self.assertEqual(cron.list_tab(c, "web")["crons"][0]["minute"], job["minute"])

    def test_specialAndEnv(self) -> None:
        """
        C{@special} jobs and environment lines.
        """
        c = self.context
        self.assertEqual(cron.set_env(c, "web", "MAILTO", "ops@example.com"), "new")
        self.assertEqual(cron.set_env(c, "web", "MAILTO", "ops@example.com"), "present")
        self.assertEqual(cron.set_env(c, "web", "MAILTO", "dev@example.com"), "updated")
        self.assertEqual(cron.set_special(c, "web", "@reboot", "/bin/boot", identifier="b"), "new")
        self.assertEqual(
            cron.set_special(c, "web", "@reboot", "/bin/boot", identifier="b"), "present"
        )
        self.assertEqual(
            cron.set_special(c, "web", "@hourly", "/bin/boot", identifier="b"), "updated"
        )
        self.assertEqual(
            self.text(),
            f"{TAG}\nMAILTO=dev@example.com\n# SALT_CRON_IDENTIFIER:b\n@hourly /bin/boot\n",
        )
        tab = cron.list_tab(c, "web")
        self.assertEqual(tab["env"], [{"name": "MAILTO", "value": "dev@example.com"}])
        self.assertEqual(tab["special"][0]["spec"], "@hourly")
        self.assertEqual(cron.rm_special(c, "web", "/bin/boot", identifier="b"), "removed")
        self.assertEqual(cron.rm_env(c, "web", "MAILTO"), "removed")
        self.assertEqual(cron.rm_env(c, "web", "MAILTO"), "absent")
        self.assertEqual(self.text(), f"{TAG}\n")

    def test_preKept(self) -> None:
        """
        Lines above Salt's tag are kept as they are.
        """
        os.makedirs(self.spool)
        with open(os.path.join(self.spool, "web"), "w") as f:
            f.write("# mine\n0 0 * * * /bin/mine\n")
        cron.set_job(self.context, "web", 1, 1, 1, 1, 1, "/bin/x")
        self.assertEqual(self.text(), f"# mine\n0 0 * * * /bin/mine\n{TAG}\n1 1 1 1 1 /bin/x\n")
        self.assertEqual(
            cron.list_tab(self.context, "web")["pre"], ["# mine", "0 0 * * * /bin/mine"]
        )

    def test_parseMultilineComment(self) -> None:
        """
        Comment lines before a job join into its comment.
        """
        tab = cron._parse(
            f"{TAG}\n# one\n# two SALT_CRON_IDENTIFIER:x\n#DISABLED#@daily run it\nA=b c\n"
        )
        self.assertEqual(
            tab["special"],
            [
                {
                    "spec": "@daily",
                    "cmd": "run it",
                    "identifier": "x",
                    "comment": "one\ntwo",
                    "commented": True,
                }
            ],
        )
        self.assertEqual(tab["env"], [{"name": "A", "value": "b c"}])


class CrontabTests(SynchronousTestCase):
    """
    The real C{crontab} command, on a test user's crontab.
    """

    def setUp(self) -> None:
        self.user = makeCronUser(self)
        self.context = makeLoaderContext()

    def installed(self) -> str:
        return subprocess.run(
            ["crontab", "-u", self.user, "-l"], capture_output=True, text=True, check=True
        ).stdout

    def test_roundTrip(self) -> None:
        """
        Jobs and env lines are installed with C{crontab -u} and read back.
        """
        c, user = self.context, self.user
        self.assertEqual(cron.raw_cron(c, user), "")
        self.assertEqual(cron.set_env(c, user, "SHELL", "/bin/sh"), "new")
        self.assertEqual(
            cron.set_job(c, user, 0, 3, "*", "*", "*", "/bin/true", identifier="t"), "new"
        )
        self.assertEqual(
            self.installed(),
            f"{TAG}\nSHELL=/bin/sh\n# SALT_CRON_IDENTIFIER:t\n0 3 * * * /bin/true\n",
        )
        self.assertEqual(cron.list_tab(c, user)["crons"][0]["cmd"], "/bin/true")
        self.assertEqual(cron.rm_job(c, user, "/bin/true", identifier="t"), "removed")
        self.assertEqual(self.installed(), f"{TAG}\nSHELL=/bin/sh\n")

    def test_refused(self) -> None:
        """
        A crontab the command refuses (a bad time) gives its error.
        """
        result = cron.set_job(self.context, self.user, 99, "*", "*", "*", "*", "/bin/true")
        self.assertNotIn(result, ("new", "updated", "present"))
        self.assertIn("bad minute", result)
        self.assertEqual(cron.raw_cron(self.context, self.user), "")
