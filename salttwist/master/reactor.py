# -*- test-case-name: tests.test_reactor -*-
"""
Salt's reactor: run actions when events whose tags match a glob appear on
the master's event bus.

The master option C{reactor} maps tag globs to reaction files (Salt's
format)::

    reactor:
      - 'salt/minion/*/start':
        - /srv/reactor/start.sls

Each reaction file is a Jinja2 template rendered with C{tag} and C{data}
(the event's tag and data, Salt's names) into YAML that maps state ids to
one action each, in Salt's reactor SLS form::

    {% if data['id'].startswith('web') %}
    ping_new_web:
      local.test.ping:
        - tgt: {{ data['id'] }}
    {% endif %}
    report:
      runner.manage.up: []
    tell:
      event.send:
        - tag: myco/started/{{ data['id'] }}
        - data: {id: {{ data['id'] }}}

Action kinds: C{local.<fun>} (Salt's alias C{cmd.<fun>}) publishes a job to
minions (C{tgt}, C{tgt_type} or the old C{expr_form}, C{arg}, C{kwarg}, or
Salt 3000+'s C{args} form); C{runner.<fun>} runs a runner in the master
(C{arg}/C{kwarg}, C{args}, or the old form where every other key is a
keyword argument); C{event.send} (also spelled C{runner.event.send}) fires
C{tag} with C{data} on the master's bus. C{wheel.*} and C{caller.*} are
Salt's too but have nothing to run here: they fail as unknown.

How it runs:

  - The bus callback only matches the tag and queues; nothing of a
    reaction runs inside the bus's C{fire}. Every matching event reacts, and
    every reaction (one event and one reaction file) is independent: its
    own L{Deferred}, its own failure.
  - At most C{reactor_worker_threads} reactions are in flight at once and at
    most C{reactor_worker_hwm} wait; a reaction that finds the queue full is
    dropped, logged, and reported as a C{salt/reactor/error} event.
  - Files are read in a thread (C{runBlocking}), every time, so an edited
    file takes effect at the next event. A C{salt://} path
    (C{salt://reactor/start.sls}, C{?saltenv=dev} for another saltenv than
    C{base}) is read from the master's file server (its C{file_roots} or
    gitfs), in the same thread; one the file server does not have is a
    failure naming it, reported as every other. Rendering and YAML parsing run in
    a thread too: a small file renders in well under a millisecond (the
    compiled template is cached while the file is unchanged), but one that
    embeds C{{{ data }}} of a big event (a 1 MB return) takes far longer,
    and the reactor must keep serving meanwhile (the GIL is shared, but the
    reactor gets its turns); files over L{MAX_REACTION_FILE_BYTES} are
    refused.
    The files are the admin's, like the config; the sandbox keeps event
    data (which minions control) from reaching Python internals, it does not
    bound the CPU a file's own loops may take.
  - Any failure (unreadable file, template error such as an undefined
    variable, YAML error, malformed action, unknown function, bad target,
    runner failure) is logged and fired as C{salt/reactor/error} with
    C{tag}, C{file} and C{error} (and C{id} and C{fun} for one action).
    A reaction to a C{salt/reactor/error} event that fails is only logged,
    so a broken error handler cannot feed itself.

In a cluster (C{cluster_id}) every master's bus also carries the other
masters' events: their minions' returns and events, their C{salt/key},
C{salt/auth}, starts and presence (L{salttwist.cluster.fanout}), each with
C{_cluster_origin} in its data. A reactor on every master must not act on
one event once per master (accept a key three times, run a job three
times), so it reacts only to events without C{_cluster_origin}: each event
reacts once in the cluster, on the master where it happened (a minion's
return on the master it is connected to, C{salttwist-key}'s change on the
master whose config the command used). With C{reactor_cluster_events:
True} a master reacts to the other masters' events too: for a reactor
configured on one master only.

Loops: as in Salt, events whose data carries C{user: Reactor} (the
C{salt/job/<jid>/new} and C{salt/run/<jid>/...} events of the jobs and
runners reactions start, which run as user C{Reactor}) do not react. Every
other event a reaction causes does: the returns of its jobs, the events it
sends, a minion's start. A reaction that causes an event it matches (a
C{'*'} glob with C{event.send}) loops, as it does in Salt.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from jinja2 import StrictUndefined, Template, TemplateError, TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist import serial
from salttwist.cluster.fanout import fromCluster
from salttwist.fileserver.interfaces import FileServerError
from salttwist.fileserver.paths import SALT_SCHEME, parseSaltUrl
from salttwist.interfaces import IEventBus

if TYPE_CHECKING:
    from salttwist.master.interfaces import IReactorMaster

#: The user reactions run jobs and runners as (Salt's C{ReactWrap.event_user});
#: events carrying it do not react.
REACTOR_USER = "Reactor"
#: The tag of the event fired when a reaction fails.
ERROR_TAG = "salt/reactor/error"
#: The largest reaction file read.
MAX_REACTION_FILE_BYTES = 1024 * 1024
#: The longest tag C{event.send} fires (as the event pull socket allows).
MAX_TAG_LENGTH = 512

_GLOB_CHARS = re.compile(r"[*?\[]")
_YAMLLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Keys every action accepts and ignores: the state compiler's (Salt adds
#: C{name}); all actions of a file start at once, so C{order} has no effect.
_IGNORED = frozenset({"name", "order"})
_LOCAL_KEYS = frozenset({"tgt", "tgt_type", "expr_form", "arg", "kwarg", "args"}) | _IGNORED
_EVENT_KEYS = frozenset({"tag", "data", "args"}) | _IGNORED


class ReactionError(Exception):
    """
    A reaction file, or one of its actions, cannot be run.
    """


@dataclass(frozen=True)
class Action:
    """
    One action of a rendered reaction file.

    @ivar stateId: the state id it is under.
    @ivar kind: C{"local"}, C{"runner"} or C{"event"}.
    @ivar fun: the function (C{test.ping}, C{manage.up}, C{send}).
    @ivar params: its parameters, merged from Salt's list of single-key maps.
    """

    stateId: str
    kind: str
    fun: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        """
        The action as written, for messages: C{local.test.ping}.
        """
        return f"{self.kind}.{self.fun}"


@dataclass
class _Reaction:
    """
    One event to react to with one reaction file (as configured).
    """

    tag: str
    data: dict[str, Any]
    fileSpec: str


def _mergeParams(value: Any, where: str) -> dict[str, Any]:
    """
    Salt's action parameters: a list of single-key maps (or nothing).
    """
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ReactionError(f"{where}: parameters must be a list of '- key: value' items")
    params: dict[str, Any] = {}
    for item in value:
        if not isinstance(item, dict) or len(item) != 1:
            raise ReactionError(
                f"{where}: parameters must be a list of '- key: value' items, not {item!r}"
            )
        ((key, itemValue),) = item.items()
        if not isinstance(key, str):
            raise ReactionError(f"{where}: parameter names must be strings, not {key!r}")
        params[key] = itemValue
    return params


def _argsForm(value: Any, where: str) -> dict[str, Any]:
    """
    Salt 3000+'s C{args}: keyword arguments as a list of single-key maps
    (or one map).
    """
    if isinstance(value, dict):
        kwargs = value
    elif isinstance(value, list) and all(isinstance(i, dict) and len(i) == 1 for i in value):
        kwargs = {k: v for item in value for k, v in item.items()}
    else:
        raise ReactionError(f"{where}: 'args' must be a list of '- name: value' items")
    if not all(isinstance(k, str) for k in kwargs):
        raise ReactionError(f"{where}: argument names in 'args' must be strings")
    return dict(kwargs)


def callArguments(action: Action, extraKwargs: bool) -> tuple[list[Any], dict[str, Any]]:
    """
    The positional and keyword arguments of an action, from either of
    Salt's forms: C{args} (keyword arguments only), or C{arg} (a list, or
    one value) and C{kwarg} (a map); with C{extraKwargs}, every other key
    not in L{_IGNORED} is a keyword argument too (Salt's old runner form).

    @raise ReactionError: if the forms are mixed or malformed.
    """
    params, where = action.params, f"{action.stateId} ({action.spec})"
    known = {"arg", "kwarg", "args", "tgt", "tgt_type", "expr_form", *_IGNORED}
    extra = {k: v for k, v in params.items() if k not in known} if extraKwargs else {}
    if "args" in params:
        if "arg" in params or "kwarg" in params or extra:
            raise ReactionError(f"{where}: use either 'args' or 'arg'/'kwarg', not both")
        return [], _argsForm(params["args"], where)
    arg = params.get("arg", [])
    if arg is None:
        arg = []
    elif not isinstance(arg, list):
        arg = [arg]
    kwarg = params.get("kwarg") or {}
    if not isinstance(kwarg, dict) or not all(isinstance(k, str) for k in kwarg):
        raise ReactionError(f"{where}: 'kwarg' must be a mapping of names to values")
    return list(arg), {**extra, **kwarg}


def wireArguments(args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """
    @return: Salt's wire argument list (keyword arguments as a map marked
        C{__kwarg__}).
    """
    return [*args, {**kwargs, "__kwarg__": True}] if kwargs else list(args)


def parseReaction(high: Any, runners: Mapping[str, Any]) -> list[Action]:
    """
    Check a rendered reaction file and list its actions, in file order.
    Nothing runs if any action is malformed (as Salt's C{verify_high}).

    @param high: the file's YAML, after rendering.
    @param runners: the master's runner functions, by name.
    @raise ReactionError: naming the state id at fault.
    """
    if high is None:
        return []
    if not isinstance(high, dict):
        raise ReactionError(
            f"a reaction file must render to a mapping of state ids, not {type(high).__name__}"
        )
    actions: list[Action] = []
    for stateId, block in high.items():
        if not isinstance(block, dict) or not block:
            raise ReactionError(
                f"{stateId}: must map an action (such as local.test.ping) to its parameters"
            )
        for spec, value in block.items():
            where = f"{stateId} ({spec})"
            kind, _, fun = str(spec).partition(".")
            if kind == "cmd":
                kind = "local"
            if (kind, fun) in (("event", "send"), ("runner", "event.send")):
                kind, fun = "event", "send"
            if kind not in ("local", "runner", "event") or not fun:
                raise ReactionError(
                    f"{where}: unknown action; use local.<function>, runner.<function> or "
                    "event.send"
                )
            params = _mergeParams(value, where)
            allowed = {"local": _LOCAL_KEYS, "event": _EVENT_KEYS}.get(kind)
            if allowed is not None and set(params) - allowed:
                unknown = ", ".join(sorted(set(params) - allowed))
                raise ReactionError(
                    f"{where}: unsupported parameter(s) {unknown}; supported: "
                    + ", ".join(sorted(allowed - _IGNORED))
                )
            try:
                serial.dumps(params)
            except serial.SerialError as e:
                raise ReactionError(
                    f"{where}: {e} (quote values YAML reads as dates or other types)"
                ) from e
            action = Action(str(stateId), kind, fun, params)
            if kind == "local":
                if "tgt" not in params:
                    raise ReactionError(f"{where}: a local action needs a 'tgt'")
                callArguments(action, extraKwargs=False)
            elif kind == "runner":
                if fun not in runners:
                    raise ReactionError(f"{where}: '{fun}' is not available.")
                callArguments(action, extraKwargs=True)
            else:
                eventArguments(action)
            actions.append(action)
    return actions


def eventArguments(action: Action) -> tuple[str, dict[str, Any]]:
    """
    @return: the tag and data of an C{event.send} action.
    @raise ReactionError: if they are missing or malformed.
    """
    where = f"{action.stateId} ({action.spec})"
    params = action.params
    if "args" in params:
        if set(params) - _IGNORED - {"args"}:
            raise ReactionError(f"{where}: use either 'args' or 'tag'/'data', not both")
        params = _argsForm(params["args"], where)
    tag, data = params.get("tag"), params.get("data")
    if not isinstance(tag, str) or not tag or len(tag) > MAX_TAG_LENGTH:
        raise ReactionError(f"{where}: 'tag' must be a non-empty string of at most 512 characters")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ReactionError(f"{where}: 'data' must be a mapping")
    return tag, data


def _tagPrefix(tagGlob: str) -> str:
    """
    @return: the literal start of a glob (the bus filters by prefix).
    """
    match = _GLOB_CHARS.search(tagGlob)
    return tagGlob if match is None else tagGlob[: match.start()]


def readReactionFiles(
    fileSpec: str, configDir: str, fileServer: Any = None
) -> list[tuple[str, str]]:
    """
    Read the files of one configured reaction entry (blocking: call it in a
    thread). A relative path is taken from the config directory; a path
    with glob characters reads every matching file, in sorted order. A
    C{salt://} URL (C{salt://reactor/start.sls}, C{?saltenv=} for another
    saltenv than C{base}) is one file of the master's file server, read
    where C{fileServer} finds it; its pair is named by the URL.

    @param fileServer: the master's L{salttwist.fileserver.server.FileServer},
        for C{salt://} URLs.
    @return: (path, text) pairs.
    @raise ReactionError: if no file matches, one cannot be read, is too
        large, or is not UTF-8; for a C{salt://} URL, if the file server
        does not have it or refuses it (a path leaving the roots, a
        saltenv it does not have), naming the URL.
    """
    if fileSpec.startswith(SALT_SCHEME):
        return [(fileSpec, _readText(_findSaltFile(fileSpec, fileServer), fileSpec))]
    if _GLOB_CHARS.search(fileSpec):
        # Only the configured part is a pattern, not the config directory.
        pattern = os.path.join(glob.escape(configDir), fileSpec)
        paths = sorted(glob.glob(pattern))
        if not paths:
            raise ReactionError(f"no reaction file matches {os.path.join(configDir, fileSpec)}")
    else:
        paths = [os.path.join(configDir, fileSpec)]
    return [(one, _readText(one, one)) for one in paths]


def _findSaltFile(url: str, fileServer: Any) -> str:
    """
    @return: where the master's file server keeps C{salt://} file C{url}
        (blocking).
    @raise ReactionError: naming C{url}, if there is no file server, it
        has no such file, or refuses the path or saltenv.
    """
    if fileServer is None:
        raise ReactionError(f"{url}: this master has no file server to read salt:// files from")
    try:
        path, saltenv = parseSaltUrl(url)
        found = fileServer.findFile(path, saltenv or "base")
    except FileServerError as e:
        raise ReactionError(f"{url}: {e}") from e
    if found is None:
        raise ReactionError(
            f"{url}: no such file on the master's file server (saltenv {saltenv or 'base'!r})"
        )
    return str(found.realPath)


def _readText(path: str, shown: str) -> str:
    """
    @return: the text of reaction file C{path} (blocking).
    @raise ReactionError: naming it as C{shown}, if it cannot be read, is
        too large, or is not UTF-8.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_REACTION_FILE_BYTES + 1)
    except OSError as e:
        raise ReactionError(f"cannot read {shown}: {e.strerror or e}") from e
    if len(raw) > MAX_REACTION_FILE_BYTES:
        raise ReactionError(f"{shown} is over {MAX_REACTION_FILE_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReactionError(f"{shown} is not UTF-8: {e}") from e


class Reactor(Service):
    """
    Reacts to the master's events as the C{reactor} option says.

    @ivar reacted: reactions that ran every action without a failure.
    @ivar failed: reactions that failed, in whole or in part.
    @ivar dropped: reactions dropped because the queue was full.
    """

    log = Logger()
    name = "reactor"

    def __init__(
        self,
        master: IReactorMaster,
        reactorMap: list[dict[str, list[str]]],
        configDir: str,
        workers: int = 10,
        highWaterMark: int = 10000,
        fileServer: Any = None,
        clusterEvents: bool = False,
    ) -> None:
        """
        @param master: the master whose bus, runners and publish path are used.
        @param reactorMap: the checked C{reactor} option.
        @param configDir: where relative reaction file paths start.
        @param workers: C{reactor_worker_threads}: reactions in flight at most.
        @param highWaterMark: C{reactor_worker_hwm}: reactions waiting at most.
        @param fileServer: where C{salt://} reaction files are read (a
            L{salttwist.fileserver.server.FileServer}); by default the
            master's C{fileServer}, looked up at each reaction.
        @param clusterEvents: C{reactor_cluster_events}: react to the events
            the other masters of a cluster forwarded too (by default only
            to this master's own).
        """
        self.master = master
        self.clusterEvents = clusterEvents
        self.fileServer = fileServer
        self.bus: IEventBus = master.bus
        self.clock = master.clock
        self.configDir = configDir
        self.workers = workers
        self.highWaterMark = highWaterMark
        self._globs = [
            (re.compile(fnmatch.translate(tagGlob)), files)
            for entry in reactorMap
            for tagGlob, files in entry.items()
        ]
        self._prefixes = sorted({_tagPrefix(tagGlob) for entry in reactorMap for tagGlob in entry})
        self._env = ImmutableSandboxedEnvironment(
            undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
        )
        self._templates: dict[str, tuple[str, Template]] = {}
        self._pending: deque[_Reaction] = deque()
        self._inFlight = 0
        self._pump: Any = None
        self._subscription: Any = None
        self.reacted = 0
        self.failed = 0
        self.dropped = 0

    # -- service -------------------------------------------------------------

    def startService(self) -> None:
        """
        Subscribe to the tags the globs can match.
        """
        super().startService()
        prefixes = [] if "" in self._prefixes else self._prefixes
        self._subscription = self.bus.subscribe(prefixes, self.eventReceived)

    def stopService(self) -> None:
        """
        Stop reacting; reactions waiting are dropped, those in flight finish.
        """
        super().stopService()
        if self._subscription is not None:
            self._subscription.stop()
            self._subscription = None
        if self._pump is not None and self._pump.active():
            self._pump.cancel()
        self._pump = None
        self._pending.clear()

    # -- matching and queueing ------------------------------------------------

    def filesFor(self, tag: str) -> list[str]:
        """
        @return: the reaction files configured for C{tag}, in config order.
        """
        return [f for pattern, files in self._globs if pattern.match(tag) for f in files]

    def eventReceived(self, tag: str, data: dict[str, Any]) -> None:
        """
        The bus callback: queue one reaction per matching file. No reaction
        work happens here, so the bus is never held up.
        """
        if data.get("user") == REACTOR_USER:
            return
        if not self.clusterEvents and fromCluster(data):
            # Another master's event: its own reactor acts on it.
            return
        for fileSpec in self.filesFor(tag):
            reaction = _Reaction(tag, data, fileSpec)
            # Those that start at the next turn, in free slots, are not waiting.
            freeSlots = max(0, self.workers - self._inFlight)
            if len(self._pending) >= self.highWaterMark + freeSlots:
                self.dropped += 1
                self._report(
                    reaction,
                    fileSpec,
                    f"reactor queue full ({self.highWaterMark} waiting, {self._inFlight} "
                    "running); reaction dropped: raise reactor_worker_hwm or "
                    "reactor_worker_threads",
                )
                continue
            self._pending.append(reaction)
        self._schedule()

    def _schedule(self) -> None:
        if self._pump is None and self._pending and self._inFlight < self.workers and self.running:
            self._pump = self.clock.callLater(0, self._startWaiting)

    def _startWaiting(self) -> None:
        self._pump = None
        while self._pending and self._inFlight < self.workers:
            reaction = self._pending.popleft()
            self._inFlight += 1
            d = Deferred.fromCoroutine(self._react(reaction))
            d.addErrback(lambda f: self.log.failure("reactor bug", f))
            d.addBoth(self._finished)

    def _finished(self, _: object) -> None:
        self._inFlight -= 1
        self._schedule()

    # -- one reaction ----------------------------------------------------------

    async def _react(self, reaction: _Reaction) -> None:
        try:
            files = await self.master.runBlocking(
                readReactionFiles, reaction.fileSpec, self.configDir, self._fileServer()
            )
        except Exception as e:
            self.failed += 1
            self._report(reaction, reaction.fileSpec, _describe(e))
            return
        ok = True
        for path, text in files:
            ok = await self._reactWithFile(reaction, path, text) and ok
        if ok:
            self.reacted += 1
        else:
            self.failed += 1

    def _fileServer(self) -> Any:
        """
        @return: the file server C{salt://} reaction files are read from:
            the one given, else the master's (L{None} if it has none).
        """
        if self.fileServer is not None:
            return self.fileServer
        return getattr(self.master, "fileServer", None)

    async def _reactWithFile(self, reaction: _Reaction, path: str, text: str) -> bool:
        try:
            # Rendering is CPU work that grows with the event's data (a big
            # return embedded with {{ data }}): it runs in a thread.
            rendered = await self.master.runBlocking(
                self.render, path, text, reaction.tag, reaction.data
            )
            actions = parseReaction(rendered, self.master.runners)
        except Exception as e:
            self._report(reaction, path, _describe(e))
            return False
        results = await DeferredList(
            [
                maybeDeferred(self._run, action).addErrback(
                    self._actionFailed, reaction, path, action
                )
                for action in actions
            ],
            consumeErrors=True,
        )
        return all(success and value is not False for success, value in results)

    def render(self, path: str, text: str, tag: str, data: dict[str, Any]) -> Any:
        """
        Render one reaction file with Jinja2 (sandboxed, undefined names are
        errors) and parse the result as YAML.

        @raise TemplateError: if the template fails.
        @raise yaml.YAMLError: if the result is not YAML.
        """
        cached = self._templates.get(path)
        if cached is None or cached[0] != text:
            cached = (text, self._env.from_string(text))
            self._templates[path] = cached
        rendered = cached[1].render(tag=tag, data=data)
        return yaml.load(rendered, Loader=_YAMLLoader)

    def _run(self, action: Action) -> Deferred[Any]:
        """
        Start one action.
        """
        if action.kind == "local":
            args, kwargs = callArguments(action, extraKwargs=False)
            params = action.params
            load = {
                "fun": action.fun,
                "arg": wireArguments(args, kwargs),
                "tgt": params["tgt"],
                "tgt_type": params.get("tgt_type", params.get("expr_form", "glob")),
                "user": REACTOR_USER,
            }
            # The local client's publish path, called directly (no req
            # session: the reactor is the master itself).
            d = maybeDeferred(self.master.clientPublish, None, load)
            return d.addCallback(self._published, action)
        if action.kind == "runner":
            args, kwargs = callArguments(action, extraKwargs=True)
            load = {"fun": action.fun, "arg": wireArguments(args, kwargs), "user": REACTOR_USER}
            return maybeDeferred(self.master.clientRunner, None, load)
        tag, data = eventArguments(action)
        return maybeDeferred(self.bus.fire, tag, data)

    def _published(self, reply: dict[str, Any], action: Action) -> dict[str, Any]:
        if not reply.get("minions"):
            self.log.info(
                "reaction {id} ({spec}): target {tgt!r} matched no minion",
                id=action.stateId,
                spec=action.spec,
                tgt=action.params.get("tgt"),
            )
        return reply

    def _actionFailed(
        self, failure: Failure, reaction: _Reaction, path: str, action: Action
    ) -> bool:
        self._report(
            reaction, path, _describe(failure.value), stateId=action.stateId, fun=action.spec
        )
        return False

    def _report(
        self,
        reaction: _Reaction,
        path: str,
        error: str,
        stateId: str | None = None,
        fun: str | None = None,
    ) -> None:
        """
        Log a failed reaction and fire C{salt/reactor/error}, unless it was
        itself a reaction to that event (then only log: no loop).
        """
        self.log.error(
            "reaction to {tag} with {file}{what} failed: {error}",
            tag=reaction.tag,
            file=path,
            what=f" ({stateId}: {fun})" if stateId else "",
            error=error,
        )
        if reaction.tag == ERROR_TAG:
            return
        data: dict[str, Any] = {"tag": reaction.tag, "file": path, "error": error}
        if stateId is not None:
            data.update({"id": stateId, "fun": fun})
        self.bus.fire(ERROR_TAG, data)


def _describe(error: BaseException) -> str:
    """
    A failure as one line for the log and the error event.
    """
    if isinstance(error, (ReactionError, ValueError)):
        return str(error)
    if isinstance(error, TemplateSyntaxError):
        return f"template error at line {error.lineno}: {error.message}"
    if isinstance(error, TemplateError):
        return f"template error: {error}"
    if isinstance(error, yaml.YAMLError):
        return f"invalid YAML after rendering: {error}".replace("\n", " ")
    return f"{type(error).__name__}: {error}"


def buildReactor(config: dict[str, Any], master: IReactorMaster) -> Reactor | None:
    """
    @return: the reactor the master's C{config} asks for, or L{None} when
        C{reactor} is empty.
    """
    if not config.get("reactor"):
        return None
    return Reactor(
        master,
        config["reactor"],
        config.get("config_dir") or os.getcwd(),
        workers=config["reactor_worker_threads"],
        highWaterMark=config["reactor_worker_hwm"],
        clusterEvents=config.get("reactor_cluster_events", False),
    )
