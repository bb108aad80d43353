# -*- test-case-name: tests.test_master_fileserving -*-
"""
The file server's room on the master: C{salt://} requests inside a
minion's session.

Wire (each request a session payload with C{cmd}; each answered for the
session's own minion id):
  - C{_file_envs} C{{}} -> C{{"ret": [saltenv, ...]}}
  - C{_file_list} C{{"saltenv", "prefix"}} -> C{{"ret": [path, ...]}}
  - C{_dir_list} C{{"saltenv", "prefix"}} -> C{{"ret": [path, ...]}}
  - C{_file_hash} C{{"saltenv", "path"}} -> C{{"ret": {"hsum", "hash_type",
    "size"}}} or C{{"ret": {}}} when there is no such file
  - C{_file_hashes} C{{"saltenv", "prefix"}} -> C{{"ret": {path: hsum}}}
  - C{_file_hash_many} C{{"saltenv", "paths": [path, ...]}} -> C{{"ret":
    {path: {"hsum", "hash_type", "size"} or {} or {"error": why}}}}: the
    answers of C{_file_hash} for up to L{MAX_BATCH_PATHS} paths in one
    request and one thread call (a state run asks for all its sources at
    once)
  - C{_serve_files} C{{"saltenv", "paths": [path, ...]}} -> C{{"ret":
    {path: {"data", "hsum", "size"} or {"hsum", "size"} or {} or {"error":
    why}}}}: whole small files in one reply, in the order asked, while
    their bytes together fit in C{file_buffer_size}; a file that does not
    fit (or changed while read) comes without C{data}, to fetch with
    C{_serve_file} (or ask again); up to L{MAX_BATCH_PATHS} paths
  - C{_serve_file} C{{"saltenv", "path", "loc", "hsum"}} -> C{{"data":
    bytes, "loc": next offset, "eof": bool}}: one chunk of at most
    C{file_buffer_size} bytes from offset C{loc}; the chunk at C{loc} 0
    also carries C{"hsum"} and C{"size"}. C{hsum} (optional at C{loc} 0)
    is the SHA-256 the minion was told: if the file is no longer that one
    the answer is an error containing L{CHANGED}, and the minion starts
    again.
  - C{_master_opts} C{{}} -> C{{"ret": {option: value}}}: the master's
    options a minion's state runs take (Salt's C{_master_opts},
    L{salttwist.state.masteropts})
  - C{_file_recv} C{{"path", "loc", "data", "size", "eof"}} -> C{{"ret":
    True}} (C{cp.push}; refused unless C{file_recv}); chunks in order,
    appended to a temporary file renamed into
    C{cachedir/minions/<id>/files/<path>} at C{eof}.
A refused request is answered C{{"error": "<why>"}}.

Every file-server call, every hash and every chunk read or written runs in
a thread (C{runBlocking}): they touch the disk (and gitfs, git), which
would stall every session on the reactor. Each minion's requests pass
through L{FairLimits} first (C{fileserver_request_rate},
C{fileserver_request_burst}, C{fileserver_inflight_bytes}).

Nothing of a file's content is ever logged.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger

from salttwist.daemon import StartupError
from salttwist.fileserver.interfaces import FileServerError
from salttwist.fileserver.limits import FairLimits, LimitExceeded
from salttwist.fileserver.paths import checkPrefix, checkRelativePath, checkSaltenv
from salttwist.fileserver.server import FileServer

#: The words of the error a minion gets when a file changed while it
#: fetched it: the client looks for them and starts the transfer again.
CHANGED = "changed during the transfer"
#: The most transfers whose identity (size, mtime, hash) a session keeps.
MAX_TRANSFERS_PER_SESSION = 64
#: The most paths of one C{_file_hash_many} or C{_serve_files} request.
MAX_BATCH_PATHS = 1000
#: The most pushes (C{_file_recv}) one session may have open at once.
MAX_PUSHES_PER_SESSION = 8
_MB = 1024 * 1024


@dataclass
class _Transfer:
    """
    What a session was told about one file it fetches: the file as it was
    when its hash was taken.
    """

    realPath: str
    size: int
    mtimeNs: int
    hsum: str


@dataclass
class _Push:
    """
    One C{cp.push} being received: its temporary file and where it goes.
    """

    parts: list[str]
    tmpName: str
    size: int
    nextLoc: int = 0
    #: A write failed: the push is abandoned, later chunks are refused.
    broken: bool = False
    #: The chain of writes (each waits for the one before it).
    last: Deferred[Any] = field(default_factory=lambda: succeed(None))


class _SessionFiles:
    """
    One session's transfers and pushes.
    """

    def __init__(self) -> None:
        self.transfers: OrderedDict[tuple[str, str, str], _Transfer] = OrderedDict()
        self.pushes: dict[str, _Push] = {}


def _string(load: dict[str, Any], key: str, default: str | None = None) -> str:
    value = load.get(key, default)
    if not isinstance(value, str):
        raise FileServerError(f"{key} must be a string, not {type(value).__name__}")
    return value


def _paths(load: dict[str, Any]) -> list[str]:
    """
    @return: the checked relative paths of a batch request's C{paths}.
    @raise FileServerError: naming the problem: not a list, more than
        L{MAX_BATCH_PATHS}, or a path that is not a string or is a path
        trick.
    """
    paths = load.get("paths")
    if not isinstance(paths, list):
        raise FileServerError(f"paths must be a list, not {type(paths).__name__}")
    if len(paths) > MAX_BATCH_PATHS:
        raise FileServerError(
            f"{len(paths)} paths in one request, more than {MAX_BATCH_PATHS}: send fewer"
        )
    checked = []
    for path in paths:
        if not isinstance(path, str):
            raise FileServerError(f"each path must be a string, not {type(path).__name__}")
        checked.append(checkRelativePath(path))
    return checked


def _offset(load: dict[str, Any], key: str = "loc") -> int:
    value = load.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FileServerError(f"{key} must be a non-negative integer, not {value!r}")
    return value


def _readChunk(transfer: _Transfer, loc: int, count: int, shown: str) -> bytes:
    """
    Read C{count} bytes at C{loc} of a file being fetched, if it is still
    the file the transfer began with (blocking: in a thread).

    @raise FileServerError: with L{CHANGED} if its size or mtime differ.
    """
    try:
        fd = os.open(transfer.realPath, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileServerError(f"{shown} {CHANGED}: it is gone") from None
    except OSError as e:
        raise FileServerError(f"cannot read {shown}: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if info.st_size != transfer.size or info.st_mtime_ns != transfer.mtimeNs:
            raise FileServerError(f"{shown} {CHANGED}: fetch it again")
        return os.pread(fd, count, loc)
    finally:
        os.close(fd)


class FileRequests:
    """
    The file server's requests from minion sessions.

    @ivar fileServer: the L{FileServer} (roots, gitfs) the requests read;
        runners use it too (C{master.fileRequests.fileServer}).
    @ivar limits: the per-minion L{FairLimits}.
    @ivar chunkSize: C{file_buffer_size}, the most bytes of one chunk.
    @raise StartupError: if the file server's options are wrong (an
        unknown backend, a bad ignore pattern or C{gitfs_remotes}).
    """

    log = Logger()

    def __init__(
        self,
        config: dict[str, Any],
        clock: Any,
        runBlocking: Any,
        fileServer: FileServer | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.runBlocking = runBlocking
        if fileServer is None:
            try:
                fileServer = FileServer.fromConfig(config)
            except ValueError as e:
                where = config.get("conf_file", "the master config")
                raise StartupError(f"{where}: {e}") from e
        self.fileServer = fileServer
        self.limits = FairLimits.fromConfig(config, clock)
        self.chunkSize: int = config.get("file_buffer_size", _MB)
        self._sessions: dict[int, _SessionFiles] = {}

    # -- plumbing --------------------------------------------------------------

    def _session(self, proto: Any) -> _SessionFiles:
        files = self._sessions.get(id(proto))
        if files is None:
            files = self._sessions[id(proto)] = _SessionFiles()
        return files

    def _limited(
        self, proto: Any, work: Any, nbytes: int = 0, held: int = 0
    ) -> Deferred[dict[str, Any]]:
        """
        Run C{work()} (which returns a L{Deferred}) once the session's
        minion is within its limits, and release what it took when done.
        """
        minionId = proto.minionId
        admitted = self.limits.acquire(minionId, nbytes, held, owner=proto)

        def release(result: object) -> object:
            self.limits.release(minionId, nbytes)
            return result

        def run(_: object) -> Deferred[dict[str, Any]]:
            return maybeDeferred(work).addBoth(release)

        return admitted.addCallback(run)

    # -- listings and hashes ---------------------------------------------------

    def masterOpts(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_master_opts}: the master's options a minion's state runs take
        (L{salttwist.state.masteropts.masterStateOptions}).
        """
        from salttwist.state.masteropts import masterStateOptions

        return succeed(_ret(masterStateOptions(self.config)))

    def fileEnvs(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_file_envs}: the saltenvs the file server has.
        """
        return self._limited(
            proto, lambda: self.runBlocking(self.fileServer.envs).addCallback(_ret)
        )

    def fileList(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_file_list}: the files of C{saltenv} under C{prefix}.
        """
        saltenv, prefix = self._envAndPrefix(load)
        return self._limited(
            proto,
            lambda: self.runBlocking(self.fileServer.fileList, saltenv, prefix).addCallback(_ret),
        )

    def dirList(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_dir_list}: the directories of C{saltenv} under C{prefix}.
        """
        saltenv, prefix = self._envAndPrefix(load)
        return self._limited(
            proto,
            lambda: self.runBlocking(self.fileServer.dirList, saltenv, prefix).addCallback(_ret),
        )

    def fileHash(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_file_hash}: the SHA-256 and size of one file, or C{{}}.
        """
        path, saltenv = self._pathAndEnv(load)
        return self._limited(
            proto,
            lambda: self.runBlocking(self.fileServer.hashFile, path, saltenv).addCallback(_ret),
        )

    def fileHashes(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_file_hashes}: C{{path: hsum}} of every file of C{saltenv} under
        C{prefix}, in one answer (a minion re-checks a cached directory
        with one request).
        """
        saltenv, prefix = self._envAndPrefix(load)
        return self._limited(
            proto,
            lambda: self.runBlocking(self.fileServer.hashes, saltenv, prefix).addCallback(_ret),
        )

    def fileHashMany(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_file_hash_many}: C{_file_hash} of many paths of one saltenv, in
        one thread call.
        """
        saltenv = checkSaltenv(_string(load, "saltenv", "base"))
        paths = _paths(load)
        return self._limited(
            proto,
            lambda: self.runBlocking(self.fileServer.hashFiles, paths, saltenv).addCallback(_ret),
        )

    def serveFiles(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_serve_files}: whole small files of one saltenv in one reply, at
        most C{file_buffer_size} bytes of them, read in one thread call.
        """
        saltenv = checkSaltenv(_string(load, "saltenv", "base"))
        paths = _paths(load)
        files = self._session(proto)

        def remember(answers: dict[str, Any]) -> dict[str, Any]:
            # The files served without their data are fetched next with
            # _serve_file: their identity is kept, as its first chunk would.
            for path, (transfer, _) in answers.items():
                if transfer is not None:
                    files.transfers[(saltenv, path, transfer.hsum)] = transfer
            while len(files.transfers) > MAX_TRANSFERS_PER_SESSION:
                files.transfers.popitem(last=False)
            return {"ret": {path: reply for path, (_, reply) in answers.items()}}

        return self._limited(
            proto,
            lambda: self.runBlocking(self._readFiles, paths, saltenv).addCallback(remember),
            nbytes=self.chunkSize,
        )

    def _readFiles(
        self, paths: list[str], saltenv: str
    ) -> dict[str, tuple[_Transfer | None, dict[str, Any]]]:
        """
        Find, hash and read whole the files of a C{_serve_files} request
        while they fit in C{file_buffer_size} bytes (blocking: in a
        thread).

        @return: C{{path: (its transfer when it is served without data,
            or None; its answer)}}.
        """
        self.fileServer.checkSaltenv(saltenv)
        budget = self.chunkSize
        answers: dict[str, tuple[_Transfer | None, dict[str, Any]]] = {}
        for path in paths:
            shown = f"salt://{path} (saltenv {saltenv})"
            try:
                found = self.fileServer.findFile(path, saltenv)
            except FileServerError as e:
                answers[path] = (None, {"error": str(e)})
                continue
            hsum = self.fileServer.hashOf(found) if found is not None else None
            if found is None or hsum is None:
                answers[path] = (None, {})
                continue
            transfer = _Transfer(found.realPath, found.size, found.mtimeNs, hsum)
            reply: dict[str, Any] = {"hsum": transfer.hsum, "size": transfer.size}
            if transfer.size <= budget:
                try:
                    data = _readChunk(transfer, 0, transfer.size, shown)
                except FileServerError:
                    data = None
                if data is not None and len(data) == transfer.size:
                    budget -= transfer.size
                    reply["data"] = data
                    answers[path] = (None, reply)
                    continue
            answers[path] = (transfer, reply)
        return answers

    def _envAndPrefix(self, load: dict[str, Any]) -> tuple[str, str]:
        return checkSaltenv(_string(load, "saltenv", "base")), checkPrefix(
            _string(load, "prefix", "")
        )

    def _pathAndEnv(self, load: dict[str, Any]) -> tuple[str, str]:
        return checkRelativePath(_string(load, "path")), checkSaltenv(
            _string(load, "saltenv", "base")
        )

    # -- content ---------------------------------------------------------------

    def serveFile(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_serve_file}: one chunk of a file, read in a thread.
        """
        path, saltenv = self._pathAndEnv(load)
        loc = _offset(load)
        hsum = load.get("hsum")
        if hsum is not None and not isinstance(hsum, str):
            raise FileServerError(f"hsum must be a string, not {type(hsum).__name__}")
        files = self._session(proto)
        shown = f"salt://{path} (saltenv {saltenv})"

        def work() -> Deferred[dict[str, Any]]:
            key = (saltenv, path, hsum or "")
            transfer = files.transfers.get(key) if loc > 0 and hsum else None
            if transfer is not None:
                files.transfers.move_to_end(key)
                return self._chunk(transfer, loc, shown, first=False)
            # Finding the file, taking its hash and reading the chunk are
            # one thread call: a small file is served with one hop.
            d = self.runBlocking(self._identifyAndRead, path, saltenv, shown, loc, hsum)

            def identified(result: tuple[_Transfer, bytes]) -> dict[str, Any]:
                found, data = result
                files.transfers[(saltenv, path, found.hsum)] = found
                while len(files.transfers) > MAX_TRANSFERS_PER_SESSION:
                    files.transfers.popitem(last=False)
                return self._answer(found, loc, data, shown, first=loc == 0)

            return d.addCallback(identified)

        return self._limited(proto, work, nbytes=self.chunkSize)

    def _identify(self, path: str, saltenv: str, shown: str) -> _Transfer:
        """
        Find a file and take its hash (blocking: in a thread).
        """
        found = self.fileServer.findFile(path, saltenv)
        if found is None:
            raise FileServerError(f"{shown} is not on the file server")
        hsum = self.fileServer.hashOf(found)
        if hsum is None:
            raise FileServerError(f"cannot read {shown} on the master")
        return _Transfer(found.realPath, found.size, found.mtimeNs, hsum)

    def _identifyAndRead(
        self, path: str, saltenv: str, shown: str, loc: int, hsum: str | None
    ) -> tuple[_Transfer, bytes]:
        """
        L{_identify} a file, check it is still the one the minion was told
        (C{hsum}, if given) and read its chunk at C{loc} (blocking: in a
        thread).
        """
        found = self._identify(path, saltenv, shown)
        if hsum and found.hsum != hsum:
            raise FileServerError(f"{shown} {CHANGED}: fetch it again")
        return found, _readChunk(found, loc, self._count(found, loc, shown), shown)

    def _count(self, transfer: _Transfer, loc: int, shown: str) -> int:
        """
        @return: the bytes of the chunk at C{loc}.
        @raise FileServerError: if C{loc} is past the end of the file.
        """
        if loc > transfer.size:
            raise FileServerError(f"{shown}: offset {loc} is past its end ({transfer.size} bytes)")
        return min(self.chunkSize, transfer.size - loc)

    def _chunk(
        self, transfer: _Transfer, loc: int, shown: str, first: bool
    ) -> Deferred[dict[str, Any]]:
        count = self._count(transfer, loc, shown)
        d = self.runBlocking(_readChunk, transfer, loc, count, shown)
        return d.addCallback(lambda data: self._answer(transfer, loc, data, shown, first))

    def _answer(
        self, transfer: _Transfer, loc: int, data: bytes, shown: str, first: bool
    ) -> dict[str, Any]:
        """
        @return: the reply carrying the chunk C{data} read at C{loc}.
        @raise FileServerError: with L{CHANGED} if it is short.
        """
        end = loc + len(data)
        if len(data) != min(self.chunkSize, transfer.size - loc):
            raise FileServerError(f"{shown} {CHANGED}: it is shorter now")
        reply: dict[str, Any] = {"data": data, "loc": end, "eof": end >= transfer.size}
        if first:
            reply["hsum"] = transfer.hsum
            reply["size"] = transfer.size
        return reply

    # -- cp.push ---------------------------------------------------------------

    def fileRecv(self, proto: Any, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_file_recv} (C{cp.push}): append one chunk of a minion's file to
        its temporary file under C{cachedir/minions/<id>/files}, in a
        thread, renamed into place at C{eof}.
        """
        if not self.config.get("file_recv"):
            raise FileServerError("file_recv is disabled on this master: cp.push is refused")
        path = checkRelativePath(_string(load, "path"))
        loc = _offset(load)
        size = _offset(load, "size")
        data = load.get("data", b"")
        if not isinstance(data, bytes):
            raise FileServerError(f"data must be bytes, not {type(data).__name__}")
        eof = bool(load.get("eof"))
        maxMb = self.config.get("file_recv_max_size", 100)
        if size > maxMb * _MB:
            raise FileServerError(
                f"push of {path} refused: {size} bytes exceeds file_recv_max_size {maxMb} MB"
            )
        if loc + len(data) > size:
            raise FileServerError(f"push of {path}: data past its announced size {size}")
        if eof and loc + len(data) != size:
            raise FileServerError(
                f"push of {path}: ends at {loc + len(data)} bytes, announced {size}"
            )
        minionId = proto.minionId
        if not minionId or minionId in (".", "..") or "/" in minionId or "\x00" in minionId:
            raise FileServerError(f"push refused: minion id {minionId!r} cannot name a directory")
        files = self._session(proto)
        push = files.pushes.get(path)
        if loc == 0:
            if push is None and len(files.pushes) >= MAX_PUSHES_PER_SESSION:
                raise FileServerError(
                    f"push of {path} refused: {MAX_PUSHES_PER_SESSION} pushes already open "
                    "on this session"
                )
            if push is not None:
                self._discard(proto.minionId, push)
            parts = ["minions", minionId, "files", *path.split("/")]
            push = files.pushes[path] = _Push(
                parts, f".{parts[-1]}.{secrets.token_hex(8)}.recv", size
            )
        elif push is None or push.nextLoc != loc or push.size != size:
            expected = push.nextLoc if push is not None else 0
            raise FileServerError(
                f"push of {path} out of order: expected offset {expected}, got {loc}"
            )
        push.nextLoc = loc + len(data)
        if eof:
            del files.pushes[path]
        cachedir = self.config["cachedir"]

        def write(_: object) -> Deferred[Any]:
            if push.broken:
                raise FileServerError(f"push of {path} failed earlier: send it again")
            return self.runBlocking(_appendPush, cachedir, push, loc, data, eof)

        def work() -> Deferred[dict[str, Any]]:
            d = push.last.addCallback(write)
            push.last = done = Deferred()
            d.addBoth(lambda result: (done.callback(None), result)[1])

            def failed(failure: Any) -> Any:
                if not push.broken:
                    push.broken = True
                    if files.pushes.get(path) is push:
                        del files.pushes[path]
                    self._discard(minionId, push)
                return failure

            d.addErrback(failed)
            return d.addCallback(lambda _: {"ret": True})

        try:
            return self._limited(proto, work, nbytes=len(data), held=len(data))
        except LimitExceeded:
            # The chunk is lost: the push cannot go on (the minion sends it
            # again from the start).
            push.broken = True
            if files.pushes.get(path) is push:
                del files.pushes[path]
            self._discard(minionId, push)
            raise

    def _discard(self, minionId: str, push: _Push) -> None:
        """
        Remove the temporary file of a push that will not finish (after
        its pending writes), in a thread.
        """
        cachedir = self.config["cachedir"]
        push.last.addCallback(lambda _: self.runBlocking(_removePush, cachedir, push))
        push.last.addErrback(
            lambda failure: self.log.warn(
                "could not remove the unfinished push of minion {id}: {e}",
                id=minionId,
                e=failure.value,
            )
        )

    # -- sessions --------------------------------------------------------------

    def sessionEnded(self, proto: Any) -> None:
        """
        A session closed: forget what it had in flight (its transfers, its
        waiting requests), and remove the temporary files of its unfinished
        pushes.
        """
        files = self._sessions.pop(id(proto), None)
        minionId = getattr(proto, "minionId", None)
        if minionId is not None:
            self.limits.dropOwner(minionId, proto)
        if files is not None:
            for push in files.pushes.values():
                self._discard(minionId or "?", push)


def _ret(value: object) -> dict[str, Any]:
    return {"ret": value}


def _openDirs(cachedir: str, parts: list[str]) -> int:
    """
    Open (creating them, mode 0700) the directories C{parts} under
    C{cachedir}, never following a symbolic link (blocking).

    @return: a descriptor of the last one.
    @raise FileServerError: if one of them is a symbolic link or not a
        directory.
    """
    fd = os.open(cachedir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                child = os.open(
                    part,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=fd,
                )
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise FileServerError(
                        f"push refused: {'/'.join(parts)} crosses {part!r}, which is a "
                        "symbolic link or not a directory"
                    ) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _appendPush(cachedir: str, push: _Push, loc: int, data: bytes, eof: bool) -> None:
    """
    Append one chunk to a push's temporary file (created at offset 0), and
    rename it into place at C{eof} (blocking: in a thread).
    """
    os.makedirs(cachedir, mode=0o700, exist_ok=True)
    fd = _openDirs(cachedir, push.parts[:-1])
    try:
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_APPEND
        if loc == 0:
            flags |= os.O_CREAT | os.O_EXCL
        out = os.open(push.tmpName, flags, 0o600, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)
        if eof:
            try:
                os.rename(push.tmpName, push.parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
            except IsADirectoryError:
                os.unlink(push.tmpName, dir_fd=fd)
                raise FileServerError(
                    f"push refused: {'/'.join(push.parts[3:])} is a directory on the master"
                ) from None
    finally:
        os.close(fd)


def _removePush(cachedir: str, push: _Push) -> None:
    """
    Remove a push's temporary file, if there is one (blocking).
    """
    try:
        fd = _openDirs(cachedir, push.parts[:-1])
    except (OSError, FileServerError):
        return
    try:
        os.unlink(push.tmpName, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)
