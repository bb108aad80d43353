# -*- test-case-name: tests.test_states_pkg -*-
"""
Salt's C{pkg} states: packages installed (C{pkg.installed}, at a version,
held or not), at the newest version (C{pkg.latest}), removed
(C{pkg.removed}), removed with their configuration (C{pkg.purged}), and
upgrades applied (C{pkg.uptodate}), through the C{pkg} execution module
(apt and dpkg on Debian).

C{refresh}: C{True} updates the package lists first, C{False} not, and
the default (C{None}) once per state run, as Salt does: L{mod_init}
writes Salt's refresh tag before the run's first C{pkg.installed} or
C{pkg.latest}, the first of them to install refreshes, and the refresh
removes the tag (L{salttwist.modules._pkgrefresh}). A version is
exact (C{1.2-1}, a glob C{1.2*}, or C{latest}) or Salt's specification
(C{>=1.2}, C{<2.0}, C{>=1.0,<2.0}, C{!=1.3}: every condition must hold,
versions compared by dpkg's rules, L{salttwist.modules._pkgspec}); a
package whose installed version meets it is left alone, else the newest
version offered that meets it is installed (Salt 3008 takes one operator
only when installing).
"""

from __future__ import annotations

from typing import Any

from salttwist.modules import CommandExecutionError, SaltInvocationError
from salttwist.modules._pkgrefresh import checkRefresh, writeRefreshTag
from salttwist.modules._pkgspec import (
    anySatisfies,
    described,
    isExact,
    newestSatisfying,
    parseSpec,
)
from salttwist.modules.pkg import PackageError
from salttwist.states import StateContext, stateReturn


def _desired(name: str, pkgs: Any, version: Any, sources: Any) -> dict[str, str | None]:
    """
    The packages a state names, with their wanted versions.

    @raise ValueError: a malformed C{pkgs} or C{sources} (Salt's words).
    """
    if sources:
        if not isinstance(sources, list) or not all(
            isinstance(s, dict) and len(s) == 1 for s in sources
        ):
            raise ValueError("Invalidly formatted 'sources' parameter. See minion log.")
        return {str(next(iter(s))): None for s in sources}
    if pkgs:
        if not isinstance(pkgs, list):
            raise ValueError("Invalidly formatted 'pkgs' parameter. See minion log.")
        desired: dict[str, str | None] = {}
        for item in pkgs:
            if isinstance(item, dict) and len(item) == 1:
                key, value = next(iter(item.items()))
                desired[str(key)] = None if value in (None, "") else str(value).lstrip("=")
            elif isinstance(item, str) and item:
                desired[item] = None
            else:
                raise ValueError("Invalidly formatted 'pkgs' parameter. See minion log.")
        return desired
    return {str(name): None if version in (None, "") else str(version).lstrip("=")}


def _pinned(name: str, version: str | None) -> str:
    """
    Salt's C{_get_desired_pkg}: C{name=version}, C{name>=version}, or
    C{name}.
    """
    return described(name, version)


def _installed(ctx: StateContext) -> dict[str, list[str]]:
    return ctx.salt["pkg.list_pkgs"](versions_as_list=True)


def _badSpec(desired: dict[str, str | None]) -> str | None:
    """
    @return: the error of the first malformed version specification, or
        L{None}.
    """
    for package, wanted in desired.items():
        if wanted and wanted != "latest":
            try:
                parseSpec(wanted)
            except ValueError as e:
                return f"{package}: {e}"
    return None


def _fulfilled(
    ctx: StateContext, have: list[str], version: str | None, name: str, ignoreEpoch: Any = None
) -> bool:
    if not have:
        return False
    if version is None:
        return True
    if version == "latest":
        return ctx.salt["pkg.latest_version"](name, refresh=False) == ""
    return anySatisfies(have, version, ignoreEpoch)


def _wouldGet(ctx: StateContext, package: str, wanted: str) -> str:
    """
    (Test mode.) The version a range would install: the newest offered
    that meets it, or the range itself when none does.
    """
    offered = ctx.salt["pkg.list_repo_pkgs"](package).get(package, [])
    return newestSatisfying(offered, wanted) or wanted


def _holdEntries(ctx: StateContext, hold: bool, names: list[str]) -> list[dict[str, Any]] | str:
    """
    Hold (or release) C{names}; in test mode, predict it.

    @return: C{pkg.hold}'s (or C{pkg.unhold}'s) entries, or an error.
    """
    if ctx.test:
        held = set(ctx.salt["pkg.get_selections"]().get("hold", []))
        entries = []
        for name in names:
            if hold and name not in held:
                comment: str | None = f"Package {name} is set to be held."
            elif not hold and name in held:
                comment = f"Package {name} is set not to be held."
            else:
                continue
            entries.append({"name": name, "changes": {}, "result": None, "comment": comment})
        return entries
    try:
        return list(ctx.salt["pkg.hold" if hold else "pkg.unhold"](pkgs=names).values())
    except (CommandExecutionError, SaltInvocationError) as e:
        return str(e)


def _holdInState(
    ctx: StateContext, hold: bool, names: list[str], ret: dict[str, Any]
) -> dict[str, Any]:
    """
    Hold (or release) packages already in state: each entry's comment
    after C{.\n}, its changes as the package's (Salt's words).
    """
    entries = _holdEntries(ctx, hold, names)
    if isinstance(entries, str):
        return stateReturn(ret["name"], False, entries)
    for entry in entries:
        ret["comment"] += f".\n{entry['comment']}"
        ret["result"] = entry["result"]
        if entry["changes"]:
            ret["changes"][entry["name"]] = entry["changes"]
    return ret


def _holdAfterInstall(
    ctx: StateContext, hold: bool, names: list[str], ret: dict[str, Any]
) -> dict[str, Any]:
    """
    Hold (or release) packages just installed: comments on new lines, the
    selection change appended to the version change (Salt's words).
    """
    entries = _holdEntries(ctx, hold, names)
    if isinstance(entries, str):
        ret["result"] = False
        ret["comment"] += (
            f"\nAn error was encountered while holding/unholding package(s): {entries}"
        )
        return ret
    comments = [ret["comment"]] if ret["comment"] else []
    for entry in entries:
        comments.append(entry["comment"])
        if entry["result"] is False:
            ret["result"] = False
        elif entry["result"] is None and ret["result"] is not False:
            ret["result"] = None
        if entry["changes"]:
            change = ret["changes"].get(entry["name"])
            if change:
                change["new"] = f"{change['new']}\n{entry['changes']['new']}".lstrip("\n")
                change["old"] = f"{change['old']}\n{entry['changes']['old']}".lstrip("\n")
            else:
                ret["changes"][entry["name"]] = {"new": entry["changes"]["new"]}
    ret["comment"] = "\n".join(comments)
    return ret


def _localSources(ctx: StateContext, sources: list[dict[str, Any]]) -> list[dict[str, str]]:
    """
    C{sources} with their package files on the minion: a C{salt://} (or
    C{http(s)://}) file is cached first.

    @raise ValueError: a file cannot be cached.
    """
    local = []
    for source in sources:
        package, path = next(iter(source.items()))
        path = str(path)
        if "://" in path and not path.startswith("file://"):
            cached = ctx.salt["cp.cache_file"](path, ctx.saltenv)
            if not cached:
                raise ValueError(f"Unable to cache {path} from saltenv '{ctx.saltenv}'")
            path = cached
        local.append({package: path})
    return local


def _failed(name: str, doing: str, error: Exception) -> dict[str, Any]:
    """
    A failed package operation: the changes it made anyway and apt's
    errors, as Salt words them (C{PackageError}), or Salt's generic words.
    """
    if isinstance(error, PackageError):
        return stateReturn(name, False, str(error), dict(error.changes))
    what = "packages" if doing == "updating" else "package(s)"
    return stateReturn(name, False, f"An error was encountered while {doing} {what}: {error}")


def installed(
    ctx: StateContext,
    name: str,
    version: Any = None,
    refresh: bool | None = None,
    fromrepo: str | None = None,
    skip_verify: bool = False,
    pkgs: Any = None,
    sources: Any = None,
    hold: bool | None = None,
    reinstall: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure packages are installed (at C{version}, when given): C{name},
    or every package of C{pkgs} (names, or C{{name: version}} maps), or the
    local package files of C{sources} (C{{name: /path.deb}} maps), all in
    one installation. C{hold=True} holds them at their version,
    C{hold=False} releases them. In test mode, the packages that would be
    installed and the versions they would get.
    """
    try:
        desired = _desired(name, pkgs, version, sources)
    except ValueError as e:
        return stateReturn(name, False, str(e))
    bad = _badSpec(desired)
    if bad is not None:
        return stateReturn(name, False, bad)
    try:
        current = _installed(ctx)
    except CommandExecutionError as e:
        return stateReturn(name, False, str(e))
    ignoreEpoch = kwargs.get("ignore_epoch")
    targets = {
        package: wanted
        for package, wanted in desired.items()
        if reinstall or not _fulfilled(ctx, current.get(package, []), wanted, package, ignoreEpoch)
    }
    if not targets:
        spec = " and are at the desired version" if any(desired.values()) else ""
        ret = stateReturn(name, True, f"All specified packages are already installed{spec}")
        if hold is not None:
            ret = _holdInState(ctx, bool(hold), list(desired), ret)
        return ret

    if ctx.test:
        changes = {}
        for package, wanted in targets.items():
            new = wanted if wanted and wanted != "latest" else ""
            if new and not sources and not isExact(new):
                new = _wouldGet(ctx, package, new)
            if not new and not sources:
                new = ctx.salt["pkg.latest_version"](package, refresh=False)
            old = ",".join(current.get(package, []))
            changes[package] = {"new": new or "installed", "old": old}
        verb = "reinstalled" if reinstall else "installed/updated"
        ret = stateReturn(
            name,
            None,
            f"The following packages would be {verb}: {', '.join(targets)}",
            changes,
        )
        if hold is not None:
            ret = _holdAfterInstall(ctx, bool(hold), list(desired), ret)
            ret["result"] = None
        return ret

    arguments: dict[str, Any] = {
        "refresh": checkRefresh(ctx.opts, refresh),
        "fromrepo": fromrepo,
        "skip_verify": skip_verify,
        "reinstall": reinstall,
    }
    if sources:
        try:
            arguments["sources"] = _localSources(
                ctx, [s for s in sources if next(iter(s)) in targets]
            )
        except (ValueError, CommandExecutionError) as e:
            return stateReturn(name, False, str(e))
    else:
        arguments["pkgs"] = [{p: v} if v and v != "latest" else p for p, v in targets.items()]
    try:
        changes = ctx.salt["pkg.install"](**arguments)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _failed(name, "installing", e)
    after = _installed(ctx)
    modified = []
    failed = []
    for package, wanted in targets.items():
        have = after.get(package, [])
        ok = bool(have) and (
            not wanted or wanted == "latest" or anySatisfies(have, wanted, ignoreEpoch)
        )
        (modified if ok else failed).append(package)
    notModified = [p for p in desired if p not in targets]
    comments = []
    if modified:
        summary = ", ".join(_pinned(p, desired[p]) for p in modified)
        if len(summary) < 20:
            comments.append(f"The following packages were installed/updated: {summary}")
        else:
            many = len(modified) > 1
            comments.append(
                f"{len(modified)} targeted package{'s' if many else ''} "
                f"{'were' if many else 'was'} installed/updated."
            )
    if notModified:
        summary = ", ".join(_pinned(p, desired[p]) for p in notModified)
        comments.append(f"The following packages were already installed: {summary}")
    result = True
    if failed:
        summary = ", ".join(_pinned(p, desired[p]) for p in failed)
        comments.insert(0, f"The following packages failed to install/update: {summary}")
        result = False
    ret = stateReturn(name, result, "\n".join(comments), changes)
    if hold is not None and result:
        ret = _holdAfterInstall(ctx, bool(hold), list(desired), ret)
    return ret


def latest(
    ctx: StateContext,
    name: str,
    refresh: bool | None = None,
    fromrepo: str | None = None,
    skip_verify: bool = False,
    pkgs: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure packages are installed at the newest version the
    repositories offer (C{name}, or the names of C{pkgs}).
    """
    if kwargs.get("sources"):
        return stateReturn(name, False, 'The "sources" parameter is not supported.')
    if pkgs:
        if not isinstance(pkgs, list):
            return stateReturn(name, False, 'Invalidly formatted "pkgs" parameter. See minion log.')
        wanted = [str(next(iter(p))) if isinstance(p, dict) else str(p) for p in pkgs]
    else:
        wanted = [name]
    if not wanted:
        return stateReturn(name, False, "No packages to install provided")
    try:
        avail = ctx.salt["pkg.latest_version"](
            *wanted,
            fromrepo=fromrepo,
            refresh=False if ctx.test else checkRefresh(ctx.opts, refresh),
        )
    except CommandExecutionError as e:
        return stateReturn(
            name,
            False,
            "An error was encountered while checking the newest available version "
            f"of package(s): {e}",
        )
    current = ctx.salt["pkg.version"](*wanted)
    if isinstance(avail, str):
        avail = {wanted[0]: avail}
    if isinstance(current, str):
        current = {wanted[0]: current}
    targets = {}
    problems = []
    for package in wanted:
        if avail.get(package):
            targets[package] = avail[package]
        elif not current.get(package):
            problems.append(f"No information found for '{package}'.")
    if problems:
        return stateReturn(name, False, " ".join(problems))
    if not targets:
        if len(wanted) > 10:
            comment = f"All {len(wanted)} packages are up-to-date."
        elif len(wanted) > 1:
            comment = f"All packages are up-to-date ({', '.join(sorted(wanted))})."
        else:
            comment = f"Package {wanted[0]} is already up-to-date"
        return stateReturn(name, True, comment)
    upToDate = [p for p in wanted if p not in targets] if pkgs else []
    if ctx.test:
        comments = [
            "The following packages would be installed/upgraded: " + ", ".join(sorted(targets))
        ]
        if upToDate:
            if len(upToDate) <= 10:
                comments.append(
                    "The following packages are already up-to-date: "
                    + ", ".join(f"{p} ({current[p]})" for p in sorted(upToDate))
                )
            else:
                comments.append(f"{len(upToDate)} packages are already up-to-date")
        changes = {p: {"old": current.get(p, ""), "new": v} for p, v in targets.items()}
        return stateReturn(name, None, "\n".join(comments), changes)
    try:
        changes = ctx.salt["pkg.install"](
            pkgs=list(targets), refresh=False, fromrepo=fromrepo, skip_verify=skip_verify
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return _failed(name, "installing", e)
    if not changes:
        if len(targets) > 10:
            comment = (
                f"{len(targets)} targeted packages failed to update. See debug log for details."
            )
        elif len(targets) > 1:
            comment = (
                "The following targeted packages failed to update. "
                f"See debug log for details: ({', '.join(sorted(targets))})."
            )
        else:
            comment = f"Package {next(iter(targets))} failed to update."
        return stateReturn(name, False, comment)
    failed = [
        p
        for p in targets
        if not changes.get(p) or targets[p] not in str(changes[p].get("new", "")).split(",")
    ]
    successful = [p for p in targets if p not in failed]
    comments = []
    if failed:
        comments.append(f"The following packages failed to update: {', '.join(sorted(failed))}")
    if successful:
        comments.append(
            "The following packages were successfully installed/upgraded: "
            + ", ".join(sorted(successful))
        )
    if upToDate:
        if len(upToDate) <= 10:
            comments.append(
                f"The following packages were already up-to-date: {', '.join(sorted(upToDate))}"
            )
        else:
            comments.append(f"{len(upToDate)} packages were already up-to-date ")
    return stateReturn(name, not failed, " ".join(comments), changes)


def _uninstall(
    ctx: StateContext, action: str, name: str, version: Any, pkgs: Any, ignoreEpoch: Any = None
) -> dict[str, Any]:
    try:
        desired = _desired(name, pkgs, version, None)
    except ValueError:
        return stateReturn(name, False, "Invalidly formatted pkgs parameter. See minion log.")
    current = _installed(ctx)
    targets = []
    versionSpec = False
    for package, wanted in desired.items():
        have = current.get(package, [])
        if not have:
            continue
        if wanted is None:
            targets.append(package)
        else:
            versionSpec = True
            try:
                if anySatisfies(have, wanted, ignoreEpoch):
                    targets.append(package)
            except ValueError as e:
                return stateReturn(name, False, f"{package}: {e}")
    if action == "remove" and not targets:
        spec = " (matching specified versions)" if versionSpec else ""
        return stateReturn(name, True, f"All specified packages{spec} are already absent")
    if action == "purge":
        leftovers = ctx.salt["pkg.list_pkgs"](versions_as_list=True, removed=True)
        targets += [p for p in desired if p in leftovers and p not in targets]
    targets.sort()
    if not targets:
        partially = " or partially installed" if action == "purge" else ""
        return stateReturn(name, True, f"None of the targeted packages are installed{partially}")
    if ctx.test:
        return stateReturn(
            name,
            None,
            f"The following packages will be {action}d: {', '.join(targets)}.",
            {p: {"new": f"{action}d", "old": ""} for p in targets},
        )
    try:
        changes = ctx.salt[f"pkg.{action}"](pkgs=targets)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _failed(name, "removing" if action == "remove" else "purging", e)
    after = _installed(ctx)
    failed = [p for p in desired if p in after and p in targets]
    if action == "purge":
        leftovers = ctx.salt["pkg.list_pkgs"](versions_as_list=True, removed=True)
        failed += [p for p in desired if p in leftovers and p not in failed]
    failed.sort()
    if failed:
        return stateReturn(
            name,
            False,
            f"The following packages failed to {action}: {', '.join(failed)}.",
            changes,
        )
    notInstalled = sorted(p for p in desired if p not in targets)
    if notInstalled:
        comment = (
            f"The following packages were not installed: {', '.join(notInstalled)} "
            f"The following packages were {action}d: {', '.join(targets)}."
        )
    else:
        comment = f"All targeted packages were {action}d."
    return stateReturn(name, True, comment, changes)


def removed(
    ctx: StateContext, name: str, version: Any = None, pkgs: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Make sure packages are not installed (their configuration files may
    stay); with C{version} (a version or a specification, C{<2.0}), only
    an installed version meeting it is removed. C{ignore_epoch}: compare
    without epochs (default: as Salt, only for a version without one).
    """
    return _uninstall(ctx, "remove", name, version, pkgs, kwargs.get("ignore_epoch"))


def purged(
    ctx: StateContext, name: str, version: Any = None, pkgs: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Make sure packages are not installed and their configuration files are
    gone too.
    """
    return _uninstall(ctx, "purge", name, version, pkgs, kwargs.get("ignore_epoch"))


def uptodate(
    ctx: StateContext, name: str, refresh: bool = False, pkgs: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Apply the available upgrades: every package's, or only those of
    C{pkgs} (a list of names). C{dist_upgrade=True} lets the upgrade
    install and remove packages.
    """
    ret = stateReturn(name, False, "Failed to update")
    if not isinstance(refresh, bool):
        ret["comment"] = "refresh must be either True or False"
        return ret
    if pkgs is not None and not isinstance(pkgs, list):
        ret["comment"] = "pkgs must be a list of package names"
        return ret
    dist = kwargs.get("dist_upgrade", False) is True
    try:
        packages = ctx.salt["pkg.list_upgrades"](refresh=refresh and not ctx.test)
        if pkgs is not None:
            packages = {p: v for p, v in packages.items() if p in pkgs}
        expected = {p: {"new": v, "old": ctx.salt["pkg.version"](p)} for p, v in packages.items()}
    except Exception as e:
        ret["comment"] = str(e)
        return ret
    if not packages:
        return stateReturn(name, True, "System is already up-to-date")
    if ctx.test:
        return stateReturn(name, None, "System update will be performed", expected)
    try:
        changes = ctx.salt["pkg.upgrade"](refresh=False, pkgs=pkgs, dist_upgrade=dist)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _failed(name, "updating", e)
    ret["changes"] = changes
    missing = [p for p in expected if p not in changes] if pkgs is not None else []
    if missing:
        ret["comment"] = f"The following package(s) failed to update: {', '.join(missing)}"
        return ret
    ret.update(result=True, comment="Upgrade ran successfully")
    return ret


#: The functions whose chunks C{mod_aggregate} merges.
_AGGREGATED = ("installed", "latest", "removed", "purged")


def _entries(items: Any) -> list[tuple[str, Any]] | None:
    """
    C{pkgs} or C{sources} as C{(name, version or source)} pairs, or
    L{None} when malformed (such a chunk is left to fail on its own).
    """
    if not isinstance(items, list):
        return None
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if isinstance(item, str) and item:
            pairs.append((item, None))
        elif isinstance(item, dict) and len(item) == 1:
            key, value = next(iter(item.items()))
            pairs.append((str(key), None if value in (None, "") else value))
        else:
            return None
    return pairs


def _chunkEntries(chunk: dict[str, Any], kind: str) -> list[tuple[str, Any]] | None:
    if kind == "sources":
        return _entries(chunk.get("sources"))
    if "pkgs" in chunk:
        return _entries(chunk["pkgs"])
    if "name" in chunk:
        version = chunk.get("version")
        return [(str(chunk["name"]), None if version in (None, "") else version)]
    return None


def _merge(merged: dict[str, Any], pairs: list[tuple[str, Any]]) -> bool:
    """
    Add C{pairs} to C{merged} unless one names a package already there
    at another version (or source).

    @return: whether they were added.
    """
    for key, value in pairs:
        if key in merged and None not in (merged[key], value) and merged[key] != value:
            return False
    for key, value in pairs:
        if merged.get(key) is None:
            merged[key] = value
    return True


def mod_init(ctx: StateContext, low: dict[str, Any]) -> bool:
    """
    Salt's C{pkg.mod_init}, called before the run's first C{pkg} state
    (and the next ones until it returns true): before a C{pkg.installed}
    or C{pkg.latest}, write the refresh tag, so that the first state that
    installs without C{refresh} given refreshes the package database, once
    in the run.

    @return: whether it wrote the tag (it is not called again this run).
    """
    if low.get("fun") in ("installed", "latest"):
        writeRefreshTag(ctx.opts)
        return True
    return False


def mod_aggregate(
    ctx: StateContext,
    low: dict[str, Any],
    chunks: list[dict[str, Any]],
    running: dict[str, Any],
) -> dict[str, Any]:
    """
    Salt's C{pkg.mod_aggregate} (with C{state_aggregate}): merge the
    packages of the other C{pkg} chunks of the same function
    (C{installed}, C{latest}, C{removed}, C{purged}) into C{low}'s
    C{pkgs} (or C{sources}, only with other C{sources}), so that one
    installation does them all. A chunk already run, already merged
    (C{__agg__}), from another C{fromrepo}, with C{hold}, or pinning a
    package at another version than one already merged is left alone;
    those merged are marked C{__agg__} (they still run, and find their
    packages in place).

    Unlike Salt 3008, C{low}'s own package stays in the list (Salt's
    drops it when C{low} names one package) and a package is listed
    once, at its pinned version.

    @return: C{low}, changed in place.
    """
    if low.get("fun") not in _AGGREGATED:
        return low
    kind = "sources" if "sources" in low else "pkgs"
    merged: dict[str, Any] = {}
    own = _chunkEntries(low, kind)
    if own is None or not _merge(merged, own):
        return low
    took = False
    for chunk in chunks:
        if chunk is low or chunk.get("state") != "pkg" or "__agg__" in chunk:
            continue
        tag = f"pkg_|-{chunk.get('__id__')}_|-{chunk.get('name')}_|-{chunk.get('fun')}"
        if tag in running:
            continue
        if chunk.get("fun") != low.get("fun") or chunk.get("fromrepo") != low.get("fromrepo"):
            continue
        if "hold" in chunk or ("sources" in chunk) != (kind == "sources"):
            continue
        pairs = _chunkEntries(chunk, kind)
        if pairs is None or not _merge(merged, pairs):
            continue
        if kind == "pkgs" and "pkgs" not in chunk:
            # Salt's: the version moved into the aggregate's list.
            chunk.pop("version", None)
        chunk["__agg__"] = True
        took = True
    if took:
        low[kind] = [key if value is None else {key: value} for key, value in merged.items()]
        if kind == "pkgs":
            low.pop("version", None)
    return low


def mod_watch(ctx: StateContext, name: str, sfun: str | None = None, **kwargs: Any) -> dict:
    """
    A watched state changed: run the watching state's function again
    (C{installed}, C{latest}, C{removed}, C{purged}).
    """
    functions = {"purged": purged, "latest": latest, "removed": removed, "installed": installed}
    if sfun in functions:
        return functions[sfun](ctx, name, **kwargs)
    return stateReturn(name, False, f"pkg.{sfun} does not work with the watch requisite")
