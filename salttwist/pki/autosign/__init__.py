# -*- test-case-name: tests.test_autosign -*-
"""
Autosign policies: which new minion keys the master accepts (or rejects)
without an admin.

Puppet's kinds of autosigning, in Salt's configuration language, plus two of
Salt's own (grains) and one beyond both (HTTP). Each kind is a small class
providing L{IAutosignPolicy}; L{buildAutosignPolicy} composes them from the
master's configuration in a fixed order:

 1. C{autosign: false}: nothing is autosigned, nothing else is consulted
    (L{AutosignDisabledPolicy}).
 2. C{autoreject_file}: a match rejects (L{AutorejectFilePolicy}).
 3. C{auto_accept}: everything is accepted (L{AutoAcceptPolicy}).
 4. C{autosign_file} (a whitelist, or a policy executable if the file is
    executable: L{AutosignFilePolicy}), C{autosign_policy}
    (L{PolicyExecutablePolicy}), C{autosign_grains_dir} (L{GrainsPolicy}),
    C{autosign_url} (L{URLPolicy}), in that order; the first accept wins.
 5. Otherwise the key stays pending.

A decision is an L{AutosignDecision}. C{decide} never fails: any error
becomes a C{"pending"} decision whose reason says what went wrong.
User documentation: C{docs/autosign.md}.

A module per kind of policy: L{base <salttwist.pki.autosign.base>} (the
decision and what every policy shares),
L{whitelist <salttwist.pki.autosign.whitelist>} (C{autosign_file},
C{autoreject_file}), L{executable <salttwist.pki.autosign.executable>}
(policy executables), L{grains <salttwist.pki.autosign.grains>},
L{url <salttwist.pki.autosign.url>}, L{fixed <salttwist.pki.autosign.fixed>}
(C{auto_accept}, C{autosign: false}),
L{hygiene <salttwist.pki.autosign.hygiene>} (who may change the policy
files: only root and the master's user) and
L{composite <salttwist.pki.autosign.composite>} (the chain, and
L{buildAutosignPolicy}). Import the names from this package.
"""

from __future__ import annotations

from salttwist.blocking import threadRunner
from salttwist.pki.autosign.base import (
    ACCEPT,
    ENV_GRAINS,
    ENV_ID,
    ENV_PEER,
    MAX_GRAINS_JSON,
    MAX_QUEUED,
    PENDING,
    REJECT,
    AutosignDecision,
)
from salttwist.pki.autosign.composite import CompositeAutosignPolicy, buildAutosignPolicy
from salttwist.pki.autosign.executable import PolicyExecutablePolicy, PolicyProcessRunner
from salttwist.pki.autosign.fixed import AutoAcceptPolicy, AutosignDisabledPolicy
from salttwist.pki.autosign.grains import GrainsPolicy
from salttwist.pki.autosign.url import URLPolicy
from salttwist.pki.autosign.whitelist import (
    AutorejectFilePolicy,
    AutosignFilePolicy,
    Whitelist,
    matchesPattern,
    parseWhitelist,
)

__all__ = [
    "ACCEPT",
    "PENDING",
    "REJECT",
    "ENV_GRAINS",
    "ENV_ID",
    "ENV_PEER",
    "MAX_GRAINS_JSON",
    "MAX_QUEUED",
    "AutoAcceptPolicy",
    "AutorejectFilePolicy",
    "AutosignDecision",
    "AutosignDisabledPolicy",
    "AutosignFilePolicy",
    "CompositeAutosignPolicy",
    "GrainsPolicy",
    "PolicyExecutablePolicy",
    "PolicyProcessRunner",
    "URLPolicy",
    "Whitelist",
    "buildAutosignPolicy",
    "matchesPattern",
    "parseWhitelist",
    "threadRunner",
]

# The classes' home is this package, as when it was one module: their
# class loggers' namespaces (the logger name in log lines), reprs and
# pickles stay salttwist.pki.autosign.<Class>.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = __name__
del _name, _value
