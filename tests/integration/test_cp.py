# -*- test-case-name: tests.integration.test_cp -*-
"""
Integration tests of the C{cp} module, C{salttwist-cp} and the
C{fileserver.*} runners (issue 20): a real master serving C{file_roots}
and real minions, driven by the real C{salttwist}, C{salttwist-cp} and
C{salttwist-run} commands of the installed copy.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.config import loadMinionConfig
from tests.integration.harness import Cluster, CommandResult, runCommand

MINIONS = ("minion1", "minion2")
HELLO = b"hello from the master\n"


def writeFile(root: str, relative: str, data: bytes) -> str:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def readBytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class CpTestCase(TestCase):
    """
    A master serving C{base} from one root, and minions.
    """

    timeout = 240
    minionIds: tuple[str, ...] = MINIONS
    masterOptions: dict[str, Any] = {}

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        writeFile(self.roots, "hello.txt", HELLO)
        writeFile(self.roots, "web/init.sls", b"nginx: {}\n")
        writeFile(self.roots, "web/files/site.conf", b"server {}\n")
        writeFile(
            self.roots,
            "motd.j2",
            b"Welcome to {{ grains.id }} ({{ saltenv }}) {{ salt['test.echo']('echoed') }}\n",
        )
        os.makedirs(os.path.join(self.roots, "web", "empty"))
        self.cluster.writeMasterConfig(file_roots={"base": [self.roots]}, **self.masterOptions)
        await self.cluster.startReady(self.minionIds)
        self.out = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(self.out)

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    def minionCache(self, minionId: str) -> str:
        minionDir = self.cluster.minionDir(minionId)
        return loadMinionConfig(minionDir, overrides={"root_dir": minionDir})["cachedir"]

    async def salt(self, minionId: str, *args: str) -> Any:
        """
        Run C{salttwist MINION ARGS --out json}, which must succeed.

        @return: the minion's return.
        """
        result = await self.cluster.salt(minionId, *args, "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return json.loads(result.out)[minionId]

    async def command(self, name: str, *args: str) -> CommandResult:
        """
        Run C{NAME -c MASTER_DIR ARGS}.
        """
        return await runCommand(
            [name, "-c", self.cluster.masterDir, *args], cwd=self.cluster.baseDir
        )


class CpModuleTests(CpTestCase):
    """
    Two minions, a master with C{file_recv} off (the default).
    """

    async def test_cpFunctions(self) -> None:
        """
        C{cp.get_file}, C{cp.get_dir}, C{cp.get_template},
        C{cp.list_master}, C{cp.hash_file} and C{cp.cache_file} (twice: the
        second transfers nothing) through the minion's session; C{cp.push}
        is refused by a master without C{file_recv}.
        """
        dest = os.path.join(self.out, "hello.txt")
        self.assertEqual(await self.salt("minion1", "cp.get_file", "salt://hello.txt", dest), dest)
        self.assertEqual(readBytes(dest), HELLO)

        got = await self.salt("minion1", "cp.get_dir", "salt://web", self.out)
        self.assertEqual(
            got,
            [
                os.path.join(self.out, "web", "empty"),
                os.path.join(self.out, "web", "files", "site.conf"),
                os.path.join(self.out, "web", "init.sls"),
            ],
        )
        self.assertEqual(readBytes(got[1]), b"server {}\n")

        motd = os.path.join(self.out, "motd")
        self.assertEqual(
            await self.salt("minion2", "cp.get_template", "salt://motd.j2", motd), motd
        )
        self.assertEqual(readBytes(motd), b"Welcome to minion2 (base) echoed\n")

        self.assertEqual(
            await self.salt("minion1", "cp.list_master"),
            ["hello.txt", "motd.j2", "web/files/site.conf", "web/init.sls"],
        )
        self.assertEqual(
            await self.salt("minion1", "cp.hash_file", "salt://hello.txt"),
            {"hsum": hashlib.sha256(HELLO).hexdigest(), "hash_type": "sha256"},
        )
        refused = await self.cluster.salt(
            "minion1", "cp.get_file", "salt://../etc/passwd", dest, "--out", "json"
        )
        self.assertEqual(refused.code, 1, self.cluster.explain(refused))
        self.assertIn("..", json.loads(refused.out)["minion1"])

        cached = os.path.join(self.minionCache("minion2"), "files", "base", "hello.txt")
        self.assertEqual(await self.salt("minion2", "cp.cache_file", "salt://hello.txt"), cached)
        before = os.stat(cached)
        self.assertEqual(await self.salt("minion2", "cp.cache_file", "salt://hello.txt"), cached)
        after = os.stat(cached)
        # Not fetched again: a fetch writes a new file renamed into place.
        self.assertEqual((after.st_ino, after.st_mtime_ns), (before.st_ino, before.st_mtime_ns))
        self.assertIs(await self.salt("minion2", "cp.cache_file", "salt://nothing"), False)

        local = writeFile(self.out, "report.txt", b"report\n")
        self.assertIs(await self.salt("minion1", "cp.push", local), False)
        stored = os.path.join(self.cluster.masterConfig()["cachedir"], "minions", "minion1")
        self.assertFalse(os.path.exists(stored))

    async def test_salttwistCp(self) -> None:
        """
        C{salttwist-cp} copies a file to both minions in one job; with
        C{-C}, a directory (a 3 MiB file in chunks, an empty directory) to
        each minion; the output is Salt's.
        """
        source = writeFile(self.out, "src/motd", b"Message of the day\n")
        dest = os.path.join(self.out, "both", "motd")
        os.makedirs(os.path.dirname(dest))
        result = await self.command("salttwist-cp", "*", source, dest, "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(json.loads(result.out), {m: {dest: True} for m in MINIONS})
        self.assertEqual(readBytes(dest), b"Message of the day\n")

        tree = os.path.join(self.out, "tree")
        big = os.urandom(3 * 1024 * 1024 + 17)
        writeFile(tree, "data/big.bin", big)
        writeFile(tree, "data/small.txt", b"small\n")
        os.makedirs(os.path.join(tree, "data", "void"))
        for minionId in MINIONS:
            target = os.path.join(self.out, f"to-{minionId}") + "/"
            result = await self.command(
                "salttwist-cp", "-C", "-L", minionId, os.path.join(tree, "data"), target,
                "--out", "json", "-t", "30",
            )  # fmt: skip
            self.assertEqual(result.code, 0, self.cluster.explain(result))
            landed = os.path.join(self.out, f"to-{minionId}", "data")
            self.assertEqual(
                json.loads(result.out),
                {
                    minionId: {
                        os.path.join(landed, "big.bin"): True,
                        os.path.join(landed, "small.txt"): True,
                        os.path.join(landed, "void"): True,
                    }
                },
            )
            self.assertEqual(readBytes(os.path.join(landed, "big.bin")), big)
            self.assertTrue(os.path.isdir(os.path.join(landed, "void")))

        relative = await self.command("salttwist-cp", "*", source, "relative/dest")
        self.assertEqual(relative.code, 2, str(relative))
        self.assertIn("absolute", relative.err)

    async def test_fileserverRunners(self) -> None:
        """
        C{salttwist-run fileserver.file_list}, C{fileserver.dir_list} and
        C{fileserver.envs}, and C{fileserver.update}.
        """
        result = await self.command("salttwist-run", "fileserver.file_list", "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(
            json.loads(result.out), ["hello.txt", "motd.j2", "web/files/site.conf", "web/init.sls"]
        )
        result = await self.command("salttwist-run", "fileserver.dir_list", "--out", "json")
        self.assertEqual(json.loads(result.out), ["web", "web/empty", "web/files"])
        result = await self.command("salttwist-run", "fileserver.envs", "--out", "json")
        self.assertEqual(json.loads(result.out), ["base"])
        result = await self.command("salttwist-run", "fileserver.update", "--out", "json")
        self.assertEqual(json.loads(result.out), True)
        result = await self.command("salttwist-run", "fileserver.file_list", "saltenv=nope")
        self.assertNotEqual(result.code, 0, str(result))
        self.assertIn("'nope'", result.out + result.err)


class PushTests(CpTestCase):
    """
    One minion, a master with C{file_recv: True}.
    """

    minionIds = ("minion1",)
    masterOptions = {"file_recv": True}

    async def test_push(self) -> None:
        """
        C{cp.push} stores the file under the master's
        C{cachedir/minions/<id>/files/}, at its path or C{upload_path}.
        """
        data = os.urandom(2 * 1024 * 1024)
        local = writeFile(self.out, "report.bin", data)
        self.assertIs(await self.salt("minion1", "cp.push", local), True)
        files = os.path.join(self.cluster.masterConfig()["cachedir"], "minions", "minion1", "files")
        # Stored at the file's real path (the cluster's directory is a symlink).
        real = os.path.realpath(local)
        self.assertEqual(readBytes(os.path.join(files, *real.lstrip("/").split("/"))), data)
        self.assertIs(
            await self.salt("minion1", "cp.push", local, "upload_path=/reports/r.bin"), True
        )
        self.assertEqual(readBytes(os.path.join(files, "reports", "r.bin")), data)

    async def test_salttwistCall(self) -> None:
        """
        C{salttwist-call} (a transient session of the minion's id, beside
        its daemon) reaches the file server too.
        """
        dest = os.path.join(self.out, "called.txt")
        result = await runCommand(
            [
                "salttwist-call",
                "-c",
                self.cluster.minionDir("minion1"),
                "cp.get_file",
                "salt://hello.txt",
                dest,
                "--out",
                "json",
            ],
            cwd=self.cluster.baseDir,
        )
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertEqual(json.loads(result.out), {"local": dest})
        self.assertEqual(readBytes(dest), HELLO)
