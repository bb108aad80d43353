# -*- test-case-name: tests.test_fileserver_contract -*-
"""
L{FileServer}: the backends of C{fileserver_backend}, in order, behind one
object: the master's file room, the runners (C{fileserver.*}), masterless
minions (C{file_client: local}) and the pillar's and states' renderers
ask it for C{salt://} files.

It checks every path and saltenv once for all backends
(L{salttwist.fileserver.paths}), merges their saltenvs and listings (the
first backend holding a path wins, as Salt's), and hashes files with
SHA-256, streaming them (a 2 GB file is never in memory) and caching each
hash in memory under the file's (real path, size, mtime in ns), so a
re-check of 1,000 unchanged files costs 1,000 C{stat}s, not 1,000 reads.

Every method blocks (disk, hashing, git): callers run them in a thread
(C{runBlocking}) or a worker process, never on the reactor. They may be
called from several threads at once: the hash cache is locked, and the
git backend swaps its state whole.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from twisted.logger import Logger

from salttwist.fileserver.interfaces import FileServerError, FoundFile, IFileServerBackend
from salttwist.fileserver.paths import checkPrefix, checkRelativePath, checkSaltenv

#: The hash type of every file-server hash (Salt's C{hash_type}).
HASH_TYPE = "sha256"
#: Bytes read at a time when hashing.
HASH_CHUNK = 1 << 20
#: Hashes kept in memory (least recently used dropped first): about 200
#: bytes each.
HASH_CACHE_SIZE = 100_000
#: The names C{fileserver_backend} takes, and the backend each means.
BACKEND_ALIASES = {"roots": "roots", "git": "git", "gitfs": "git"}


class FileServer:
    """
    The backends of C{fileserver_backend}, in order (see the module's
    docstring).

    @ivar backends: the backends, in the order searched.
    @param opts: the master's (or a masterless minion's) options.
    @param backends: the backends; by default a L{RootsBackend} of
        C{opts} alone (L{fromConfig} builds them from
        C{fileserver_backend}).
    """

    log = Logger()

    def __init__(
        self, opts: dict[str, Any], backends: list[IFileServerBackend] | None = None
    ) -> None:
        self.opts = opts
        if backends is None:
            from salttwist.fileserver.roots import RootsBackend

            backends = [RootsBackend(opts)]
        self.backends: list[IFileServerBackend] = list(backends)
        self._hashes: OrderedDict[tuple[str, int, int], str] = OrderedDict()
        self._hashLock = threading.Lock()

    @classmethod
    def fromConfig(cls, opts: dict[str, Any]) -> FileServer:
        """
        Build the backends C{opts["fileserver_backend"]} names, in its
        order: C{roots} (L{RootsBackend}) and C{git} or C{gitfs}
        (L{GitBackend}, its cache under C{cachedir/gitfs}). No git command
        runs here: the git backend fetches at its first L{update} (or its
        first use).

        @raise ValueError: naming the backend, if one is unknown; a
            L{FileServerError} (a L{ValueError}) for a bad C{file_roots},
            ignore pattern or C{gitfs_remotes}.
        """
        names = opts.get("fileserver_backend") or ["roots"]
        if isinstance(names, str):
            names = [names]
        backends: list[IFileServerBackend] = []
        seen: set[str] = set()
        for name in names:
            kind = BACKEND_ALIASES.get(name)
            if kind is None:
                raise ValueError(
                    f"fileserver_backend: unknown backend {name!r} "
                    f"(known: {', '.join(sorted(BACKEND_ALIASES))})"
                )
            if kind in seen:
                continue
            seen.add(kind)
            if kind == "roots":
                from salttwist.fileserver.roots import RootsBackend

                backends.append(RootsBackend(opts))
            else:
                from salttwist.fileserver.gitfs import GitBackend

                backends.append(GitBackend(opts, opts["cachedir"]))
        return cls(opts, backends)

    def selectBackends(self, backend: str | list[str] | None = None) -> list[IFileServerBackend]:
        """
        The backends a runner's C{backend} argument names, as Salt's
        C{fileserver.*} runners take it: L{None} for all; C{"roots,git"}
        (or a list) for those; C{"-git"} for all but those.

        @raise ValueError: naming it, if a name is not a known backend.
        """
        if backend is None or backend == "":
            return list(self.backends)
        names = backend.split(",") if isinstance(backend, str) else list(backend)
        names = [n.strip() for n in names if n.strip()]
        exclude = all(n.startswith("-") for n in names)
        wanted = set()
        for n in names:
            bare = n[1:] if n.startswith("-") else n
            if bare not in BACKEND_ALIASES:
                raise ValueError(f"unknown file server backend {bare!r}")
            wanted.add(BACKEND_ALIASES[bare])
        if exclude:
            return [b for b in self.backends if b.name not in wanted]
        return [b for b in self.backends if b.name in wanted]

    def envs(self, backend: str | list[str] | None = None) -> list[str]:
        """
        @return: every saltenv of the backends, sorted.
        """
        found: set[str] = set()
        for b in self.selectBackends(backend):
            found.update(b.envs())
        return sorted(found)

    def checkSaltenv(self, saltenv: str) -> str:
        """
        @return: C{saltenv}.
        @raise FileServerError: if C{saltenv} is invalid or no backend
            serves it.
        """
        return self._checkSaltenv(saltenv)

    def _checkSaltenv(self, saltenv: str, backends: list[IFileServerBackend] | None = None) -> str:
        """
        @raise FileServerError: if C{saltenv} is invalid or no backend
            serves it.
        """
        checkSaltenv(saltenv)
        for b in backends if backends is not None else self.backends:
            if saltenv in b.envs():
                return saltenv
        raise FileServerError(f"saltenv {saltenv!r} is not configured")

    def fileList(
        self, saltenv: str, prefix: str = "", backend: str | list[str] | None = None
    ) -> list[str]:
        """
        @return: the files of C{saltenv} whose paths start with C{prefix}
            (Salt's C{cp.list_master}), sorted, from every backend.
        @raise FileServerError: if C{saltenv} is not configured or
            C{prefix} is a path trick.
        """
        backends = self.selectBackends(backend)
        self._checkSaltenv(saltenv, backends)
        prefix = checkPrefix(prefix)
        found: set[str] = set()
        for b in backends:
            found.update(b.fileList(saltenv))
        return sorted(p for p in found if p.startswith(prefix))

    def dirList(
        self, saltenv: str, prefix: str = "", backend: str | list[str] | None = None
    ) -> list[str]:
        """
        @return: the directories of C{saltenv} whose paths start with
            C{prefix} (Salt's C{cp.list_master_dirs}), sorted.
        @raise FileServerError: as L{fileList}.
        """
        backends = self.selectBackends(backend)
        self._checkSaltenv(saltenv, backends)
        prefix = checkPrefix(prefix)
        found: set[str] = set()
        for b in backends:
            found.update(b.dirList(saltenv))
        return sorted(p for p in found if p.startswith(prefix))

    def findFile(self, path: str, saltenv: str) -> FoundFile | None:
        """
        @param path: a relative path (C{salt://} stripped by the caller,
            see L{salttwist.fileserver.paths.parseSaltUrl}).
        @return: the file from the first backend holding it, or L{None}.
        @raise FileServerError: if C{path} is a path trick (C{..},
            absolute, NUL, backslash, a symlink leaving a root) or
            C{saltenv} is invalid or not configured.
        """
        path = checkRelativePath(path)
        self._checkSaltenv(saltenv)
        return self._find(path, saltenv)

    def _find(self, path: str, saltenv: str) -> FoundFile | None:
        """
        L{findFile} of a path and saltenv already checked.
        """
        for b in self.backends:
            found = b.findFile(path, saltenv)
            if found is not None:
                return found
        return None

    def hashFile(self, path: str, saltenv: str) -> dict[str, Any]:
        """
        @return: C{{"hsum": hex SHA-256, "hash_type": "sha256", "size":
            bytes}} of the file the minion would get, or C{{}} if there is
            none (Salt's C{hash_file} answer, plus the size).
        @raise FileServerError: as L{findFile}.
        """
        found = self.findFile(path, saltenv)
        if found is None:
            return {}
        hsum = self.hashOf(found)
        if hsum is None:
            return {}
        return {"hsum": hsum, "hash_type": HASH_TYPE, "size": found.size}

    def hashFiles(self, paths: list[str], saltenv: str) -> dict[str, dict[str, Any]]:
        """
        L{hashFile} of many paths of one saltenv at once (the saltenv
        checked once).

        @param paths: relative paths, each already checked
            (L{salttwist.fileserver.paths.checkRelativePath}).
        @return: C{{path: hashFile's answer}} for every path (C{{}} for a
            path that is not on the file server or cannot be read,
            C{{"error": why}} for one L{findFile} refuses, such as a
            symlink leaving its root).
        @raise FileServerError: if C{saltenv} is invalid or not
            configured.
        """
        self._checkSaltenv(saltenv)
        result: dict[str, dict[str, Any]] = {}
        for path in paths:
            try:
                found = self._find(path, saltenv)
            except FileServerError as e:
                result[path] = {"error": str(e)}
                continue
            hsum = self.hashOf(found) if found is not None else None
            if found is None or hsum is None:
                result[path] = {}
            else:
                result[path] = {"hsum": hsum, "hash_type": HASH_TYPE, "size": found.size}
        return result

    def hashes(self, saltenv: str, prefix: str = "") -> dict[str, str]:
        """
        @return: C{{path: hex SHA-256}} of every file of C{saltenv} under
            C{prefix}, for a bulk cache check (C{cp.cache_dir}); unchanged
            files cost a C{stat} each, not a read.
        @raise FileServerError: as L{fileList}.
        """
        result: dict[str, str] = {}
        # fileList checked the saltenv and the prefix; its paths are
        # normalised.
        for path in self.fileList(saltenv, prefix):
            try:
                found = self._find(path, saltenv)
            except FileServerError:
                continue
            if found is None:
                continue
            hsum = self.hashOf(found)
            if hsum is not None:
                result[path] = hsum
        return result

    def hashOf(self, found: FoundFile) -> str | None:
        """
        @return: the SHA-256 of C{found}'s content, from the cache if its
            real path, size and mtime are unchanged, else read in chunks
            of L{HASH_CHUNK} bytes (and cached, if it did not change while
            read); L{None} if it cannot be read.
        """
        key = (found.realPath, found.size, found.mtimeNs)
        with self._hashLock:
            cached = self._hashes.get(key)
            if cached is not None:
                self._hashes.move_to_end(key)
                return cached
        import hashlib  # late: a master or minion that hashes nothing never loads libcrypto

        digest = hashlib.sha256()
        try:
            with open(found.realPath, "rb") as f:
                before = os.fstat(f.fileno())
                while True:
                    chunk = f.read(HASH_CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                after = os.fstat(f.fileno())
        except OSError as e:
            self.log.warn("file server: cannot read {path}: {error}", path=found.path, error=e)
            return None
        hsum = digest.hexdigest()
        if (
            (before.st_size, before.st_mtime_ns)
            == (after.st_size, after.st_mtime_ns)
            == (
                found.size,
                found.mtimeNs,
            )
        ):
            with self._hashLock:
                self._hashes[key] = hsum
                while len(self._hashes) > HASH_CACHE_SIZE:
                    self._hashes.popitem(last=False)
        return hsum

    def update(self, backend: str | list[str] | None = None) -> dict[str, bool]:
        """
        Bring every backend up to date (gitfs fetches). A backend that
        fails is logged and reported unchanged; the others still update.

        @return: C{{backend name: whether it changed}}.
        """
        result: dict[str, bool] = {}
        for b in self.selectBackends(backend):
            try:
                result[b.name] = bool(b.update())
            except Exception:
                self.log.failure("file server backend {name} failed to update", name=b.name)
                result[b.name] = False
        return result

    def clearCache(self, backend: str | list[str] | None = None) -> None:
        """
        Forget the cached hashes and what the backends cached.
        """
        for b in self.selectBackends(backend):
            b.clearCache()
        with self._hashLock:
            self._hashes.clear()
