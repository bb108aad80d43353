# -*- test-case-name: tests.test_modules_pkg -*-
"""
Salt's C{pkg} module, read-only, for Debian and its derivatives: the
installed packages and their versions, from C{dpkg-query}.
"""

from __future__ import annotations

import fnmatch
import platform
import shutil
from typing import Any

from twisted.internet.defer import Deferred

from salttwist.modules import CommandExecutionError, LoaderContext, needsContext, onReactor
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
