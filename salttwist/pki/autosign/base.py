# -*- test-case-name: tests.test_autosign -*-
"""
What every autosign policy shares: the verdicts, the decision, the
environment and size limits given to policy executables and URLs, and the
helpers that keep C{decide} from ever failing.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

ACCEPT = "accept"
REJECT = "reject"
PENDING = "pending"
_VERDICTS = (ACCEPT, REJECT, PENDING)

ENV_ID = "SALTTWIST_AUTOSIGN_ID"
"""The environment variable holding the minion id, for policy executables."""
ENV_PEER = "SALTTWIST_AUTOSIGN_PEER"
"""The environment variable holding the minion's C{host:port}."""
ENV_GRAINS = "SALTTWIST_AUTOSIGN_GRAINS"
"""The environment variable holding the minion's autosign grains as JSON."""

MAX_QUEUED = 1000
"""The most decisions that may wait for a policy-process slot; beyond, a
decision is C{"pending"} at once."""

MAX_GRAINS_JSON = 65536
"""The largest autosign grains, as JSON bytes, passed to a policy executable
or URL. Larger grains leave the key pending rather than being cut."""

# Named for the package, as when it was one module: the namespace is the
# logger name in log lines (Salt's C{name} in JSON lines).
_log = Logger(namespace="salttwist.pki.autosign")


@dataclass(frozen=True)
class AutosignDecision:
    """
    What an autosign policy decided about one key.

    @ivar verdict: C{"accept"}, C{"reject"} or C{"pending"}.
    @ivar policy: the name of the policy that decided: C{"autosign_file"},
        C{"autoreject_file"}, C{"policy_executable"}, C{"autosign_grains"},
        C{"autosign_url"}, C{"auto_accept"}, C{"autosign_disabled"} or
        C{"none"} (no policy accepted).
    @ivar reason: a sentence for logs and events.
    @ivar failed: L{True} when the policy could not reach a verdict (an
        unreadable file, a timeout, an HTTP error...); the verdict is then
        C{"pending"}. A failed reject policy stops the composite policy, so a
        broken rejection list never lets a key be accepted.
    """

    verdict: str
    policy: str
    reason: str
    failed: bool = False

    def __post_init__(self) -> None:
        if self.verdict not in _VERDICTS:
            raise ValueError(f"verdict must be one of {_VERDICTS}, not {self.verdict!r}")


def _pending(policy: str, reason: str, failed: bool = False) -> AutosignDecision:
    return AutosignDecision(PENDING, policy, reason, failed)


def _guard(
    name: str, coroutine: Coroutine[Any, Any, AutosignDecision]
) -> Deferred[AutosignDecision]:
    """
    Run a policy's decision coroutine so that it never fails.

    @param name: the policy's name, for the decision made of an error.
    @param coroutine: the decision.
    @return: a L{Deferred} that fires with the decision, or with a failed
        C{"pending"} one if the coroutine raised. Cancelling it (the caller
        no longer wants the answer) fails it with L{CancelledError}, as usual.
    """

    def failed(failure: Failure) -> AutosignDecision:
        if failure.check(CancelledError):
            return failure  # type: ignore[return-value]
        _log.failure("autosign policy {policy} failed", failure, policy=name)
        return _pending(name, f"internal error: {failure.getErrorMessage()}", failed=True)

    return Deferred.fromCoroutine(coroutine).addErrback(failed)


class _GuardedPolicy:
    """
    An autosign policy whose decision is the coroutine C{_decide}, run
    through L{_guard} so that it never fails.

    @ivar name: the policy's name, for the decision made of an error.
    """

    name: str

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return _guard(self.name, self._decide(minionId, pem, context))

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        raise NotImplementedError()


def _contextGrains(context: Mapping[str, Any]) -> dict[str, Any]:
    """
    The minion's autosign grains from a decision's context: a dict with
    string keys, or C{{}} for anything else (the minion may send garbage).
    """
    grains = context.get("autosign_grains") if isinstance(context, Mapping) else None
    if not isinstance(grains, dict):
        return {}
    return {key: value for key, value in grains.items() if isinstance(key, str)}


def _contextPeer(context: Mapping[str, Any]) -> str:
    """
    The minion's address from a decision's context, or C{""}.
    """
    peer = context.get("peer") if isinstance(context, Mapping) else None
    if not isinstance(peer, str) or "\0" in peer:
        return ""
    return peer


def _jsonDefault(value: Any) -> Any:
    """
    Make msgpack values JSON can not encode representable: bytes as text
    (undecodable bytes replaced), anything else as its repr.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def _grainsJSON(grains: Mapping[str, Any]) -> str | None:
    """
    Encode autosign grains for a policy executable or URL.

    @return: the JSON text, or L{None} if the grains cannot be encoded (for
        example nested maps with keys of mixed types) or their encoding is
        larger than L{MAX_GRAINS_JSON}.
    """
    try:
        text = json.dumps(
            dict(grains),
            sort_keys=True,
            skipkeys=True,
            allow_nan=False,
            ensure_ascii=True,
            default=_jsonDefault,
        )
    except (TypeError, ValueError, RecursionError):
        return None
    if len(text) > MAX_GRAINS_JSON:
        return None
    return text


def _logDecision(decision: AutosignDecision, minionId: str) -> AutosignDecision:
    """
    Log a final decision at info level, with the decision in the event.

    @return: C{decision}.
    """
    _log.info(
        "autosign: {verdict} {id} by {policy}: {reason}",
        verdict=decision.verdict,
        id=minionId,
        policy=decision.policy,
        reason=decision.reason,
        decision=decision,
    )
    return decision
