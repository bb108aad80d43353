# -*- test-case-name: tests.test_ext_pillar -*-
"""
Tests for L{salttwist.pillar.ext}: the L{IExtPillar} contract, run against
every implementation (C{file_tree}, C{cmd_json}, C{cmd_yaml}), then what
each does besides, with real directories and real commands.
"""

from __future__ import annotations

import copy
import json
import os
import select
import shlex
import signal
import sys
import time
from typing import Any

from twisted.python import log
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from salttwist.pillar.ext import (
    EXT_PILLARS,
    CommandPillar,
    FileTreePillar,
    getExtPillar,
    registerExtPillar,
)
from salttwist.pillar.interfaces import ExtPillarError, IExtPillar

#: What the contract's minion is given: nested mappings of strings (the
#: shape every implementation can produce).
DATA: dict[str, Any] = {"role": "web", "db": {"user": "app", "password": "s3cret"}}


class ExtPillarContractMixin:
    """
    What every L{IExtPillar} does. Subclasses define C{makePillar(opts)}
    and C{configure(minionId, data)}, which stores C{data} for
    C{minionId} and returns the C{ext_pillar} configuration.
    """

    name: str

    def makePillar(self, opts: dict[str, Any]) -> Any:
        raise NotImplementedError()

    def configure(self, minionId: str, data: dict[str, Any]) -> Any:
        raise NotImplementedError()

    def test_interface(self) -> None:
        """
        It provides L{IExtPillar} and is registered under its name.
        """
        pillar = self.makePillar({})
        self.assertTrue(verifyObject(IExtPillar, pillar))  # type: ignore[attr-defined]
        self.assertEqual(pillar.name, self.name)  # type: ignore[attr-defined]
        self.assertIs(type(getExtPillar(self.name, {})), type(pillar))  # type: ignore[attr-defined]

    def test_data(self) -> None:
        """
        The configured minion gets its data.
        """
        conf = self.configure("web1", DATA)
        result = self.makePillar({}).compile("web1", {}, conf, grains={})
        self.assertEqual(result, DATA)  # type: ignore[attr-defined]

    def test_otherMinion(self) -> None:
        """
        Another minion gets nothing of the first one's data.
        """
        conf = self.configure("web1", DATA)
        self.assertEqual(self.makePillar({}).compile("db1", {}, conf, grains={}), {})  # type: ignore[attr-defined]

    def test_pillarUnchanged(self) -> None:
        """
        The pillar so far is read, not changed; the result is a new mapping.
        """
        conf = self.configure("web1", DATA)
        pillar = {"role": "old", "x": [1]}
        before = copy.deepcopy(pillar)
        ext = self.makePillar({})
        result = ext.compile("web1", pillar, conf, grains={})
        self.assertEqual(pillar, before)  # type: ignore[attr-defined]
        result["role"] = "changed"
        self.assertEqual(ext.compile("web1", pillar, conf, grains={})["role"], "web")  # type: ignore[attr-defined]

    def test_badConfiguration(self) -> None:
        """
        A configuration of the wrong shape is an L{ExtPillarError}.
        """
        ext = self.makePillar({})
        self.assertRaises(ExtPillarError, ext.compile, "web1", {}, 42, grains={})  # type: ignore[attr-defined]


class FileTreeContractTests(ExtPillarContractMixin, SynchronousTestCase):
    name = "file_tree"

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)

    def makePillar(self, opts: dict[str, Any]) -> Any:
        return FileTreePillar(opts)

    def configure(self, minionId: str, data: dict[str, Any]) -> Any:
        writeTree(os.path.join(self.root, "hosts", minionId), data)
        return {"root_dir": self.root}


class CmdJsonContractTests(ExtPillarContractMixin, SynchronousTestCase):
    name = "cmd_json"
    suffix = ".json"

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def makePillar(self, opts: dict[str, Any]) -> Any:
        return CommandPillar(opts, self.name)

    def dump(self, data: dict[str, Any]) -> str:
        return json.dumps(data)

    def configure(self, minionId: str, data: dict[str, Any]) -> Any:
        with open(os.path.join(self.dir, minionId + self.suffix), "w") as f:
            f.write(self.dump(data))
        files = shlex.quote(self.dir)
        return f"cat {files}/%s{self.suffix} 2>/dev/null || echo '{{}}'"


class CmdYamlContractTests(CmdJsonContractTests):
    name = "cmd_yaml"
    suffix = ".yaml"

    def dump(self, data: dict[str, Any]) -> str:
        import yaml

        return yaml.safe_dump(data)


def writeTree(top: str, data: dict[str, Any]) -> None:
    """
    Write C{data} as a C{file_tree}: mappings as directories, strings as
    files (with a trailing newline).
    """
    os.makedirs(top, exist_ok=True)
    for key, value in data.items():
        path = os.path.join(top, key)
        if isinstance(value, dict):
            writeTree(path, value)
        else:
            with open(path, "w") as f:
                f.write(f"{value}\n")


class FileTreeTests(SynchronousTestCase):
    """
    C{file_tree} as Salt's: hosts and nodegroups, newlines, links.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        self.opts: dict[str, Any] = {"nodegroups": {"webs": "web*", "debian": "G@os:Debian"}}
        self.ext = FileTreePillar(self.opts)

    def compile(self, minionId: str = "web1", conf: Any = None, grains: Any = None) -> dict:
        return self.ext.compile(
            minionId, {}, conf or {"root_dir": self.root}, grains=grains or {"os": "Debian"}
        )

    def test_nodegroupsThenHost(self) -> None:
        """
        The nodegroups the minion is in come first, in the order of the
        option, then its host directory.
        """
        writeTree(
            os.path.join(self.root, "nodegroups", "webs"), {"a": "webs", "b": "webs", "w": "1"}
        )
        writeTree(os.path.join(self.root, "nodegroups", "debian"), {"b": "debian", "d": "1"})
        writeTree(os.path.join(self.root, "hosts", "web1"), {"a": "host"})
        self.assertEqual(self.compile(), {"a": "host", "b": "debian", "w": "1", "d": "1"})
        self.assertEqual(self.compile("db1", grains={"os": "RedHat"}), {})
        self.assertEqual(self.compile("db1"), {"b": "debian", "d": "1"})

    def test_keepNewline(self) -> None:
        """
        Trailing newlines are stripped unless C{keep_newline} is true or a
        glob matches the file's path.
        """
        writeTree(os.path.join(self.root, "hosts", "web1"), {"k": "v", "certs": {"c.pem": "PEM"}})
        self.assertEqual(self.compile()["k"], "v")
        conf = {"root_dir": self.root, "keep_newline": True}
        self.assertEqual(self.compile(conf=conf)["k"], "v\n")
        conf = {"root_dir": self.root, "keep_newline": ["certs/*"]}
        result = self.compile(conf=conf)
        self.assertEqual((result["k"], result["certs"]["c.pem"]), ("v", "PEM\n"))

    def test_oneNewlineStripped(self) -> None:
        """
        As in Salt, only the last newline goes, of text and binary files
        alike.
        """
        host = os.path.join(self.root, "hosts", "web1")
        os.makedirs(host)
        with open(os.path.join(host, "two"), "w") as f:
            f.write("a\n\n")
        with open(os.path.join(host, "bin"), "wb") as f:
            f.write(b"\xff\n")
        self.assertEqual(self.compile(), {"two": "a\n", "bin": b"\xff"})

    def test_relativeRootDir(self) -> None:
        """
        A relative C{root_dir} is looked for under each root of the
        pillarenv, the results merged; without a pillarenv it is an error.
        """
        first, second = os.path.abspath(self.mktemp()), os.path.abspath(self.mktemp())
        writeTree(os.path.join(first, "ext", "hosts", "web1"), {"a": "1", "b": "first"})
        writeTree(os.path.join(second, "ext", "hosts", "web1"), {"b": "second"})
        opts = {"pillarenv": "base", "pillar_roots": {"base": [first, second]}}
        ext = FileTreePillar(opts)
        self.assertEqual(ext.compile("web1", {}, {"root_dir": "ext"}), {"a": "1", "b": "second"})
        e = self.assertRaises(
            ExtPillarError, FileTreePillar({}).compile, "web1", {}, {"root_dir": "ext"}
        )
        self.assertIn("pillarenv is not set", str(e))

    def test_template(self) -> None:
        """
        With C{template: True} each file goes through the render pipeline
        with the grains.
        """
        host = os.path.join(self.root, "hosts", "web1")
        os.makedirs(host)
        with open(os.path.join(host, "conf"), "w") as f:
            f.write("os: {{ grains.os }}\n")
        conf = {"root_dir": self.root, "template": True}
        self.assertEqual(self.compile(conf=conf), {"conf": {"os": "Debian"}})
        with open(os.path.join(host, "conf"), "w") as f:
            f.write("a: b: c\n")
        e = self.assertRaises(ExtPillarError, self.compile, conf=conf)
        self.assertIn("line 1", str(e))

    def test_binaryAndEmptyDir(self) -> None:
        """
        A file that is not UTF-8 gives bytes; an empty directory an empty
        mapping.
        """
        host = os.path.join(self.root, "hosts", "web1")
        os.makedirs(os.path.join(host, "empty"))
        with open(os.path.join(host, "blob"), "wb") as f:
            f.write(b"\xff\xfe\x00")
        self.assertEqual(self.compile(), {"blob": b"\xff\xfe\x00", "empty": {}})

    def test_linksOutOfRoot(self) -> None:
        """
        Without C{follow_dir_links}, links leaving C{root_dir} are skipped;
        with it, directory links are followed.
        """
        outside = os.path.abspath(self.mktemp())
        writeTree(outside, {"secret": "x"})
        host = os.path.join(self.root, "hosts", "web1")
        writeTree(host, {"ok": "1"})
        os.symlink(outside, os.path.join(host, "linked"))
        os.symlink(os.path.join(outside, "secret"), os.path.join(host, "file"))
        self.assertEqual(self.compile(), {"ok": "1"})
        conf = {"root_dir": self.root, "follow_dir_links": True}
        self.assertEqual(self.compile(conf=conf)["linked"], {"secret": "x"})

    def test_missingRoot(self) -> None:
        """
        A C{root_dir} that is not a directory is an error naming it.
        """
        e = self.assertRaises(ExtPillarError, self.compile, conf={"root_dir": "/nonexistent/x"})
        self.assertIn("/nonexistent/x", str(e))

    def test_badMinionId(self) -> None:
        """
        An id that cannot be a directory name is refused.
        """
        for minionId in ("..", "a/b", ""):
            self.assertRaises(ExtPillarError, self.compile, minionId)

    def test_noHostDir(self) -> None:
        """
        A minion without a directory gets nothing.
        """
        self.assertEqual(self.compile("web9"), {})


class CommandPillarTests(SynchronousTestCase):
    """
    C{cmd_json} and C{cmd_yaml} run real commands.
    """

    def test_minionIdReplaced(self) -> None:
        """
        C{%s} is the minion's id, quoted for the shell when needed.
        """
        ext = CommandPillar({}, "cmd_yaml")
        self.assertEqual(ext.compile("web1", {}, "echo 'id: %s'"), {"id": "web1"})
        script = "import sys, json; print(json.dumps({'id': sys.argv[1]}))"
        command = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} %s"
        weird = "a b;touch x"
        self.assertEqual(CommandPillar({}, "cmd_json").compile(weird, {}, command), {"id": weird})

    def test_failingCommand(self) -> None:
        """
        A non-zero exit is an error with the status and the last line of
        its standard error.
        """
        ext = CommandPillar({}, "cmd_json")
        e = self.assertRaises(ExtPillarError, ext.compile, "m", {}, "echo oops >&2; exit 2")
        self.assertEqual(str(e), "command exited with status 2: oops")

    def test_badOutput(self) -> None:
        """
        Output that does not parse, or is not a mapping, is an error.
        """
        self.assertRaises(
            ExtPillarError, CommandPillar({}, "cmd_json").compile, "m", {}, "echo '{'"
        )
        self.assertRaises(
            ExtPillarError, CommandPillar({}, "cmd_json").compile, "m", {}, "echo [1]"
        )
        self.assertRaises(
            ExtPillarError, CommandPillar({}, "cmd_yaml").compile, "m", {}, "echo 'a: ['"
        )
        self.assertEqual(CommandPillar({}, "cmd_yaml").compile("m", {}, "true"), {})

    def test_timeout(self) -> None:
        """
        A command running past its timeout is killed with its process group
        (a background child too) and is an error.
        """
        ext = CommandPillar({}, "cmd_json")
        pidFile = os.path.abspath(self.mktemp())
        quiet = ">/dev/null 2>&1"  # not holding the output pipe: the shell's end is seen
        command = f"sleep 300 {quiet} & echo $! > {pidFile}; sleep 300 {quiet}; echo '{{}}'"
        start = time.monotonic()
        e = self.assertRaises(
            ExtPillarError, ext.compile, "m", {}, {"command": command, "timeout": 0.3}
        )
        log.msg(f"ext_pillar command killed after {time.monotonic() - start:.2f} s")
        self.assertIn("timed out after 0.3 seconds", str(e))
        with open(pidFile) as f:
            child = int(f.read())
        self.assertTrue(endsSoon(child), f"the background child {child} survived")
        self.assertRaises(ExtPillarError, ext.compile, "m", {}, {"command": "true", "timeout": -1})


def endsSoon(pid: int) -> bool:
    """
    @return: whether process C{pid} is gone, or ends within a generous
        deadline (a killed process ends at once; this only bounds the wait
        for one that was not killed, which is then killed here).
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if poller.poll(10_000):
            return True
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return False
    finally:
        os.close(fd)


class RegistryTests(SynchronousTestCase):
    """
    Names map to factories; new ones can be registered.
    """

    def test_builtin(self) -> None:
        self.assertEqual(sorted(EXT_PILLARS), ["cmd_json", "cmd_yaml", "file_tree"])
        self.assertIsNone(getExtPillar("nope", {}))

    def test_register(self) -> None:
        """
        A registered external pillar is found by name (and used by the
        compiler).
        """
        self.addCleanup(EXT_PILLARS.pop, "static", None)
        registerExtPillar("static", lambda opts: FileTreePillar(opts))
        self.assertIsInstance(getExtPillar("static", {}), FileTreePillar)
