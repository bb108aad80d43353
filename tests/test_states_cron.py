# -*- test-case-name: tests.test_states_cron -*-
"""
Tests for L{salttwist.states.cron}: the states over the real cron module,
on a spool directory (the C{cron_spool_dir} option) and, once, on a real
test user's crontab through the C{crontab} command.
"""

from __future__ import annotations

import os
import subprocess

from twisted.trial.unittest import TestCase

from salttwist.states import StateContext
from tests._statectx import makeStateContext, runState
from tests.test_modules_cron import TAG, makeCronUser


class CronStateTests(TestCase):
    """
    C{cron.present}, C{absent}, C{env_present}, C{env_absent}.
    """

    def setUp(self) -> None:
        self.spool = os.path.abspath(self.mktemp())

    def ctx(self, test: bool = False) -> StateContext:
        return makeStateContext(test=test, opts={"cron_spool_dir": self.spool})

    def text(self) -> str:
        with open(os.path.join(self.spool, "web")) as f:
            return f.read()

    async def test_present(self) -> None:
        """
        A job is added (identified by its name), then present; a change is
        an update; test mode says which, changing nothing.
        """
        args = dict(name="/bin/backup", user="web", minute=5, hour=2, comment="nightly")
        preview = await runState("cron.present", ctx=self.ctx(test=True), **args)
        self.assertEqual(
            (preview["result"], preview["comment"], preview["changes"]),
            (None, "Cron /bin/backup is set to be added", {}),
        )
        self.assertFalse(os.path.exists(os.path.join(self.spool, "web")))
        ret = await runState("cron.present", ctx=self.ctx(), **args)
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, "Cron /bin/backup added to web's crontab", {"web": "/bin/backup"}),
        )
        self.assertEqual(
            self.text(),
            f"{TAG}\n# nightly SALT_CRON_IDENTIFIER:/bin/backup\n5 2 * * * /bin/backup\n",
        )
        same = await runState("cron.present", ctx=self.ctx(test=True), **args)
        self.assertEqual(
            (same["result"], same["comment"]), (True, "Cron /bin/backup already present")
        )
        again = await runState("cron.present", ctx=self.ctx(), **args)
        self.assertEqual((again["result"], again["changes"]), (True, {}))
        args["hour"] = 3
        preview = await runState("cron.present", ctx=self.ctx(test=True), **args)
        self.assertEqual(preview["comment"], "Cron /bin/backup is set to be updated")
        ret = await runState("cron.present", ctx=self.ctx(), **args)
        self.assertEqual(
            (ret["comment"], ret["changes"]), ("Cron /bin/backup updated", {"web": "/bin/backup"})
        )
        self.assertIn("5 3 * * * /bin/backup\n", self.text())

    async def test_identifierAndSpecial(self) -> None:
        """
        With C{identifier}, a new command replaces the job; C{special}
        writes an C{@} line; C{commented} disables it.
        """
        await runState("cron.present", name="/bin/a", user="web", identifier="job", ctx=self.ctx())
        ret = await runState(
            "cron.present", name="/bin/b", user="web", identifier="job", ctx=self.ctx()
        )
        self.assertEqual(ret["comment"], "Cron /bin/b updated")
        self.assertEqual(self.text(), f"{TAG}\n# SALT_CRON_IDENTIFIER:job\n* * * * * /bin/b\n")
        ret = await runState(
            "cron.present",
            name="/bin/boot",
            user="web",
            special="@reboot",
            commented=True,
            ctx=self.ctx(),
        )
        self.assertTrue(ret["result"])
        self.assertIn(
            "# SALT_CRON_IDENTIFIER:/bin/boot\n#DISABLED#@reboot /bin/boot\n", self.text()
        )
        gone = await runState(
            "cron.absent", name="/bin/boot", user="web", special="@reboot", ctx=self.ctx()
        )
        self.assertEqual(gone["comment"], "Cron /bin/boot removed from web's crontab")

    async def test_absent(self) -> None:
        """
        C{cron.absent} removes the job; test mode says it would.
        """
        await runState("cron.present", name="/bin/x", user="web", ctx=self.ctx())
        preview = await runState("cron.absent", name="/bin/x", user="web", ctx=self.ctx(test=True))
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, "Cron /bin/x is set to be removed")
        )
        ret = await runState("cron.absent", name="/bin/x", user="web", ctx=self.ctx())
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, "Cron /bin/x removed from web's crontab", {"web": "/bin/x"}),
        )
        self.assertEqual(self.text(), f"{TAG}\n")
        again = await runState("cron.absent", name="/bin/x", user="web", ctx=self.ctx())
        self.assertEqual(again["comment"], "Cron /bin/x already absent")
        preview = await runState("cron.absent", name="/bin/x", user="web", ctx=self.ctx(test=True))
        self.assertEqual((preview["result"], preview["comment"]), (True, "Cron /bin/x is absent"))

    async def test_env(self) -> None:
        """
        C{env_present} and C{env_absent}.
        """
        preview = await runState(
            "cron.env_present", name="MAILTO", value="a@b", user="web", ctx=self.ctx(test=True)
        )
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, "Cron env MAILTO is set to be added")
        )
        ret = await runState(
            "cron.env_present", name="MAILTO", value="a@b", user="web", ctx=self.ctx()
        )
        self.assertEqual(
            (ret["comment"], ret["changes"]),
            ("Cron env MAILTO added to web's crontab", {"web": "MAILTO"}),
        )
        self.assertEqual(self.text(), f"{TAG}\nMAILTO=a@b\n")
        same = await runState(
            "cron.env_present", name="MAILTO", value="a@b", user="web", ctx=self.ctx()
        )
        self.assertEqual(same["comment"], "Cron env MAILTO already present")
        changed = await runState(
            "cron.env_present", name="MAILTO", value="c@d", user="web", ctx=self.ctx()
        )
        self.assertEqual(changed["comment"], "Cron env MAILTO updated")
        preview = await runState(
            "cron.env_absent", name="MAILTO", user="web", ctx=self.ctx(test=True)
        )
        self.assertEqual(preview["comment"], "Cron env MAILTO is set to be removed")
        gone = await runState("cron.env_absent", name="MAILTO", user="web", ctx=self.ctx())
        self.assertEqual(gone["comment"], "Cron env MAILTO removed from web's crontab")
        self.assertEqual(self.text(), f"{TAG}\n")

    async def test_realCrontab(self) -> None:
        """
        Through the C{crontab} command, on a real test user's crontab; a
        refused crontab fails the state with the command's error.
        """
        user = makeCronUser(self)
        ctx = makeStateContext()
        ret = await runState("cron.present", name="/bin/true", user=user, minute=7, ctx=ctx)
        self.assertTrue(ret["result"])
        listed = subprocess.run(["crontab", "-u", user, "-l"], capture_output=True, text=True)
        self.assertEqual(
            listed.stdout, f"{TAG}\n# SALT_CRON_IDENTIFIER:/bin/true\n7 * * * * /bin/true\n"
        )
        bad = await runState("cron.present", name="/bin/false", user=user, hour=77, ctx=ctx)
        self.assertFalse(bad["result"])
        self.assertTrue(
            bad["comment"].startswith(
                f"Cron /bin/false for user {user} failed to commit with error \n"
            )
        )
