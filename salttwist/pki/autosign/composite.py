# -*- test-case-name: tests.test_autosign -*-
"""
The chain of policies, L{CompositeAutosignPolicy}, and
L{buildAutosignPolicy}, which builds it from the master's configuration
in the order the package's docstring gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.blocking import RunBlocking, threadRunner
from salttwist.interfaces import IAutosignPolicy
from salttwist.pki.autosign.base import (
    PENDING,
    REJECT,
    AutosignDecision,
    _GuardedPolicy,
    _log,
    _logDecision,
    _pending,
)
from salttwist.pki.autosign.executable import PolicyExecutablePolicy, PolicyProcessRunner
from salttwist.pki.autosign.fixed import AutoAcceptPolicy, AutosignDisabledPolicy
from salttwist.pki.autosign.grains import GrainsPolicy
from salttwist.pki.autosign.hygiene import checkAutosignFiles
from salttwist.pki.autosign.url import URLPolicy, _defaultHTTPClient
from salttwist.pki.autosign.whitelist import AutorejectFilePolicy, AutosignFilePolicy


@implementer(IAutosignPolicy)
class CompositeAutosignPolicy(_GuardedPolicy):
    """
    Consults reject policies, then accept policies, in order, one at a time.

    The first C{"reject"} from a reject policy rejects. A reject policy that
    fails leaves the key pending and stops there: a rejection list that
    cannot be read must not let a key through. Then the first C{"accept"}
    (or C{"reject"}) of an accept policy decides; a failed accept policy is
    passed over. If none decides, the key stays pending with the policy
    C{"none"} and every reason heard.

    Every final decision is logged.
    """

    name = "composite"

    def __init__(
        self, rejecters: Sequence[IAutosignPolicy], accepters: Sequence[IAutosignPolicy]
    ) -> None:
        """
        @param rejecters: the policies that may reject, in order.
        @param accepters: the policies that may accept, in order.
        """
        self.rejecters = tuple(rejecters)
        self.accepters = tuple(accepters)

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return super().decide(minionId, pem, context).addCallback(_logDecision, minionId)

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        if not isinstance(context, Mapping):
            context = {}
        for policy in self.rejecters:
            decision = await policy.decide(minionId, pem, context)
            if decision.verdict == REJECT:
                return decision
            if decision.failed:
                return _pending(
                    decision.policy,
                    f"{decision.reason}; no other policy was consulted, so that a rejection"
                    " list that cannot be checked lets no key in",
                    True,
                )
        heard = []
        for policy in self.accepters:
            decision = await policy.decide(minionId, pem, context)
            if decision.verdict != PENDING:
                return decision
            heard.append(f"{decision.policy}: {decision.reason}")
        if not heard:
            return _pending("none", "no autosign policy is configured")
        return _pending("none", "no policy accepted the key (" + "; ".join(heard) + ")")


_FILE_OPTIONS = ("autosign_file", "autoreject_file", "autosign_policy", "autosign_grains_dir")


def _checkAtStart(config: Mapping[str, Any], runBlocking: RunBlocking) -> None:
    """
    Check the hygiene of the autosign files once, in a thread, as the master
    starts, and log an error per problem (see L{checkAutosignFiles}); with
    none of those files configured, nothing is run. The
    master starts anyway: each decision checks again, and an untrusted file
    leaves keys pending.
    """

    def report(problems: list[str]) -> None:
        for problem in problems:
            _log.error("autosign: {problem}", problem=problem)

    def failed(failure: Failure) -> None:
        _log.failure("autosign: the start-time check of the policy files failed", failure)

    if not any(config.get(option) for option in _FILE_OPTIONS):
        return
    d = runBlocking(checkAutosignFiles, dict(config))
    d.addCallbacks(report, failed)


def buildAutosignPolicy(
    config: Mapping[str, Any],
    reactor: Any,
    runBlocking: RunBlocking | None = None,
    httpClient: Any = None,
    environ: Mapping[str, str] | None = None,
) -> IAutosignPolicy:
    """
    Build the master's autosign policy from its configuration.

    @param config: the master config (L{salttwist.config.loadMasterConfig});
        missing options take their defaults.
    @param reactor: provides C{IReactorProcess}, C{IReactorTime} and (unless
        C{runBlocking} is given) C{IReactorThreads}.
    @param runBlocking: runs blocking file reads; defaults to the reactor's
        thread pool.
    @param httpClient: the client for C{autosign_url}; defaults to a treq
        L{HTTPClient} on C{reactor}.
    @param environ: the master's environment, for the executables' C{PATH}.

    Once built, the configured files' hygiene is checked (in C{runBlocking})
    and each problem logged as an error; and if C{reactor} has system event
    triggers, policy processes are killed (L{PolicyProcessRunner.stop})
    before it shuts down.

    @return: L{AutosignDisabledPolicy} if C{autosign} is false, else a
        L{CompositeAutosignPolicy}.
    """
    if config.get("autosign") is False:
        return AutosignDisabledPolicy()
    if runBlocking is None:
        runBlocking = threadRunner(reactor)
    timeout = config.get("autosign_timeout", 10)
    rejecters: list[IAutosignPolicy] = []
    accepters: list[IAutosignPolicy] = []
    if config.get("autoreject_file"):
        rejecters.append(AutorejectFilePolicy(config["autoreject_file"], runBlocking))
    if config.get("auto_accept"):
        accepters.append(AutoAcceptPolicy())
    if config.get("autosign_file") or config.get("autosign_policy"):
        runner = PolicyProcessRunner(
            reactor,
            timeout,
            config.get("autosign_max_concurrent", 4),
            config.get("autosign_output_max", 65536),
            environ=environ,
        )
        addTrigger = getattr(reactor, "addSystemEventTrigger", None)
        if addTrigger is not None:
            # The master stops: kill the policies' process groups.
            addTrigger("before", "shutdown", runner.stop)
        if config.get("autosign_file"):
            accepters.append(AutosignFilePolicy(config["autosign_file"], runner, runBlocking))
        if config.get("autosign_policy"):
            accepters.append(PolicyExecutablePolicy(config["autosign_policy"], runner, runBlocking))
    if config.get("autosign_grains_dir"):
        accepters.append(GrainsPolicy(config["autosign_grains_dir"], runBlocking))
    if config.get("autosign_url"):
        client = httpClient if httpClient is not None else _defaultHTTPClient(reactor)
        accepters.append(URLPolicy(config["autosign_url"], client, reactor, timeout))
    _checkAtStart(config, runBlocking)
    if config.get("autosign") is True and not accepters:
        _log.warn(
            "autosign is true but no autosign policy is configured: nothing is autosigned."
            " Unlike Puppet, autosign: true does not accept everything; auto_accept does."
        )
    return CompositeAutosignPolicy(rejecters, accepters)
