# -*- test-case-name: tests.test_client_api,tests.integration.test_client_api -*-
"""
Salt's Python API, synchronous: L{LocalClient} (C{salt.client.LocalClient}),
L{Caller} (C{salt.client.Caller}) and L{RunnerClient}
(C{salt.runner.RunnerClient}), with Salt's method names, signatures and
return shapes, for scripts and other blocking code::

    from salttwist.client import LocalClient

    local = LocalClient()
    local.cmd("*", "test.ping")          # {"web1": True, "web2": True}

Each call runs the L{Deferred} core on the reactor, which runs in a daemon
thread started on first use (see L{salttwist.client._bridge}), and blocks
until the core has finished. Twisted programs, whose reactor is already
running, use that core directly instead: L{salttwist.client.local.LocalClient}
(C{run}, C{publish}, C{runner}) and L{salttwist.client.localcall.LocalCaller}
(C{call}); calling these facades on the reactor thread raises
L{ReactorThreadError}.

Errors: L{MasterUnavailable} when the master cannot be reached (Salt's
C{SaltClientError}), L{RequestError} when it refuses a job or a runner
fails, L{TypeError} for a keyword argument salttwist does not know (there is
no C{external_auth}: C{username}, C{password}, C{eauth} and C{token} are
refused rather than ignored), L{ValueError} for a returner (C{ret}) or a
caller-chosen C{jid}, which salttwist does not offer.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterable
from typing import Any

from salttwist.client._bridge import ReactorThread, ReactorThreadError, getReactorThread
from salttwist.client.local import JobResult, MasterUnavailable
from salttwist.config import defaultConfigDir, loadMasterConfig, loadMinionConfig
from salttwist.jid import isJid
from salttwist.transport.reqclient import RequestError

__all__ = [
    "Caller",
    "LocalClient",
    "MasterUnavailable",
    "ReactorThreadError",
    "RequestError",
    "RunnerClient",
]


def configDir(cPath: str | None, daemon: str) -> str:
    """
    The config directory a facade reads, from Salt's C{c_path}.

    @param cPath: the config directory, or the C{master}/C{minion} file in
        it (Salt passes the file, the commands' C{-c} the directory); when
        L{None}, C{$SALTTWIST_CONFIG_DIR} or L{salttwist.config.DEFAULT_CONFIG_DIR}, as the
        commands use.
    @param daemon: C{"master"} or C{"minion"}: the file's name.
    """
    if cPath is None:
        return defaultConfigDir()
    if os.path.basename(os.path.normpath(cPath)) == daemon and not os.path.isdir(cPath):
        return os.path.dirname(os.path.abspath(cPath))
    return cPath


def conditionInput(arg: Iterable[Any] | None, kwarg: dict[str, Any] | None) -> list[Any]:
    """
    Salt's C{condition_input}: the positional arguments, then C{kwarg} as a
    trailing map marked C{__kwarg__}, which is how keyword arguments travel.
    A number that reads as a jid becomes its text, as in Salt.

    @raise TypeError: if C{arg} is not a list or tuple (a string would be
        split into characters), or C{kwarg} not a dict.
    """
    if arg is None:
        arg = ()
    if not isinstance(arg, (list, tuple)):
        raise TypeError(f"arg must be a list or tuple of arguments, not {type(arg).__name__}")
    wire = [
        str(item)
        if isinstance(item, int) and not isinstance(item, bool) and isJid(str(item))
        else item
        for item in arg
    ]
    if kwarg:
        if not isinstance(kwarg, dict):
            raise TypeError(f"kwarg must be a dict, not {type(kwarg).__name__}")
        wire.append({**kwarg, "__kwarg__": True})
    return wire


def _options(method: str, kwargs: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """
    @return: C{kwargs}, all of which C{method} knows.
    @raise TypeError: naming the others.
    """
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise TypeError(
            f"{method}() got unexpected keyword argument(s) {', '.join(unknown)} "
            "(salttwist has no external_auth; pass the function's own keyword "
            "arguments in kwarg)"
        )
    return kwargs


def _noReturner(ret: str, jid: str = "") -> None:
    """
    @raise ValueError: for Salt options salttwist does not have.
    """
    if ret:
        raise ValueError(f"salttwist has no returners: ret must be '', not {ret!r}")
    if jid:
        raise ValueError(f"the master assigns jids: jid must be '', not {jid!r}")


def _seconds(value: Any, default: float) -> float:
    """
    Salt's C{_get_timeout}: C{value} as seconds, or C{default} when it is
    L{None} or cannot be read.
    """
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return default
    return default


def fullReturn(data: dict[str, Any], jid: str = "") -> dict[str, Any]:
    """
    One minion's return event in the shape of Salt's C{full_return} and
    C{cmd_iter}: C{{"ret", "retcode", "jid"}}.
    """
    return {
        "ret": data.get("return"),
        "retcode": data.get("retcode", 0),
        "jid": data.get("jid") or jid,
    }


def batchReturn(data: dict[str, Any]) -> Any:
    """
    One minion's return as Salt's C{cmd_batch} yields it: the return, with
    the retcode added to a map that has none (Salt's batch does this).
    """
    value = data.get("return")
    if isinstance(value, dict) and "retcode" not in value:
        value = {**value, "retcode": data.get("retcode", 0)}
    return value


def cmdReturns(result: JobResult, full: bool) -> dict[str, Any]:
    """
    What Salt's C{LocalClient.cmd} returns for C{result}: each minion's
    return (or L{fullReturn}), and C{False} for a targeted minion that did
    not return; C{{}} when no minion matched.
    """
    if not result.minions:
        return {}
    returns: dict[str, Any] = {
        minionId: fullReturn(data, result.jid) if full else data.get("return")
        for minionId, data in result.returns.items()
    }
    for minionId in result.minions:
        returns.setdefault(minionId, False)
    return returns


class _Facade:
    """
    What the facades share: the bridge, and a core made once.
    """

    def __init__(self, bridge: ReactorThread | None) -> None:
        self._bridge = bridge if bridge is not None else getReactorThread()
        self._coreLock = threading.Lock()
        self._core: Any = None

    def _makeCore(self) -> Any:
        raise NotImplementedError()

    def _client(self) -> Any:
        """
        @return: the L{Deferred} core, made on first use.
        """
        with self._coreLock:
            if self._core is None:
                self._core = self._makeCore()
            return self._core

    def destroy(self) -> None:
        """
        Salt's C{destroy}: close the connections the core keeps, if it
        keeps any (a later call opens new ones).
        """
        with self._coreLock:
            core = self._core
        close = getattr(core, "close", None)
        if close is None:
            return
        if self._bridge.isReactorThread():
            close()
            return
        try:
            self._bridge.call(close)
        except ReactorThreadError:
            # The reactor has stopped: its connections went with it.
            pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


class LocalClient(_Facade):
    """
    Salt's C{salt.client.LocalClient}: run execution-module functions on
    minions through the master on this machine, as C{salttwist} does: as
    the master's user, or as a user the master's C{publisher_acl} names.

    As Salt's, it keeps its connections to the master (one authenticated
    session and one event bus subscription, shared by all its calls, from
    any thread) until L{destroy}; if the master restarts, the next call
    opens new ones.

    The L{Deferred} core for Twisted programs is
    L{salttwist.client.local.LocalClient}.

    @ivar opts: the master configuration.
    """

    def __init__(
        self,
        c_path: str | None = None,
        mopts: dict[str, Any] | None = None,
        *,
        bridge: ReactorThread | None = None,
    ) -> None:
        """
        @param c_path: the master's config directory or its C{master} file
            (default: C{$SALTTWIST_CONFIG_DIR} or C{/etc/salttwist}).
        @param mopts: a master configuration already loaded
            (L{salttwist.config.loadMasterConfig}); C{c_path} is then not read.
        @param bridge: the reactor thread to use; the process's shared one
            by default.
        @raise salttwist.config.ConfigError: if the configuration is invalid.
        """
        super().__init__(bridge)
        self.opts = mopts if mopts is not None else loadMasterConfig(configDir(c_path, "master"))

    def _makeCore(self) -> Any:
        from salttwist.client.local import LocalClient as Core

        # As Salt's LocalClient keeps its event subscription: one
        # authenticated session and one subscription for all the calls,
        # until destroy().
        return Core(self.opts, self._bridge.reactor, keepConnected=True)

    def _timeout(self, timeout: Any) -> float:
        return _seconds(timeout, float(self.opts["timeout"]))

    def _gatherTimeout(self, kwargs: dict[str, Any]) -> float:
        return _seconds(kwargs.get("gather_job_timeout"), float(self.opts["gather_job_timeout"]))

    def run_job(
        self,
        tgt: Any,
        fun: str,
        arg: Iterable[Any] = (),
        tgt_type: str = "glob",
        ret: str = "",
        timeout: Any = None,
        jid: str = "",
        kwarg: dict[str, Any] | None = None,
        listen: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """
        Publish a job without waiting for returns.

        @return: C{{"jid": ..., "minions": [...]}}, or C{{}} when no minion
            matched the target.
        """
        _options("run_job", kwargs, ())
        _noReturner(ret, jid)
        wire = conditionInput(arg, kwarg)
        reply = self._bridge.call(self._client().publish, tgt, fun, wire, tgt_type)
        if not reply.get("minions"):
            return {}
        return {"jid": reply["jid"], "minions": list(reply["minions"])}

    def cmd_async(
        self,
        tgt: Any,
        fun: str,
        arg: Iterable[Any] = (),
        tgt_type: str = "glob",
        ret: str = "",
        jid: str = "",
        kwarg: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> str | int:
        """
        Publish a job without waiting for returns; read them later with
        L{get_cache_returns}.

        @return: the jid, or C{0} when no minion matched (as Salt).
        """
        _options("cmd_async", kwargs, ())
        pubData = self.run_job(tgt, fun, arg, tgt_type, ret, jid=jid, kwarg=kwarg)
        return pubData.get("jid", 0)

    def cmd(
        self,
        tgt: Any,
        fun: str,
        arg: Iterable[Any] = (),
        timeout: Any = None,
        tgt_type: str = "glob",
        ret: str = "",
        jid: str = "",
        full_return: bool = False,
        kwarg: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """
        Run C{fun} on the minions C{tgt} matches and wait for their returns,
        as C{salttwist} does: C{timeout} seconds (default: the master's
        C{timeout}) for the connected ones, then as long as
        C{saltutil.find_job} says they still run it.

        @param arg: positional arguments of C{fun}.
        @param kwarg: keyword arguments of C{fun}.
        @param kwargs: C{gather_job_timeout} only.
        @return: C{{minion: return}}, C{False} for a targeted minion that did
            not return, C{{}} if none matched; with C{full_return},
            C{{minion: {"ret", "retcode", "jid"}}}.
        """
        options = _options("cmd", kwargs, ("gather_job_timeout",))
        _noReturner(ret, jid)
        wire = conditionInput(arg, kwarg)
        result = self._bridge.call(
            self._client().run,
            tgt,
            fun,
            wire,
            tgt_type,
            self._timeout(timeout),
            gatherJobTimeout=self._gatherTimeout(options),
        )
        return cmdReturns(result, full_return)

    def cmd_iter(
        self,
        tgt: Any,
        fun: str,
        arg: Iterable[Any] = (),
        timeout: Any = None,
        tgt_type: str = "glob",
        ret: str = "",
        kwarg: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Generator[dict[str, Any], None, None]:
        """
        Run C{fun} as L{cmd} does, yielding each minion's return as it
        arrives: C{{minion: {"ret", "retcode", "jid"}}}. The job is
        published when the first item is asked for; closing the generator
        early stops waiting.

        As in Salt, one C{{}} is yielded when no minion matched.

        @param kwargs: C{gather_job_timeout}; C{yield_pub_data} to yield
            C{{"jid", "minions"}} first; C{expect_minions} to yield
            C{{minion: {"failed": True}}} for each targeted minion that did
            not return.
        """
        options = _options(
            "cmd_iter", kwargs, ("gather_job_timeout", "yield_pub_data", "expect_minions")
        )
        _noReturner(ret)
        wire = conditionInput(arg, kwarg)
        core = self._client()
        timeout = self._timeout(timeout)
        gatherTimeout = self._gatherTimeout(options)

        async def run(emit: Any) -> JobResult:
            def published(jid: str, minions: list[str]) -> None:
                if options.get("yield_pub_data"):
                    emit({"jid": jid, "minions": list(minions)})

            def returned(minionId: str, data: dict[str, Any]) -> None:
                emit({minionId: fullReturn(data)})

            result = await core.run(
                tgt,
                fun,
                wire,
                tgt_type,
                timeout,
                onPublished=published,
                onReturn=returned,
                gatherJobTimeout=gatherTimeout,
            )
            if options.get("expect_minions"):
                for minionId in result.notConnected + result.missing:
                    emit({minionId: {"failed": True}})
            return result

        def returns() -> Generator[dict[str, Any], None, None]:
            result = yield from self._bridge.stream(run)
            if not result.minions:
                yield {}

        return returns()

    def cmd_batch(
        self,
        tgt: Any,
        fun: str,
        arg: Iterable[Any] = (),
        tgt_type: str = "glob",
        ret: str = "",
        kwarg: dict[str, Any] | None = None,
        batch: str | int = "10%",
        **kwargs: Any,
    ) -> Generator[dict[str, Any], None, None]:
        """
        Run C{fun} on the minions of C{tgt} that answer C{test.ping}, at
        most C{batch} of them at a time (C{10}, C{"10"} or C{"25%"}) in a
        sliding window, as C{salttwist -b} does, yielding
        C{{minion: return}} as returns arrive (L{batchReturn}) and
        C{{minion: {}}} for a minion that did not return. The first
        minions start when the first item is asked for.

        @param kwargs: C{timeout}, C{gather_job_timeout}; C{batch_wait}
            (seconds a returned minion's place stays empty); C{failhard}
            (start no minion after one failed).
        @raise ValueError: if C{batch} is not a size or percentage.
        """
        from salttwist.client.batch import parseBatch, runBatches

        options = _options(
            "cmd_batch", kwargs, ("timeout", "gather_job_timeout", "batch_wait", "failhard")
        )
        _noReturner(ret)
        spec = parseBatch(batch)
        wire = conditionInput(arg, kwarg)
        core = self._client()
        reactor = self._bridge.reactor
        timeout = self._timeout(options.get("timeout"))
        gatherTimeout = self._gatherTimeout(options)
        batchWait = _seconds(options.get("batch_wait"), 0.0)
        failhard = bool(options.get("failhard", False))

        async def run(emit: Any) -> None:
            def returned(minionId: str, data: dict[str, Any]) -> None:
                emit({minionId: batchReturn(data)})

            def batchDone(result: JobResult) -> None:
                for minionId in result.notConnected + result.missing:
                    emit({minionId: {}})

            await runBatches(
                core,
                reactor,
                tgt,
                fun,
                wire,
                tgt_type,
                spec,
                timeout,
                gatherTimeout,
                batchWait=batchWait,
                failhard=failhard,
                onReturn=returned,
                onBatchDone=batchDone,
            )

        def returns() -> Generator[dict[str, Any], None, None]:
            yield from self._bridge.stream(run)

        return returns()

    def get_cache_returns(self, jid: str | int) -> dict[str, dict[str, Any]]:
        """
        The returns of job C{jid} kept in the master's job cache (through
        the C{jobs.list_job} runner).

        @return: C{{minion: {"ret": return}}} for each minion that returned
            (C{{}} for a job the cache does not know).
        @raise RequestError: if C{jid} is not a jid, or the master keeps no
            job cache.
        """
        wire = conditionInput([jid], None)
        reply = self._bridge.call(self._client().runner, "jobs.list_job", wire)
        listed = reply.get("return") or {}
        results = (listed.get("Result") or {}) if isinstance(listed, dict) else {}
        return {minionId: {"ret": data.get("return")} for minionId, data in results.items()}


class Caller(_Facade):
    """
    Salt's C{salt.client.Caller}: the execution modules of this machine's
    minion configuration, run here, as C{salttwist-call --local} runs them
    (no master is involved).

    The L{Deferred} core for Twisted programs is
    L{salttwist.client.localcall.LocalCaller}.

    @ivar opts: the minion configuration.
    """

    def __init__(
        self,
        c_path: str | None = None,
        mopts: dict[str, Any] | None = None,
        *,
        bridge: ReactorThread | None = None,
    ) -> None:
        """
        @param c_path: the minion's config directory or its C{minion} file
            (default: C{$SALTTWIST_CONFIG_DIR} or C{/etc/salttwist}).
        @param mopts: a minion configuration already loaded
            (L{salttwist.config.loadMinionConfig}).
        @param bridge: the reactor thread to use; the process's shared one
            by default.
        """
        super().__init__(bridge)
        self.opts = mopts if mopts is not None else loadMinionConfig(configDir(c_path, "minion"))

    def _makeCore(self) -> Any:
        from salttwist.client.localcall import LocalCaller

        # Made here, not on the reactor thread: gathering grains blocks.
        return LocalCaller(self.opts, self._bridge.reactor)

    def cmd(self, fun: str, /, *args: Any, **kwargs: Any) -> Any:
        """
        Call C{fun(*args, **kwargs)} and return what it returns, as Salt's
        C{Caller.cmd}: C{Caller().cmd("test.echo", "hi")} is C{"hi"}.

        @raise KeyError: if there is no function C{fun}.
        @raise Exception: what the function raised (e.g.
            L{salttwist.modules.CommandExecutionError}).
        """
        core = self._client()
        return self._bridge.call(core.call, fun, *args, **kwargs)

    function = cmd


class RunnerClient(_Facade):
    """
    Salt's C{salt.runner.RunnerClient}: run runner functions in the master
    on this machine, as C{salttwist-run} does (as the master's user).

    The L{Deferred} core for Twisted programs is
    L{salttwist.client.local.LocalClient.runner}.

    @ivar opts: the master configuration.
    """

    def __init__(
        self, opts: dict[str, Any] | str | None = None, *, bridge: ReactorThread | None = None
    ) -> None:
        """
        @param opts: the master configuration (as Salt's RunnerClient takes
            it), or the master's config directory or C{master} file
            (default: C{$SALTTWIST_CONFIG_DIR} or C{/etc/salttwist}).
        @param bridge: the reactor thread to use; the process's shared one
            by default.
        """
        super().__init__(bridge)
        if isinstance(opts, dict):
            self.opts = opts
        else:
            self.opts = loadMasterConfig(configDir(opts, "master"))

    def _makeCore(self) -> Any:
        from salttwist.client.local import LocalClient as Core

        return Core(self.opts, self._bridge.reactor)

    def cmd(
        self,
        fun: str,
        arg: Iterable[Any] | None = None,
        pub_data: dict[str, Any] | None = None,
        kwarg: dict[str, Any] | None = None,
        print_event: bool = True,
        full_return: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """
        Run runner C{fun} in the master and return its return:
        C{RunnerClient().cmd("manage.up")}.

        Unlike Salt, C{key=value} strings in C{arg} stay positional: pass
        keyword arguments in C{kwarg}. C{pub_data} and C{print_event} are
        accepted and not used (nothing is printed).

        @param timeout: seconds to wait for the return (the runner itself
            keeps running in the master); as long as it takes by default.
        @return: the return, or with C{full_return}
            C{{"fun", "jid", "return", "success"}}.
        @raise RequestError: if the runner is unknown, its arguments do
            not fit, or it failed.
        @raise TimeoutError: if C{timeout} passed first.
        """
        wire = conditionInput(arg, kwarg)
        reply = self._bridge.callWithTimeout(timeout, self._client().runner, fun, wire)
        if full_return:
            return {
                "fun": fun,
                "jid": reply.get("jid"),
                "return": reply.get("return"),
                "success": True,
            }
        return reply.get("return")

    def cmd_sync(
        self, low: dict[str, Any], timeout: float | None = None, full_return: bool = False
    ) -> Any:
        """
        Run a runner given as Salt's low data: C{{"fun": ..., "arg": [...],
        "kwarg": {...}}}; other keys are keyword arguments of the runner (as
        Salt's C{_reformat_low} treats them).

        @raise TimeoutError: if C{timeout} seconds passed first.
        """
        low = dict(low)
        fun = low.pop("fun")
        arg = low.pop("arg", None)
        kwarg = dict(low.pop("kwarg", None) or {})
        for reserved in ("client", "full_return", "print_event"):
            low.pop(reserved, None)
        kwarg.update(low)
        return self.cmd(fun, arg, kwarg=kwarg or None, full_return=full_return, timeout=timeout)
