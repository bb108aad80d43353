# -*- test-case-name: tests.integration.test_readme -*-
"""
The README's command examples, run as written.

Every line of every C{sh} block under the README's "Commands" heading is a
command a user may copy. This test runs each one against a real master
with minions C{minion1}, C{web1} and C{web2}, as the README says, with
C{SALTTWIST_CONFIG_DIR} pointing at the master's config (the minion's for
C{salttwist-call}) instead of C{/etc/salttwist}. The example jid is
replaced by a real one. A line whose comment says "until Ctrl-C" is
started, given a moment, interrupted with SIGINT, and must exit 0; a line
ending in C{&} runs in the background while the rest of its block runs and
must end with 0 by the end of the block; every other line must exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterator
from typing import Any

from twisted.trial.unittest import FailTest, SynchronousTestCase, TestCase

from salttwist.cli import CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR
from tests.integration.harness import (
    Cluster,
    DaemonProcess,
    runCommand,
    sleep,
    spawnDaemon,
    waitFor,
)

README = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "README.md")
MINIONS = ("minion1", "web1", "web2")
#: Where the README's examples write outside the test's directories (as a
#: user would, under /tmp), removed after the test.
README_DESTINATIONS = (
    "/tmp/salttwist-readme-motd",
    "/tmp/salttwist-readme-cp",
    "/tmp/salttwist-readme-state",
)
#: The jid the README's examples use.
EXAMPLE_JID = "20260316190000123456"
UNTIL_CTRL_C = "until Ctrl-C"


def commandExamples(text: str) -> Iterator[tuple[int, str, str]]:
    """
    The command lines of the C{sh} blocks under the C{## Commands} heading,
    with the comment of each.

    @return: C{(block number, command, comment)}; the command without its
        comment.
    """
    start = text.index("\n## Commands\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else None]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.M | re.S)
    for number, block in enumerate(blocks):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            code, comment = _splitComment(line)
            command = shlex.join(shlex.split(code))
            yield number, command, comment


def _splitComment(line: str) -> tuple[str, str]:
    """
    @return: C{line}'s command and its C{#} comment (a C{#} in quotes or
        inside a word is not one), the comment stripped.
    """
    quote = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index], line[index + 1 :].strip()
    return line, ""


class CommandExamplesParsingTests(SynchronousTestCase):
    """
    L{commandExamples} finds the README's commands.
    """

    def test_everyCommandHasExamples(self) -> None:
        """
        Each command of the README has examples under Commands, and each
        example is one of the commands.
        """
        with open(README) as f:
            examples = list(commandExamples(f.read()))
        programs = {shlex.split(command)[0] for _, command, _ in examples}
        self.assertEqual(
            programs,
            {
                "salttwist",
                "salttwist-key",
                "salttwist-call",
                "salttwist-run",
                "salttwist-cp",
                "salttwist-event",
            },
        )

    def test_comments(self) -> None:
        """
        A comment after the command is split off; quotes in the command
        stay as written.
        """
        text = "x\n## Commands\n```sh\nsalttwist 'web*' test.ping   # all web\n```\n## Next\n"
        self.assertEqual(
            list(commandExamples(text)), [(0, "salttwist 'web*' test.ping", "all web")]
        )


class ReadmeExamplesTests(TestCase):
    """
    The README's examples work as shown.
    """

    timeout = 600

    async def setUp(self) -> None:
        """
        A master (presence events every second, for the presence example)
        with the README's three minions, the file roots and pillar of the
        README's examples (C{salt://motd}, C{role: web} for C{web*}), and
        C{etc/motd} beside the commands for C{salttwist-cp}.
        """
        self.cluster = Cluster(self)
        roots = self._writeRoots(self.cluster.baseDir)
        self.cluster.writeMasterConfig(presence_events=True, loop_interval=1, **roots)
        await self.cluster.startReady(MINIONS, **roots)
        for leftover in README_DESTINATIONS:
            self.addCleanup(shutil.rmtree, leftover, True)
            self.addCleanup(_removeFile, leftover)
        saved = os.environ.get(CONFIG_DIR_ENV)
        self.addCleanup(self._restoreEnvironment, saved)

    @staticmethod
    def _writeRoots(baseDir: str) -> dict[str, Any]:
        """
        Write the README's file roots and pillar under C{baseDir}.

        @return: the C{file_roots} and C{pillar_roots} options.
        """
        files = {
            "srv/salt/motd": "Welcome to {{ grains['id'] }}\n",
            "srv/pillar/top.sls": "base:\n  '*':\n    - common\n  'web*':\n    - web\n",
            "srv/pillar/common.sls": "site: example.org\n",
            "srv/pillar/web.sls": (
                "role: web\nports: {% for n in range(3) %}\n  - {{ 8080 + n }}{% endfor %}\n"
            ),
            "etc/motd": "Hello from the master\n",
            "srv/salt/top.sls": "base:\n  '*':\n    - readme\n",
            "srv/salt/orch.sls": (
                "ping_all:\n  salt.function:\n    - name: test.ping\n    - tgt: '*'\n"
            ),
            "srv/salt/readme.sls": (
                "motd:\n  file.managed:\n    - name: /tmp/salttwist-readme-state\n"
                "    - contents: Hello from {{ grains['id'] }}\n"
            ),
        }
        for name, text in files.items():
            path = os.path.join(baseDir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return {
            "file_roots": {"base": [os.path.join(baseDir, "srv", "salt")]},
            "pillar_roots": {"base": [os.path.join(baseDir, "srv", "pillar")]},
        }

    def _restoreEnvironment(self, saved: str | None) -> None:
        if saved is None:
            os.environ.pop(CONFIG_DIR_ENV, None)
        else:
            os.environ[CONFIG_DIR_ENV] = saved

    async def test_examples(self) -> None:
        """
        Every example exits 0; the streaming ones run until interrupted.
        """
        cluster = self.cluster
        with open(README) as f:
            examples = list(commandExamples(f.read()))
        self.assertGreater(len(examples), 40)
        os.environ[CONFIG_DIR_ENV] = cluster.masterDir
        job = await runCommand(["salttwist", "--async", "*", "test.ping"], cwd=cluster.baseDir)
        self.assertEqual(job.code, 0, str(job))
        jid = job.out.split()[-1]
        self.assertRegex(jid, r"^\d{20}$")
        await sleep(1)
        failures: list[str] = []
        background: list[tuple[list[str], DaemonProcess]] = []
        for index, (block, command, comment) in enumerate(examples):
            argv = shlex.split(command.replace(EXAMPLE_JID, jid))
            configDir = self._configDir(argv)
            os.environ[CONFIG_DIR_ENV] = configDir
            argv = [configDir if word == DEFAULT_CONFIG_DIR else word for word in argv]
            if argv[-1] == "&":
                # Started in the background, as in a shell; it must have
                # finished well by the end of its block.
                argv = argv[:-1]
                background.append((argv, spawnDaemon(argv[0], argv, cwd=cluster.baseDir)))
                await sleep(2)
            elif UNTIL_CTRL_C in comment:
                failures.extend(filter(None, [await self._interrupted(argv)]))
            else:
                result = await runCommand(argv, cwd=cluster.baseDir)
                if result.code != 0:
                    failures.append(str(result))
            blockEnds = index + 1 == len(examples) or examples[index + 1][0] != block
            if blockEnds:
                for started, process in background:
                    failures.extend(filter(None, [await self._finished(started, process)]))
                background = []
        self.assertEqual(failures, [], "\n\n".join(failures) + "\n" + cluster.logs())

    def _configDir(self, argv: list[str]) -> str:
        """
        The config directory a command of the README means by default: the
        minion's for C{salttwist-call} and C{salttwist-event --node minion},
        else the master's.
        """
        node = argv[argv.index("--node") + 1] if "--node" in argv[:-1] else "master"
        if argv[0] == "salttwist-call" or node == "minion":
            return self.cluster.minionDir("minion1")
        return self.cluster.masterDir

    async def _finished(self, argv: list[str], process: DaemonProcess) -> str | None:
        """
        Wait for a background example to end.

        @return: what went wrong, or L{None}.
        """
        try:
            await waitFor(lambda: not process.running, f"{argv[0]} to finish", timeout=30)
        except FailTest as e:
            process.sendSignal("KILL")
            return f"$ {shlex.join(argv)} &: {e}"
        if process.exitCode != 0:
            return f"$ {shlex.join(argv)} &: {process.describe()}"
        return None

    async def _interrupted(self, argv: list[str]) -> str | None:
        """
        Start C{argv}, let it stream for a moment, interrupt it.

        @return: what went wrong, or L{None}.
        """
        process = spawnDaemon(argv[0], argv, cwd=self.cluster.baseDir)
        await sleep(2)
        if not process.running:
            return f"$ {shlex.join(argv)} ended before Ctrl-C: {process.describe()}"
        process.sendSignal("INT")
        await waitFor(lambda: not process.running, f"{argv[0]} to stop after SIGINT")
        if process.exitCode != 0:
            return f"$ {shlex.join(argv)} after Ctrl-C: {process.describe()}"
        return None


def _removeFile(path: str) -> None:
    """
    Remove the file C{path} if there is one.
    """
    if os.path.isfile(path):
        os.remove(path)
