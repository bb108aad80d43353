# -*- test-case-name: tests.test_modules_pkg -*-
"""
Salt's C{pkg} module for Debian and its derivatives (Salt's C{aptpkg}): the
installed packages and their versions from C{dpkg-query}; installing,
removing, purging, upgrading and holding packages with C{apt-get} and
C{dpkg}; the versions the repositories offer from C{apt-cache}.

C{apt-get} runs non-interactively (C{DEBIAN_FRONTEND=noninteractive}),
keeping changed configuration files (C{--force-confold}), and waits up to
C{apt_lock_timeout} seconds (a minion option, default 300) for the dpkg
lock another package manager holds. The environment's C{APT_CONFIG} is
honoured, as apt itself does.
"""

from __future__ import annotations

import fnmatch
import os
import platform
import re
import shutil
import subprocess
import time
from functools import cmp_to_key
from typing import Any

from twisted.internet.defer import Deferred

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
    onReactor,
)
from salttwist.modules._pkgrefresh import clearRefreshTag
from salttwist.modules._pkgspec import compareVersions, isExact, newestSatisfying, pinnable
from salttwist.modules._process import runCommand

#: dpkg's name for the machine's own architecture.
_DPKG_ARCH = {
    "x86_64": "amd64",
    "aarch64": "arm64",
    "i686": "i386",
    "i386": "i386",
    "armv7l": "armhf",
    "ppc64le": "ppc64el",
    "s390x": "s390x",
    "riscv64": "riscv64",
}

_FORMAT = "${Status} ${Package} ${Version} ${Architecture}\n"


def _parseDpkgQuery(output: str, nativeArch: str | None) -> dict[str, dict[str, list[str]]]:
    """
    Parse C{dpkg-query -W} lines (C{install ok installed zsh 5.9-4 amd64})
    as Salt does: C{{"installed": {name: [versions]}, "removed": {...}}};
    a package of a foreign architecture is named C{name:arch}.
    """
    ret: dict[str, dict[str, list[str]]] = {"installed": {}, "removed": {}}
    for line in output.splitlines():
        cols = line.split()
        try:
            status, name, version, arch = (cols[x] for x in (2, 3, 4, 5))
        except IndexError:
            continue
        if nativeArch and arch not in ("all", nativeArch):
            name += f":{arch}"
        # The state decides, whatever the selection (a package selected for
        # removal is still installed until it is removed). Salt tests
        # "installed" in status, which counts half-installed packages too.
        if status == "installed":
            versions = ret["installed"].setdefault(name, [])
        elif status == "config-files":
            versions = ret["removed"].setdefault(name, [])
        else:
            continue
        if version not in versions:
            versions.append(version)
    return ret


def _dpkgQuery(context: LoaderContext, function: str) -> Deferred:
    if shutil.which("dpkg-query") is None:
        raise CommandExecutionError(
            f"{function} needs dpkg-query, which is not installed on this minion "
            "(the pkg module supports Debian and its derivatives only)"
        )
    argv = ["dpkg-query", "--showformat", _FORMAT, "-W"]
    native = _DPKG_ARCH.get(platform.machine())

    def parse(result: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
        if result["retcode"] != 0 and not result["stdout"]:
            raise CommandExecutionError(f"dpkg-query failed: {result['stderr']}")
        return _parseDpkgQuery(result["stdout"], native)

    return runCommand(context, argv, python_shell=False, output_loglevel="quiet").addCallback(parse)


def _shape(packages: dict[str, list[str]], versionsAsList: bool) -> dict[str, Any]:
    if versionsAsList:
        return {name: sorted(v) for name, v in sorted(packages.items())}
    return {name: ",".join(sorted(v)) for name, v in sorted(packages.items())}


@onReactor
@needsContext
def list_pkgs(
    context: LoaderContext, versions_as_list: bool = False, removed: bool = False
) -> Deferred:
    """
    Return the installed packages as C{{name: version}} (with
    C{versions_as_list=True}, C{{name: [versions]}}); with
    C{removed=True}, the removed packages whose configuration files are
    still there instead.

    CLI Example:

        salttwist '*' pkg.list_pkgs
        salttwist '*' pkg.list_pkgs versions_as_list=True
    """

    def select(parsed: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
        return _shape(
            parsed["removed" if removed is True else "installed"], versions_as_list is True
        )

    return _dpkgQuery(context, "pkg.list_pkgs").addCallback(select)


@onReactor
@needsContext
def version(context: LoaderContext, *names: str, **kwargs: Any) -> Deferred:
    """
    Return the installed version of a package (the empty string if it is
    not installed); for several names or a glob, C{{name: version}}.

    CLI Example:

        salttwist '*' pkg.version bash
        salttwist '*' pkg.version bash coreutils 'python3*'
    """
    versionsAsList = kwargs.pop("versions_as_list", False) is True
    if kwargs:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(kwargs))}")

    def select(parsed: dict[str, dict[str, list[str]]]) -> Any:
        installed = parsed["installed"]
        ret: dict[str, list[str]] = {}
        globbed = False
        for name in names:
            name = str(name)
            if "*" in name or "?" in name or "[" in name:
                globbed = True
                for match in fnmatch.filter(installed, name):
                    ret[match] = installed[match]
            else:
                ret[name] = installed.get(name, [])
        shaped = _shape(ret, versionsAsList)
        if len(shaped) == 1 and not globbed:
            return next(iter(shaped.values()))
        return shaped

    return _dpkgQuery(context, "pkg.version").addCallback(select)


# Changing packages: blocking functions, run in a thread by the loader.


class PackageError(CommandExecutionError):
    """
    A package operation failed, possibly after changing some packages;
    worded as Salt's (C{"Problem encountered installing package(s).
    Additional info follows: ..."} with apt's errors).

    @ivar changes: what did change, in the function's return shape.
    @ivar errors: apt's error lines.
    """

    def __init__(
        self, message: str, errors: list[str], changes: dict[str, Any] | None = None
    ) -> None:
        lines = "".join(f"\n    - {error}" for error in errors)
        super().__init__(f"{message}. Additional info follows:\n\nerrors:{lines}")
        self.errors = errors
        self.changes = changes or {}


#: The environment of every C{apt-get} and C{dpkg} call (Salt's).
_APT_ENV = {
    "DEBIAN_FRONTEND": "noninteractive",
    "APT_LISTBUGS_FRONTEND": "none",
    "APT_LISTCHANGES_FRONTEND": "none",
    "LC_ALL": "C",
    "LANG": "C",
}

#: Keep configuration files the administrator changed, take new defaults
#: for the others.
_DPKG_OPTIONS = ["-o", "DPkg::Options::=--force-confold", "-o", "DPkg::Options::=--force-confdef"]

_LOCK_ERROR = re.compile(r"Could not get lock|Unable to acquire the dpkg frontend lock")

#: Whether the package database was refreshed in this process: a direct
#: call's C{refresh=None} refreshes once per minion start. State runs use
#: the refresh tag instead (L{salttwist.modules._pkgrefresh}).
_refreshed = False


def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """
    Run a package tool with Salt's environment; blocking.

    @raise CommandExecutionError: it is not installed.
    """
    if shutil.which(argv[0]) is None:
        raise CommandExecutionError(
            f"{argv[0]} is not installed on this minion "
            "(the pkg module supports Debian and its derivatives only)"
        )
    env = dict(os.environ)
    env.update(_APT_ENV)
    return subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        check=False,
    )


def _aptGet(context: LoaderContext, *args: str) -> subprocess.CompletedProcess[str]:
    """
    Run C{apt-get -q -y <args>}, waiting for the dpkg lock.

    @raise CommandExecutionError: the lock stayed taken.
    """
    timeout = context.opts.get("apt_lock_timeout", 300)
    argv = ["apt-get", "-q", "-y", "-o", f"DPkg::Lock::Timeout={int(timeout)}", *args]
    result = _run(argv)
    if result.returncode != 0 and _LOCK_ERROR.search(result.stderr):
        raise CommandExecutionError(
            f"another package manager holds the dpkg lock (waited {int(timeout)} seconds, "
            f"the minion option apt_lock_timeout): {_errors(result)}"
        )
    return result


def _errorLines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """
    @return: apt's error lines (C{E: ...}), or its whole standard error.
    """
    lines = [line for line in result.stderr.splitlines() if line.startswith("E:")]
    return lines or [result.stderr.strip() or result.stdout.strip()]


def _errors(result: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(_errorLines(result))


def _installed() -> dict[str, dict[str, list[str]]]:
    result = _run(["dpkg-query", "--showformat", _FORMAT, "-W"])
    if result.returncode != 0 and not result.stdout:
        raise CommandExecutionError(f"dpkg-query failed: {result.stderr}")
    return _parseDpkgQuery(result.stdout, _DPKG_ARCH.get(platform.machine()))


def _compare(old: dict[str, list[str]], new: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """
    Salt's C{compare_dicts} over C{name: [versions]}: C{{name: {"old",
    "new"}}} for every package whose versions differ (C{""} for none).
    """
    changes = {}
    for name in sorted(set(old) | set(new)):
        before = ",".join(sorted(old.get(name, [])))
        after = ",".join(sorted(new.get(name, [])))
        if before != after:
            changes[name] = {"old": before, "new": after}
    return changes


def _targets(name: Any, pkgs: Any, version: Any = None) -> dict[str, str | None]:
    """
    The packages named by C{name} (with C{version}) or by C{pkgs} (names,
    or one-key maps C{{name: version}}), Salt's C{parse_targets}.

    @raise SaltInvocationError: neither, or a malformed C{pkgs}.
    """
    if pkgs:
        if isinstance(pkgs, str):
            pkgs = [p.strip() for p in pkgs.split(",") if p.strip()]
        if not isinstance(pkgs, list):
            raise SaltInvocationError("pkgs must be a list of names or of {name: version}")
        targets: dict[str, str | None] = {}
        for item in pkgs:
            if isinstance(item, dict) and len(item) == 1:
                key, value = next(iter(item.items()))
                targets[str(key)] = None if value in (None, "") else str(value)
            elif isinstance(item, str | int | float) and str(item):
                targets[str(item)] = None
            else:
                raise SaltInvocationError(f"Invalid package in pkgs: {item!r}")
        return targets
    if name:
        names = [n.strip() for n in str(name).split(",") if n.strip()]
        if len(names) > 1:
            return dict.fromkeys(names)
        return {str(name): None if version in (None, "") else str(version)}
    raise SaltInvocationError("One of name or pkgs must be specified")


def _pin(name: str, version: str | None) -> str:
    if not version or version == "latest":
        return name
    return f"{name}={version.lstrip('=')}"


def _repoVersions(names: list[str]) -> dict[str, list[str]]:
    """
    (Blocking.) The versions the repositories offer of each package
    (C{apt-cache madison}), as Salt's C{list_repo_pkgs}.
    """
    result = _run(["apt-cache", "-q", "madison", *names])
    offered: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) >= 3 and cols[0] in names and cols[1] not in offered.get(cols[0], []):
            offered.setdefault(cols[0], []).append(cols[1])
    return offered


def _resolveRanges(targets: dict[str, str | None]) -> tuple[dict[str, str | None], list[str]]:
    """
    Replace each version range (C{>=1.2}, C{>=1.0,<2.0}, C{!=1.3}) by the
    newest version the repositories offer that meets it (Salt's
    C{aptpkg.install} with C{match_version}, which takes one operator
    only); an exact version or glob stays as it is.

    @return: the targets with exact versions, and Salt's error for each
        range no offered version meets.
    @raise SaltInvocationError: a malformed specification.
    """
    ranges = {}
    for name, spec in targets.items():
        if spec and spec != "latest":
            try:
                exact = isExact(spec)
            except ValueError as e:
                raise SaltInvocationError(f"{name}: {e}") from e
            if not exact:
                ranges[name] = spec
            else:
                targets[name] = pinnable(spec)
    if not ranges:
        return targets, []
    offered = _repoVersions(sorted(ranges))
    errors = []
    resolved = dict(targets)
    for name, spec in ranges.items():
        candidates = offered.get(name, [])
        match = newestSatisfying(candidates, spec)
        if match is None:
            errors.append(
                f"No version matching '{name}{spec}' could be found "
                f"(available: {', '.join(candidates) if candidates else None})"
            )
            del resolved[name]
        else:
            resolved[name] = match
    return resolved, errors


@needsContext
def refresh_db(
    context: LoaderContext, cache_valid_time: int = 0, failhard: bool = False, **kwargs: Any
) -> dict[str, bool | None]:
    """
    Update the package lists (C{apt-get update}) and return each source:
    C{True} fetched, C{None} unchanged (C{Hit}), C{False} ignored or
    failed. C{cache_valid_time}: skip when the lists are younger (seconds).
    C{failhard=True} raises when a source failed.

    CLI Example:

        salttwist '*' pkg.refresh_db
    """
    global _refreshed
    if cache_valid_time:
        try:
            age = os.stat("/var/lib/apt/lists").st_mtime
            if age + int(cache_valid_time) > time.time():
                return {}
        except OSError:
            pass
    result = _aptGet(context, "update")
    if result.returncode != 0:
        raise CommandExecutionError(f"apt-get update failed: {_errors(result)}")
    _refreshed = True
    clearRefreshTag(context.opts)
    ret: dict[str, bool | None] = {}
    failed = []
    for line in result.stdout.splitlines():
        cols = line.split()
        if not cols:
            continue
        ident = re.sub(r" \[[^]]+B\]$", "", " ".join(cols[1:]))
        if cols[0].startswith("Get"):
            ret[ident] = True
        elif cols[0].startswith("Hit"):
            ret[ident] = None
        elif cols[0].startswith(("Ign", "Err")):
            ret[ident] = False
            if cols[0].startswith("Err"):
                failed.append(ident)
    if failhard and failed:
        raise CommandExecutionError(f"Error getting repos: {', '.join(failed)}")
    return ret


def _maybeRefresh(context: LoaderContext, refresh: Any) -> None:
    """
    C{refresh}: C{True} refreshes, C{False} not, C{None} once per minion
    start (Salt's C{rtag}).
    """
    if refresh is True or (refresh is None and not _refreshed):
        refresh_db(context)


@needsContext
def install(
    context: LoaderContext,
    name: str | None = None,
    refresh: bool = False,
    fromrepo: str | None = None,
    skip_verify: bool = False,
    pkgs: Any = None,
    sources: Any = None,
    version: str | None = None,
    reinstall: bool = False,
    **kwargs: Any,
) -> dict[str, dict[str, str]]:
    """
    Install packages, all in one C{apt-get install}, and return what
    changed: C{{name: {"old": version, "new": version}}}.

    @param name: a package (or several, comma-separated).
    @param pkgs: a list of names or C{{name: version}} maps (instead of
        C{name}).
    @param version: the version of C{name} to install, or a range
        (C{>=1.2}, C{>=1.0,<2.0}, C{!=1.3}: the newest version offered
        that meets it; likewise in C{pkgs}).
    @param sources: a list of C{{name: /path/to/file.deb}} maps: local
        package files.
    @param refresh: update the package lists first (L{None}: if not yet
        done since the minion started).
    @param fromrepo: the release to take packages from (C{-t}).
    @param skip_verify: allow unauthenticated packages.
    @param reinstall: reinstall packages already at the version.

    A held package named here is installed at the version asked for and
    stays held.

    CLI Example:

        salttwist '*' pkg.install nginx
        salttwist '*' pkg.install pkgs='["curl", {"nginx": "1.22.1-9"}]'
    """
    if pkgs and sources:
        raise SaltInvocationError('Only one of "pkgs" and "sources" is permitted.')
    if sources:
        if not isinstance(sources, list) or not all(
            isinstance(s, dict) and len(s) == 1 for s in sources
        ):
            raise SaltInvocationError("sources must be a list of {name: path} maps")
        args = []
        for source in sources:
            path = str(next(iter(source.values())))
            if path.startswith("file://"):
                path = path[len("file://") :]
            if not os.path.isabs(path) or not os.path.isfile(path):
                raise CommandExecutionError(
                    f"source {path!r} is not a package file on the minion "
                    "(only local paths are supported)"
                )
            args.append(path)
    _maybeRefresh(context, refresh)
    errors: list[str] = []
    if not sources:
        wanted, errors = _resolveRanges(_targets(name, pkgs, version))
        if not wanted:
            raise PackageError("Problem encountered installing package(s)", errors)
        args = [_pin(n, v) for n, v in wanted.items()]
    options = list(_DPKG_OPTIONS)
    if any("=" in arg for arg in args):
        # A pinned version may be older than the installed one.
        options.append("--allow-downgrades")
    if fromrepo:
        options += ["-t", str(fromrepo)]
    if skip_verify:
        options.append("--allow-unauthenticated")
    if reinstall:
        options.append("--reinstall")
    old = _installed()["installed"]
    # A held package named here is released for this installation and held
    # again afterwards, as Salt does.
    named = {arg.split("=")[0] for arg in args}
    held = [p for p, selection in _selections([]).items() if selection == "hold" and p in named]
    for package in held:
        _setSelection(package, "install")
    try:
        result = _aptGet(context, *options, "install", *args)
    finally:
        for package in held:
            _setSelection(package, "hold")
    changes = _compare(old, _installed()["installed"])
    if result.returncode != 0:
        errors += _errorLines(result)
    if errors:
        raise PackageError("Problem encountered installing package(s)", errors, changes)
    return changes


def _uninstall(context: LoaderContext, action: str, name: Any, pkgs: Any) -> dict[str, Any]:
    wanted = _targets(name, pkgs)
    before = _installed()
    targets = [p for p in before["installed"] if any(fnmatch.fnmatch(p, w) for w in wanted)]
    if action == "purge":
        targets += [p for p in before["removed"] if any(fnmatch.fnmatch(p, w) for w in wanted)]
    if not targets:
        return {}
    result = _aptGet(context, *_DPKG_OPTIONS, action, *sorted(targets))
    after = _installed()
    changes: dict[str, Any] = _compare(before["installed"], after["installed"])
    if action == "purge":
        changes = {
            "removed": _compare(before["removed"], after["removed"]),
            "installed": changes,
        }
    if result.returncode != 0:
        raise PackageError("Problem encountered removing package(s)", _errorLines(result), changes)
    return changes


@needsContext
def remove(
    context: LoaderContext, name: str | None = None, pkgs: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Remove packages (keeping their configuration files) and return what
    changed: C{{name: {"old": version, "new": ""}}}. Globs match installed
    packages.

    CLI Example:

        salttwist '*' pkg.remove nginx
        salttwist '*' pkg.remove pkgs='["nginx", "curl"]'
    """
    return _uninstall(context, "remove", name, pkgs)


@needsContext
def purge(
    context: LoaderContext, name: str | None = None, pkgs: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Remove packages with their configuration files (also packages already
    removed whose configuration files remain) and return what changed, as
    Salt: C{{"removed": {<config files gone>}, "installed": {<packages
    gone>}}}.

    CLI Example:

        salttwist '*' pkg.purge nginx
    """
    return _uninstall(context, "purge", name, pkgs)


def _candidates(names: list[str], fromrepo: str | None) -> dict[str, str]:
    argv = ["apt-cache", "-q", "policy", *names]
    if fromrepo:
        argv += ["-o", f"APT::Default-Release={fromrepo}"]
    result = _run(argv)
    candidates: dict[str, str] = {}
    current = None
    for line in result.stdout.splitlines():
        text = line.strip()
        if not line.startswith(" ") and text.endswith(":"):
            current = text[:-1]
        elif text.startswith("Candidate:") and current is not None:
            value = text.split(None, 1)[1] if len(text.split()) > 1 else ""
            candidates[current] = "" if value == "(none)" else value
    return candidates


@needsContext
def latest_version(context: LoaderContext, *names: str, **kwargs: Any) -> Any:
    """
    The newest version of each package the repositories offer, when it is
    newer than the installed one (or the package is not installed); else
    C{""}. One name: a string; several: C{{name: version}}.
    C{refresh} (default C{True}; L{None}: once per minion start) updates
    the lists first; C{fromrepo}
    picks a release; C{show_installed=True} gives the candidate even when
    it is installed.

    CLI Example:

        salttwist '*' pkg.latest_version nginx
    """
    refresh = kwargs.pop("refresh", True)
    showInstalled = kwargs.pop("show_installed", False) is True
    fromrepo = kwargs.pop("fromrepo", None)
    if not names:
        return ""
    _maybeRefresh(context, True if refresh in ("True", "true") else refresh)
    installed = _installed()["installed"]
    candidates = _candidates(list(names), fromrepo)
    ret = {}
    for name in names:
        candidate = candidates.get(name, "")
        have = installed.get(name, [])
        if not have or showInstalled:
            ret[name] = candidate
        elif candidate and not any(version_cmp(v, candidate) >= 0 for v in have):
            ret[name] = candidate
        else:
            ret[name] = ""
    if len(names) == 1:
        return ret[names[0]]
    return ret


@needsContext
def available_version(context: LoaderContext, *names: str, **kwargs: Any) -> Any:
    """
    Salt's former name of L{latest_version}, with the same arguments.

    CLI Example:

        salttwist '*' pkg.available_version nginx
    """
    return latest_version(context, *names, **kwargs)


@needsContext
def upgrade_available(context: LoaderContext, name: str, **kwargs: Any) -> bool:
    """
    Whether a newer version of the package is available.

    CLI Example:

        salttwist '*' pkg.upgrade_available nginx
    """
    return latest_version(context, name, **kwargs) != ""


@needsContext
def list_upgrades(
    context: LoaderContext,
    refresh: bool = True,
    dist_upgrade: bool = True,
    fromrepo: str | None = None,
    **kwargs: Any,
) -> dict[str, str]:
    """
    The packages an upgrade would change, with their new versions
    (C{apt-get --just-print dist-upgrade}; C{dist_upgrade=False}: plain
    C{upgrade}).

    CLI Example:

        salttwist '*' pkg.list_upgrades
    """
    if refresh is True:
        refresh_db(context)
    argv = ["--just-print", "dist-upgrade" if dist_upgrade else "upgrade"]
    if fromrepo:
        argv += ["-o", f"APT::Default-Release={fromrepo}"]
    result = _aptGet(context, *argv)
    if result.returncode != 0:
        raise CommandExecutionError(f"Failed to get upgrades: {_errors(result)}")
    return dict(re.findall(r"(?m)^Conf (\S+) \((\S+)", result.stdout))


@needsContext
def upgrade(
    context: LoaderContext,
    refresh: bool = True,
    dist_upgrade: bool = False,
    pkgs: Any = None,
    **kwargs: Any,
) -> dict[str, dict[str, str]]:
    """
    Upgrade the system (C{apt-get upgrade}, or C{dist-upgrade}), or only
    the packages C{pkgs} (those installed, without installing new ones),
    and return what changed.

    CLI Example:

        salttwist '*' pkg.upgrade
        salttwist '*' pkg.upgrade pkgs='["nginx"]'
    """
    if refresh is True:
        refresh_db(context)
    old = _installed()["installed"]
    if pkgs:
        names = [_pin(n, v) for n, v in _targets(None, pkgs).items()]
        result = _aptGet(context, *_DPKG_OPTIONS, "install", "--only-upgrade", *names)
    else:
        result = _aptGet(context, *_DPKG_OPTIONS, "dist-upgrade" if dist_upgrade else "upgrade")
    changes = _compare(old, _installed()["installed"])
    if result.returncode != 0:
        raise PackageError("Problem encountered upgrading packages", _errorLines(result), changes)
    return changes


def _selections(names: list[str]) -> dict[str, str]:
    result = _run(["dpkg", "--get-selections", *names])
    return {
        cols[0].split(":")[0]
        if cols[0].endswith(f":{_DPKG_ARCH.get(platform.machine())}")
        else cols[0]: cols[1]
        for cols in (line.split() for line in result.stdout.splitlines())
        if len(cols) == 2
    }


def _setSelection(name: str, selection: str) -> None:
    result = _run(["dpkg", "--set-selections"], stdin=f"{name} {selection}\n")
    if result.returncode != 0:
        raise CommandExecutionError(f"dpkg --set-selections failed: {result.stderr.strip()}")


def _holdTargets(name: Any, pkgs: Any) -> list[str]:
    if pkgs:
        return [str(next(iter(p))) if isinstance(p, dict) else str(p) for p in pkgs]
    if name:
        return [str(name)]
    raise SaltInvocationError("One of name, pkgs, or sources must be specified.")


@needsContext
def hold(
    context: LoaderContext, name: str | None = None, pkgs: Any = None, **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """
    Hold packages at their version (C{dpkg --set-selections}); per
    package, a state-like return C{{"name", "changes", "result",
    "comment"}} with Salt's words.

    CLI Example:

        salttwist '*' pkg.hold nginx
    """
    ret = {}
    for target in _holdTargets(name, pkgs):
        entry: dict[str, Any] = {"name": target, "changes": {}, "result": False, "comment": ""}
        state = _selections([target]).get(target)
        if state is None:
            entry["comment"] = f"Package {target} not currently held."
        elif state != "hold":
            if context.opts.get("test"):
                entry.update(result=None, comment=f"Package {target} is set to be held.")
            else:
                _setSelection(target, "hold")
                entry.update(
                    result=True,
                    changes={"old": state, "new": "hold"},
                    comment=f"Package {target} is now being held.",
                )
        else:
            entry.update(result=True, comment=f"Package {target} is already set to be held.")
        ret[target] = entry
    return ret


@needsContext
def unhold(
    context: LoaderContext, name: str | None = None, pkgs: Any = None, **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """
    Stop holding packages; returns as L{hold}.

    CLI Example:

        salttwist '*' pkg.unhold nginx
    """
    ret = {}
    for target in _holdTargets(name, pkgs):
        entry: dict[str, Any] = {"name": target, "changes": {}, "result": False, "comment": ""}
        state = _selections([target]).get(target)
        if state is None:
            entry["comment"] = f"Package {target} does not have a state."
        elif state == "hold":
            if context.opts.get("test"):
                entry.update(result=None, comment=f"Package {target} is set not to be held.")
            else:
                _setSelection(target, "install")
                entry.update(
                    result=True,
                    changes={"old": "hold", "new": "install"},
                    comment=f"Package {target} is no longer being held.",
                )
        else:
            entry.update(result=True, comment=f"Package {target} is already set not to be held.")
        ret[target] = entry
    return ret


@needsContext
def get_selections(
    context: LoaderContext, pattern: str | None = None, state: str | None = None
) -> dict[str, list[str]]:
    """
    The packages' dpkg selections, by selection: C{{"install": [...],
    "hold": [...]}}; C{pattern} is a glob, C{state} keeps one selection.

    CLI Example:

        salttwist '*' pkg.get_selections 'python-*' state=hold
    """
    ret: dict[str, list[str]] = {}
    for name, selection in sorted(_selections([pattern] if pattern else []).items()):
        if state is None or selection == state:
            ret.setdefault(selection, []).append(name)
    return ret


@needsContext
def list_repo_pkgs(context: LoaderContext, *names: str, **kwargs: Any) -> dict[str, list[str]]:
    """
    The versions the repositories offer of the named packages, newest
    first: C{{name: [version, ...]}} (Salt's C{byrepo=False} shape).

    CLI Example:

        salttwist '*' pkg.list_repo_pkgs nginx curl
    """
    if kwargs.get("byrepo"):
        raise SaltInvocationError("byrepo=True is not supported (the versions only are listed)")
    if not names:
        raise SaltInvocationError("name the packages to list")
    offered = _repoVersions([str(n) for n in names])
    return {
        name: sorted(versions, key=cmp_to_key(compareVersions), reverse=True)
        for name, versions in offered.items()
    }


def version_cmp(pkg1: str, pkg2: str, ignore_epoch: bool = False, **kwargs: Any) -> int:
    """
    Compare two Debian versions as dpkg does: C{-1}, C{0} or C{1}.

    CLI Example:

        salttwist '*' pkg.version_cmp 0.2.4-0ubuntu1 0.2.4.1-0ubuntu1
    """
    return compareVersions(pkg1, pkg2, bool(ignore_epoch))
