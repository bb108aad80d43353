# -*- test-case-name: tests.test_autosign -*-
"""
The policies that consult nothing: C{auto_accept: true} and
C{autosign: false}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from salttwist.interfaces import IAutosignPolicy
from salttwist.pki.autosign.base import (
    ACCEPT,
    AutosignDecision,
    _logDecision,
    _pending,
)


@implementer(IAutosignPolicy)
class AutoAcceptPolicy:
    """
    C{auto_accept: true}: naive autosigning, every key is accepted.
    """

    name = "auto_accept"

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return succeed(
            AutosignDecision(ACCEPT, self.name, "auto_accept is true: every key is accepted")
        )


@implementer(IAutosignPolicy)
class AutosignDisabledPolicy:
    """
    C{autosign: false}: nothing is ever autosigned. Each decision is
    logged, as the composite policy's are.
    """

    name = "autosign_disabled"

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        decision = _pending(
            self.name, "autosign is false: no key is autosigned, whatever is configured"
        )
        return succeed(_logDecision(decision, minionId))
