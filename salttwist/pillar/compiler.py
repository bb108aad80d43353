# -*- test-case-name: tests.test_pillar_compile -*-
"""
Compiling one minion's pillar, as Salt's C{salt.pillar.Pillar}.

  1. The top files: C{top.sls} of each saltenv of C{pillar_roots} (C{base}
     first, then the order of C{pillar_roots}; only C{pillarenv}'s when it
     is set, only the requested saltenv's with the C{none} strategy),
     rendered like any SLS. A later top file's entry for the same saltenv
     and target replaces an earlier one; entries are sorted by their
     C{order}.
  2. Matching: each target with its C{match:} type (C{compound} when none,
     as Salt's C{confirm_top}), through L{salttwist.targeting}.
  3. The SLS files matched (globs allowed), each rendered with C{grains},
     C{opts} (C{opts['id']} is the minion's id), C{saltenv}, C{pillar} (what
     is compiled so far) and Salt's C{sls} variables, their C{include:}
     (names, C{.relative} names, globs and C{- name: {defaults: {...}, key:
     a:b}}) rendered first and the including file merged last.
  4. The C{ext_pillar} entries in order (before the SLS files with
     C{ext_pillar_first}), then the C{pillar=} override, merged last.

Errors never stop the compilation: each goes to C{_errors} (Salt's shape:
a list of strings) and the rest of the pillar is still compiled. With
C{pillar_safe_render_error} (the default), the minion is told only which
SLS, top file or ext_pillar failed; the full text (file, line, cause) is
returned beside for the master's log (L{compilePillarWithErrors}).

Files are read only from the saltenv's C{pillar_roots}: SLS names and
template names that would leave a root, and symbolic links that resolve
outside it, are refused.

All of it blocks (disk, rendering, commands): the master runs it in a
worker process, C{salttwist-call --local} in a thread.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from typing import Any

from salttwist.pillar.ext import getExtPillar
from salttwist.pillar.merge import merge
from salttwist.render import RenderError, readSource, renderText
from salttwist.targeting import compileTarget

log = logging.getLogger(__name__)

#: Target types whose matching needs the pillar compiled so far.
_PILLAR_TYPES = ("pillar", "pillar_pcre", "pillar_exact")

_GLOB_CHARS = frozenset("*?[")

#: The deepest chain of SLS includes followed.
MAX_INCLUDE_DEPTH = 64


class _Errors:
    """
    The errors of one compilation: the full texts (for the master's log)
    and what the minion is shown.
    """

    def __init__(self, safe: bool) -> None:
        self.safe = safe
        self.full: list[str] = []
        self.public: list[str] = []

    def add(self, full: str, hidden: str | None = None) -> None:
        """
        @param full: the whole message.
        @param hidden: what the minion sees instead with
            C{pillar_safe_render_error}, or L{None} when C{full} hides
            nothing.
        """
        self.full.append(full)
        self.public.append(hidden if self.safe and hidden is not None else full)


class _Roots:
    """
    The files of one saltenv's C{pillar_roots}, confined to them.
    """

    def __init__(self, saltenv: str, dirs: list[str]) -> None:
        self.saltenv = saltenv
        self.dirs = [os.path.abspath(d) for d in dirs]
        self._real = [os.path.realpath(d) for d in self.dirs]
        self._avail: list[str] | None = None

    def find(self, relPath: str) -> str | None:
        """
        @return: the path of C{relPath} in the first root that holds it as
            a regular file resolving inside that root, or L{None}.
        """
        for root, real in zip(self.dirs, self._real, strict=True):
            path = os.path.join(root, relPath)
            if os.path.isfile(path):
                resolved = os.path.realpath(path)
                if resolved.startswith(real + os.sep):
                    return path
        return None

    def read(self, relPath: str) -> tuple[str, str]:
        """
        The template loader of this saltenv (names already confined by the
        renderer).

        @raise LookupError: when no root holds C{relPath}.
        """
        path = self.find(relPath)
        if path is None:
            raise LookupError(f"'{relPath}' is not in the pillar_roots of saltenv '{self.saltenv}'")
        return readSource(path), path

    def findSls(self, sls: str) -> tuple[str, str] | None:
        """
        @return: C{(path, relative name)} of SLS C{sls} (C{a.b} is
            C{a/b.sls}, else C{a/b/init.sls}), or L{None}.
        """
        base = sls.replace(".", "/")
        for relPath in (base + ".sls", base + "/init.sls"):
            path = self.find(relPath)
            if path is not None:
                return path, relPath
        return None

    def avail(self) -> list[str]:
        """
        @return: every SLS name of the saltenv (for globs), sorted.
        """
        if self._avail is None:
            names: set[str] = set()
            for root in self.dirs:
                for dirPath, dirNames, fileNames in os.walk(root):
                    dirNames[:] = [d for d in dirNames if not d.startswith(".") and "." not in d]
                    rel = os.path.relpath(dirPath, root)
                    parts = [] if rel == "." else rel.split(os.sep)
                    for fileName in fileNames:
                        if not fileName.endswith(".sls") or fileName.count(".") != 1:
                            continue
                        stem = fileName[: -len(".sls")]
                        name = ".".join(parts if stem == "init" else [*parts, stem])
                        if name and name != "top":
                            names.add(name)
            self._avail = sorted(names)
        return self._avail


_PLAIN = (str, bool, float, bytes, type(None))


def deliverable(value: Any) -> Any:
    """
    C{value} made of what the wire (msgpack with string keys) carries, so
    a pillar never fails to reach its minion: mapping keys that are not
    strings become their text (YAML's C{80: http} gives C{"80"}), tuples
    and sets become lists, integers beyond 64 bits and other objects their
    text. Containers are copied only where something changes.
    """
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, dict):
        changed = False
        items = []
        for key, item in value.items():
            newKey = key if isinstance(key, str) else str(key)
            newItem = deliverable(item)
            changed = changed or newKey is not key or newItem is not item
            items.append((newKey, newItem))
        if not changed and type(value) is dict:
            return value
        result: dict[str, Any] = {}
        for key, item in items:
            result.setdefault(key, item)
        return result
    if isinstance(value, list):
        newItems = [deliverable(item) for item in value]
        if type(value) is list and all(a is b for a, b in zip(newItems, value, strict=True)):
            return value
        return newItems
    if isinstance(value, (tuple, set, frozenset)):
        items = [deliverable(item) for item in value]
        if isinstance(value, (set, frozenset)):
            try:
                items.sort()
            except TypeError:
                pass
        return items
    return str(value)


def _checkSlsName(sls: object) -> str | None:
    """
    @return: why C{sls} is not a valid SLS name, or L{None}.
    """
    if not isinstance(sls, str) or not sls:
        return f"SLS name {sls!r} is not a non-empty string"
    if "/" in sls or "\\" in sls or "\x00" in sls or sls.startswith(".") or ".." in sls:
        return f"SLS name {sls!r} is not a dotted name inside the pillar roots"
    return None


class _Compiler:
    """
    One compilation of one minion's pillar.
    """

    def __init__(
        self,
        opts: dict[str, Any],
        minionId: str,
        grains: dict[str, Any],
        saltenv: str | None,
        pillarenv: str | None,
        override: dict[str, Any] | None,
    ) -> None:
        self.opts = dict(opts)
        self.opts["id"] = minionId
        self.minionId = minionId
        self.grains = grains or {}
        self.saltenv = saltenv
        if pillarenv is None:
            pillarenv = opts.get("pillarenv")
            if opts.get("pillarenv_from_saltenv") and saltenv:
                pillarenv = saltenv
        self.pillarenv = pillarenv or None
        # What the external pillars see (file_tree's relative root_dir).
        self.opts["pillarenv"] = self.pillarenv
        self.strategy = opts.get("pillar_source_merging_strategy") or "smart"
        self.renderer = opts.get("renderer") or "jinja|yaml"
        self.mergeLists = bool(opts.get("pillar_merge_lists", False))
        self.nodegroups = opts.get("nodegroups") or {}
        self.errors = _Errors(bool(opts.get("pillar_safe_render_error", True)))
        self.override: dict[str, Any] = {}
        if override is not None:
            if isinstance(override, dict):
                self.override = deliverable(override)
            else:
                self.errors.add("Pillar data must be a dictionary")
        pillarRoots = opts.get("pillar_roots") or {}
        self.roots = {env: _Roots(env, list(dirs)) for env, dirs in pillarRoots.items()}
        envs = ["base"] + [env for env in pillarRoots if env != "base"]
        self.envs = envs
        self.ignored: dict[str, set[str]] = {}

    def merge(self, a: dict, b: dict) -> dict:
        return merge(a, b, self.strategy, self.renderer, self.mergeLists)

    # The top files.

    def topEnvs(self) -> list[str]:
        if self.pillarenv:
            if self.pillarenv not in self.roots:
                log.debug("pillarenv %r is not in pillar_roots", self.pillarenv)
                return []
            return [self.pillarenv]
        if self.strategy == "none":
            wanted = self.saltenv or "base"
            return [env for env in self.envs if env == wanted]
        return list(self.envs)

    def readTops(self, pillar: dict) -> list[tuple[str, dict]]:
        """
        @return: C{(saltenv of the file, rendered top)} for each top file.
        """
        tops = []
        topName = str(self.opts.get("state_top") or "top.sls")
        if topName.startswith("salt://"):
            topName = topName[len("salt://") :]
        topName = topName.lstrip("/")
        for env in self.topEnvs():
            roots = self.roots.get(env)
            if roots is None:
                continue
            path = roots.find(topName)
            if path is None:
                continue
            try:
                data = renderText(
                    readSource(path),
                    self.context(env, pillar),
                    path=path,
                    saltenv=env,
                    defaultPipeline=self.renderer,
                    loader=roots.read,
                    name=topName,
                    cacheData=True,
                )
            except RenderError as e:
                self.errors.add(
                    f"Rendering Primary Top file failed, render error: {e}",
                    f"Rendering Primary Top file of saltenv '{env}' failed."
                    " Please see master log for details.",
                )
                continue
            if data is None:
                continue
            if not isinstance(data, dict):
                self.errors.add(
                    f"Pillar top file {path} (saltenv '{env}') does not render to a mapping"
                    " of saltenvs",
                    f"Pillar top file of saltenv '{env}' does not render to a mapping of saltenvs",
                )
                continue
            tops.append((env, data))
        return tops

    def mergeTops(self, tops: list[tuple[str, dict]]) -> dict[str, list[tuple[str, str, list]]]:
        """
        @return: C{{saltenv: [(target, match type, [sls, ...]), ...]}},
            each saltenv's targets sorted by C{order}.
        """
        merged: dict[str, dict[str, tuple[int, str, list]]] = {}
        for fileEnv, top in tops:
            for env, targets in top.items():
                if env == "include":
                    continue
                if not isinstance(targets, dict):
                    self.errors.add(
                        f"Pillar top file of saltenv '{fileEnv}': the entry for saltenv"
                        f" '{env}' is not a mapping of targets"
                    )
                    continue
                envTargets = merged.setdefault(str(env), {})
                for tgt, items in targets.items():
                    if not isinstance(items, list):
                        self.errors.add(
                            f"Pillar top file of saltenv '{fileEnv}': target '{tgt}' in saltenv"
                            f" '{env}' is not a list"
                        )
                        continue
                    matchType = "compound"
                    order = 0
                    states: list = []
                    ignoreMissing = False
                    for item in items:
                        if isinstance(item, dict):
                            if "match" in item:
                                matchType = str(item["match"])
                            if "order" in item:
                                try:
                                    order = int(item["order"])
                                except (TypeError, ValueError):
                                    order = 0
                            if item.get("ignore_missing"):
                                ignoreMissing = True
                        elif isinstance(item, str) and item not in states:
                            states.append(item)
                    if ignoreMissing:
                        self.ignored.setdefault(str(env), set()).update(states)
                    envTargets[str(tgt)] = (order, matchType, states)
        result: dict[str, list[tuple[str, str, list]]] = {}
        for env, envTargets in merged.items():
            ordered = sorted(envTargets.items(), key=lambda pair: pair[1][0])
            result[env] = [(tgt, matchType, states) for tgt, (_, matchType, states) in ordered]
        return result

    def topMatches(self, top: dict[str, list[tuple[str, str, list]]], pillar: dict) -> dict:
        """
        @return: C{{saltenv: [sls, ...]}} for this minion, as Salt's
            C{top_matches}.
        """
        matches: dict[str, list[str]] = {}
        for env, targets in top.items():
            if self.pillarenv and env != self.pillarenv:
                continue
            for tgt, matchType, states in targets:
                try:
                    matcher = compileTarget(tgt, matchType, self.nodegroups)
                    if matchType in _PILLAR_TYPES or matchType == "compound":
                        found = matcher.matches(self.minionId, self.grains, pillar)
                    else:
                        found = matcher.matches(self.minionId, self.grains)
                except Exception as e:  # TargetError, or grains of a shape it cannot use
                    self.errors.add(
                        f"Pillar top file: target '{tgt}' (match: {matchType}) in saltenv"
                        f" '{env}': {e}"
                    )
                    continue
                if found:
                    envMatches = matches.setdefault(env, [])
                    for sls in states:
                        if sls not in envMatches:
                            envMatches.append(sls)
        return matches

    # The SLS files.

    def context(self, env: str, pillar: dict, extra: dict | None = None) -> dict[str, Any]:
        context: dict[str, Any] = {
            "grains": self.grains,
            "opts": self.opts,
            "saltenv": env,
            "pillar": pillar,
        }
        if extra:
            context.update(extra)
        return context

    def expand(self, env: str, pattern: str) -> list[str]:
        """
        @return: the SLS names C{pattern} names: itself, or the names its
            glob matches (itself when none does, as in Salt).
        """
        if _GLOB_CHARS.isdisjoint(pattern):
            return [pattern]
        roots = self.roots.get(env)
        found = fnmatch.filter(roots.avail(), pattern) if roots is not None else []
        return found or [pattern]

    def renderPillar(self, matches: dict[str, list[str]], pillar: dict) -> dict:
        for env, patterns in matches.items():
            if env not in self.roots and env != "base":
                self.errors.add(f"No matching pillar environment for environment '{env}' found")
                continue
            mods: dict[str, Any] = {}
            files: list[str] = []
            for pattern in patterns:
                for sls in self.expand(env, pattern):
                    if sls not in files:
                        files.append(sls)
            for sls in files:
                state = self.renderSls(sls, env, mods, {}, pillar)
                if state is None:
                    continue
                if not isinstance(state, dict):
                    continue
                pillar = self.merge(pillar, state)
        return pillar

    def renderSls(
        self,
        sls: str,
        env: str,
        mods: dict[str, Any],
        defaults: dict,
        pillar: dict,
        depth: int = 0,
    ) -> Any:
        """
        Render one SLS and its includes.

        @param depth: how many includes led here.
        @return: its data (a mapping), or L{None} when there is none.
        """
        problem = _checkSlsName(sls)
        if problem is not None:
            self.errors.add(f"{problem} (saltenv '{env}')")
            return None
        if depth > MAX_INCLUDE_DEPTH:
            self.errors.add(
                f"Including SLS '{sls}' in environment '{env}' goes deeper than"
                f" {MAX_INCLUDE_DEPTH} includes"
            )
            return None
        roots = self.roots.get(env)
        found = roots.findSls(sls) if roots is not None else None
        if found is None:
            if sls in self.ignored.get(env, ()):
                return None
            if roots is not None and roots.dirs:
                self.errors.add(
                    f"Specified SLS '{sls}' in environment '{env}' is not available on the"
                    " salt master"
                )
            else:
                log.debug("SLS %r: saltenv %r is not in pillar_roots", sls, env)
            return None
        path, relPath = found
        assert roots is not None
        try:
            state = renderText(
                readSource(path),
                self.context(env, pillar, defaults),
                path=path,
                sls=sls,
                saltenv=env,
                defaultPipeline=self.renderer,
                loader=roots.read,
                name=relPath,
                cacheData=True,
                wire=True,
            )
        except RenderError as e:
            self.errors.add(
                str(e.withSls(sls, env)),
                f"Rendering SLS '{sls}' failed. Please see master log for details.",
            )
            state = None
        mods[sls] = state
        if not state:
            return state
        if not isinstance(state, dict):
            self.errors.add(f"SLS '{sls}' does not render to a dictionary")
            return None
        if "include" not in state:
            return state
        includes = state.pop("include")
        if not isinstance(includes, list):
            self.errors.add(f"Include Declaration in SLS '{sls}' is not formed as a list")
            return state
        isInit = relPath.endswith("/init.sls") or relPath == "init.sls"
        included: list[dict] = []
        overrideSls = bool(self.opts.get("pillar_includes_override_sls", False))
        for entry in includes:
            subDefaults: dict = {}
            key: str | None = None
            if isinstance(entry, dict) and len(entry) == 1:
                subSls, options = next(iter(entry.items()))
                options = options or {}
                if not isinstance(options, dict):
                    self.errors.add(f"Include '{subSls}' in SLS '{sls}': options must be a mapping")
                    continue
                subDefaults = options.get("defaults") or {}
                if not isinstance(subDefaults, dict):
                    self.errors.add(
                        f"Include '{subSls}' in SLS '{sls}': defaults must be a mapping"
                    )
                    continue
                key = options.get("key")
            elif isinstance(entry, str):
                subSls = entry
            else:
                self.errors.add(f"Include Declaration in SLS '{sls}' has a bad entry: {entry!r}")
                continue
            subSls = str(subSls)
            if subSls.startswith("."):
                level = len(subSls) - len(subSls.lstrip("."))
                parts = sls.split(".") if isInit else sls.split(".")[:-1]
                if level > 1:
                    parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else None
                if parts is None:
                    self.errors.add(
                        f"Include '{subSls}' in SLS '{sls}' goes above the top of saltenv '{env}'"
                    )
                    continue
                subSls = ".".join([*parts, subSls.lstrip(".")])
            for name in self.expand(env, subSls):
                if name in mods:
                    nstate = mods[name]
                else:
                    nstate = self.renderSls(name, env, mods, subDefaults, pillar, depth + 1)
                if not nstate or not isinstance(nstate, dict):
                    continue
                if key:
                    for fragment in reversed(str(key).split(":")):
                        nstate = {fragment: nstate}
                if overrideSls:
                    state = self.merge(state, nstate)
                else:
                    included.append(nstate)
        if not overrideSls:
            merged: dict = {}
            for part in [*included, state]:
                merged = self.merge(merged, part)
            state = merged
        return state

    # External pillars.

    def extPillar(self, pillar: dict) -> dict:
        entries = self.opts.get("ext_pillar") or []
        if not isinstance(entries, list):
            self.errors.add('The "ext_pillar" option is malformed')
            return pillar
        if self.override:
            pillar = self.merge(pillar, self.override)
        excluded = self.opts.get("exclude_ext_pillar") or []
        for entry in entries:
            if not isinstance(entry, dict):
                self.errors.add('The "ext_pillar" option is malformed')
                return pillar
            for name, conf in entry.items():
                if name in excluded:
                    continue
                ext = getExtPillar(str(name), self.opts)
                if ext is None:
                    self.errors.add(f"ext_pillar interface named {name} is unavailable")
                    continue
                try:
                    data = ext.compile(self.minionId, pillar, conf, grains=self.grains)
                except Exception as e:
                    log.debug("ext_pillar %s failed for %s", name, self.minionId, exc_info=True)
                    self.errors.add(
                        f"Failed to load ext_pillar {name}: {e}",
                        f"Failed to load ext_pillar {name}. Please see master log for details.",
                    )
                    continue
                if not data:
                    continue
                if not isinstance(data, dict):
                    self.errors.add(
                        f"Failed to load ext_pillar {name}: it returned a"
                        f" {type(data).__name__}, not a mapping"
                    )
                    continue
                pillar = self.merge(pillar, deliverable(data))
        return pillar

    # The whole.

    def getTop(self, pillar: dict) -> dict[str, list[tuple[str, str, list]]]:
        return self.mergeTops(self.readTops(pillar))

    def compile(self) -> dict[str, Any]:
        override = self.override
        if self.opts.get("ext_pillar_first", False):
            extData = self.extPillar(dict(override))
            top = self.getTop(extData)
            # Salt merges the SLS data over the ext_pillar data; starting from
            # it gives the same pillar and lets the SLS files see it.
            pillar = self.renderPillar(self.topMatches(top, extData), extData)
        else:
            top = self.getTop(dict(override))
            pillar = self.renderPillar(self.topMatches(top, dict(override)), dict(override))
            pillar = self.extPillar(pillar)
        if self.errors.full:
            pillar = dict(pillar)
            pillar["_errors"] = self.errors.public
        if override:
            pillar = self.merge(pillar, override)
        return pillar


def compilePillarWithErrors(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    *,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    override: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """
    Compile C{minionId}'s pillar.

    Blocking (disk, rendering, commands): run it in a worker process or a
    thread.

    @param opts: the master's options (C{pillar_roots}, C{ext_pillar},
        C{pillar_source_merging_strategy} ...).
    @param minionId: the minion's authenticated id.
    @param grains: its grains.
    @param saltenv: the saltenv asked for (with C{pillarenv_from_saltenv},
        the pillarenv; with the C{none} strategy, the only top file read).
    @param pillarenv: only this saltenv's top file and entries.
    @param override: Salt's C{pillar=}: merged last.
    @return: C{(pillar, errors)}: the pillar as the minion gets it (with
        C{_errors} when something failed) and the full text of every error
        for the master's log.
    """
    try:
        compiler = _Compiler(opts, minionId, grains, saltenv, pillarenv, override)
        return compiler.compile(), compiler.errors.full
    except Exception as e:
        # A bug of ours or options of a shape nobody checked: still an
        # answer, never an exception in the master's worker.
        log.debug("pillar compilation failed for %s", minionId, exc_info=True)
        full = f"Pillar compilation failed: {type(e).__name__}: {e}"
        public = full
        if opts.get("pillar_safe_render_error", True):
            public = "Pillar compilation failed. Please see master log for details."
        return {"_errors": [public]}, [full]


def compilePillar(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    *,
    saltenv: str | None = None,
    pillarenv: str | None = None,
    override: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """
    Compile C{minionId}'s pillar as the minion gets it; see
    L{compilePillarWithErrors}. Never raises for bad SLS files or failing
    external pillars: they are in C{_errors}.
    """
    return compilePillarWithErrors(
        opts, minionId, grains, saltenv=saltenv, pillarenv=pillarenv, override=override
    )[0]


def showTopWithErrors(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    *,
    pillarenv: str | None = None,
) -> tuple[dict[str, list[str]], list[str]]:
    """
    @return: C{({saltenv: [sls, ...]}, errors)}: the SLS files the pillar
        top files give C{minionId} (Salt's C{pillar.show_top}) and the full
        text of the errors met reading them.
    """
    try:
        compiler = _Compiler(opts, minionId, grains, None, pillarenv, None)
        pillar: dict[str, Any] = {}
        if opts.get("ext_pillar_first", False):
            pillar = compiler.extPillar({})
        return compiler.topMatches(compiler.getTop(pillar), pillar), compiler.errors.full
    except Exception as e:
        log.debug("pillar top failed for %s", minionId, exc_info=True)
        return {}, [f"Pillar top failed: {type(e).__name__}: {e}"]


def showTop(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    *,
    pillarenv: str | None = None,
) -> dict[str, list[str]]:
    """
    @return: C{{saltenv: [sls, ...]}}, Salt's C{pillar.show_top}; see
        L{showTopWithErrors} for the errors.
    """
    return showTopWithErrors(opts, minionId, grains, pillarenv=pillarenv)[0]
