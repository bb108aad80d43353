# -*- test-case-name: tests.test_fileclient -*-
"""
The minion's side of the file server: L{RemoteFileClient} fetches
C{salt://} files from its master over its session, L{LocalFileClient}
copies them from local roots (C{file_client: local}); both keep Salt's
cache layout, C{cachedir/files/<saltenv>/<path>}, and fetch a file again
only when the file server's SHA-256 differs from the cached copy's.

Every method is called on the reactor thread and returns a L{Deferred}.
Disk work (stat, hashing, writing chunks, renaming) runs in threads
(C{runBlocking}): it would stall the minion's jobs and its connection on
the reactor. Memory is bounded by the transfer window: at most L{WINDOW}
chunks (and at most L{WINDOW_BYTES}) of one transfer are in flight or
waiting to be written; a file of any size streams to disk.

A small index, C{cachedir/file_index.json}, maps each cached file's
C{(size, mtime_ns)} to its SHA-256, so re-checking many unchanged cached
files costs a C{stat} each, not a hash (L{CacheIndex}).
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import (
    Deferred,
    DeferredList,
    DeferredSemaphore,
    fail,
    gatherResults,
    maybeDeferred,
)
from twisted.internet.error import ConnectionClosed
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.fileserver.interfaces import FileServerError, IFileClient
from salttwist.fileserver.paths import checkPrefix, checkRelativePath, checkSaltenv, parseSaltUrl
from salttwist.transport.errors import RequestError

#: Chunks of one transfer requested ahead of the one being written.
WINDOW = 8
#: The most bytes of one transfer requested but not yet written.
WINDOW_BYTES = 8 * 1024 * 1024
#: The most paths of one C{_file_hash_many} or C{_serve_files} request
#: (L{salttwist.master.fileserving.MAX_BATCH_PATHS}).
BATCH_PATHS = 1000
#: Files of one L{RemoteFileClient.cacheDir} fetched at once.
PARALLEL_FILES = 4
#: How many times a transfer starts again when the file changed meanwhile.
RETRIES = 3
#: The most chunks of one transfer written in one thread call (when the
#: writing lags behind the network).
WRITE_BATCH = 4
#: The bytes of one C{_file_recv} chunk (C{cp.push}).
PUSH_CHUNK = 1024 * 1024
#: The words of the master's error for a file that changed while fetched
#: (L{salttwist.master.fileserving.CHANGED}; repeated here: a ground module
#: does not import the master's).
CHANGED = "changed during the transfer"
#: The index file's name, in C{cachedir}.
INDEX_FILE = "file_index.json"
#: The most entries the index keeps.
INDEX_MAX = 100_000

RunBlocking = Callable[..., Deferred]


def _deferred(method: Callable[..., Deferred[Any]]) -> Callable[..., Deferred[Any]]:
    """
    Let a method that returns a L{Deferred} report a bad argument (a
    L{FileServerError} raised before its work starts) through it too.
    """

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Deferred[Any]:
        try:
            return method(*args, **kwargs)
        except Exception as e:
            return fail(e)

    return wrapper


def splitUrl(path: str, saltenv: str) -> tuple[str, str]:
    """
    @return: C{(relative path, saltenv)} of C{path} (a C{salt://} URL or a
        relative path), a saltenv in the URL winning over C{saltenv}.
    @raise FileServerError: for a bad URL, path or saltenv.
    """
    relative, urlEnv = parseSaltUrl(path)
    return checkRelativePath(relative), checkSaltenv(urlEnv or saltenv or "base")


def _sha256(path: str) -> str:
    import hashlib  # late: a minion that fetches no file never loads libcrypto's

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


class CacheIndex:
    """
    The SHA-256 of cached files, keyed by path and checked against their
    C{(size, mtime_ns)}; saved in C{cachedir/file_index.json} (written
    atomically; a stale or lost entry only costs one hash). Every method
    blocks: call it in a thread; several threads may use it at once.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: dict[str, tuple[int, int, str]] | None = None
        self._dirty = False
        #: Guards the entries; hashing and saving happen outside it.
        self._lock = threading.Lock()
        #: One save at a time, so an older snapshot never replaces a newer.
        self._saveLock = threading.Lock()

    def _load(self) -> dict[str, tuple[int, int, str]]:
        """
        The entries, read from the file on first use (call with the lock
        held).
        """
        if self._entries is None:
            entries: dict[str, tuple[int, int, str]] = {}
            try:
                with open(self.path) as f:
                    raw = json.load(f)
                for key, value in raw.items():
                    size, mtimeNs, hsum = value
                    entries[key] = (int(size), int(mtimeNs), str(hsum))
            except (OSError, ValueError, TypeError, AttributeError):
                entries = {}
            self._entries = entries
        return self._entries

    def hashOf(self, path: str) -> str | None:
        """
        @return: the SHA-256 of the file at C{path}: from the index if its
            size and mtime are those recorded, else computed (and
            recorded); L{None} if there is no such file.
        """
        try:
            info = os.stat(path)
        except OSError:
            with self._lock:
                if self._load().pop(path, None) is not None:
                    self._dirty = True
            return None
        with self._lock:
            known = self._load().get(path)
        if known is not None and known[0] == info.st_size and known[1] == info.st_mtime_ns:
            return known[2]
        try:
            hsum = _sha256(path)
        except OSError:
            return None
        self.record(path, info.st_size, info.st_mtime_ns, hsum)
        return hsum

    def record(self, path: str, size: int, mtimeNs: int, hsum: str) -> None:
        """
        Remember the hash of a file just written.
        """
        with self._lock:
            entries = self._load()
            entries.pop(path, None)
            entries[path] = (size, mtimeNs, hsum)
            while len(entries) > INDEX_MAX:
                del entries[next(iter(entries))]
            self._dirty = True

    def stale(self, wanted: Iterable[tuple[str, str]]) -> list[str]:
        """
        @param wanted: C{(path, hsum)} pairs.
        @return: the paths whose cached copy is missing or has another
            hash.
        """
        return [path for path, hsum in wanted if self.hashOf(path) != hsum]

    @property
    def dirty(self) -> bool:
        """
        Whether an entry changed since the last L{save} (a save is due).
        """
        return self._dirty

    def save(self) -> None:
        """
        Write the index if it changed (to a temporary file renamed over
        it).
        """
        with self._saveLock:
            with self._lock:
                if not self._dirty or self._entries is None:
                    return
                self._dirty = False
                snapshot = {k: list(v) for k, v in self._entries.items()}
            tmp = f"{self.path}.{os.urandom(4).hex()}.tmp"
            try:
                os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
                with open(tmp, "w") as f:
                    json.dump(snapshot, f)
                os.replace(tmp, self.path)
            except OSError:
                with self._lock:
                    self._dirty = True
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


class _Download:
    """
    One file being written: a temporary file beside the target, hashed as
    it is written, and optionally a second temporary file beside another
    destination (L{RemoteFileClient.cacheFileTo}) written with the same
    bytes. Every method blocks: call it in a thread, one at a time.

    @ivar copyTo: the second destination, or L{None} if none is written
        (none was asked, a regular file of the size expected is there, or
        its temporary file could not be made).
    """

    def __init__(
        self, target: str, copyTo: str | None = None, expectedSize: int | None = None
    ) -> None:
        self.target = target
        directory, name = os.path.split(target)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.path.isdir(target) and not os.path.islink(target):
            raise FileServerError(f"cannot cache {target}: a directory is in the way")
        self.tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.part")
        self._file = open(self.tmp, "xb")
        import hashlib  # late: a minion that fetches no file never loads libcrypto's

        self._digest = hashlib.sha256()
        self.size = 0
        self.copyTo: str | None = None
        self._copyTmp = ""
        self._copy: Any = None
        if copyTo is not None:
            self._openCopy(copyTo, expectedSize)

    def _openCopy(self, copyTo: str, expectedSize: int | None) -> None:
        """
        Open the temporary file beside C{copyTo}, unless a regular file of
        C{expectedSize} bytes is there (it may already hold these bytes:
        the caller compares it) or it cannot be made (the caller's copy
        from the cache reports why). Its directory is never made here.
        """
        try:
            if os.path.isfile(copyTo) and os.path.getsize(copyTo) == expectedSize:
                return
        except OSError:
            pass
        directory, name = os.path.split(copyTo)
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.part")
        try:
            self._copy = open(tmp, "xb")
        except OSError:
            return
        self.copyTo, self._copyTmp = copyTo, tmp

    def write(self, data: bytes) -> None:
        """
        Hash C{data} and append it to the file and to the copy.
        """
        self.writeOwn([data])
        self.writeCopy([data])

    def writeOwn(self, chunks: list[bytes]) -> None:
        """
        Hash C{chunks} and append them to the file (not the copy: a
        transfer writes the copy in another thread at the same time, see
        L{writeCopy}).
        """
        for data in chunks:
            self._digest.update(data)
            self._file.write(data)
            self.size += len(data)

    def writeCopy(self, chunks: list[bytes]) -> None:
        """
        Append C{chunks} to the copy, if there is one.

        @raise FileServerError: naming L{copyTo}, if it cannot be written.
        """
        if self._copy is None:
            return
        try:
            for data in chunks:
                self._copy.write(data)
        except OSError as e:
            raise FileServerError(f"cannot write {self.copyTo}: {e.strerror}") from None

    def finish(self, hsum: str, index: CacheIndex, shown: str) -> str:
        """
        Check the hash, rename the file into place and record its hash in
        C{index} (saved by the caller, once for many files); then rename
        the copy over L{copyTo} (which keeps its mode if it exists, as
        C{cp.get_file}'s copy from the cache does).

        @raise FileServerError: if the content is not what C{hsum} says,
            or the copy cannot be put in place.
        """
        self._file.close()
        if self._copy is not None:
            self._copy.close()
        got = self._digest.hexdigest()
        if got != hsum:
            self.abort()
            raise FileServerError(
                f"{shown}: what arrived has SHA-256 {got}, the file server said {hsum}"
            )
        os.replace(self.tmp, self.target)
        info = os.stat(self.target)
        index.record(self.target, info.st_size, info.st_mtime_ns, hsum)
        if self.copyTo is not None:
            try:
                try:
                    mode = os.stat(self.copyTo).st_mode & 0o7777
                except FileNotFoundError:
                    mode = None
                if mode is not None:
                    os.chmod(self._copyTmp, mode)
                os.replace(self._copyTmp, self.copyTo)
            except OSError as e:
                self._removeCopy()
                raise FileServerError(f"cannot write {self.copyTo}: {e.strerror}") from None
        return self.target

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        self._removeCopy()

    def _removeCopy(self) -> None:
        if self._copy is None:
            return
        if not self._copy.closed:
            self._copy.close()
        try:
            os.unlink(self._copyTmp)
        except FileNotFoundError:
            pass


def _groupByEnv(paths: list[str], saltenv: str) -> dict[str, dict[str, list[str]]]:
    """
    @return: C{{saltenv: {relative path: [paths as given]}}} of C{paths}
        (C{salt://} URLs or relative paths), each checked.
    @raise FileServerError: for a bad path or saltenv, or C{paths} not a
        list of strings.
    """
    if not isinstance(paths, (list, tuple)):
        raise FileServerError(f"paths must be a list, not {type(paths).__name__}")
    groups: dict[str, dict[str, list[str]]] = {}
    for path in paths:
        if not isinstance(path, str):
            raise FileServerError(f"each path must be a string, not {type(path).__name__}")
        relative, env = splitUrl(path, saltenv)
        groups.setdefault(env, {}).setdefault(relative, []).append(path)
    return groups


def _writeWhole(
    files: list[tuple[str, str, bytes, str]], index: CacheIndex, where: str
) -> dict[str, str]:
    """
    Write whole files that came in one C{_serve_files} reply, each through
    a L{_Download} (a temporary file renamed into place once its SHA-256
    is the one announced), recording their hashes in C{index} (blocking:
    in a thread).

    @param files: C{(relative path, target, data, hsum)} of each.
    @return: C{{relative path: target}}.
    @raise FileServerError: if one's content is not its hash (the files
        before it are kept).
    """
    written: dict[str, str] = {}
    for relative, target, data, hsum in files:
        download = _Download(target)
        try:
            download.write(data)
        except BaseException:
            download.abort()
            raise
        written[relative] = download.finish(hsum, index, f"salt://{relative} ({where})")
    return written


class _CachingClient:
    """
    What both clients share: the cache's layout, its index, and one
    fetch per cached path at a time.
    """

    def __init__(self, cachedir: str, runBlocking: RunBlocking) -> None:
        self.cachedir = cachedir
        self.runBlocking = runBlocking
        self.index = CacheIndex(os.path.join(cachedir, INDEX_FILE))
        #: Fetches under way by target path: a second request of the same
        #: file waits for the first.
        self._fetching: dict[str, list[Deferred[str]]] = {}

    def cachedPath(self, path: str, saltenv: str = "base") -> str:
        """
        @return: where L{cacheFile} keeps C{path} (whether or not it is
            there now); no I/O.
        """
        relative, env = splitUrl(path, saltenv)
        return self._cachedPathOf(relative, env)

    def _cachedPathOf(self, relative: str, env: str) -> str:
        """
        L{cachedPath} of a relative path and saltenv already checked.
        """
        return os.path.join(self.cachedir, "files", *env.split("/"), *relative.split("/"))

    def _once(self, target: str, fetch: Callable[[], Deferred[str]]) -> Deferred[str]:
        """
        Run C{fetch} unless a fetch of C{target} is under way: then wait
        for that one. Every caller gets a L{Deferred} of its own, so what
        one caller chains on its result never changes another's.
        """
        waiter: Deferred[str] = Deferred()
        waiters = self._fetching.get(target)
        if waiters is not None:
            waiters.append(waiter)
            return waiter
        waiters = self._fetching[target] = [waiter]

        def done(result: Any) -> None:
            del self._fetching[target]
            for each in waiters:
                if isinstance(result, Failure):
                    each.errback(result)
                else:
                    each.callback(result)

        maybeDeferred(fetch).addBoth(done)
        return waiter

    def _cacheDirWith(
        self,
        path: str,
        saltenv: str,
        includeEmpty: bool,
        hashes: Callable[[str, str], Deferred[dict[str, str]]],
        dirs: Callable[[str, str], Deferred[list[str]]],
        fetch: Callable[[str, str, str, str], Deferred[str]],
    ) -> Deferred[list[str]]:
        """
        L{cacheDir} with the client's own C{hashes} (one request),
        C{dirs} and C{fetch(relative, saltenv, target, hsum)}.
        """
        relative, env = parseSaltUrl(path)
        env = checkSaltenv(env or saltenv or "base")
        prefix = checkPrefix(relative).rstrip("/")
        under = f"{prefix}/" if prefix else ""

        def inside(name: str) -> bool:
            return not prefix or name == prefix or name.startswith(under)

        async def run() -> list[str]:
            listed = await hashes(env, under)
            wanted = {
                name: hsum
                for name, hsum in listed.items()
                if inside(name) and isinstance(hsum, str)
            }
            targets = {name: self.cachedPath(name, env) for name in wanted}
            stale = set(
                await self.runBlocking(
                    self.index.stale, [(targets[name], wanted[name]) for name in wanted]
                )
            )
            semaphore = DeferredSemaphore(PARALLEL_FILES)
            fetches = [
                semaphore.run(
                    lambda name=name: self._once(
                        targets[name], lambda: fetch(name, env, targets[name], wanted[name])
                    )
                )
                for name in sorted(wanted)
                if targets[name] in stale
            ]
            try:
                if fetches:
                    await gatherResults(fetches, consumeErrors=True).addErrback(
                        lambda failure: failure.value.subFailure
                    )
            finally:
                await self.runBlocking(self.index.save)
            if includeEmpty:
                directories = [d for d in await dirs(env, under) if inside(d)]
                paths = [self.cachedPath(d, env) for d in directories]
                await self.runBlocking(
                    lambda: [os.makedirs(p, mode=0o700, exist_ok=True) for p in paths]
                )
            return [targets[name] for name in sorted(wanted)]

        return Deferred.fromCoroutine(run())


@implementer(IFileClient)
class RemoteFileClient(_CachingClient):
    """
    The file client of a minion with a master (C{file_client: remote}):
    every request goes over the minion's session.

    @ivar request: sends one session request, C{payload -> Deferred[dict]}
        (L{salttwist.minion.core.Minion.masterRequest}).
    """

    log = Logger()

    def __init__(
        self,
        request: Callable[[dict[str, Any]], Deferred[dict[str, Any]]],
        cachedir: str,
        runBlocking: RunBlocking,
        minionId: str,
    ) -> None:
        super().__init__(cachedir, runBlocking)
        self.request = request
        self.minionId = minionId

    def _ask(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        Send one request; the master's refusal becomes L{FileServerError}
        in its words, a connection lost meanwhile a L{ConnectionError}.
        """

        def refused(failure: Any) -> Any:
            if failure.check(ConnectionClosed):
                raise ConnectionError(
                    f"minion {self.minionId} lost its connection to the master during "
                    f"{payload.get('cmd')}"
                )
            failure.trap(RequestError)
            raise FileServerError(str(failure.value))

        try:
            d = self.request(payload)
        except RequestError as e:
            raise FileServerError(str(e)) from None
        return d.addErrback(refused)

    def _ret(self, payload: dict[str, Any]) -> Deferred[Any]:
        return self._ask(payload).addCallback(lambda reply: reply.get("ret"))

    @_deferred
    def envs(self) -> Deferred[list[str]]:
        """
        @return: a L{Deferred} firing with the master's saltenvs.
        """
        return self._ret({"cmd": "_file_envs"})

    @_deferred
    def fileList(self, saltenv: str = "base", prefix: str = "") -> Deferred[list[str]]:
        """
        @return: a L{Deferred} firing with the files of C{saltenv} under
            C{prefix} (Salt's C{cp.list_master}).
        """
        return self._ret({"cmd": "_file_list", "saltenv": saltenv, "prefix": prefix})

    @_deferred
    def dirList(self, saltenv: str = "base", prefix: str = "") -> Deferred[list[str]]:
        """
        @return: a L{Deferred} firing with the directories of C{saltenv}
            under C{prefix} (Salt's C{cp.list_master_dirs}).
        """
        return self._ret({"cmd": "_dir_list", "saltenv": saltenv, "prefix": prefix})

    def _hashInfo(self, relative: str, env: str) -> Deferred[dict[str, Any]]:
        return self._ret({"cmd": "_file_hash", "saltenv": env, "path": relative}).addCallback(
            lambda ret: ret if isinstance(ret, dict) else {}
        )

    @_deferred
    def hashFile(self, path: str, saltenv: str = "base") -> Deferred[dict[str, Any]]:
        """
        @return: a L{Deferred} firing with C{{"hsum", "hash_type"}} of the
            master's copy of C{path}, or C{{}} if it has none.
        """
        relative, env = splitUrl(path, saltenv)
        return self._hashInfo(relative, env).addCallback(
            lambda info: (
                {"hsum": info["hsum"], "hash_type": info.get("hash_type", "sha256")}
                if info.get("hsum")
                else {}
            )
        )

    @_deferred
    def cacheFile(self, path: str, saltenv: str = "base") -> Deferred[str]:
        """
        Fetch C{path} into the cache unless the cached copy's SHA-256 is
        the master's.

        @return: a L{Deferred} firing with the cached file's path, or
            C{""} if the master has no such file.
        """
        relative, env = splitUrl(path, saltenv)
        return self._cache(relative, env, None).addCallback(lambda result: result[0])

    @_deferred
    def cacheFileTo(self, path: str, saltenv: str, dest: str) -> Deferred[tuple[str, bool]]:
        """
        L{cacheFile}, writing C{dest} in the same pass when the file is
        transferred (see L{IFileClient.cacheFileTo}).

        @return: a L{Deferred} firing with C{(cached path, whether dest
            was written)}.
        """
        relative, env = splitUrl(path, saltenv)
        return self._cache(relative, env, dest).addCallback(
            lambda result: (result[0], result[1] is not None and result[1] == dest)
        )

    @_deferred
    def cacheFileKnown(self, path: str, saltenv: str, hsum: str) -> Deferred[str]:
        """
        L{cacheFile} when the master's SHA-256 of C{path} is already known
        (from a batched request of the caller's, such as a state run's
        L{cacheFiles} and L{hashFiles} before its first state): no
        C{_file_hash} request; the cached copy is checked against C{hsum}
        (a C{stat}) and fetched again if it differs (a file changed on the
        master since gets its new content).

        @return: a L{Deferred} firing with the cached file's path.
        """
        relative, env = splitUrl(path, saltenv)
        return self._cache(relative, env, None, {"hsum": hsum}).addCallback(
            lambda result: result[0]
        )

    def _cache(
        self,
        relative: str,
        env: str,
        copyTo: str | None,
        known: dict[str, Any] | None = None,
    ) -> Deferred[tuple[str, str | None]]:
        """
        L{cacheFile} of a checked path, also writing C{copyTo} if it
        transfers the file.

        @param known: the master's C{{"hsum"}} of the file if the caller
            knows it (then it is not asked for).
        @return: a L{Deferred} firing with C{(cached path or "", the copy
            written or None)}; a caller that joined a fetch of the same
            file already under way gets that fetch's copy, not its own.
        """
        target = self.cachedPath(relative, env)

        async def run() -> tuple[str, str | None]:
            info = known if known is not None else await self._hashInfo(relative, env)
            hsum = info.get("hsum")
            if not hsum:
                return "", None
            size = info.get("size")
            try:
                if await self.runBlocking(self.index.hashOf, target) == hsum:
                    return target, None
                copy = _CopyTo(copyTo, size) if copyTo is not None else None
                written = await self._fetch(relative, env, target, hsum, copy)
                return written, copy.written if copy is not None else None
            finally:
                if self.index.dirty:
                    await self.runBlocking(self.index.save)

        return self._once(target, lambda: Deferred.fromCoroutine(run()))

    @_deferred
    def hashFiles(self, paths: list[str], saltenv: str = "base") -> Deferred[dict[str, Any]]:
        """
        L{hashFile} of many files at once: one C{_file_hash_many} request
        per saltenv (and per L{BATCH_PATHS} paths), one thread call on the
        master each.

        @param paths: C{salt://} URLs or relative paths (a saltenv in a
            URL wins over C{saltenv}).
        @return: a L{Deferred} firing with C{{path as given: {"hsum",
            "hash_type"} or {}}}; a path the master refuses (a symlink
            leaving its root) is left out: L{hashFile} of it alone says
            why.
        @raise FileServerError: (in the L{Deferred}) for a bad path or
            saltenv, before anything is sent, or the master's refusal of
            a whole request.
        """
        groups = _groupByEnv(paths, saltenv)

        async def run() -> dict[str, Any]:
            result: dict[str, Any] = {}
            for env, wanted in groups.items():
                infos = await self._hashMany(env, list(wanted))
                for relative, given in wanted.items():
                    info = infos.get(relative)
                    if not isinstance(info, dict) or "error" in info:
                        continue
                    for name in given:
                        result[name] = (
                            {"hsum": info["hsum"], "hash_type": info.get("hash_type", "sha256")}
                            if info.get("hsum")
                            else {}
                        )
            return result

        return Deferred.fromCoroutine(run())

    @_deferred
    def cacheFiles(self, paths: list[str], saltenv: str = "base") -> Deferred[dict[str, str]]:
        """
        L{cacheFile} of many files at once: per saltenv, one
        C{_file_hash_many} request and one thread call to check every
        cached copy, then the files that differ in as few C{_serve_files}
        requests as their sizes allow (small files come whole, many in one
        reply, and are written and checked in one thread call per reply);
        a file too big for one reply is fetched in chunks as L{cacheFile}
        does, L{PARALLEL_FILES} at a time.

        @param paths: C{salt://} URLs or relative paths (a saltenv in a
            URL wins over C{saltenv}).
        @return: a L{Deferred} firing with C{{path as given: cached path,
            or "" if the master has no such file}}; a path the master
            refuses is left out (L{cacheFile} of it alone says why).
        @raise FileServerError: (in the L{Deferred}) for a bad path or
            saltenv, before anything is sent, the master's refusal of a
            whole request, or a file whose content is not its hash.
        """
        return self._cacheFilesWith(paths, saltenv, None)

    @_deferred
    def cacheFilesHashed(
        self, paths: list[str], saltenv: str = "base"
    ) -> Deferred[dict[str, tuple[str, str]]]:
        """
        L{cacheFiles}, each cached file with the SHA-256 its copy has (the
        master's, which the copy was checked against): what L{cacheFiles}
        then L{hashFiles} tell, in the requests of L{cacheFiles} alone.

        @return: a L{Deferred} firing with C{{path as given: (cached path,
            SHA-256)}}; a path the master has no file for, or refuses, is
            left out.
        @raise FileServerError: as L{cacheFiles}.
        """
        hashes: dict[str, str] = {}

        def paired(cached: dict[str, str]) -> dict[str, tuple[str, str]]:
            return {
                name: (path, hashes[name])
                for name, path in cached.items()
                if path and name in hashes
            }

        return self._cacheFilesWith(paths, saltenv, hashes).addCallback(paired)

    def _cacheFilesWith(
        self, paths: list[str], saltenv: str, hashes: dict[str, str] | None
    ) -> Deferred[dict[str, str]]:
        """
        L{cacheFiles}, noting in C{hashes} (if given) the SHA-256 of each
        file cached, by path as given.
        """
        groups = _groupByEnv(paths, saltenv)

        async def run() -> dict[str, str]:
            result: dict[str, str] = {}
            try:
                for env, wanted in groups.items():
                    envHashes: dict[str, str] = {}
                    cached = await self._cacheMany(env, list(wanted), envHashes)
                    for relative, given in wanted.items():
                        if relative in cached:
                            for name in given:
                                result[name] = cached[relative]
                                if hashes is not None and relative in envHashes:
                                    hashes[name] = envHashes[relative]
            finally:
                await self.runBlocking(self.index.save)
            return result

        return Deferred.fromCoroutine(run())

    async def _hashMany(self, env: str, relatives: list[str]) -> dict[str, Any]:
        """
        C{_file_hash_many} of C{relatives}, L{BATCH_PATHS} at a time.
        """
        infos: dict[str, Any] = {}
        for start in range(0, len(relatives), BATCH_PATHS):
            batch = relatives[start : start + BATCH_PATHS]
            ret = await self._ret({"cmd": "_file_hash_many", "saltenv": env, "paths": batch})
            if isinstance(ret, dict):
                infos.update(ret)
        return infos

    async def _cacheMany(
        self, env: str, relatives: list[str], hashes: dict[str, str] | None = None
    ) -> dict[str, str]:
        """
        L{cacheFiles} of the checked paths of one saltenv.

        @param hashes: if given, gets the SHA-256 of each file cached (the
            one its copy was checked against), by relative path.
        @return: C{{relative path: cached path or ""}}, refused paths left
            out.
        """
        if hashes is None:
            hashes = {}
        infos = await self._hashMany(env, relatives)
        result: dict[str, str] = {}
        known: dict[str, str] = {}
        for relative in relatives:
            info = infos.get(relative)
            if not isinstance(info, dict) or "error" in info:
                continue
            if not info.get("hsum"):
                result[relative] = ""
            else:
                known[relative] = info["hsum"]
        # Checked by the caller (_groupByEnv): no second check of each.
        targets = {relative: self._cachedPathOf(relative, env) for relative in known}
        stale = set(
            await self.runBlocking(
                self.index.stale, [(targets[name], hsum) for name, hsum in known.items()]
            )
        )
        for relative in known:
            if targets[relative] not in stale:
                result[relative] = targets[relative]
                hashes[relative] = known[relative]
        remaining = [relative for relative in known if targets[relative] in stale]
        big: dict[str, str] = {}
        while remaining:
            batch, remaining = remaining[:BATCH_PATHS], remaining[BATCH_PATHS:]
            ret = await self._ret({"cmd": "_serve_files", "saltenv": env, "paths": batch})
            if not isinstance(ret, dict):
                raise FileServerError(f"the master's answer to _serve_files is malformed: {ret!r}")
            whole: list[tuple[str, str, bytes, str]] = []
            later: list[str] = []
            for index, relative in enumerate(batch):
                reply = ret.get(relative)
                if not isinstance(reply, dict) or "error" in reply:
                    continue
                hsum = reply.get("hsum")
                if not isinstance(hsum, str):
                    result[relative] = ""
                elif isinstance(reply.get("data"), bytes):
                    whole.append((relative, targets[relative], reply["data"], hsum))
                    hashes[relative] = hsum
                elif index == 0:
                    # Too big for a reply of its own: fetched in chunks.
                    big[relative] = hsum
                else:
                    later.append(relative)
            if whole:
                shown = f"saltenv {env}"
                written = await self.runBlocking(_writeWhole, whole, self.index, shown)
                result.update(written)
            remaining = later + remaining
        semaphore = DeferredSemaphore(PARALLEL_FILES)
        names = sorted(big)
        fetched = await gatherResults(
            [
                semaphore.run(
                    lambda name=name: self._once(
                        targets[name], lambda: self._fetch(name, env, targets[name], big[name])
                    )
                )
                for name in names
            ],
            consumeErrors=True,
        ).addErrback(lambda failure: failure.value.subFailure)
        result.update(zip(names, fetched, strict=True))
        hashes.update((name, big[name]) for name in names)
        return result

    def cacheDir(
        self, path: str, saltenv: str = "base", includeEmpty: bool = False
    ) -> Deferred[list[str]]:
        """
        Fetch every file under directory C{path} whose cached copy is
        missing or differs: one C{_file_hashes} request, one thread hop to
        check every cached copy, then L{PARALLEL_FILES} transfers at once.

        @return: a L{Deferred} firing with the cached paths.
        """
        return self._cacheDirWith(
            path,
            saltenv,
            includeEmpty,
            lambda env, prefix: self._ret(
                {"cmd": "_file_hashes", "saltenv": env, "prefix": prefix}
            ),
            self.dirList,
            self._fetch,
        )

    def _fetch(
        self, relative: str, env: str, target: str, hsum: str, copy: _CopyTo | None = None
    ) -> Deferred[str]:
        """
        Transfer a file into C{target} (and C{copy}'s destination, if
        given), starting again (up to L{RETRIES} times) if it changes on
        the master meanwhile.
        """

        async def run() -> str:
            expected: str | None = hsum
            for attempt in range(RETRIES + 1):
                try:
                    return await self._transfer(relative, env, target, expected, copy)
                except FileServerError as e:
                    if CHANGED not in str(e) or attempt == RETRIES:
                        raise
                    expected = None
            raise AssertionError("unreachable")

        return Deferred.fromCoroutine(run())

    def _transfer(
        self,
        relative: str,
        env: str,
        target: str,
        hsum: str | None,
        copy: _CopyTo | None = None,
    ) -> Deferred[str]:
        return _Transfer(self, relative, env, target, hsum, copy).start()

    @_deferred
    def push(self, localPath: str, remotePath: str) -> Deferred[bool]:
        """
        Send C{localPath} to the master in chunks of L{PUSH_CHUNK} bytes
        (each read in a thread, one in flight at a time), kept there as
        C{cachedir/minions/<id>/files/<remotePath>} if its C{file_recv} is
        on.

        @return: a L{Deferred} firing with C{True}, or failing with
            L{FileServerError} saying why the master refused it.
        """
        remote = checkRelativePath(remotePath.lstrip("/"))

        async def run() -> bool:
            try:
                f = await self.runBlocking(open, localPath, "rb")
            except OSError as e:
                raise FileServerError(f"cannot push {localPath}: {e.strerror}") from None
            try:
                size = (await self.runBlocking(os.fstat, f.fileno())).st_size
                loc = 0
                while True:
                    data = await self.runBlocking(f.read, PUSH_CHUNK)
                    eof = loc + len(data) >= size or not data
                    if eof and loc + len(data) != size:
                        raise FileServerError(f"{localPath} changed while it was pushed")
                    await self._ask(
                        {
                            "cmd": "_file_recv",
                            "path": remote,
                            "loc": loc,
                            "data": data,
                            "size": size,
                            "eof": eof,
                        }
                    )
                    loc += len(data)
                    if eof:
                        return True
            finally:
                await self.runBlocking(f.close)

        return Deferred.fromCoroutine(run())


class _CopyTo:
    """
    A second destination of a transfer (L{RemoteFileClient.cacheFileTo}).

    @ivar dest: where the copy goes.
    @ivar expectedSize: the master's size of the file: a regular file of
        that size at C{dest} is left for the caller to compare.
    @ivar written: C{dest} once a transfer put the copy there.
    """

    def __init__(self, dest: str, expectedSize: int | None) -> None:
        self.dest = dest
        self.expectedSize = expectedSize if isinstance(expectedSize, int) else None
        self.written: str | None = None


class _Transfer:
    """
    One pipelined fetch: up to L{WINDOW} chunk requests in flight, chunks
    written in order by one chain of thread calls, each chunk dropped once
    written.
    """

    def __init__(
        self,
        client: RemoteFileClient,
        relative: str,
        env: str,
        target: str,
        hsum: str | None,
        copy: _CopyTo | None = None,
    ) -> None:
        self.client = client
        self.copy = copy
        self.relative = relative
        self.env = env
        self.target = target
        self.hsum = hsum
        self.shown = f"salt://{relative} (saltenv {env})"
        self.done: Deferred[str] = Deferred()
        self.download: _Download | None = None
        self.chunk = 0
        self.size = 0
        self.nextLoc = 0
        #: Requested chunks not yet written (by offset), and those arrived.
        self.pending: set[int] = set()
        self.arrived: dict[int, tuple[bytes, int, bool]] = {}
        self.writeLoc = 0
        self.writing = False
        self.failed = False

    def _request(self, loc: int) -> Deferred[dict[str, Any]]:
        payload = {
            "cmd": "_serve_file",
            "saltenv": self.env,
            "path": self.relative,
            "loc": loc,
        }
        if self.hsum:
            payload["hsum"] = self.hsum
        return self.client._ask(payload)

    def start(self) -> Deferred[str]:
        runBlocking = self.client.runBlocking
        copy = self.copy
        if copy is None:
            d = runBlocking(_Download, self.target)
        else:
            d = runBlocking(_Download, self.target, copy.dest, copy.expectedSize)

        def opened(download: _Download) -> Deferred[dict[str, Any]]:
            self.download = download
            self.pending.add(0)
            return self._request(0)

        d.addCallback(opened)
        d.addCallbacks(self._first, self._fail)
        return self.done

    def _first(self, reply: dict[str, Any]) -> None:
        data = reply.get("data", b"")
        hsum, size = reply.get("hsum"), reply.get("size")
        if not isinstance(data, bytes) or not isinstance(hsum, str) or not isinstance(size, int):
            self._fail(FileServerError(f"{self.shown}: the master's first chunk is malformed"))
            return
        if self.hsum and hsum != self.hsum:
            self._fail(FileServerError(f"{self.shown} {CHANGED}"))
            return
        self.hsum, self.size, self.chunk = hsum, size, max(1, len(data))
        self.nextLoc = len(data)
        self._arrived(0, reply)
        self._fill()

    def _fill(self) -> None:
        """
        Request more chunks while the window has room.
        """
        window = max(1, min(WINDOW, WINDOW_BYTES // self.chunk))
        while not self.failed and self.nextLoc < self.size and len(self.pending) < window:
            loc = self.nextLoc
            self.nextLoc += self.chunk
            self.pending.add(loc)
            self._request(loc).addCallbacks(
                lambda reply, loc=loc: self._arrived(loc, reply), self._fail
            )

    def _arrived(self, loc: int, reply: dict[str, Any]) -> None:
        if self.failed:
            return
        data = reply.get("data")
        end = reply.get("loc")
        if not isinstance(data, bytes) or end != loc + len(data):
            self._fail(FileServerError(f"{self.shown}: the master's chunk at {loc} is malformed"))
            return
        expected = min(self.chunk, self.size - loc)
        if len(data) != expected:
            self._fail(FileServerError(f"{self.shown} {CHANGED}: a chunk is short"))
            return
        self.arrived[loc] = (data, end, bool(reply.get("eof")))
        self._write()

    def _write(self) -> None:
        """
        Write the next chunks in order (those arrived, up to
        L{WRITE_BATCH} in one thread call), if no write runs: the file
        (and its hash) in one thread, the copy beside C{dest}, if any, in
        another at the same time.
        """
        if self.writing or self.failed:
            return
        if self.writeLoc >= self.size and not self.pending:
            self._finish()
            return
        chunks: list[bytes] = []
        starts: list[int] = []
        loc = self.writeLoc
        while len(chunks) < WRITE_BATCH:
            entry = self.arrived.pop(loc, None)
            if entry is None:
                break
            starts.append(loc)
            chunks.append(entry[0])
            loc = entry[1]
        if not chunks:
            return
        self.writing = True
        download = self.download
        assert download is not None
        runBlocking = self.client.runBlocking
        d = runBlocking(download.writeOwn, chunks)
        if download.copyTo is not None:
            # Both writes end before anything else happens to the files
            # (a failure of one aborts the download only then).
            d = DeferredList(
                [d, runBlocking(download.writeCopy, chunks)], consumeErrors=True
            ).addCallback(_firstFailure)

        def written(_: object) -> None:
            self.writing = False
            self.pending.difference_update(starts)
            self.writeLoc = loc
            self._fill()
            self._write()

        d.addCallbacks(written, self._fail)

    def _finish(self) -> None:
        assert self.download is not None and self.hsum is not None
        self.writing = True
        download = self.download
        d = self.client.runBlocking(download.finish, self.hsum, self.client.index, self.shown)

        def finished(target: str) -> None:
            if self.copy is not None and download.copyTo is not None:
                self.copy.written = download.copyTo
            self.done.callback(target)

        d.addCallbacks(finished, self._fail)

    def _fail(self, reason: Any) -> None:
        if self.failed:
            return
        self.failed = True
        self.arrived.clear()
        download = self.download
        if download is not None:
            self.client.runBlocking(download.abort).addErrback(lambda _: None)
        if not self.done.called:
            self.done.errback(reason)


@implementer(IFileClient)
class LocalFileClient(_CachingClient):
    """
    The file client of a minion without a master (C{file_client: local},
    C{salttwist-call --local}): it reads its own C{file_roots} through a
    L{salttwist.fileserver.server.FileServer} and copies files into the
    same cache as L{RemoteFileClient} (Salt's local client does too), with
    the same hash check.
    """

    def __init__(self, fileServer: Any, cachedir: str, runBlocking: RunBlocking) -> None:
        super().__init__(cachedir, runBlocking)
        self.fileServer = fileServer

    @_deferred
    def envs(self) -> Deferred[list[str]]:
        """
        @return: a L{Deferred} firing with the local saltenvs.
        """
        return self.runBlocking(self.fileServer.envs)

    @_deferred
    def fileList(self, saltenv: str = "base", prefix: str = "") -> Deferred[list[str]]:
        """
        @return: a L{Deferred} firing with the files of C{saltenv} under
            C{prefix}.
        """
        return self.runBlocking(
            self.fileServer.fileList, checkSaltenv(saltenv), checkPrefix(prefix)
        )

    @_deferred
    def dirList(self, saltenv: str = "base", prefix: str = "") -> Deferred[list[str]]:
        """
        @return: a L{Deferred} firing with the directories of C{saltenv}
            under C{prefix}.
        """
        return self.runBlocking(self.fileServer.dirList, checkSaltenv(saltenv), checkPrefix(prefix))

    @_deferred
    def hashFile(self, path: str, saltenv: str = "base") -> Deferred[dict[str, Any]]:
        """
        @return: a L{Deferred} firing with C{{"hsum", "hash_type"}} of the
            local roots' copy, or C{{}}.
        """
        relative, env = splitUrl(path, saltenv)
        return self.runBlocking(self.fileServer.hashFile, relative, env).addCallback(
            lambda info: (
                {"hsum": info["hsum"], "hash_type": info.get("hash_type", "sha256")} if info else {}
            )
        )

    @_deferred
    def cacheFile(self, path: str, saltenv: str = "base") -> Deferred[str]:
        """
        Copy C{path} from the local roots into the cache unless the cached
        copy is the same (one thread call).

        @return: a L{Deferred} firing with the cached path, or C{""}.
        """
        relative, env = splitUrl(path, saltenv)
        target = self.cachedPath(relative, env)
        return self._once(
            target, lambda: self.runBlocking(self._cacheBlocking, relative, env, target, True)
        )

    @_deferred
    def cacheFileTo(self, path: str, saltenv: str, dest: str) -> Deferred[tuple[str, bool]]:
        """
        L{cacheFile}; C{dest} is never written here (a local copy is cheap
        to make from the cache: the caller does).

        @return: a L{Deferred} firing with C{(cached path or "", False)}.
        """
        return self.cacheFile(path, saltenv).addCallback(lambda cached: (cached, False))

    def cacheDir(
        self, path: str, saltenv: str = "base", includeEmpty: bool = False
    ) -> Deferred[list[str]]:
        """
        Copy every file under directory C{path} as L{cacheFile} does.

        @return: a L{Deferred} firing with the cached paths.
        """
        return self._cacheDirWith(
            path,
            saltenv,
            includeEmpty,
            lambda env, prefix: self.runBlocking(self.fileServer.hashes, env, prefix),
            self.dirList,
            lambda relative, env, target, hsum: self.runBlocking(
                self._cacheBlocking, relative, env, target, False
            ),
        )

    @_deferred
    def hashFiles(self, paths: list[str], saltenv: str = "base") -> Deferred[dict[str, Any]]:
        """
        L{hashFile} of many files, in one thread call.

        @return: a L{Deferred} firing with C{{path as given: {"hsum",
            "hash_type"} or {}}}; a path the roots refuse is left out.
        """
        groups = _groupByEnv(paths, saltenv)

        def hashAll() -> dict[str, Any]:
            result: dict[str, Any] = {}
            for env, wanted in groups.items():
                infos = self.fileServer.hashFiles(list(wanted), env)
                for relative, given in wanted.items():
                    info = infos.get(relative, {})
                    if "error" in info:
                        continue
                    for name in given:
                        result[name] = (
                            {"hsum": info["hsum"], "hash_type": info["hash_type"]} if info else {}
                        )
            return result

        return self.runBlocking(hashAll)

    @_deferred
    def cacheFiles(self, paths: list[str], saltenv: str = "base") -> Deferred[dict[str, str]]:
        """
        L{cacheFile} of many files, in one thread call.

        @return: a L{Deferred} firing with C{{path as given: cached path or
            ""}}; a path the roots refuse is left out.
        """
        groups = _groupByEnv(paths, saltenv)

        def cacheAll() -> dict[str, str]:
            result: dict[str, str] = {}
            try:
                for env, wanted in groups.items():
                    for relative, given in wanted.items():
                        try:
                            cached = self._copyBlocking(
                                relative, env, self.cachedPath(relative, env)
                            )
                        except FileServerError:
                            continue
                        for name in given:
                            result[name] = cached
            finally:
                self.index.save()
            return result

        return self.runBlocking(cacheAll)

    def _cacheBlocking(self, relative: str, env: str, target: str, save: bool) -> str:
        """
        Copy one file into the cache if its cached copy differs (blocking:
        in a thread), and save the index if C{save} (else the caller does).
        """
        try:
            return self._copyBlocking(relative, env, target)
        finally:
            if save:
                self.index.save()

    def _copyBlocking(self, relative: str, env: str, target: str) -> str:
        shown = f"salt://{relative} (saltenv {env})"
        for _ in range(RETRIES + 1):
            found = self.fileServer.findFile(relative, env)
            if found is None:
                return ""
            info = self.fileServer.hashFile(relative, env)
            if not info:
                return ""
            wanted = info["hsum"]
            if self.index.hashOf(target) == wanted:
                return target
            download = _Download(target)
            try:
                with open(found.realPath, "rb") as source:
                    while chunk := source.read(1024 * 1024):
                        download.write(chunk)
                return download.finish(wanted, self.index, shown)
            except FileServerError:
                # Changed while copied: take its new hash and copy again.
                continue
            except OSError as e:
                download.abort()
                raise FileServerError(f"cannot copy {shown}: {e.strerror}") from None
        raise FileServerError(f"{shown} {CHANGED}, {RETRIES + 1} times: try again later")

    @_deferred
    def push(self, localPath: str, remotePath: str) -> Deferred[bool]:
        """
        Refused: a minion without a master has nowhere to push to.
        """
        return _failed(
            FileServerError("cp.push needs a master: this minion's file_client is local")
        )


def _firstFailure(results: list[tuple[bool, Any]]) -> Any:
    """
    @return: the first failure of a L{DeferredList}'s results (to fail
        with), else L{None}.
    """
    for ok, result in results:
        if not ok:
            return result
    return None


def _failed(error: Exception) -> Deferred[Any]:
    return fail(error)


__all__ = ["CacheIndex", "LocalFileClient", "RemoteFileClient", "splitUrl"]
