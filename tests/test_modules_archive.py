# -*- test-case-name: tests.test_modules_archive -*-
"""
Tests for L{salttwist.modules.archive} (Salt's C{archive} module), with
real tar and zip archives built in the tests, malicious ones included.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, archive, loadFunctions
from tests._statectx import makeLoaderContext


def addTar(
    tar: tarfile.TarFile,
    name: str,
    data: bytes | None = b"x",
    kind: bytes = tarfile.REGTYPE,
    link: str = "",
    mode: int = 0o644,
) -> None:
    """
    Add a member to C{tar}: a file with C{data}, a directory, or a link.
    """
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.linkname = link
    if kind == tarfile.REGTYPE and data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        if kind == tarfile.DIRTYPE:
            info.mode = 0o755
        tar.addfile(info)


def makeTar(path: str, members: list[tuple]) -> str:
    """
    Write a gzipped tar at C{path} of C{members} (L{addTar}'s arguments).
    """
    with tarfile.open(path, "w:gz") as tar:
        for member in members:
            addTar(tar, *member)
    return path


def makeZip(
    path: str, members: list[tuple[str, bytes]], links: dict[str, str] | None = None
) -> str:
    """
    Write a zip at C{path}: files C{(name, data)} (a name ending with
    C{/} a directory) and symbolic links C{{name: target}}.
    """
    with zipfile.ZipFile(path, "w") as out:
        for name, data in members:
            out.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            out.writestr(info, target)
    return path


class ArchiveModuleTests(SynchronousTestCase):
    """
    C{archive.list}, C{unzip}, C{zip}, C{is_encrypted}, C{tar}, and the
    extraction of tar archives, safe and unsafe.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.dest = os.path.join(self.dir, "dest")
        self.context = makeLoaderContext()

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def goodTar(self) -> str:
        return makeTar(
            self.path("good.tar.gz"),
            [
                ("app", None, tarfile.DIRTYPE),
                ("app/bin", None, tarfile.DIRTYPE),
                ("app/bin/run", b"#!/bin/sh\n", tarfile.REGTYPE, "", 0o755),
                ("app/README", b"hello\n"),
                ("app/current", None, tarfile.SYMTYPE, "bin"),
            ],
        )

    def test_loaded(self) -> None:
        """
        The module loads as C{archive} with Salt's function names.
        """
        functions = loadFunctions()
        for name in ("list", "unzip", "zip", "tar", "is_encrypted"):
            self.assertIn(f"archive.{name}", functions)

    def test_guess(self) -> None:
        """
        The format is guessed from the name as Salt does.
        """
        self.assertEqual(archive._guessArchiveType("x.TAR.GZ"), "tar")
        self.assertEqual(archive._guessArchiveType("x.tgz"), "tar")
        self.assertEqual(archive._guessArchiveType("x.zip"), "zip")
        self.assertIsNone(archive._guessArchiveType("x.gz"))

    def test_listTar(self) -> None:
        """
        C{archive.list} of a tar: sorted names, directories ending with
        C{/}; verbose: Salt's dictionary.
        """
        path = self.goodTar()
        self.assertEqual(
            archive.list_(self.context, path),
            ["app/", "app/README", "app/bin/", "app/bin/run", "app/current"],
        )
        self.assertEqual(
            archive.list_(self.context, path, verbose=True),
            {
                "dirs": ["app/", "app/bin/"],
                "files": ["app/README", "app/bin/run"],
                "links": ["app/current"],
                "top_level_dirs": ["app/"],
                "top_level_files": [],
                "top_level_links": [],
            },
        )
        self.assertEqual(
            archive.list_(self.context, path, strip_components=1),
            ["README", "bin/", "bin/run", "current"],
        )

    def test_listZip(self) -> None:
        """
        C{archive.list} of a zip; directories implied by files are listed.
        """
        path = makeZip(self.path("a.zip"), [("top/a.txt", b"a"), ("top/sub/b.txt", b"b")])
        self.assertEqual(
            archive.list_(self.context, "file://" + path),
            ["top/", "top/a.txt", "top/sub/", "top/sub/b.txt"],
        )

    def test_listErrors(self) -> None:
        """
        A missing archive, an unknown format and a corrupt archive are
        errors naming the problem.
        """
        with self.assertRaises(CommandExecutionError) as e:
            archive.list_(self.context, self.path("nope.tar"))
        self.assertIn("does not exist", str(e.exception))
        other = self.path("x.bin")
        with open(other, "wb") as f:
            f.write(b"garbage")
        with self.assertRaises(CommandExecutionError) as e:
            archive.list_(self.context, other)
        self.assertIn("Unable to guess archive format", str(e.exception))
        with self.assertRaises(CommandExecutionError) as e:
            archive.list_(self.context, other, archive_format="zip")
        self.assertIn("is not a ZIP file", str(e.exception))

    def test_extractTar(self) -> None:
        """
        A good tar is unpacked with its files, modes and links.
        """
        names = archive._extractTar(self.goodTar(), self.dest)
        self.assertEqual(names, ["app", "app/bin", "app/bin/run", "app/README", "app/current"])
        with open(os.path.join(self.dest, "app", "README"), "rb") as f:
            self.assertEqual(f.read(), b"hello\n")
        self.assertTrue(os.access(os.path.join(self.dest, "app/bin/run"), os.X_OK))
        self.assertEqual(os.readlink(os.path.join(self.dest, "app/current")), "bin")

    def test_extractTarStrip(self) -> None:
        """
        C{strip_components} drops leading directories.
        """
        archive._extractTar(self.goodTar(), self.dest, strip_components=1)
        self.assertTrue(os.path.isfile(os.path.join(self.dest, "README")))
        self.assertTrue(os.path.isfile(os.path.join(self.dest, "bin", "run")))

    def assertRefused(self, path: str, *reasons: str) -> None:
        """
        Extracting C{path} fails naming each reason, and writes nothing
        outside (nor inside) the destination.
        """
        before = sorted(os.listdir(self.dir))
        with self.assertRaises(CommandExecutionError) as e:
            if path.endswith(".zip"):
                archive.unzip(path, self.dest)
            else:
                archive._extractTar(path, self.dest)
        message = str(e.exception)
        self.assertIn("Refusing to extract", message)
        for reason in reasons:
            self.assertIn(reason, message)
        self.assertEqual(sorted(os.listdir(self.dir)), before)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "evil")))
        if os.path.isdir(self.dest):
            self.assertEqual(os.listdir(self.dest), [])

    def test_tarDotDot(self) -> None:
        """
        A member climbing out with C{..} refuses the archive.
        """
        path = makeTar(self.path("dotdot.tar.gz"), [("ok", b"x"), ("../evil", b"x")])
        self.assertRefused(path, "- ../evil: path leads outside the destination")

    def test_tarAbsolute(self) -> None:
        """
        An absolute member refuses the archive.
        """
        target = self.path("evil")
        path = makeTar(self.path("abs.tar.gz"), [(target, b"x")])
        self.assertRefused(path, f"- {target}: absolute path")

    def test_tarSymlinkOut(self) -> None:
        """
        Symbolic links to absolute paths or out with C{..} refuse the
        archive, and so does writing through one.
        """
        path = makeTar(
            self.path("links.tar.gz"),
            [
                ("top", None, tarfile.DIRTYPE),
                ("top/abs", None, tarfile.SYMTYPE, self.dir),
                ("top/up", None, tarfile.SYMTYPE, "../../evil"),
                ("top/abs/evil", b"x"),
            ],
        )
        self.assertRefused(
            path,
            f"- top/abs: symbolic link to the absolute path {self.dir}",
            "- top/up: symbolic link to ../../evil, which leads outside the destination",
        )

    def test_tarSymlinkChain(self) -> None:
        """
        A chain of links that each look inside but together lead out is
        refused.
        """
        path = makeTar(
            self.path("chain.tar.gz"),
            [
                ("a", None, tarfile.SYMTYPE, "."),
                ("b", None, tarfile.SYMTYPE, "a/.."),
                ("b/evil", b"x"),
            ],
        )
        self.assertRefused(path, "- b: symbolic link to a/.., which leads outside")

    def test_tarHardLinkOut(self) -> None:
        """
        A hard link to a file outside refuses the archive.
        """
        secret = self.path("secret")
        with open(secret, "w") as f:
            f.write("secret")
        path = makeTar(
            self.path("hard.tar.gz"),
            [("h1", None, tarfile.LNKTYPE, "../secret"), ("h2", None, tarfile.LNKTYPE, secret)],
        )
        self.assertRefused(
            path,
            "- h1: hard link to ../secret, which leads outside",
            f"- h2: hard link to the absolute path {secret}",
        )

    def test_tarDevice(self) -> None:
        """
        A device file refuses the archive.
        """
        path = makeTar(self.path("dev.tar.gz"), [("null", None, tarfile.CHRTYPE)])
        self.assertRefused(path, "- null: device or special file")

    def test_existingSymlinkInDestination(self) -> None:
        """
        A symbolic link already in the destination does not redirect a
        write outside.
        """
        outside = self.path("outside")
        os.makedirs(outside)
        os.makedirs(self.dest)
        os.symlink(outside, os.path.join(self.dest, "app"))
        with self.assertRaises(CommandExecutionError) as e:
            archive._extractTar(self.goodTar(), self.dest)
        self.assertIn("Refusing to extract", str(e.exception))
        self.assertEqual(os.listdir(outside), [])

    def test_tarDataFilterModes(self) -> None:
        """
        Set-uid and world-writable bits in the archive are not kept.
        """
        path = makeTar(self.path("modes.tar.gz"), [("f", b"x", tarfile.REGTYPE, "", 0o4777)])
        archive._extractTar(path, self.dest)
        mode = stat.S_IMODE(os.stat(os.path.join(self.dest, "f")).st_mode)
        self.assertEqual(mode & (stat.S_ISUID | stat.S_IWOTH), 0)

    def test_unzip(self) -> None:
        """
        C{archive.unzip} unpacks files, directories and inner links; its
        C{excludes} leave names out; C{trim_output} shortens the list.
        """
        path = makeZip(
            self.path("a.zip"),
            [("top/", b""), ("top/a.txt", b"a"), ("top/b.txt", b"b")],
            {"top/link": "a.txt"},
        )
        names = archive.unzip(path, self.dest, excludes="top/b.txt")
        self.assertEqual(names, ["top/", "top/a.txt", "top/link"])
        self.assertEqual(os.readlink(os.path.join(self.dest, "top/link")), "a.txt")
        self.assertFalse(os.path.exists(os.path.join(self.dest, "top/b.txt")))
        self.assertEqual(
            archive.unzip(path, self.path("d2"), trim_output=1),
            ["top/", "List trimmed after 1 files."],
        )

    def test_zipDotDot(self) -> None:
        """
        A zip member with C{..} or an absolute name refuses the archive.
        """
        path = makeZip(self.path("evil.zip"), [("../evil", b"x"), ("/tmp/evil", b"x")])
        self.assertRefused(path, "- ../evil: path leads outside", "- /tmp/evil: absolute path")

    def test_zipSymlinkOut(self) -> None:
        """
        A zip symbolic link pointing out refuses the archive.
        """
        path = makeZip(self.path("links.zip"), [("top/x", b"x")], {"top/l": "../../evil"})
        self.assertRefused(path, "- top/l: symbolic link to ../../evil")

    def test_zipRoundTrip(self) -> None:
        """
        C{archive.zip} archives files and directories relative to C{cwd};
        C{is_encrypted} is false for it.
        """
        src = self.path("src")
        os.makedirs(os.path.join(src, "d"))
        with open(os.path.join(src, "d", "f.txt"), "w") as f:
            f.write("data")
        zipPath = self.path("out.zip")
        self.assertEqual(archive.zip_(zipPath, "d", cwd=src), ["d/", "d/f.txt"])
        self.assertIs(archive.is_encrypted(self.context, zipPath), False)
        archive.unzip(zipPath, self.dest)
        with open(os.path.join(self.dest, "d", "f.txt")) as f:
            self.assertEqual(f.read(), "data")

    def test_isEncrypted(self) -> None:
        """
        A zip whose member has the encryption flag is encrypted.
        """
        zipPath = self.path("enc.zip")
        with zipfile.ZipFile(zipPath, "w") as out:
            info = zipfile.ZipInfo("x")
            out.writestr(info, b"data")
        with open(zipPath, "r+b") as f:
            data = bytearray(f.read())
            # Set bit 0 of the general purpose flags in the local header
            # and the central directory entry.
            data[6] |= 1
            central = data.rfind(b"PK\x01\x02")
            data[central + 8] |= 1
            f.seek(0)
            f.write(data)
        self.assertIs(archive.is_encrypted(self.context, zipPath), True)

    def test_tarCommand(self) -> None:
        """
        C{archive.tar} runs tar: make an archive, list it.
        """
        src = self.path("src")
        os.makedirs(src)
        with open(os.path.join(src, "f"), "w") as f:
            f.write("x")
        out = self.path("t.tar")
        archive.tar("cf", out, sources="f", cwd=src)
        self.assertEqual(archive.tar("tf", out), ["f"])
