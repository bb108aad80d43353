# -*- test-case-name: tests.test_extmods,tests.test_modules_saltutil_sync -*-
"""
Custom code through the file server: Salt's C{_modules}, C{_grains},
C{_states}, C{_utils} and C{_runners} folders, copied ("synced") from the
file server into C{extension_modules/<kind>/} and loaded beside the
built-in modules.

Syncing (L{installSynced}, L{syncKinds}): the files of C{salt://_<kind>/}
of each saltenv are fetched into the minion's cache
(C{IFileClient.cacheDir}), then the C{.py} files that are new or whose
content changed are copied into C{extension_modules/<kind>/}, and files
there that the file server no longer has are removed (Salt's
C{clean_dynamic_modules}, on by default). The names copied are returned in
Salt's shape, C{["modules.mymod"]}; a removal is not listed. With
C{refresh} a minion loads its custom code again after every sync, as
Salt's does; the master reloads its runners when a file changed.

Loading (L{loadExtensionModules}): each C{.py} file at the top of
C{extension_modules/<kind>/} is imported from its file under the private
package name C{salttwist_ext.<kind>.<name>}, with Salt's dunders set in
its globals (before the module's code runs, and again after, as Salt's
loader overwrites what a module set itself):

  - C{__opts__}: the config; C{__grains__}: the grains (the minion's live
    mapping); C{__pillar__}: the pillar as it is when read (a live view of
    C{LoaderContext.pillar}, which a refresh replaces whole);
  - C{__salt__}: every execution function (built-in and custom) by name;
    a function that needs the loader context gets it, and one that runs on
    the reactor is called there and waited for when called from a thread
    (L{SaltFunctions});
  - C{__context__}: a dict shared by the modules of one load;
  - C{__utils__}: the functions of the synced C{_utils} modules.

Custom execution functions are wrapped by L{jobFunction}: they take the
job's loader context (so C{__pillar__} is that job's, with its C{pillar=}
override) and run in a thread, as built-in blocking functions do.

C{__virtual__()} decides: C{False} or C{(False, reason)} skips the module
(logged with the reason), a string names it, anything else keeps it, named
by C{__virtualname__} or its file name. C{__func_alias__} renames
functions, as in Salt. A module that fails to import, or whose
C{__virtual__} raises, is logged with its path and the error and skipped:
the others load and the daemon runs on. A custom module named as a
built-in one replaces it whole, as Salt lets it (logged).

Custom grains (L{runGrainModules}): every public function of a C{_grains}
module is called (with the grains so far when it takes a C{grains}
argument) and each C{dict} it returns is merged. Precedence, as Salt's
loader applies it: core grains, then custom grain modules, then the grains
file, then the C{grains:} of the config (L{gatherGrains}).

Everything here that touches the disk or imports code blocks: callers run
it in a thread (L{reloadExtensions} does, with the loader context's
reactor), except at daemon start, before the reactor runs
(L{autoloadExtensions}).

Synced C{_states} are loaded by each state run, not here
(L{salttwist.state.extstates}, with Salt's dunders). Packages
(directories with C{__init__.py}) are copied but not loaded; only
top-level C{.py} files are.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import CoroutineType, ModuleType
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.threads import blockingCallFromThread
from twisted.logger import Logger

from salttwist.grains import coreGrains, grainsFilePath, readGrainsFile
from salttwist.modules import CommandExecutionError, LoaderContext, Retcode
from salttwist.modules._process import inThread, offReactorThread

log = Logger()

#: The kinds of custom code, by the name Salt's C{sync_<kind>} uses; each
#: comes from the C{_<kind>} folder of the file server.
KINDS = ("modules", "grains", "states", "utils", "runners")
#: The kinds a minion syncs (C{saltutil.sync_all}), in Salt's order.
MINION_KINDS = ("modules", "states", "grains", "utils")
#: The kinds a master syncs (C{salttwist-run saltutil.sync_all}).
MASTER_KINDS = ("runners", "utils")
#: The package synced modules are imported under.
PACKAGE = "salttwist_ext"
#: The file names synced (Salt also syncs C{.pyx}, C{.so} and C{.zip}
#: files, which salttwist does not load).
_SOURCE_SUFFIX = ".py"


def extensionModulesDir(opts: Mapping[str, Any]) -> str:
    """
    @return: C{extension_modules}, or C{<cachedir>/extmods} when it is not
        set (Salt's default, on the minion and the master).
    """
    configured = opts.get("extension_modules")
    if configured:
        return str(configured)
    return os.path.join(str(opts["cachedir"]), "extmods")


def sourceDir(kind: str) -> str:
    """
    @return: the file server's folder of C{kind}: C{_modules}.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind of custom module {kind!r}; one of {', '.join(KINDS)}")
    return f"_{kind}"


def saltenvList(saltenv: Any, opts: Mapping[str, Any]) -> list[str]:
    """
    The saltenvs to sync from: C{saltenv} (a name, a comma-separated list
    or a list), else the C{saltenv} option, else C{base}. (Salt syncs every
    saltenv of the top file when none is given; salttwist syncs C{base}.)

    @raise CommandExecutionError: if C{saltenv} is neither.
    """
    if saltenv is None or saltenv == "":
        saltenv = opts.get("saltenv") or "base"
    if isinstance(saltenv, str):
        envs = [env.strip() for env in saltenv.split(",")]
    elif isinstance(saltenv, list) and all(isinstance(env, str) for env in saltenv):
        envs = [env.strip() for env in saltenv]
    else:
        raise CommandExecutionError(
            f"saltenv must be a saltenv name or a comma-separated list of them, not {saltenv!r}"
        )
    envs = [env for env in envs if env]
    if not envs:
        raise CommandExecutionError("saltenv names no saltenv")
    return list(dict.fromkeys(envs))


def nameList(value: Any, kind: str, what: str) -> set[str] | None:
    """
    Salt's C{extmod_whitelist} / C{extmod_blacklist}: a mapping of kind to
    module names, or a comma-separated string of names for the kind being
    synced.

    @return: the names given for C{kind}, or L{None} when the list says
        nothing about it.
    @raise CommandExecutionError: if C{value} is neither form.
    """
    if value is None or value == "" or value == {}:
        return None
    if isinstance(value, str):
        return {name.strip() for name in value.split(",") if name.strip()}
    if isinstance(value, dict):
        names = value.get(kind)
        if names is None:
            return None
        if isinstance(names, str):
            return {name.strip() for name in names.split(",") if name.strip()}
        if isinstance(names, list) and all(isinstance(name, str) for name in names):
            return set(names)
    raise CommandExecutionError(
        f"{what} must be a mapping of kinds to lists of module names, or a comma-separated "
        f"string of names, not {value!r}"
    )


def _digest(path: str) -> bytes:
    import hashlib  # late: a minion that syncs nothing never loads libcrypto's

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.digest()


@dataclass
class SyncResult:
    """
    What one sync of one kind did.

    @ivar changed: Salt's names (C{modules.mymod}) of the files copied
        because they were new or changed.
    @ivar removed: the relative paths of the files removed because the file
        server no longer has them.
    """

    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def touched(self) -> bool:
        """
        Whether anything on disk changed (the modules must be reloaded).
        """
        return bool(self.changed or self.removed)


def installSynced(
    kind: str,
    fetched: Iterable[tuple[str, Iterable[str]]],
    destination: str,
    whitelist: set[str] | None = None,
    blacklist: set[str] | None = None,
    clean: bool = True,
) -> SyncResult:
    """
    Copy the files a file client fetched of one kind into C{destination}
    (blocking: call it in a thread). The first saltenv holding a file wins.

    @param kind: C{modules}, C{grains}, ...
    @param fetched: for each saltenv in order, the local folder the file
        client cached C{_<kind>} into and the cached files under it.
    @param destination: C{extension_modules/<kind>}, made if missing
        (mode 0700).
    @param whitelist: if not L{None}, only these module names are synced.
    @param blacklist: these module names are not synced.
    @param clean: remove files of C{destination} the file server does not
        have (Salt's C{clean_dynamic_modules}).
    @return: what changed.
    @raise CommandExecutionError: if a fetched file lies outside its folder
        or the destination cannot be written.
    """
    files: list[tuple[str, str]] = []
    for cacheRoot, cachedFiles in fetched:
        for cached in sorted(cachedFiles):
            relPath = os.path.relpath(cached, cacheRoot)
            if relPath.startswith(os.pardir + os.sep) or os.path.isabs(relPath):
                raise CommandExecutionError(f"{cached} is not under {cacheRoot}")
            files.append((relPath, cached))
    return installFiles(kind, files, destination, whitelist, blacklist, clean)


def installFiles(
    kind: str,
    files: Iterable[tuple[str, str]],
    destination: str,
    whitelist: set[str] | None = None,
    blacklist: set[str] | None = None,
    clean: bool = True,
) -> SyncResult:
    """
    Copy files of one kind into C{destination} (blocking), as
    L{installSynced} does.

    @param files: C{(relative path, file to copy)} pairs in order of
        preference: the first of a relative path wins.
    """
    # Two syncs at once (two jobs, or a runner and a job) copy one at a time.
    with _INSTALL_LOCK:
        return _installFiles(kind, files, destination, whitelist, blacklist, clean)


#: Held while files are copied into an extension_modules folder.
_INSTALL_LOCK = threading.Lock()


def _installFiles(
    kind: str,
    files: Iterable[tuple[str, str]],
    destination: str,
    whitelist: set[str] | None,
    blacklist: set[str] | None,
    clean: bool,
) -> SyncResult:
    result = SyncResult()
    try:
        os.makedirs(destination, mode=0o700, exist_ok=True)
    except OSError as e:
        raise CommandExecutionError(f"cannot create {destination}: {e.strerror or e}") from e
    remote: set[str] = set()
    for relPath, source in files:
        if not relPath.endswith(_SOURCE_SUFFIX) or "__pycache__" in relPath.split(os.sep):
            continue
        if relPath in remote:
            continue
        name = relPath[: -len(_SOURCE_SUFFIX)].replace(os.sep, ".")
        if whitelist is not None and name not in whitelist:
            continue
        if blacklist is not None and name in blacklist:
            continue
        remote.add(relPath)
        target = os.path.join(destination, relPath)
        try:
            if os.path.isfile(target) and _digest(target) == _digest(source):
                continue
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            # Written beside and renamed: a loader never reads half a file.
            partial = f"{target}.partial"
            shutil.copyfile(source, partial)
            os.replace(partial, target)
        except OSError as e:
            raise CommandExecutionError(
                f"cannot copy {source} to {target}: {e.strerror or e}"
            ) from e
        log.info("synced {kind} {name} into {target}", kind=kind, name=name, target=target)
        result.changed.append(f"{kind}.{name}")
    if clean:
        result.removed = _clean(destination, remote)
    return result


def _clean(destination: str, keep: set[str]) -> list[str]:
    """
    Remove the files of C{destination} not in C{keep} (relative paths), and
    the folders left empty (C{__pycache__} folders are left alone).

    @return: the relative paths of the files removed.
    """
    removed = []
    for root, _dirs, files in os.walk(destination, topdown=False):
        for name in files:
            path = os.path.join(root, name)
            relPath = os.path.relpath(path, destination)
            if relPath in keep:
                continue
            if "__pycache__" in relPath.split(os.sep):
                continue
            os.remove(path)
            removed.append(relPath)
            log.info("removed {path}: the file server no longer has it", path=path)
        if root != destination and not os.listdir(root):
            os.rmdir(root)
    return sorted(removed)


async def syncKinds(
    context: LoaderContext,
    kinds: Iterable[str],
    saltenv: Any = None,
    refresh: bool = True,
    extmodWhitelist: Any = None,
    extmodBlacklist: Any = None,
    refreshPillar: bool = False,
) -> dict[str, list[str]]:
    """
    Sync each of C{kinds} from the file server through
    C{context.fileClient} (on the reactor thread: the fetches are the file
    client's, the copies run in a thread), then, with C{refresh}, reload
    the custom code (L{reloadExtensions}) even if nothing changed, as
    Salt's C{refresh} does, and with C{refreshPillar} too ask for the
    pillar again without waiting for it (Salt's C{sync_grains} and
    C{sync_all}: grains may change what the pillar's top file matches).

    @return: for each kind, Salt's names of the files copied.
    @raise CommandExecutionError: with no file client, a saltenv the file
        server refuses, no session to the master, or a copy that fails.
    """
    fileClient = context.fileClient
    if fileClient is None:
        raise CommandExecutionError(
            "custom modules cannot be synced: this minion has no file client"
        )
    envs = saltenvList(saltenv, context.opts)
    extDir = extensionModulesDir(context.opts)
    clean = context.opts.get("clean_dynamic_modules", True) is not False
    results: dict[str, list[str]] = {}
    for kind in kinds:
        whitelist = nameList(extmodWhitelist, kind, "extmod_whitelist")
        blacklist = nameList(extmodBlacklist, kind, "extmod_blacklist")
        fetched = []
        for env in envs:
            folder = sourceDir(kind)
            try:
                files = await fileClient.cacheDir(f"salt://{folder}", env)
            except (ValueError, ConnectionError, OSError) as e:
                raise CommandExecutionError(
                    f"cannot sync {folder} from saltenv {env!r}: {e}"
                ) from e
            fetched.append((fileClient.cachedPath(folder, env), list(files or [])))
        result = await inThread(
            context.reactor,
            installSynced,
            kind,
            fetched,
            os.path.join(extDir, kind),
            whitelist,
            blacklist,
            clean,
        )
        results[kind] = result.changed
    if refresh:
        await reloadExtensions(context)
        if refreshPillar and context.refreshPillar is not None:
            _refreshPillarLater(context)
    return results


def _refreshPillarLater(context: LoaderContext) -> None:
    """
    Ask for the pillar again, not waiting for it (Salt's
    C{refresh_pillar(wait=False)}); a failure is logged.
    """
    assert context.refreshPillar is not None
    try:
        d = maybeDeferred(context.refreshPillar)
    except Exception:
        log.failure("pillar refresh after a sync failed")
        return
    d.addErrback(lambda f: log.failure("pillar refresh after a sync failed", f))


# -- loading ------------------------------------------------------------------


class LivePillar(Mapping[str, Any]):
    """
    C{__pillar__}: the minion's pillar as it is when read
    (C{LoaderContext.pillar}, which a refresh replaces whole).
    """

    def __init__(self, context: LoaderContext) -> None:
        self._context = context

    @property
    def _pillar(self) -> Mapping[str, Any]:
        # A job's own context (its pillar= override) while one of its
        # functions runs, else the minion's.
        return (_JOB_CONTEXT.get() or self._context).pillar

    def __getitem__(self, key: str) -> Any:
        return self._pillar[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._pillar))

    def __len__(self) -> int:
        return len(self._pillar)

    def __repr__(self) -> str:
        return f"LivePillar({sorted(self._pillar)!r})"


#: The loader context of the job whose custom function runs now (in this
#: thread): L{jobFunction} sets it, L{LivePillar} and L{SaltFunctions}
#: read it.
_JOB_CONTEXT: ContextVar[LoaderContext | None] = ContextVar("_JOB_CONTEXT", default=None)


def jobFunction(function: Callable[..., Any]) -> Callable[..., Any]:
    """
    Wrap a custom execution function (Salt's form: plain arguments) so it
    takes the job's loader context as salttwist's functions marked
    L{needsContext <salttwist.modules.needsContext>} do, and runs with it
    as the current job's: its C{__pillar__} is then that job's pillar
    (with a job's C{pillar=} override). Its signature, name and docstring
    stay the function's (with the context first, as C{sys.argspec}
    expects). A function already marked to take the context or to run on
    the reactor (a module written for salttwist) is returned as it is.
    """
    if getattr(function, "needsContext", False) or getattr(function, "runsOnReactor", False):
        return function

    def run(context: LoaderContext, *args: Any, **kwargs: Any) -> Any:
        token = _JOB_CONTEXT.set(context)
        try:
            return function(*args, **kwargs)
        finally:
            _JOB_CONTEXT.reset(token)

    signature = inspect.signature(function)
    contextParameter = inspect.Parameter("context", inspect.Parameter.POSITIONAL_ONLY)
    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[contextParameter, *signature.parameters.values()]
    )
    run.__name__ = function.__name__
    run.__qualname__ = function.__qualname__
    run.__doc__ = function.__doc__
    run.__module__ = function.__module__
    run.needsContext = True  # type: ignore[attr-defined]
    run.customFunction = function  # type: ignore[attr-defined]
    return run


def _awaitable(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """
    Call C{function} on the reactor thread; a coroutine it returns becomes
    a L{Deferred}.
    """
    value = function(*args, **kwargs)
    if isinstance(value, CoroutineType):
        return Deferred.fromCoroutine(value)
    return value


class SaltFunctions(Mapping[str, Callable[..., Any]]):
    """
    C{__salt__}: every execution function by name, callable from a custom
    module as in Salt (C{__salt__["test.ping"]()}).

    A function marked L{needsContext <salttwist.modules.needsContext>} gets
    the loader context first. One marked L{onReactor
    <salttwist.modules.onReactor>} is called on the reactor thread and
    waited for (C{blockingCallFromThread}) when called from a thread, as
    custom functions run, unless it offers a blocking twin for threads (its
    C{offReactor} attribute, taking the same arguments: C{cmd.retcode}
    runs a state's C{unless} in the state's thread), which is then called
    there; on the reactor thread it is called directly. A L{Retcode} is
    unwrapped to its value.
    """

    def __init__(self, context: LoaderContext) -> None:
        self._context = context

    def __getitem__(self, key: str) -> Callable[..., Any]:
        function = self._context.functions[key]

        def call(*args: Any, **kwargs: Any) -> Any:
            context = _JOB_CONTEXT.get() or self._context
            if getattr(function, "needsContext", False):
                args = (context, *args)
            if getattr(function, "runsOnReactor", False) and offReactorThread(context.reactor):
                here = getattr(function, "offReactor", None)
                if here is not None:
                    value = here(*args, **kwargs)
                else:
                    value = blockingCallFromThread(
                        context.reactor, maybeDeferred, _awaitable, function, *args, **kwargs
                    )
            else:
                value = function(*args, **kwargs)
            return value.value if isinstance(value, Retcode) else value

        call.__name__ = key
        call.__doc__ = function.__doc__
        return call

    def __iter__(self) -> Iterator[str]:
        return iter(self._context.functions)

    def __len__(self) -> int:
        return len(self._context.functions)

    def __contains__(self, key: object) -> bool:
        try:
            self._context.functions[key]  # type: ignore[index]
        except KeyError:
            return False
        return True


@dataclass
class LoadedModule:
    """
    One custom module that loaded.

    @ivar name: the name it loads as (C{__virtual__}'s string,
        C{__virtualname__} or its file name).
    @ivar path: the file it came from.
    @ivar functions: its public functions by C{name.function}.
    """

    name: str
    path: str
    module: ModuleType
    functions: dict[str, Callable[..., Any]]


def _publicFunctions(module: ModuleType, name: str) -> dict[str, Callable[..., Any]]:
    """
    Salt's loader: the public functions defined in C{module} (not
    imported), renamed by C{__func_alias__}.
    """
    aliases = getattr(module, "__func_alias__", None)
    if not isinstance(aliases, dict):
        aliases = {}
    functions: dict[str, Callable[..., Any]] = {}
    for attr, value in vars(module).items():
        if attr.startswith("_") or not inspect.isfunction(value):
            continue
        if value.__module__ != module.__name__:
            continue
        functions[f"{name}.{aliases.get(attr, attr)}"] = value
    return functions


def _virtualName(module: ModuleType, fileName: str, path: str, kind: str) -> str | None:
    """
    Call C{__virtual__} if the module has one.

    @return: the name the module loads as, or L{None} if it declined
        (logged with its reason).
    """
    virtualName = getattr(module, "__virtualname__", None)
    name = virtualName if isinstance(virtualName, str) and virtualName else fileName
    virtual = getattr(module, "__virtual__", None)
    if not callable(virtual):
        return name
    answer = virtual()
    reason = None
    if isinstance(answer, tuple) and answer and answer[0] is False:
        reason = answer[1] if len(answer) > 1 else None
        answer = False
    if answer is False:
        log.info(
            "custom {kind} module {path} not loaded: __virtual__ returned False{why}",
            kind=kind,
            path=path,
            why=f" ({reason})" if reason else "",
        )
        return None
    if isinstance(answer, str) and answer:
        return answer
    return name


def importModuleFile(path: str, kind: str, dunders: Mapping[str, Any]) -> LoadedModule | None:
    """
    Import one custom module from C{path} (blocking) with C{dunders} in its
    globals, and ask its C{__virtual__}.

    @return: the module and its functions, or L{None} if it failed to
        import (logged with its path and the error) or declined.
    """
    fileName = os.path.basename(path)[: -len(_SOURCE_SUFFIX)]
    fullName = f"{PACKAGE}.{kind}.{fileName}"
    module: ModuleType | None = None
    try:
        spec = importlib.util.spec_from_file_location(fullName, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot make an import spec for {path}")
        module = importlib.util.module_from_spec(spec)
        vars(module).update(dunders)
        # In sys.modules while it runs, as an import does (dataclasses and
        # pickling look a module up there); replaced at each reload.
        sys.modules[fullName] = module
        # Compiled from the source each time, never from a __pycache__ file
        # (whose check, by mtime in seconds and size, could miss a change
        # synced within the same second).
        with open(path, "rb") as f:
            source = f.read()
        exec(compile(source, path, "exec", dont_inherit=True), vars(module))
        vars(module).update(dunders)
        name = _virtualName(module, fileName, path, kind)
    except (Exception, SystemExit) as e:
        # SystemExit too: a module calling sys.exit() must not stop the daemon.
        if module is not None and sys.modules.get(fullName) is module:
            del sys.modules[fullName]
        log.error(
            "custom {kind} module {path} failed to load and is skipped: {error}",
            kind=kind,
            path=path,
            error=f"{type(e).__name__}: {e}",
        )
        return None
    if name is None:
        return None
    return LoadedModule(name, path, module, _publicFunctions(module, name))


def loadExtensionModules(
    directory: str, kind: str, dunders: Mapping[str, Any]
) -> list[LoadedModule]:
    """
    Import every C{.py} file at the top of C{directory} (blocking), sorted
    by file name; a missing directory has none.

    @return: the modules that loaded; when two load as the same name, the
        later file wins (logged).
    """
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    except OSError as e:
        log.error(
            "cannot list custom {kind} modules in {dir}: {error}", kind=kind, dir=directory, error=e
        )
        return []
    loaded: dict[str, LoadedModule] = {}
    for fileName in names:
        path = os.path.join(directory, fileName)
        if not fileName.endswith(_SOURCE_SUFFIX) or fileName.startswith("."):
            continue
        if not os.path.isfile(path):
            continue
        module = importModuleFile(path, kind, dunders)
        if module is None:
            continue
        if module.name in loaded:
            log.warn(
                "custom {kind} modules {first} and {second} both load as {name}: {second} wins",
                kind=kind,
                first=loaded[module.name].path,
                second=path,
                name=module.name,
            )
        loaded[module.name] = module
    return list(loaded.values())


@dataclass
class Extensions:
    """
    The custom code of one load: execution-module functions, utils
    functions and custom grains.
    """

    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)
    utils: dict[str, Callable[..., Any]] = field(default_factory=dict)
    grainModules: list[LoadedModule] = field(default_factory=list)
    #: The built-in modules' names, when there are custom modules.
    builtins: set[str] = field(default_factory=set)


def loadUtils(
    extDir: str, opts: Mapping[str, Any], sharedContext: dict[str, Any]
) -> dict[str, Callable[..., Any]]:
    """
    Load the synced C{_utils} modules (blocking).

    @return: C{__utils__}: their functions by C{name.function}.
    """
    utils: dict[str, Callable[..., Any]] = {}
    dunders = {"__opts__": opts, "__context__": sharedContext, "__utils__": utils}
    for module in loadExtensionModules(os.path.join(extDir, "utils"), "utils", dunders):
        utils.update(module.functions)
    return utils


def loadExtensions(context: LoaderContext, withGrains: bool = True) -> Extensions:
    """
    Load the synced custom code of a minion (blocking): C{_utils}, then
    C{_modules} (with Salt's dunders bound to C{context}), then
    C{_grains}.
    """
    extDir = extensionModulesDir(context.opts)
    sharedContext: dict[str, Any] = {}
    extensions = Extensions()
    extensions.utils = loadUtils(extDir, context.opts, sharedContext)
    dunders = {
        "__opts__": context.opts,
        "__grains__": context.grains,
        "__pillar__": LivePillar(context),
        "__salt__": SaltFunctions(context),
        "__context__": sharedContext,
        "__utils__": extensions.utils,
    }
    for module in loadExtensionModules(os.path.join(extDir, "modules"), "modules", dunders):
        extensions.functions.update(
            (name, jobFunction(function)) for name, function in module.functions.items()
        )
        extensions.modules[module.name] = module.path
    builtinModules = getattr(context.functions, "builtinModules", None)
    if extensions.modules and builtinModules is not None:
        # Imports every built-in module (here, in the loading thread), only
        # when there are custom ones that may replace some.
        extensions.builtins = set(builtinModules())
    if withGrains:
        grainDunders = {
            "__opts__": context.opts,
            "__context__": sharedContext,
            "__utils__": extensions.utils,
            "__pillar__": LivePillar(context),
        }
        extensions.grainModules = loadExtensionModules(
            os.path.join(extDir, "grains"), "grains", grainDunders
        )
    return extensions


def runGrainModules(modules: Iterable[LoadedModule], grains: Mapping[str, Any]) -> dict[str, Any]:
    """
    Call every public function of the custom grain modules (blocking), as
    Salt does: modules by file name, functions in the order they are
    defined, each with the grains so far when it takes a C{grains}
    argument.
    A function that raises, or returns something other than a C{dict}, is
    logged and skipped.

    @param grains: the grains before the custom ones (not changed).
    @return: the custom grains.
    """
    custom: dict[str, Any] = {}
    for module in modules:
        for name, function in module.functions.items():
            try:
                parameters = inspect.signature(function).parameters
                if "grains" in parameters:
                    value = function(grains={**grains, **custom})
                else:
                    value = function()
            except Exception as e:
                log.error(
                    "custom grain function {name} of {path} failed and is skipped: {error}",
                    name=name,
                    path=module.path,
                    error=f"{type(e).__name__}: {e}",
                )
                continue
            if isinstance(value, dict):
                custom.update(value)
            elif value is not None:
                log.warn(
                    "custom grain function {name} of {path} returned a {type}, not a dict: ignored",
                    name=name,
                    path=module.path,
                    type=type(value).__name__,
                )
    return custom


def mergeGrains(
    core: Mapping[str, Any], custom: Mapping[str, Any], opts: Mapping[str, Any]
) -> dict[str, Any]:
    """
    Salt's precedence: the core grains, the custom grains over them, then
    the grains file and the config's C{grains:} over both (blocking: it
    reads the grains file).
    """
    merged = dict(core)
    merged.update(custom)
    if opts.get("conf_file"):
        merged.update(readGrainsFile(grainsFilePath(dict(opts))))
    merged.update(opts.get("grains") or {})
    return merged


def gatherGrains(
    context: LoaderContext, grainModules: Iterable[LoadedModule] | None
) -> dict[str, Any]:
    """
    Gather the minion's grains again (blocking): core grains, the grains
    file and the config's, and the custom grains of C{grainModules} in
    Salt's precedence (L{mergeGrains}).
    """
    opts = context.opts
    grainsFile = grainsFilePath(opts) if opts.get("conf_file") else None
    core = coreGrains(context.grains["id"], opts.get("grains") or {}, grainsFile)
    custom = runGrainModules(grainModules or [], core)
    return mergeGrains(core, custom, opts)


def installExtensions(context: LoaderContext, extensions: Extensions) -> None:
    """
    Make C{extensions}' functions the custom ones of C{context.functions}
    (a L{LazyFunctions <salttwist.modules.LazyFunctions>}; other mappings
    get them set in), logging each custom module that replaces a built-in
    one.
    """
    functions = context.functions
    setExtensions = getattr(functions, "setExtensions", None)
    if setExtensions is not None:
        for name in sorted(set(extensions.modules) & extensions.builtins):
            log.warn(
                "custom module {path} replaces the built-in module {name}",
                path=extensions.modules[name],
                name=name,
            )
        setExtensions(extensions.functions)
    else:
        functions.update(extensions.functions)
    if extensions.modules:
        names = ", ".join(sorted(extensions.modules))
        log.info("custom execution modules loaded: {names}", names=names)


def _replaceGrains(context: LoaderContext, grains: dict[str, Any]) -> bool:
    """
    Replace the contents of C{context.grains} (the same mapping custom
    modules hold as C{__grains__}).

    @return: whether they changed.
    """
    if grains == context.grains:
        return False
    context.grains.clear()
    context.grains.update(grains)
    return True


def autoloadExtensions(context: LoaderContext) -> None:
    """
    At daemon start, before the reactor runs (blocking): load the synced
    custom modules into C{context.functions} and merge the custom grains
    into C{context.grains}.
    """
    extensions = loadExtensions(context)
    installExtensions(context, extensions)
    if extensions.grainModules:
        custom = runGrainModules(extensions.grainModules, context.grains)
        base = dict(context.grains)
        _replaceGrains(context, mergeGrains(base, custom, context.opts))


def reloadExtensions(context: LoaderContext) -> Deferred[bool]:
    """
    Load the synced custom code again (Salt's C{refresh_modules}): import
    in a thread, then, on the reactor thread, install the functions and
    replace the grains (core, custom, file and config, gathered again in
    the thread), reporting them with C{context.onGrainsChanged} if they
    changed.

    @return: a L{Deferred} firing with C{True}.
    """

    def load() -> tuple[Extensions, dict[str, Any]]:
        extensions = loadExtensions(context)
        return extensions, gatherGrains(context, extensions.grainModules)

    def install(loaded: tuple[Extensions, dict[str, Any]]) -> bool:
        extensions, grains = loaded
        installExtensions(context, extensions)
        if _replaceGrains(context, grains) and context.onGrainsChanged is not None:
            context.onGrainsChanged()
        return True

    return inThread(context.reactor, load).addCallback(install)


def refreshGrains(context: LoaderContext) -> Deferred[bool]:
    """
    Gather the grains again (core, custom grain modules, file, config) in
    a thread and report them with C{context.onGrainsChanged} (Salt's
    C{saltutil.refresh_grains}). Custom grain modules load only if
    C{autoload_dynamic_modules} is on.

    @return: a L{Deferred} firing with C{True}.
    """

    def gather() -> dict[str, Any]:
        modules = None
        if context.opts.get("autoload_dynamic_modules", True):
            extDir = extensionModulesDir(context.opts)
            modules = loadExtensionModules(
                os.path.join(extDir, "grains"),
                "grains",
                {"__opts__": context.opts, "__context__": {}, "__pillar__": LivePillar(context)},
            )
        return gatherGrains(context, modules)

    def apply(grains: dict[str, Any]) -> bool:
        context.grains.clear()
        context.grains.update(grains)
        if context.onGrainsChanged is not None:
            context.onGrainsChanged()
        return True

    return inThread(context.reactor, gather).addCallback(apply)


# -- the master's custom code (runners) --------------------------------------


def syncFromFileServer(
    fileServer: Any,
    kind: str,
    envs: Iterable[str],
    destination: str,
    whitelist: set[str] | None = None,
    blacklist: set[str] | None = None,
    clean: bool = True,
) -> SyncResult:
    """
    Sync one kind from the master's own file server (blocking: the file
    server's methods and the copies block): the files of C{_<kind>/} of
    each saltenv, read where the file server finds them.

    @param fileServer: a L{salttwist.fileserver.server.FileServer}.
    @raise ValueError: naming the saltenv, if the file server refuses it.
    """
    folder = sourceDir(kind)
    files: list[tuple[str, str]] = []
    for env in envs:
        try:
            listed = fileServer.fileList(env, f"{folder}/")
            for path in listed:
                found = fileServer.findFile(path, env)
                if found is not None:
                    relPath = path[len(folder) + 1 :]
                    files.append((os.path.join(*relPath.split("/")), found.realPath))
        except ValueError as e:
            raise ValueError(f"cannot sync {folder} from saltenv {env!r}: {e}") from e
    return installFiles(kind, files, destination, whitelist, blacklist, clean)


def loadCustomRunners(opts: Mapping[str, Any]) -> list[LoadedModule]:
    """
    Load the master's synced C{_runners} modules (blocking), with
    C{__opts__} (the master's config), C{__context__} and C{__utils__}
    (the master's synced C{_utils}) in their globals.
    """
    if not opts.get("extension_modules") and not opts.get("cachedir"):
        return []
    extDir = extensionModulesDir(opts)
    sharedContext: dict[str, Any] = {}
    utils = loadUtils(extDir, opts, sharedContext)
    dunders = {"__opts__": opts, "__context__": sharedContext, "__utils__": utils}
    return loadExtensionModules(os.path.join(extDir, "runners"), "runners", dunders)
