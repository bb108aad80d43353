# -*- test-case-name: tests.test_modules_cp -*-
"""
Salt's C{cp} module: files from the master's file server (C{salt://}),
from the web (C{http://}, C{https://}) and from the minion's own disk
(C{file://}), the minion's file cache, C{cp.push} to the master, and the
receiving end of C{salttwist-cp} (C{cp.recv}, C{cp.recv_chunked}).

Where the work runs:

    - the functions that reach the file server are coroutines run on the
      reactor (L{onReactor}): they await the minion's file client
      (L{IFileClient <salttwist.fileserver.interfaces.IFileClient>}, whose
      requests and cache writes are its own business), and hand every bit
      of their own disk work (stat, hash, copy, render) to the reactor's
      thread pool (L{salttwist.modules._process.inThread}), so that a
      100 MB copy never stalls the jobs running beside it;
    - C{http(s)://} downloads go through treq; the body is streamed to a
      temporary file beside the destination, written in a thread while the
      connection is paused above a few MiB held, so a large download
      neither sits in memory nor blocks the reactor (treq's C{collect}
      has no back-pressure, so the body is delivered to our own protocol);
    - C{cp.recv} and C{cp.recv_chunked} are plain functions (they only
      write to disk): the minion runs them in a thread.

Return values are Salt's: C{cp.get_file} gives the destination or C{''}
when the file server has no such file, C{cp.cache_file} the cached path
or C{False}, C{cp.hash_file} C{{"hsum", "hash_type"}} or C{{}},
C{cp.is_cached} a path or C{''}, C{cp.push} C{True} or C{False}.
Errors are L{CommandExecutionError}s (the job returns C{ERROR: ...}); a
path the file server refuses (C{..}, absolute, a saltenv it does not
serve) fails with the master's own words.

Differences from Salt, each on purpose:

    - destination paths must be absolute (a minion daemon's working
      directory means nothing to whoever publishes the job);
    - C{gzip} is accepted and ignored: transfers are chunked and streamed
      over the minion's session already;
    - C{cp.get_url file:///src /dest} copies the file to C{dest} (Salt's
      returns C{/src} and copies nothing); with C{dest=''} it returns the
      path, as Salt does;
    - C{cp.get_template} fails with the template's error (file, line,
      cause) where Salt logs it and returns C{''};
    - templates are rendered in a thread: C{salt[...]} calls in them reach
      execution functions as Salt's C{__salt__} does (those that run on the
      reactor are called there and waited for).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import gzip as gziplib
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from twisted.internet.defer import CancelledError, Deferred, maybeDeferred
from twisted.internet.protocol import Protocol
from twisted.internet.threads import blockingCallFromThread
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist.fileserver.interfaces import FileServerError
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    needsContext,
    onReactor,
)
from salttwist.modules._process import inThread, offReactorThread

_log = Logger()

#: Bytes read from or hashed in a file at a time.
_BLOCK = 1 << 20

#: A download holds at most this many bytes received and not yet written
#: before its connection is paused.
_HIGH_WATER = 4 << 20
#: ... and is resumed once below this.
_LOW_WATER = 1 << 20

#: The most C{cp.get_url URL dest=None} reads into memory (it returns the
#: contents).
_MAX_CONTENTS = 64 << 20

#: Hash types by the length of a hex digest, for C{source_hash} without a
#: C{type=} prefix (Salt's C{HASHES_REVMAP}).
_HASHES_BY_LENGTH = {
    32: "md5",
    40: "sha1",
    56: "sha224",
    64: "sha256",
    96: "sha384",
    128: "sha512",
}

#: The longest file name kept as is in C{extrn_files}; longer ones are
#: replaced by their SHA-256 (Salt's C{MAX_FILENAME_LENGTH}).
_MAX_FILENAME = 255


# Helpers: the file client, URLs, paths ---------------------------------------


def _fileClient(context: LoaderContext) -> Any:
    """
    @return: the minion's file client.
    @raise CommandExecutionError: if it has none.
    """
    client = context.fileClient
    if client is None:
        raise CommandExecutionError(
            "this minion has no file client: salt:// files cannot be reached here"
        )
    return client


async def _ask(method: Callable[..., Any], *args: Any) -> Any:
    """
    Call a file-client method and await its L{Deferred}, turning its
    failures into L{CommandExecutionError}s in the file server's words.
    """
    try:
        return await maybeDeferred(method, *args)
    except FileServerError as e:
        raise CommandExecutionError(str(e)) from e
    except ConnectionError as e:
        raise CommandExecutionError(f"the file server cannot be reached: {e}") from e


def _saltenv(context: LoaderContext, saltenv: Any) -> str:
    """
    The saltenv of a call: the argument, else the minion's C{saltenv}
    option, else C{base} (Salt's C{get_sls_opts}).
    """
    if saltenv:
        return str(saltenv)
    return str(context.opts.get("saltenv") or "base")


def _splitSalt(path: Any, saltenv: str) -> tuple[str, str]:
    """
    Split a C{salt://} URL (or a plain relative path) into its path and
    saltenv: one given in the URL (C{?saltenv=dev}) wins.

    @raise CommandExecutionError: for a URL that is not one.
    """
    from salttwist.fileserver.paths import parseSaltUrl

    if not isinstance(path, str):
        raise SaltInvocationError(f"path must be a string, not {type(path).__name__}")
    try:
        relative, env = parseSaltUrl(path)
    except FileServerError as e:
        raise CommandExecutionError(str(e)) from e
    return relative, env or saltenv


def _saltUrl(relative: str, saltenv: str) -> str:
    """
    @return: the C{salt://} URL of C{relative} in C{saltenv}.
    """
    return f"salt://{relative}?saltenv={saltenv}"


def _checkDest(dest: Any, what: str = "dest") -> str:
    """
    @return: C{dest}, with C{~} expanded.
    @raise SaltInvocationError: if it is not an absolute path.
    """
    if not isinstance(dest, str) or not dest:
        raise SaltInvocationError(f"{what} must be an absolute path, not {dest!r}")
    expanded = os.path.expanduser(dest)
    if not os.path.isabs(expanded):
        raise SaltInvocationError(f"{what} must be an absolute path: {dest!r}")
    if "\0" in expanded:
        raise SaltInvocationError(f"{what} holds a NUL character: {dest!r}")
    return expanded


def _fileHash(path: str, hashType: str = "sha256") -> str | None:
    """
    (Blocking.) The hex digest of the file C{path}, read a block at a time,
    or L{None} if it is not a readable regular file.
    """
    try:
        digest = hashlib.new(hashType)
        with open(path, "rb") as f:
            while block := f.read(_BLOCK):
                digest.update(block)
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def _placeDest(dest: str, name: str, makedirs: bool) -> str | None:
    """
    (Blocking.) Salt's rules for a destination: a directory (or a path
    ending in C{/}) receives the file as C{name} inside it; the parent
    directory is made with C{makedirs}, else it must exist.

    @return: the file's final path, or L{None} if its directory is missing.
    """
    if os.path.isdir(dest) or dest.endswith("/"):
        dest = os.path.join(dest, name)
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        if not makedirs:
            return None
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise CommandExecutionError(f"cannot make directory {parent}: {e.strerror}") from e
    return dest


def _copyInto(source: str, dest: str) -> None:
    """
    (Blocking.) Copy C{source} to C{dest} through a temporary file beside
    it, renamed into place: a reader never sees half a file. An existing
    C{dest} keeps its mode; a new one gets the source's. The copy is the
    kernel's (C{sendfile}, through L{shutil.copyfile}).
    """
    parent = os.path.dirname(dest) or "."
    try:
        mode = os.stat(dest).st_mode & 0o7777
    except OSError:
        mode = None
    fd, temp = tempfile.mkstemp(prefix=".cp-", dir=parent)
    try:
        os.close(fd)
        shutil.copyfile(source, temp)
        if mode is None:
            shutil.copymode(source, temp)
        else:
            os.chmod(temp, mode)
        os.replace(temp, dest)
    except BaseException:
        _unlinkQuietly(temp)
        raise


def _unlinkQuietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _WrittenIndex:
    """
    The SHA-256 of the destinations this module wrote, in memory, each
    checked against the file's C{(size, mtime_ns, inode)}: checking again
    that an unchanged destination holds the master's file costs a C{stat},
    not a read (the cache's own index works the same way). Any change to
    the file (a write, a replacement) makes it hashed again.
    """

    #: Destinations remembered at most (the oldest forgotten first).
    limit = 100_000

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[int, int, int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def hashOf(self, path: str) -> str | None:
        """
        (Blocking.) @return: the SHA-256 of the regular file C{path}, from
            memory when it is unchanged since recorded, else read; L{None}
            if there is no such file.
        """
        try:
            info = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        key = (info.st_size, info.st_mtime_ns, info.st_ino)
        with self._lock:
            known = self._entries.get(path)
        if known is not None and known[:3] == key:
            return known[3]
        hsum = _fileHash(path)
        if hsum is not None:
            self._store(path, key, hsum)
        return hsum

    def record(self, path: str, hsum: str) -> None:
        """
        (Blocking.) Remember that the file just written at C{path} has
        C{hsum}.
        """
        try:
            info = os.stat(path)
        except OSError:
            return
        self._store(path, (info.st_size, info.st_mtime_ns, info.st_ino), hsum)

    def _store(self, path: str, key: tuple[int, int, int], hsum: str) -> None:
        with self._lock:
            self._entries.pop(path, None)
            self._entries[path] = (*key, hsum)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)


_written = _WrittenIndex()


def _copyIfChanged(
    source: str,
    dest: str,
    hsum: str | None = None,
    sourceHash: Callable[[str], str | None] = _fileHash,
) -> bool:
    """
    (Blocking.) Copy C{source} to C{dest} unless C{dest} already holds the
    same bytes: the same size and SHA-256. Nothing is hashed when C{dest}
    is missing or its size differs.

    @param hsum: the source's SHA-256 when known.
    @param sourceHash: gives the source's SHA-256 otherwise.
    @return: whether it copied.
    """
    try:
        same = os.path.getsize(dest) == os.path.getsize(source) and os.path.isfile(dest)
    except OSError:
        same = False
    if same:
        hsum = hsum or sourceHash(source)
        if hsum is not None and _written.hashOf(dest) == hsum:
            return False
    try:
        _copyInto(source, dest)
    except OSError as e:
        raise CommandExecutionError(f"cannot write {dest}: {e.strerror}") from e
    if hsum is not None:
        _written.record(dest, hsum)
    return True


def _extrnPath(context: LoaderContext, url: str, saltenv: str) -> str:
    """
    Where a file fetched from C{url} (not C{salt://}) is cached, as Salt
    keeps it: C{cachedir/extrn_files/<saltenv>/<host[port]>/<path>}, the
    query appended after C{-}. The path is confined to that directory.

    @raise CommandExecutionError: if the URL would leave it.
    """
    parsed = urlparse(url)
    netloc = parsed.netloc.rsplit("@", 1)[-1].replace(":", "")
    name = parsed.path
    if parsed.query:
        name = f"{name}-{parsed.query}"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or "\0" in name or not netloc or netloc in (".", ".."):
        raise CommandExecutionError(f"Invalid path: the URL {url} cannot be cached")
    parts = [
        p if len(p) <= _MAX_FILENAME else hashlib.sha256(p.encode()).hexdigest() for p in parts
    ]
    if not parts:
        parts = ["index.html"]
    root = os.path.join(_cachedir(context), "extrn_files", saltenv, netloc)
    return os.path.join(root, *parts)


def _cachedir(context: LoaderContext) -> str:
    cachedir = context.opts.get("cachedir")
    if not cachedir:
        raise CommandExecutionError("the minion has no cachedir")
    return str(cachedir)


def _renderFilenames(
    context: LoaderContext, path: str, dest: str | None, saltenv: str, template: Any
) -> Deferred[tuple[str, str | None]]:
    """
    Salt's C{template=} argument of C{cp.get_file} and C{cp.get_dir}: the
    path and destination (not the files) rendered as Jinja templates with
    C{grains}, C{pillar}, C{opts}, C{salt} and C{saltenv}, in a thread.
    """
    if template != "jinja":
        raise CommandExecutionError(
            f"Attempted to render file paths with unavailable engine {template}"
        )
    from salttwist.render import RenderError, renderJinja

    variables = _templateContext(context, saltenv, {})

    def render() -> tuple[str, str | None]:
        try:
            newPath = renderJinja(path, variables, path="<path>")
            newDest = renderJinja(dest, variables, path="<dest>") if dest else dest
        except RenderError as e:
            raise CommandExecutionError(f"Failed to render file path with error: {e}") from e
        return newPath, newDest

    return inThread(context.reactor, render)


def _templateContext(
    context: LoaderContext, saltenv: str, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """
    The variables of a template: C{salt}, C{pillar}, C{grains}, C{opts},
    C{saltenv}, then the caller's keyword arguments (which win, as in Salt).
    """
    from salttwist.modules.extmods import SaltFunctions

    variables: dict[str, Any] = {
        "salt": SaltFunctions(context),
        "pillar": context.pillar,
        "grains": context.grains,
        "opts": context.opts,
        "saltenv": saltenv,
    }
    variables.update({k: v for k, v in kwargs.items() if not k.startswith("__")})
    return variables


def _public(kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    @return: C{kwargs} without the C{__pub_*} keys a job adds.
    """
    return {k: v for k, v in kwargs.items() if not k.startswith("__")}


# Fetching from the file server -----------------------------------------------


@onReactor
@needsContext
async def get_file(
    context: LoaderContext,
    path: str,
    dest: str,
    saltenv: str | None = None,
    makedirs: bool = False,
    template: str | None = None,
    gzip: int | None = None,
    **kwargs: Any,
) -> str | bool:
    """
    Copy a file from the master's file server to C{dest} on the minion.

    C{dest} may be a directory (or end in C{/}): the file keeps its name
    inside it. Its parent directory must exist unless C{makedirs=True}
    (else C{False}, as in Salt). Returns the destination, or C{''} if the
    file server has no such file. The file is fetched into the minion's
    cache only if its SHA-256 changed, and C{dest} is rewritten only if it
    differs. C{template=jinja} renders the path and destination (not the
    file) with C{grains}, C{pillar} and C{opts}. C{gzip} is accepted and
    ignored.

    CLI Example:

        salttwist '*' cp.get_file salt://path/to/file /minion/dest
        salttwist '*' cp.get_file salt://foo/bar.conf?saltenv=config /etc/foo/bar.conf
        salttwist '*' cp.get_file "salt://{{grains.os}}/vimrc" /etc/vimrc template=jinja
    """
    saltenv = _saltenv(context, saltenv)
    if template:
        path, dest = await _renderFilenames(context, path, dest, saltenv, template)
    relative, saltenv = _splitSalt(path, saltenv)
    client = _fileClient(context)
    if not dest:
        cached = await _ask(client.cacheFile, relative, saltenv)
        return cached or ""
    dest = _checkDest(dest)
    server = await _ask(client.hashFile, relative, saltenv)
    if not server:
        return ""
    final = await inThread(
        context.reactor, _placeDest, dest, relative.rsplit("/", 1)[-1], bool(makedirs)
    )
    if final is None:
        _log.warn(
            "cp.get_file: the directory of {dest} does not exist (makedirs=True makes it)",
            dest=dest,
        )
        return False
    # A file transferred now is written to dest in the same pass; else
    # dest is copied from the cache if it differs.
    cached, written = await _ask(client.cacheFileTo, relative, saltenv, final)
    if not cached:
        return ""
    if written:
        await inThread(context.reactor, _written.record, final, server.get("hsum"))
    else:
        await inThread(context.reactor, _copyIfChanged, cached, final, server.get("hsum"))
    return final


@onReactor
@needsContext
async def get_dir(
    context: LoaderContext,
    path: str,
    dest: str,
    saltenv: str | None = None,
    template: str | None = None,
    gzip: int | None = None,
    **kwargs: Any,
) -> list[str]:
    """
    Copy a directory of the master's file server, recursively, into
    C{dest} on the minion (made if missing). As in Salt, C{salt://a/b}
    lands in C{dest/b/...}, and C{salt://a/b/} (a trailing slash) puts
    the contents of C{b} straight into C{dest}. Empty directories are made
    too. Returns the sorted paths written (and empty directories made).

    CLI Example:

        salttwist '*' cp.get_dir salt://path/to/dir/ /minion/dest
    """
    saltenv = _saltenv(context, saltenv)
    if template:
        path, dest = await _renderFilenames(context, path, dest, saltenv, template)
    relative, saltenv = _splitSalt(path, saltenv)
    dest = _checkDest(dest)
    client = _fileClient(context)
    # Salt's prefix: what is cut from each file's path to place it under
    # dest (the directory's parent, or the directory itself when the path
    # ends in "/").
    prefix = relative.rsplit("/", 1)[0] if "/" in relative else ""
    directory = relative.rstrip("/")
    under = f"{directory}/" if directory else ""
    files = [f for f in await _ask(client.fileList, saltenv, under) if f.startswith(under)]
    dirs = [d for d in await _ask(client.dirList, saltenv, under) if d.startswith(under)]
    if not files and not dirs:
        return []
    if files:
        await _ask(client.cacheDir, directory, saltenv)
    copies = []
    for name in files:
        local = name[len(prefix) :].lstrip("/")
        copies.append((client.cachedPath(name, saltenv), os.path.join(dest, local), None))
    empty = [os.path.join(dest, d[len(prefix) :].lstrip("/")) for d in _emptyDirs(files, dirs)]

    # The cache's own index knows the cached files' hashes (a stat each).
    index = getattr(client, "index", None)
    sourceHash = index.hashOf if index is not None else _fileHash

    def place() -> list[str]:
        written = []
        for source, target, hsum in copies:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.isfile(source):
                continue
            _copyIfChanged(source, target, hsum, sourceHash)
            written.append(target)
        for target in empty:
            os.makedirs(target, exist_ok=True)
            written.append(target)
        return sorted(written)

    try:
        return await inThread(context.reactor, place)
    except OSError as e:
        raise CommandExecutionError(f"cannot write under {dest}: {e}") from e


def _emptyDirs(files: list[str], dirs: list[str]) -> list[str]:
    """
    @return: the directories of C{dirs} holding none of C{files} and
        C{dirs}.
    """
    full = set()
    for path in (*files, *dirs):
        parts = path.split("/")
        full.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return [d for d in dirs if d not in full]


@onReactor
@needsContext
async def get_template(
    context: LoaderContext,
    path: str,
    dest: str,
    template: str = "jinja",
    saltenv: str | None = None,
    makedirs: bool = False,
    **kwargs: Any,
) -> str:
    """
    Render a file of the master's file server as a Jinja template and
    write the result to C{dest}. The template sees C{grains}, C{pillar},
    C{opts}, C{salt} (the execution functions), C{saltenv} and every
    keyword argument given. C{dest} may be a directory; without a
    C{dest} the result goes to the minion's C{extrn_files} cache. Returns
    the path written, or C{''} if the file server has no such file or
    C{dest}'s directory is missing (without C{makedirs=True}). A template
    that fails to render fails the call with its file, line and cause.

    CLI Example:

        salttwist '*' cp.get_template salt://path/to/template /minion/dest
        salttwist '*' cp.get_template salt://motd.j2 /etc/motd owner=ops
    """
    if template != "jinja":
        raise CommandExecutionError(
            f"Attempted to render template with unavailable engine {template}"
        )
    from salttwist.render import RenderError, renderJinja

    kwargs = _public(kwargs)
    kwargs.pop("env", None)
    saltenv = _saltenv(context, saltenv)
    relative, saltenv = _splitSalt(path, saltenv)
    client = _fileClient(context)
    cached = await _ask(client.cacheFile, relative, saltenv)
    if not cached:
        return ""
    variables = _templateContext(context, saltenv, kwargs)
    url = _saltUrl(relative, saltenv)
    if dest:
        dest = _checkDest(dest)
    else:
        dest = _extrnPath(context, url, saltenv)
        makedirs = True

    def renderAndWrite() -> str:
        with open(cached, encoding="utf-8") as f:
            text = f.read()
        try:
            rendered = renderJinja(
                text,
                variables,
                path=url,
                loader=_templateLoader(context.reactor, client, saltenv),
                name=relative,
            )
        except RenderError as e:
            raise CommandExecutionError(f"Failed to render template {url}: {e}") from e
        final = _placeDest(dest, relative.rsplit("/", 1)[-1], bool(makedirs))
        if final is None:
            return ""
        _writeText(final, rendered)
        return final

    try:
        return await inThread(context.reactor, renderAndWrite)
    except (OSError, UnicodeDecodeError) as e:
        raise CommandExecutionError(f"cannot render {url} to {dest}: {e}") from e


def _templateLoader(reactor: Any, client: Any, saltenv: str) -> Callable[[str], tuple[str, str]]:
    """
    A template loader (L{salttwist.render.jinja.TemplateLoader}) for a
    render running in a thread: each file a template includes or imports
    (C{{% include %}}, C{{% from "x/map.jinja" import y %}}, C{import_yaml}
    ...) is fetched into the cache by the file client C{client} (called on
    the reactor thread) and read here.

    From a thread other than the reactor's the loader waits for the file
    client's L{Deferred}; on the reactor's own thread (a render run
    synchronously, as in tests) it takes the L{Deferred}'s result only if
    it has one already, and fails rather than wait.

    @return: C{loader(name) -> (text, cached path)}, raising L{LookupError}
        when the file server has no such file.
    """

    def fetch(name: str) -> Any:
        if offReactorThread(reactor):
            return blockingCallFromThread(reactor, client.cacheFile, name, saltenv)
        results: list[Any] = []
        client.cacheFile(name, saltenv).addBoth(results.append)
        if not results:
            raise LookupError(f"salt://{name} cannot be fetched from the reactor's thread")
        if isinstance(results[0], Failure):
            results[0].raiseException()
        return results[0]

    def loader(name: str) -> tuple[str, str]:
        cached = fetch(name)
        if not cached:
            raise LookupError(f"salt://{name} is not on the file server (saltenv {saltenv})")
        with open(cached, encoding="utf-8") as f:
            return f.read(), cached

    return loader


def _writeText(dest: str, text: str) -> None:
    """
    (Blocking.) Write C{text} to C{dest} through a temporary file renamed
    into place.
    """
    fd, temp = tempfile.mkstemp(prefix=".cp-", dir=os.path.dirname(dest))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            os.chmod(temp, os.stat(dest).st_mode & 0o7777)
        except OSError:
            os.chmod(temp, 0o644)
        os.replace(temp, dest)
    except BaseException:
        _unlinkQuietly(temp)
        raise


# URLs ------------------------------------------------------------------------


@onReactor
@needsContext
async def get_url(
    context: LoaderContext,
    path: str,
    dest: str | None = "",
    saltenv: str | None = None,
    makedirs: bool = False,
    source_hash: str | None = None,
) -> Any:
    """
    Fetch a file from a URL: C{salt://} (the master's file server),
    C{http://} or C{https://}, or C{file://} (a path on the minion).

    With a C{dest}, the file is written there (a directory keeps the URL's
    file name; the parent must exist unless C{makedirs=True}) and its path
    returned. With C{dest=''} (the default) it is kept in the minion's
    cache and the cached path returned (for C{file://}, the path itself);
    C{source_hash} (C{sha256=<hex>} or a bare digest) skips downloading an
    http(s) file whose cached copy has that hash. With C{dest=None} the
    contents are returned (at most 64 MiB), nothing cached. Returns
    C{False} if a C{salt://} file does not exist; an HTTP error fails the
    call with its status.

    CLI Example:

        salttwist '*' cp.get_url salt://my/file /tmp/this_file_is_mine
        salttwist '*' cp.get_url http://www.slashdot.org /tmp/index.html
        salttwist '*' cp.get_url https://example.com/a.tgz source_hash=sha256=<hex>
    """
    saltenv = _saltenv(context, saltenv)
    if not isinstance(path, str) or not path:
        raise SaltInvocationError("path must be a URL")
    parsed = urlparse(path)
    scheme = parsed.scheme.lower()
    if scheme == "salt":
        relative, saltenv = _splitSalt(path, saltenv)
        client = _fileClient(context)
        if dest is None:
            cached = await _ask(client.cacheFile, relative, saltenv)
            if not cached:
                return False
            return await inThread(context.reactor, _readText, cached)
        result = await get_file(context, _saltUrl(relative, saltenv), dest, saltenv, makedirs)
        return result or False
    if scheme in ("", "file"):
        return await _getLocal(context, parsed.path if scheme else path, dest, makedirs)
    if scheme in ("http", "https"):
        return await _getHttp(context, path, dest, saltenv, makedirs, source_hash)
    raise CommandExecutionError(
        f"unsupported URL scheme '{scheme}' in {_redact(path)}: salt, http, https and file are"
    )


def _redact(url: str) -> str:
    """
    @return: C{url} without the password of its user (Salt's
        C{redact_http_basic_auth}).
    """
    return re.sub(r"(?<=://)([^/@:]*):[^/@]*@", r"\1:XXXXXXXXXX@", url)


def _readText(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read(_MAX_CONTENTS + 1)
    if len(data) > _MAX_CONTENTS:
        raise CommandExecutionError(
            f"{path} is larger than {_MAX_CONTENTS} bytes: give a dest to write it to"
        )
    return data.decode("utf-8", errors="replace")


async def _getLocal(context: LoaderContext, source: str, dest: str | None, makedirs: bool) -> Any:
    """
    C{cp.get_url} of a path on the minion (C{file://} or no scheme).
    """
    if not os.path.isabs(source):
        raise CommandExecutionError(f"Path '{source}' is not absolute")

    def fetch() -> Any:
        if not os.path.isfile(source):
            raise CommandExecutionError(f"Path '{source}' does not exist or is not a file")
        if dest is None:
            return _readText(source)
        if dest == "":
            return source
        final = _placeDest(_checkDest(dest), os.path.basename(source), makedirs)
        if final is None:
            return ""
        _copyInto(source, final)
        return final

    try:
        return await inThread(context.reactor, fetch)
    except OSError as e:
        raise CommandExecutionError(f"cannot copy {source}: {e}") from e


def _sourceHashMatches(path: str, sourceHash: Any) -> bool:
    """
    (Blocking.) Whether the file C{path} has the digest C{sourceHash}
    (C{type=hex} or a bare hex digest whose length names the type).
    """
    text = str(sourceHash).strip()
    hashType = None
    if "=" in text:
        hashType, text = text.split("=", 1)
    text = text.lower()
    hashType = (hashType or _HASHES_BY_LENGTH.get(len(text), "")).lower()
    if hashType not in _HASHES_BY_LENGTH.values():
        return False
    return _fileHash(path, hashType) == text


async def _getHttp(
    context: LoaderContext,
    url: str,
    dest: str | None,
    saltenv: str,
    makedirs: bool,
    sourceHash: Any,
) -> Any:
    """
    C{cp.get_url} (and C{cp.cache_file}) of an C{http(s)://} URL.
    """
    parsed = urlparse(url)
    if dest:
        dest = _checkDest(dest)
        if os.path.isdir(dest) or dest.endswith("/"):
            name = parsed.path.rstrip("/").rsplit("/", 1)[-1] if parsed.path.strip("/") else ""
            dest = os.path.join(dest, name or "index.html")
        parent = os.path.dirname(dest)

        def ready() -> bool:
            if os.path.isdir(parent):
                return True
            if makedirs:
                os.makedirs(parent, exist_ok=True)
                return True
            return False

        if not await inThread(context.reactor, ready):
            return ""
    elif dest == "":
        dest = _extrnPath(context, url, saltenv)
        target = dest

        def cached() -> bool:
            if sourceHash is not None and _sourceHashMatches(target, sourceHash):
                return True
            os.makedirs(os.path.dirname(target), exist_ok=True)
            return False

        if await inThread(context.reactor, cached):
            return dest
    return await _download(context, url, dest)


async def _download(context: LoaderContext, url: str, dest: str | None) -> Any:
    """
    GET C{url} and stream its body to C{dest} (or, for L{None}, return it
    as text).

    The body is kept as served: a C{Content-Encoding: gzip} response (a
    C{.tar.gz} so labelled) is not unpacked, or its C{source_hash} would no
    longer match (Salt asks tornado for C{decompress_response=False}). So
    this is a plain redirect-following L{Agent}, not treq's C{get}, which
    always gunzips.

    @raise CommandExecutionError: for an HTTP error status or a failed
        connection.
    """
    from hyperlink import EncodedURL
    from twisted.web.client import Agent, HTTPConnectionPool, RedirectAgent

    agent = RedirectAgent(
        Agent(context.reactor, pool=HTTPConnectionPool(context.reactor, persistent=False))
    )
    try:
        target = EncodedURL.from_text(url).to_uri().to_text().encode("ascii")
        response = await agent.request(b"GET", target)
    except CancelledError:
        raise
    except Exception as e:
        reasons = getattr(e, "reasons", None) or []
        if any(isinstance(r, Failure) and r.check(CancelledError) for r in reasons):
            raise CancelledError() from e
        raise CommandExecutionError(f"Error reading {_redact(url)}: {e}") from e
    if response.code >= 400:
        await _discard(response)
        phrase = response.phrase.decode("latin-1", errors="replace")
        raise CommandExecutionError(f"HTTP error {response.code} reading {_redact(url)}: {phrase}")
    if dest is None:
        body = await _collectBounded(response)
        return body.decode("utf-8", errors="replace")
    finished: Deferred[None] = Deferred()
    body = _BodyToFile(context.reactor, os.path.dirname(dest), finished)
    response.deliverBody(body)
    try:
        await finished
    except BaseException as e:
        # Failed, or cancelled (saltutil.kill_job): drop the connection and
        # the partial file.
        await body.discard()
        if isinstance(e, (CommandExecutionError, CancelledError)):
            raise
        raise CommandExecutionError(f"Error reading {_redact(url)}: {e}") from e
    await inThread(context.reactor, body.install, dest)
    return dest


async def _discard(response: Any) -> None:
    """
    Read and drop a response's body (an error page).
    """
    try:
        await _collectBounded(response, limit=1 << 20)
    except Exception:
        pass


async def _collectBounded(response: Any, limit: int = _MAX_CONTENTS) -> bytes:
    """
    @return: a response's whole body, if at most C{limit} bytes.
    """
    import treq

    parts: list[bytes] = []
    size = 0

    def collect(data: bytes) -> None:
        nonlocal size
        size += len(data)
        if size > limit:
            raise CommandExecutionError(
                f"the response is larger than {limit} bytes: give a dest to write it to"
            )
        parts.append(data)

    await treq.collect(response, collect)
    return b"".join(parts)


class _BodyToFile(Protocol):
    """
    Write a response body to a temporary file in a directory, in the
    reactor's threads, one batch at a time and in order; the connection is
    paused while more than L{_HIGH_WATER} bytes wait to be written, resumed
    below L{_LOW_WATER}. The file is made by the first write (in its
    thread), then L{install}ed at its destination or L{discard}ed.

    @ivar finished: fires with L{None} once every byte is written, or
        fails with why the body or a write failed.
    """

    def __init__(self, reactor: Any, directory: str, finished: Deferred[None]) -> None:
        self.reactor = reactor
        self.directory = directory
        self.finished = finished
        self.out: Any = None
        self.temp: str | None = None
        self.pending: list[bytes] = []
        self.pendingBytes = 0
        #: The write under way in a thread, if any.
        self.writing: Deferred[None] | None = None
        self.paused = False
        self.ended = False
        self.failed = False

    def _open(self) -> None:
        """
        (Blocking.) Make the temporary file, once.
        """
        if self.out is None:
            fd, self.temp = tempfile.mkstemp(prefix=".cp-", dir=self.directory)
            self.out = os.fdopen(fd, "wb")

    def _write(self, batch: bytes) -> None:
        """
        (Blocking.) Write one batch.
        """
        self._open()
        self.out.write(batch)

    def dataReceived(self, data: bytes) -> None:
        if self.failed:
            return
        self.pending.append(data)
        self.pendingBytes += len(data)
        if self.pendingBytes > _HIGH_WATER and not self.paused:
            self.paused = True
            self.transport.pauseProducing()
        self._writeNext()

    def _writeNext(self) -> None:
        if self.writing is not None or self.failed:
            return
        if not self.pending:
            if self.ended and not self.finished.called:
                self.finished.callback(None)
            return
        batch = b"".join(self.pending)
        self.pending = []
        self.writing = inThread(self.reactor, self._write, batch)
        self.writing.addCallbacks(self._written, self._writeFailed, callbackArgs=(len(batch),))

    def _written(self, _: object, size: int) -> None:
        self.writing = None
        self.pendingBytes -= size
        if self.paused and self.pendingBytes < _LOW_WATER and not self.ended and not self.failed:
            self.paused = False
            self.transport.resumeProducing()
        self._writeNext()

    def _writeFailed(self, failure: Failure) -> None:
        self.writing = None
        self.failed = True
        self.pending = []
        if not self.ended:
            self.transport.stopProducing()
        if not self.finished.called:
            self.finished.errback(failure)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        from twisted.web.client import ResponseDone
        from twisted.web.http import PotentialDataLoss

        self.ended = True
        if self.failed:
            return
        if reason is not None and not reason.check(ResponseDone, PotentialDataLoss):
            self.failed = True
            self.pending = []
            if not self.finished.called:
                self.finished.errback(reason)
            return
        self._writeNext()

    def install(self, dest: str) -> None:
        """
        (Blocking.) Close the file (made empty if no byte came) and rename
        it to C{dest}.
        """
        self._open()
        self.out.close()
        assert self.temp is not None
        os.chmod(self.temp, 0o644)
        os.replace(self.temp, dest)

    async def discard(self) -> None:
        """
        Stop: drop what waits, the connection, and (once the write under
        way, if any, is done) the temporary file.
        """
        self.failed = True
        self.pending = []
        if not self.ended and self.transport is not None:
            self.transport.stopProducing()
        while self.writing is not None:
            writing = Deferred()
            self.writing.addBoth(lambda result, w=writing: w.callback(None) or result)
            await writing

        def remove() -> None:
            if self.out is not None:
                self.out.close()
            if self.temp is not None:
                _unlinkQuietly(self.temp)

        await inThread(self.reactor, remove)


# The cache -------------------------------------------------------------------


@onReactor
@needsContext
async def cache_file(
    context: LoaderContext, path: str, saltenv: str | None = None, source_hash: str | None = None
) -> str | bool:
    """
    Cache a file on the minion and return its path in the cache: a
    C{salt://} file under C{cachedir/files/<saltenv>/} (fetched only if
    its SHA-256 changed), an http(s) URL under C{cachedir/extrn_files/}
    (skipped if C{source_hash} matches the cached copy), a local path as
    it is. Returns C{False} if the file server has no such file.

    CLI Example:

        salttwist '*' cp.cache_file salt://path/to/file
        salttwist '*' cp.cache_file salt://foo/bar.conf saltenv=config
    """
    saltenv = _saltenv(context, saltenv)
    if not isinstance(path, str) or not path:
        raise SaltInvocationError("path must be a salt:// URL, a URL or a path")
    scheme = urlparse(path).scheme.lower()
    if scheme in ("http", "https", "file") or (scheme == "" and path.startswith("/")):
        return await get_url(context, path, "", saltenv, source_hash=source_hash)
    relative, saltenv = _splitSalt(path, saltenv)
    cached = await _ask(_fileClient(context).cacheFile, relative, saltenv)
    if not cached:
        _log.error(
            "Unable to cache file '{path}' from saltenv '{saltenv}'.", path=path, saltenv=saltenv
        )
        return False
    return cached


@onReactor
@needsContext
async def get_file_str(context: LoaderContext, path: str, saltenv: str | None = None) -> str | bool:
    """
    Cache a file (as L{cache_file}) and return its contents as text (at
    most 64 MiB), or C{False} if it cannot be cached.

    CLI Example:

        salttwist '*' cp.get_file_str salt://my/file
    """
    cached = await cache_file(context, path, saltenv)
    if not cached:
        return False
    return await inThread(context.reactor, _readText, cached)


@onReactor
@needsContext
async def cache_files(
    context: LoaderContext, paths: Any, saltenv: str | None = None
) -> list[str | bool]:
    """
    Cache several files (a list, or a comma-separated string) as
    L{cache_file} does, and return their paths (C{False} for a missing
    one), in order. Each path may name its own saltenv
    (C{salt://a?saltenv=dev}).

    CLI Example:

        salttwist '*' cp.cache_files salt://pathto/file1,salt://pathto/file2
    """
    if isinstance(paths, str):
        paths = paths.split(",")
    if not isinstance(paths, list):
        raise SaltInvocationError("paths must be a list or a comma-separated string")
    return [await cache_file(context, path, saltenv) for path in paths]


def _includeExclude(path: str, include: Any, exclude: Any) -> bool:
    """
    Salt's C{check_include_exclude}: globs, or regular expressions after
    C{E@}, each a string or a list; a file is kept if it matches an
    include (when given) and no exclude.
    """

    def matches(pattern: Any) -> bool:
        pattern = str(pattern)
        if pattern.startswith("E@"):
            return re.search(pattern[2:], path) is not None
        return fnmatch.fnmatch(path, pattern)

    def anyOf(patterns: Any) -> bool:
        return any(matches(p) for p in (patterns if isinstance(patterns, list) else [patterns]))

    if include and not anyOf(include):
        return False
    return not (exclude and anyOf(exclude))


@onReactor
@needsContext
async def cache_dir(
    context: LoaderContext,
    path: str,
    saltenv: str | None = None,
    include_empty: bool = False,
    include_pat: Any = None,
    exclude_pat: Any = None,
) -> list[str]:
    """
    Cache every file under a directory of the master's file server and
    return their cached paths. C{include_pat} and C{exclude_pat} narrow
    the files: globs, or regular expressions prefixed with C{E@}, matched
    against each file's path. C{include_empty=True} makes the empty
    directories in the cache too.

    CLI Example:

        salttwist '*' cp.cache_dir salt://path/to/dir
        salttwist '*' cp.cache_dir salt://path/to/dir include_pat='E@.py$'
    """
    saltenv = _saltenv(context, saltenv)
    relative, saltenv = _splitSalt(path, saltenv)
    client = _fileClient(context)
    directory = relative.rstrip("/")
    if not include_pat and not exclude_pat:
        return list(await _ask(client.cacheDir, directory, saltenv, bool(include_empty)))
    under = f"{directory}/" if directory else ""
    try:
        files = [
            f
            for f in await _ask(client.fileList, saltenv, under)
            if f.startswith(under) and _includeExclude(f, include_pat, exclude_pat)
        ]
    except re.error as e:
        raise SaltInvocationError(f"bad regular expression in include_pat/exclude_pat: {e}") from e
    cached = []
    for name in files:
        result = await _ask(client.cacheFile, name, saltenv)
        if result:
            cached.append(result)
    if include_empty:
        dirs = [d for d in await _ask(client.dirList, saltenv, under) if d.startswith(under)]
        all_ = await _ask(client.fileList, saltenv, under)
        empty = [client.cachedPath(d, saltenv) for d in _emptyDirs(all_, dirs)]

        def make() -> None:
            for target in empty:
                os.makedirs(target, exist_ok=True)

        await inThread(context.reactor, make)
        cached.extend(empty)
    return cached


@onReactor
@needsContext
async def cache_master(context: LoaderContext, saltenv: str | None = None) -> list[str]:
    """
    Cache every file the master's file server has in C{saltenv} and return
    their cached paths.

    CLI Example:

        salttwist '*' cp.cache_master
        salttwist '*' cp.cache_master saltenv=dev
    """
    saltenv = _saltenv(context, saltenv)
    client = _fileClient(context)
    return list(await _ask(client.cacheDir, "", saltenv, False))


@onReactor
@needsContext
async def is_cached(context: LoaderContext, path: str, saltenv: str | None = None) -> str:
    """
    Return the path of C{path} in the minion's cache if it is cached there
    (a C{salt://} file or a URL fetched by L{get_url}), else C{''}.

    CLI Example:

        salttwist '*' cp.is_cached salt://path/to/file
    """
    saltenv = _saltenv(context, saltenv)
    if not isinstance(path, str) or not path:
        raise SaltInvocationError("path must be a salt:// URL or a URL")
    scheme = urlparse(path).scheme.lower()
    if scheme in ("http", "https"):
        candidate = _extrnPath(context, path, saltenv)
    else:
        relative, saltenv = _splitSalt(path, saltenv)
        candidate = _fileClient(context).cachedPath(relative, saltenv)
    exists = await inThread(context.reactor, os.path.isfile, candidate)
    return candidate if exists else ""


@onReactor
@needsContext
async def list_minion(context: LoaderContext, saltenv: str | None = None) -> list[str]:
    """
    List the files of C{saltenv} cached on the minion (absolute paths,
    sorted), as Salt's C{file_local_list}.

    CLI Example:

        salttwist '*' cp.list_minion
    """
    saltenv = _saltenv(context, saltenv)
    if "/" in saltenv or saltenv in (".", ".."):
        raise SaltInvocationError(f"invalid saltenv {saltenv!r}")
    roots = [
        os.path.join(_cachedir(context), "files", saltenv),
        os.path.join(_cachedir(context), "localfiles"),
    ]

    def walk() -> list[str]:
        found: set[str] = set()
        for root in roots:
            for directory, _, names in os.walk(root):
                found.update(os.path.join(directory, n) for n in names if not n.startswith(".cp-"))
        return sorted(found)

    return await inThread(context.reactor, walk)


# Listing the file server -----------------------------------------------------


@onReactor
@needsContext
async def list_master(
    context: LoaderContext, saltenv: str | None = None, prefix: str = ""
) -> list[str]:
    """
    List the files of C{saltenv} on the master's file server (under
    C{prefix} if given).

    CLI Example:

        salttwist '*' cp.list_master
        salttwist '*' cp.list_master saltenv=dev prefix=web/
    """
    saltenv = _saltenv(context, saltenv)
    return list(await _ask(_fileClient(context).fileList, saltenv, str(prefix or "")))


@onReactor
@needsContext
async def list_master_dirs(
    context: LoaderContext, saltenv: str | None = None, prefix: str = ""
) -> list[str]:
    """
    List the directories of C{saltenv} on the master's file server (under
    C{prefix} if given).

    CLI Example:

        salttwist '*' cp.list_master_dirs
    """
    saltenv = _saltenv(context, saltenv)
    return list(await _ask(_fileClient(context).dirList, saltenv, str(prefix or "")))


@onReactor
@needsContext
async def list_states(context: LoaderContext, saltenv: str | None = None) -> list[str]:
    """
    List the states (SLS files) available in C{saltenv}: C{web/nginx.sls}
    is C{web.nginx}, C{web/init.sls} is C{web}.

    CLI Example:

        salttwist '*' cp.list_states
    """
    saltenv = _saltenv(context, saltenv)
    states = set()
    for path in await _ask(_fileClient(context).fileList, saltenv, ""):
        if not path.endswith(".sls"):
            continue
        if path.endswith("/init.sls"):
            states.add(path[: -len("/init.sls")].replace("/", "."))
        else:
            states.add(path[: -len(".sls")].replace("/", "."))
    return sorted(states)


@onReactor
@needsContext
async def envs(context: LoaderContext) -> list[str]:
    """
    List the saltenvs of the master's file server.

    CLI Example:

        salttwist '*' cp.envs
    """
    return list(await _ask(_fileClient(context).envs))


@onReactor
@needsContext
async def hash_file(
    context: LoaderContext, path: str, saltenv: str | None = None
) -> dict[str, str]:
    """
    Return the hash of a file: C{salt://path} asks the master's file
    server, an absolute path hashes the minion's file. Returns
    C{{"hsum": <hex>, "hash_type": "sha256"}}, or C{{}} if there is no such
    file.

    CLI Example:

        salttwist '*' cp.hash_file salt://path/to/file
        salttwist '*' cp.hash_file /etc/hosts
    """
    saltenv = _saltenv(context, saltenv)
    if not isinstance(path, str) or not path:
        raise SaltInvocationError("path must be a salt:// URL or an absolute path")
    if not path.startswith("salt://"):
        local = path[len("file://") :] if path.startswith("file://") else path
        if not os.path.isabs(local):
            _log.warn("cp.hash_file: {path} is not absolute", path=path)
            return {}
        hsum = await inThread(context.reactor, _fileHash, local)
        return {"hsum": hsum, "hash_type": "sha256"} if hsum else {}
    relative, saltenv = _splitSalt(path, saltenv)
    found = await _ask(_fileClient(context).hashFile, relative, saltenv)
    if not found:
        return {}
    return {"hsum": found["hsum"], "hash_type": found.get("hash_type", "sha256")}


# Minion to master ------------------------------------------------------------


@onReactor
@needsContext
async def push(
    context: LoaderContext,
    path: str,
    keep_symlinks: bool = False,
    upload_path: str | None = None,
    remove_source: bool = False,
) -> bool:
    """
    Push a file from the minion to the master, which keeps it under its
    C{cachedir/minions/<minion id>/files/} (at the file's own path, or
    C{upload_path}). The master refuses unless its C{file_recv} is
    C{True}, and files over C{file_recv_max_size} MiB. Returns C{True}, or
    C{False} (the reason is logged on the minion). C{remove_source=True}
    deletes the file once pushed; C{keep_symlinks=True} does not resolve a
    symlink in C{path}.

    CLI Example:

        salttwist '*' cp.push /etc/fstab
        salttwist '*' cp.push /etc/fstab upload_path='/new/path/fstab'
        salttwist '*' cp.push /tmp/filename remove_source=True
    """
    if not isinstance(path, str) or "../" in path or not os.path.isabs(path):
        _log.warn("cp.push: the path must be absolute, without '..': {path!r}", path=path)
        return False

    def resolve() -> str | None:
        real = path if keep_symlinks else os.path.realpath(path)
        return real if os.path.isfile(real) else None

    local = await inThread(context.reactor, resolve)
    if local is None:
        _log.warn("cp.push: {path} is not a file", path=path)
        return False
    if upload_path:
        if not isinstance(upload_path, str) or "../" in upload_path:
            _log.warn("cp.push: bad upload_path {upload_path!r}", upload_path=upload_path)
            return False
        remote = upload_path
    else:
        remote = local
    parts = [p for p in os.path.normpath(remote.lstrip("/")).split("/") if p and p != "."]
    if not parts or ".." in parts:
        _log.warn("cp.push: bad upload path {remote!r}", remote=remote)
        return False
    try:
        await _ask(_fileClient(context).push, local, "/".join(parts))
    except CommandExecutionError as e:
        _log.error(
            "cp.push of {path} failed: {why}. Ensure the master has 'file_recv' set to 'True' "
            "and that the file is not larger than its 'file_recv_max_size'.",
            path=path,
            why=str(e),
        )
        return False
    if remove_source:
        try:
            await inThread(context.reactor, os.remove, local)
        except OSError as e:
            _log.error("cp.push failed to remove file '{path}': {e}", path=local, e=e)
            return False
    return True


@onReactor
@needsContext
async def push_dir(
    context: LoaderContext, path: str, glob: str | None = None, upload_path: str | None = None
) -> bool:
    """
    Push every file under the directory C{path} (those whose name matches
    C{glob}, if given) to the master, as L{push} does, keeping their
    layout under C{upload_path} if given. A file C{path} is pushed alone.
    Returns C{True}, or C{False} at the first file refused (or when there
    is none).

    CLI Example:

        salttwist '*' cp.push_dir /etc/modprobe.d/ glob='*.conf'
        salttwist '*' cp.push_dir /usr/lib/mysql upload_path='/newmysql/path'
    """
    if not isinstance(path, str) or "../" in path or not os.path.isabs(path):
        return False
    real = os.path.realpath(path)

    def walk() -> list[str] | None:
        if os.path.isfile(real):
            return None
        found = []
        for directory, _, names in os.walk(real):
            found.extend(
                os.path.join(directory, n)
                for n in names
                if glob is None or fnmatch.fnmatch(n, str(glob))
            )
        return sorted(found)

    files = await inThread(context.reactor, walk)
    if files is None:
        return await push(context, real, upload_path=upload_path)
    if not files:
        return False
    for name in files:
        target = None
        if upload_path:
            relative = os.path.relpath(name, real)
            target = "/" + "/".join(p for p in (str(upload_path).strip("/"), relative) if p)
        if not await push(context, name, upload_path=target):
            return False
    return True


# salttwist-cp's receiving end ------------------------------------------------


def recv(files: dict[str, Any], dest: str) -> dict[str, bool] | str:
    """
    Receive files sent by C{salttwist-cp} (without C{--chunked}): C{files}
    maps each source path to its contents, written to C{dest} (a
    directory receives each file by its name). Returns C{{path: True}}, or
    C{Destination unavailable} when C{dest}'s directory does not exist.
    Not meant for the command line.

    CLI Example:

        salttwist-cp '*' /etc/motd /etc/motd
        # what salttwist-cp publishes:
        salttwist '*' cp.recv '{"/etc/motd": "Welcome"}' /etc/motd
    """
    if not isinstance(files, dict):
        raise SaltInvocationError("files must be a map of paths to contents")
    dest = _checkDest(dest)
    ret: dict[str, bool] = {}
    for path, data in files.items():
        name = os.path.basename(str(path))
        if name == os.path.basename(dest) and not os.path.isdir(dest):
            final = dest
        elif os.path.isdir(dest):
            final = os.path.join(dest, name)
        elif os.path.isdir(os.path.dirname(dest)):
            final = dest
        else:
            return "Destination unavailable"
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data or b"")
        try:
            with open(final, "wb") as f:
                f.write(payload)
            ret[final] = True
        except OSError:
            ret[final] = False
    return ret


def recv_chunked(
    dest: str, chunk: Any, append: bool = False, compressed: bool = True, mode: Any = None
) -> bool | str | Retcode:
    """
    Receive one chunk of a file sent by C{salttwist-cp --chunked}: C{chunk}
    (base64, gzip-compressed when C{compressed}) is written to C{dest}, or
    appended with C{append=True}; C{mode} is set after the first chunk. A
    C{chunk} of C{None} makes the directory C{dest}. Returns C{True}, or
    the error (retcode 1). C{dest} must be absolute. Not meant for the
    command line.

    CLI Example:

        salttwist-cp -C '*' /srv/big.iso /tmp/
        # what salttwist-cp publishes (no compression, base64 of "hi"):
        salttwist '*' cp.recv_chunked /tmp/hi aGk= compressed=False
    """
    try:
        dest = _checkDest(dest)
    except SaltInvocationError as e:
        return Retcode(str(e), 1)
    if chunk is None:
        try:
            os.makedirs(dest)
        except FileExistsError:
            if not os.path.isdir(dest):
                return "Path exists and is a file"
        except OSError as e:
            return Retcode(str(e), 1)
        return True
    try:
        data = base64.b64decode(chunk, validate=True)
        if compressed:
            data = gziplib.decompress(data)
    except (binascii.Error, ValueError, OSError, EOFError) as e:
        return Retcode(f"bad chunk for {dest}: {e}", 1)
    try:
        try:
            f = open(dest, "ab" if append else "wb")  # noqa: SIM115
        except FileNotFoundError:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            f = open(dest, "ab" if append else "wb")  # noqa: SIM115
        with f:
            f.write(data)
        if not append and mode is not None:
            os.chmod(dest, int(mode) & 0o7777)
    except (OSError, ValueError, TypeError) as e:
        return Retcode(str(e), 1)
    return True
