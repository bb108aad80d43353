# -*- test-case-name: tests.test_state_compile -*-
"""
SLS files rendered into one high data (Salt's C{render_state} and
C{render_highstate}).

An SLS name C{web.nginx} is the file C{web/nginx.sls} or
C{web/nginx/init.sls} of its saltenv, read through the file server (any
object with C{envs}, C{fileList} and C{findFile}, see
L{salttwist.state.compiler.IStateFiles}) and rendered through its C{#!}
pipeline (C{renderer}, C{jinja|yaml} by default; C{#!py} too) with the
caller's variables (C{salt}, C{grains}, C{pillar}, C{opts}) and Salt's
per-file ones (C{saltenv}, C{sls}, C{slspath}, C{tpldir}, C{tplroot} ...).
Jinja's C{include}/C{import}/C{import_yaml} read files of the same
saltenv.

Each file's C{include:} is followed as Salt does: plain names, relative
names (C{.config} is a sibling, C{..common} one level up, from the file's
package), C{- saltenv: sls} mappings, globs (C{web.*}); each file once per
saltenv. Its C{extend:} and C{exclude:} are gathered for the whole run
(C{__extend__}, C{__exclude__}); its ids get C{__sls__}, C{__env__} and,
for an included file, C{__sls_included_from__}; with C{state_auto_order},
each state an C{order} (L{salttwist.state.high.AutoOrder}).

Difference from Salt 3008: an include C{- _xenv: name} resolves the name
in the one saltenv of the run that has it, as Salt's code means to; Salt
refuses it first ("Nonexistent saltenv '_xenv'").

Blocking (file server, rendering): run it in a thread or a worker.

Ground: imports no wing.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from salttwist.fileserver.interfaces import FileServerError, FoundFile
from salttwist.render import RenderError, readSource, renderText
from salttwist.state.high import (
    AutoOrder,
    cleanDuplicateExtends,
    mergeIncluded,
    normaliseDecls,
    takeExclude,
    takeExtend,
)

log = logging.getLogger(__name__)

#: The include mapping key that resolves a name in whichever saltenv of
#: the run holds it.
XENV = "_xenv"
_RELATIVE = re.compile(r"^(\.+)(.*)$")


class IStateFiles(Protocol):
    """
    What the compiler reads SLS files through:
    L{salttwist.fileserver.server.FileServer} on a master, a minion's file
    client view.
    """

    def envs(self) -> list[str]: ...

    def fileList(self, saltenv: str, prefix: str = "") -> list[str]: ...

    def findFile(self, path: str, saltenv: str) -> FoundFile | None: ...


def slsFiles(sls: str) -> tuple[str, str]:
    """
    @return: the two files SLS C{sls} may be: C{a/b.sls}, C{a/b/init.sls}.
    """
    base = sls.replace(".", "/")
    return base + ".sls", base + "/init.sls"


def findSls(files: IStateFiles, sls: str, saltenv: str) -> FoundFile | None:
    """
    @return: the file of SLS C{sls} in C{saltenv}, or L{None}.
    @raise FileServerError: for a name that is a path trick.
    """
    for path in slsFiles(sls):
        found = files.findFile(path, saltenv)
        if found is not None:
            return found
    return None


def listSls(files: IStateFiles, saltenv: str) -> list[str]:
    """
    @return: the SLS names of C{saltenv}, sorted (Salt's
        C{cp.list_states}); C{[]} for a saltenv that is not served.
    """
    try:
        paths = files.fileList(saltenv)
    except FileServerError:
        return []
    names: set[str] = set()
    for path in paths:
        if path.endswith("/init.sls"):
            names.add(path[: -len("/init.sls")].replace("/", "."))
        elif path.endswith(".sls"):
            names.add(path[: -len(".sls")].replace("/", "."))
    return sorted(names)


def loaderFor(files: IStateFiles, saltenv: str) -> Callable[[str], tuple[str, str]]:
    """
    @return: the Jinja loader of C{saltenv}: included and imported
        templates read through C{files}.
    """

    def load(name: str) -> tuple[str, str]:
        try:
            found = files.findFile(name, saltenv)
        except FileServerError as e:
            raise LookupError(str(e)) from None
        if found is None:
            raise LookupError(f"'{name}' is not in saltenv '{saltenv}'")
        return readSource(found.realPath), found.realPath

    return load


class SaltModules(Mapping[str, Any]):
    """
    The C{salt} render variable as Salt's Jinja renderer gives it: the
    execution functions by C{"module.function"} (C{salt['cmd.run']}), and
    by module as attributes (C{salt.cmd.run}, C{salt['cmd'].run}).
    """

    def __init__(self, functions: Mapping[str, Any]) -> None:
        self._functions = functions

    def __getitem__(self, key: str) -> Any:
        try:
            return self._functions[key]
        except KeyError:
            if isinstance(key, str) and "." not in key and key and not key.startswith("_"):
                return _SaltModule(self._functions, key)
            raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _SaltModule(self._functions, name)

    def __contains__(self, key: object) -> bool:
        return key in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)


class _SaltModule:
    """
    One module's functions as attributes: C{salt.cmd.run}.
    """

    def __init__(self, functions: Mapping[str, Any], module: str) -> None:
        self._functions = functions
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._functions[f"{self._module}.{name}"]
        except KeyError:
            raise AttributeError(f"'{self._module}.{name}' is not available") from None


#: The characters that make an SLS name a glob.
_GLOB_CHARS = frozenset("*?[")


class _Avail(dict):
    """
    C{{saltenv: [sls, ...]}}, each saltenv listed when first asked for.
    """

    def __init__(self, files: IStateFiles) -> None:
        super().__init__()
        self._files = files
        try:
            self._served = set(files.envs())
        except FileServerError:
            self._served = set()

    def __contains__(self, saltenv: object) -> bool:
        return saltenv in self._served

    def __missing__(self, saltenv: str) -> list[str]:
        names = listSls(self._files, saltenv) if saltenv in self._served else []
        self[saltenv] = names
        return names

    def matching(self, saltenv: str, pattern: str) -> list[str]:
        """
        The SLS names of C{saltenv} that C{pattern} matches. Only a glob
        lists the saltenv; a plain name is looked up alone (C{x.sls}, then
        C{x/init.sls}), so the time before the first state does not grow
        with the number of unrelated files the file server holds.
        """
        if saltenv not in self._served:
            return []
        if _GLOB_CHARS.isdisjoint(pattern):
            return [pattern] if self._exists(saltenv, pattern) else []
        return fnmatch.filter(self[saltenv], pattern)

    def _exists(self, saltenv: str, sls: str) -> bool:
        if dict.__contains__(self, saltenv):
            return sls in dict.__getitem__(self, saltenv)
        base = sls.replace(".", "/")
        try:
            return any(
                self._files.findFile(path, saltenv) is not None
                for path in (base + ".sls", base + "/init.sls")
            )
        except FileServerError:
            return False


class HighBuilder:
    """
    One compile: the SLS files of a run rendered and merged (Salt's
    C{BaseHighState.render_highstate}), keeping where each SLS came from
    for error messages.

    @ivar paths: C{{(saltenv, sls): file on disk}} of the files rendered.
    """

    def __init__(
        self,
        files: IStateFiles,
        variables: Mapping[str, Any],
        opts: Mapping[str, Any],
    ) -> None:
        self.files = files
        self.variables = dict(variables)
        salt = self.variables.get("salt")
        if isinstance(salt, Mapping) and not isinstance(salt, SaltModules):
            self.variables["salt"] = SaltModules(salt)
        self.opts = opts
        self.avail = _Avail(files)
        self.order = AutoOrder(bool(opts.get("state_auto_order", True)))
        self.paths: dict[tuple[str, str], str] = {}

    def where(self, sls: Any, saltenv: Any) -> str:
        """
        @return: C{" (file <path>)"} for an SLS rendered here, else C{""}.
        """
        path = self.paths.get((str(saltenv), str(sls)))
        return f" (file {path})" if path else ""

    def render(self, matches: Mapping[str, Sequence[str]]) -> tuple[dict, list[str]]:
        """
        Render the SLS names of each saltenv of C{matches} (globs allowed)
        and what they include.

        @return: C{(high, errors)}; C{high} may hold C{__extend__} and
            C{__exclude__}.
        """
        highstate: dict = {}
        errors: list[str] = []
        mods: set[str] = set()
        for saltenv, names in matches.items():
            if isinstance(names, str):
                names = [names]
            for pattern in names:
                pattern = str(pattern)
                if saltenv in self.avail:
                    statefiles = self.avail.matching(saltenv, pattern)
                else:
                    errors.append(f"No matching salt environment for environment '{saltenv}' found")
                    continue
                for sls in statefiles or [pattern]:
                    if f"{saltenv}:{sls}" in mods:
                        continue
                    state, fileErrors = self.renderState(sls, saltenv, mods, matches)
                    if state:
                        mergeIncluded(highstate, state, fileErrors, self.where)
                    unavailable = f"SLS {pattern} in saltenv"
                    for index, error in enumerate(fileErrors):
                        if "is not available" in error and unavailable in error:
                            fileErrors[index] = (
                                f"No matching sls found for '{pattern}' in env '{saltenv}'"
                            )
                    errors.extend(fileErrors)
        cleanDuplicateExtends(highstate)
        return highstate, errors

    def _renderFile(
        self, sls: str, saltenv: str, errors: list[str]
    ) -> tuple[Any, FoundFile | None]:
        try:
            found = findSls(self.files, sls, saltenv)
        except FileServerError as e:
            errors.append(f"Specified SLS {sls} in saltenv {saltenv} is not valid: {e}")
            return None, None
        if found is None:
            errors.append(
                f"Specified SLS {sls} in saltenv {saltenv} is not available on the salt "
                "master or through a configured fileserver"
            )
            return None, None
        self.paths[(saltenv, sls)] = found.realPath
        context = dict(self.variables)
        context["saltenv"] = saltenv
        context["sls"] = sls
        try:
            data = renderText(
                readSource(found.realPath),
                context,
                path=found.realPath,
                sls=sls,
                saltenv=saltenv,
                defaultPipeline=str(self.opts.get("renderer") or "jinja|yaml"),
                loader=loaderFor(self.files, saltenv),
                name=found.path,
            )
        except RenderError as e:
            errors.append(str(e.withSls(sls, saltenv)))
            return None, found
        except Exception as e:  # a bug of ours, or data nobody checked
            log.debug("rendering SLS %s:%s failed", saltenv, sls, exc_info=True)
            errors.append(
                f"Rendering SLS {sls} failed, render error: {type(e).__name__}: {e}"
                f" (file {found.realPath})"
            )
            return None, found
        return data, found

    def renderState(
        self,
        sls: str,
        saltenv: str,
        mods: set[str],
        matches: Mapping[str, Sequence[str]],
    ) -> tuple[dict, list[str]]:
        """
        Salt's C{render_state}: one SLS file and, depth first, what it
        includes.

        @param mods: C{"saltenv:sls"} of the files rendered so far in this
            run (updated).
        @return: C{(state, errors)}: its ids and those of its includes.
        """
        errors: list[str] = []
        data, found = self._renderFile(sls, saltenv, errors)
        if found is not None:
            mods.add(f"{saltenv}:{sls}")
        if not data:
            return {}, errors
        if not isinstance(data, dict):
            errors.append(f"SLS {sls} does not render to a dictionary{self.where(sls, saltenv)}")
            return {}, errors
        state: dict = data
        include: list = []
        if "include" in state:
            value = state.pop("include")
            if isinstance(value, list):
                include = value
            else:
                errors.append(f"Include Declaration in SLS {sls} is not formed as a list")
        takeExtend(state, sls, saltenv, errors)
        takeExclude(state, sls, errors)
        normaliseDecls(state, sls, saltenv, errors)
        isInit = found is not None and found.path.endswith("/init.sls")
        for entry in include:
            self._include(entry, sls, saltenv, isInit, state, mods, matches, errors)
        self.order.apply(state)
        return state, errors

    def _include(
        self,
        entry: Any,
        sls: str,
        saltenv: str,
        isInit: bool,
        state: dict,
        mods: set[str],
        matches: Mapping[str, Sequence[str]],
        errors: list[str],
    ) -> None:
        if isinstance(entry, dict) and len(entry) == 1:
            envKey, target = next(iter(entry.items()))
            envKey = str(envKey)
        else:
            envKey, target = saltenv, entry
        if not isinstance(target, str) or not target:
            errors.append(
                f"Badly formatted include {entry!r} found in include in SLS '{saltenv}:{sls}'"
            )
            return
        if envKey != XENV and envKey not in self.avail:
            errors.append(
                f"Nonexistent saltenv '{envKey}' found in include of '{target}' "
                f"within SLS '{saltenv}:{sls}'"
            )
            return
        if target.startswith("."):
            levels, rest = _RELATIVE.match(target).groups()  # type: ignore[union-attr]
            parts = sls.split(".")
            if isInit:
                parts.append("init")
            if len(levels) > len(parts):
                errors.append(
                    f"Attempted relative include of '{target}' within SLS "
                    f"'{saltenv}:{sls}' goes beyond top level package "
                )
                return
            target = ".".join(parts[: -len(levels)] + [rest])
        if envKey != XENV:
            if envKey in matches or self.avail.matching(envKey, target):
                resolved = [envKey]
            else:
                resolved = []
        else:
            resolved = [env for env in matches if self.avail.matching(env, target)]
        if len(resolved) != 1 and saltenv not in resolved:
            if not resolved:
                envs = ", ".join(matches) if envKey == XENV else envKey
                errors.append(
                    f"Unknown include: Specified SLS {envKey}: {target} is not available"
                    f" on the salt master in saltenv(s): {envs} "
                )
            else:
                errors.append(
                    f"Ambiguous include: Specified SLS {envKey}: {target} is available"
                    f" on the salt master in multiple available saltenvs: {', '.join(resolved)}"
                )
            return
        rEnv = resolved[0] if len(resolved) == 1 else saltenv
        # Salt globs against the including file's saltenv; the included
        # one's is what the name is resolved in.
        for name in self.avail.matching(rEnv, target) or [target]:
            if f"{rEnv}:{name}" in mods:
                continue
            nstate, nerrors = self.renderState(name, rEnv, mods, matches)
            missing = f"Specified SLS {name} in saltenv {rEnv} is not available"
            nerrors = [
                f"{error} (included by SLS '{saltenv}:{sls}')"
                if error.startswith(missing)
                else error
                for error in nerrors
            ]
            if nstate:
                for item, body in nstate.items():
                    if str(item).startswith("__") or not isinstance(body, dict):
                        continue
                    body.setdefault("__sls_included_from__", []).append(sls)
                mergeIncluded(state, nstate, errors, self.where)
            errors.extend(nerrors)
