# -*- test-case-name: tests.test_state_clientview -*-
"""
The state tree as a minion sees it: a blocking view over its file client
(L{salttwist.fileserver.interfaces.IFileClient}), with the three methods
the top files and the SLS compiler read a state tree through (C{envs},
C{fileList}, C{findFile}: what L{salttwist.fileserver.server.FileServer}
offers on the master).

A state run renders in a thread; the file client lives on the reactor.
Each method here calls the client there (C{blockingCallFromThread}) and
waits: never call them on the reactor's thread (they would wait for
themselves).

One L{ClientFiles} serves one state run, and remembers what it asked:
the saltenvs, each file list (by saltenv and prefix) and each file looked
up (found or not), so an SLS included twice, or a map file imported by
every SLS of a formula, costs one request. C{findFile} never lists the
file server: the time before the first state runs does not grow with the
number of files the master serves, only with those the run reads. A file
found is fetched into the minion's file cache (C{cacheFile}, which fetches
it again only when the master's copy changed) and its C{realPath} is the
cached copy.

A file client that cannot be reached (no session to the master) raises
L{FileClientUnavailable} rather than answering "no such file": a state run
must not mistake a lost connection for a missing SLS.
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet.threads import blockingCallFromThread

from salttwist.fileserver.interfaces import FileServerError, FoundFile

__all__ = ["ClientFiles", "FileClientUnavailable"]

#: The name L{ClientFiles} gives as the backend of the files it finds.
BACKEND = "minion-cache"


def _plain(path: str) -> bool:
    """
    @return: whether C{path} is written as the file server lists paths
        (relative, normalised, no URL): only such a path can be looked up
        in a listing.
    """
    return (
        "://" not in path
        and "?" not in path
        and not path.startswith(("/", "."))
        and posixpath.normpath(path) == path
    )


class FileClientUnavailable(RuntimeError):
    """
    The file client could not answer: the minion has none, or is not
    connected to its master, or the request failed for another reason
    than the file server refusing it. The message says which.
    """


class ClientFiles:
    """
    A blocking, per-run caching view over an C{IFileClient}, used from a
    thread (a state run's).

    @ivar requests: how many requests were sent to the file client (for
        tests and benchmarks).
    """

    def __init__(self, client: Any, reactor: Any) -> None:
        """
        @param client: the minion's file client (remote or local).
        @param reactor: the reactor the client runs on.
        """
        if client is None:
            raise FileClientUnavailable(
                "this minion has no file client: its state tree cannot be read"
            )
        self._client = client
        self._reactor = reactor
        self._lock = threading.Lock()
        self._envs: list[str] | None = None
        self._lists: dict[tuple[str, str], list[str]] = {}
        self._found: dict[tuple[str, str], FoundFile | None] = {}
        self.requests = 0

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        """
        Call a file-client method on the reactor and wait for its result.

        @raise FileServerError: the file server refused the request (its
            words).
        @raise FileClientUnavailable: any other failure.
        """
        self.requests += 1
        try:
            return blockingCallFromThread(self._reactor, method, *args)
        except FileServerError:
            raise
        except ConnectionError as e:
            raise FileClientUnavailable(f"the file server cannot be reached: {e}") from e
        except Exception as e:
            raise FileClientUnavailable(
                f"the file server could not answer: {type(e).__name__}: {e}"
            ) from e

    def envs(self) -> list[str]:
        """
        @return: the saltenvs the file server serves (asked once per run).
        """
        with self._lock:
            if self._envs is not None:
                return list(self._envs)
        envs = [str(env) for env in self._call(self._client.envs) or []]
        with self._lock:
            self._envs = envs
        return list(envs)

    def fileList(self, saltenv: str, prefix: str = "") -> list[str]:
        """
        @return: the files of C{saltenv} under C{prefix} (asked once per
            saltenv and prefix; once the whole saltenv was listed, every
            prefix is answered from that list).
        """
        key = (saltenv, prefix)
        with self._lock:
            cached = self._lists.get(key)
            if cached is None:
                whole = self._lists.get((saltenv, ""))
                if whole is not None:
                    cached = [path for path in whole if path.startswith(prefix)]
            if cached is not None:
                return list(cached)
        files = [str(path) for path in self._call(self._client.fileList, saltenv, prefix) or []]
        with self._lock:
            self._lists[key] = files
        return list(files)

    def findFile(self, path: str, saltenv: str) -> FoundFile | None:
        """
        Fetch C{path} of C{saltenv} into the minion's cache (unless the
        cached copy is current) and describe it. Once the whole saltenv was
        listed in this run, a path it does not hold is L{None} without a
        request.

        @return: a L{FoundFile} whose C{realPath} is the cached copy, or
            L{None} when the file server has no such file (remembered for
            the run).
        @raise FileServerError: for a path or saltenv the file server
            refuses.
        """
        key = (saltenv, path)
        with self._lock:
            if key in self._found:
                return self._found[key]
            listed = self._lists.get((saltenv, ""))
            if listed is not None and _plain(path) and path not in listed:
                # The saltenv was listed whole this run: no request for a
                # file it does not have (web.sls beside web/init.sls).
                self._found[key] = None
                return None
        cached = self._call(self._client.cacheFile, path, saltenv)
        found: FoundFile | None = None
        if cached:
            try:
                info = os.stat(cached)
            except OSError as e:
                raise FileClientUnavailable(
                    f"salt://{path} (saltenv '{saltenv}') was fetched to {cached}, "
                    f"which cannot be read: {e.strerror}"
                ) from e
            found = FoundFile(
                path=path,
                realPath=str(cached),
                size=info.st_size,
                mtimeNs=info.st_mtime_ns,
                backend=BACKEND,
            )
        with self._lock:
            self._found[key] = found
        return found
