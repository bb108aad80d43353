# -*- test-case-name: tests.test_fileserver_paths -*-
"""
C{salt://} URLs, and the checks that keep a requested path inside the
file server's roots and a saltenv name from being a path trick.

Every path the file server is asked for goes through L{checkRelativePath}
before any backend sees it; the backends then still resolve symlinks and
check that the real path stays under its root (a check on the string alone
cannot see a symlink).

Decisions (Salt accepts some of these; we refuse them, on purpose):
  - a backslash in a path or a saltenv is refused: on POSIX it is a plain
    character of a file name, but a Windows minion would read it as a
    separator (a backslash-separated C{..} would climb out of its cache),
    so a name with one is neither served nor listed;
  - a NUL, an absolute path, a C{..} component and an empty path are
    refused; C{a//b}, C{./a} and a trailing C{/} are normalised away;
  - a saltenv may contain C{/} (a git branch C{feature/x} is a saltenv of
    that name) but no C{..} or C{.} component, no leading or trailing
    C{/}, no C{//}, no NUL, no backslash and no control character.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

from salttwist.fileserver.interfaces import FileServerError

#: The scheme of file-server URLs.
SALT_SCHEME = "salt://"
#: The query keys a C{salt://} URL may carry: C{saltenv}, and Salt's
#: older C{env} (the same meaning).
_QUERY_KEYS = ("saltenv", "env")
_OTHER_SCHEME = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*://")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parseSaltUrl(url: str) -> tuple[str, str | None]:
    """
    Split a C{salt://} URL into its path and saltenv.

    C{"salt://a/b?saltenv=dev"} gives C{("a/b", "dev")}; C{"salt://a/b"}
    and a plain relative path C{"a/b"} give C{("a/b", None)}. The path is
    returned as written (leading C{/}s after C{salt://} dropped, as Salt
    does for C{salt:///a}): check it with L{checkRelativePath} before use.

    @param url: a C{salt://} URL or a relative path.
    @return: C{(path, saltenv or None)}.
    @raise FileServerError: if C{url} is not a string, has another scheme
        (C{http://...}: the file server serves only C{salt://}), carries a
        query other than C{saltenv} (or C{env}), or names an invalid
        saltenv.
    """
    if not isinstance(url, str):
        raise FileServerError(f"a salt:// URL must be a string, not {type(url).__name__}")
    if "\x00" in url:
        raise FileServerError(f"salt:// URL {url!r} contains a NUL byte")
    if not url.startswith(SALT_SCHEME):
        if _OTHER_SCHEME.match(url):
            raise FileServerError(
                f"{url!r} is not a salt:// URL (the file server serves only salt://)"
            )
        return url, None
    rest = url[len(SALT_SCHEME) :]
    saltenv: str | None = None
    if "?" in rest:
        rest, query = rest.split("?", 1)
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise FileServerError(f"salt:// URL {url!r} has a malformed query {query!r}") from None
        for key, value in pairs:
            if key not in _QUERY_KEYS:
                raise FileServerError(
                    f"salt:// URL {url!r}: unknown query key {key!r} (only saltenv is allowed)"
                )
            if saltenv is not None and value != saltenv:
                raise FileServerError(f"salt:// URL {url!r} names two saltenvs")
            saltenv = checkSaltenv(value)
    return rest.lstrip("/"), saltenv


def _components(path: str, what: str) -> list[str]:
    """
    @return: the components of C{path} but empty and C{.} ones.
    @raise FileServerError: as L{checkRelativePath}, but for emptiness.
    """
    if not isinstance(path, str):
        raise FileServerError(f"a {what} must be a string, not {type(path).__name__}")
    if "\x00" in path:
        raise FileServerError(f"{what} {path!r} contains a NUL byte")
    if "\\" in path:
        raise FileServerError(f"{what} {path!r} contains a backslash")
    if path.startswith("/"):
        raise FileServerError(f"{what} {path!r} is absolute; paths are relative to the roots")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise FileServerError(f"{what} {path!r} has a '..' component (it would leave the roots)")
    return parts


def checkRelativePath(path: str) -> str:
    """
    Check that C{path} names a file inside a root, and normalise it.

    @param path: a relative path with C{/} separators.
    @return: C{path} without empty or C{.} components (C{"./a//b/"} gives
        C{"a/b"}).
    @raise FileServerError: naming the path and the reason, if it is not a
        string, is empty, contains a NUL or a backslash, is absolute, or
        has a C{..} component.
    """
    if path == "":
        raise FileServerError("the file path is empty")
    parts = _components(path, "file path")
    if not parts:
        raise FileServerError(f"file path {path!r} names no file")
    return "/".join(parts)


def checkPrefix(prefix: str) -> str:
    """
    Check a directory prefix (of C{cp.list_master}, C{cp.cache_dir} ...):
    as L{checkRelativePath}, except that C{""} (or C{"."}: every file) is
    allowed.

    @return: C{prefix} normalised, keeping one trailing C{/} if it had one
        (C{"web/"} lists what is under C{web}, C{"web"} also C{web.sls},
        as Salt's prefixes match the start of the path).
    @raise FileServerError: as L{checkRelativePath}.
    """
    parts = _components(prefix, "prefix")
    if not parts:
        return ""
    return "/".join(parts) + ("/" if prefix.endswith("/") else "")


def checkSaltenv(name: str) -> str:
    """
    Check a saltenv name.

    @return: C{name}, unchanged.
    @raise FileServerError: naming it, if it is not a non-empty string or
        is a path trick (see the module's docstring).
    """
    if not isinstance(name, str):
        raise FileServerError(f"a saltenv must be a string, not {type(name).__name__}")
    if not name:
        raise FileServerError("the saltenv is empty")
    if _CONTROL.search(name):
        raise FileServerError(f"saltenv {name!r} contains a control character")
    if "\\" in name:
        raise FileServerError(f"saltenv {name!r} contains a backslash")
    if name.startswith("/") or name.endswith("/") or "//" in name:
        raise FileServerError(f"saltenv {name!r} has an empty path component")
    if any(part in (".", "..") for part in name.split("/")):
        raise FileServerError(f"saltenv {name!r} has a '.' or '..' component")
    return name


def isServableName(path: str) -> bool:
    """
    @return: whether a relative path found on disk could be requested
        (L{checkRelativePath} accepts it unchanged and it is UTF-8
        encodable); the backends list only such names.
    """
    if "\\" in path or "\x00" in path:
        return False
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
