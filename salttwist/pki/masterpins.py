# -*- test-case-name: tests.test_minion_failover,tests.test_call_masters -*-
"""
Which master keys a minion trusts for each master of its list, shared by
the minion daemon (L{salttwist.minion.masters}) and C{salttwist-call}
(L{salttwist.client.transient}), so it lives below both.

L{PinnedMasterCredentials}: a minion's credentials for one master of a
list: the key pinned for that master alone
(C{minion_master_<host>_<port>.pub}, L{ownPinFile}), else the key pinned
for every master (C{minion_master.pub}, the cluster's shared key), else the
key presented now, pinned in C{minion_master.pub} (first contact, as
before). A key matching no pin is never trusted.
"""

from __future__ import annotations

import os
import re
from typing import Any

from salttwist import crypt
from salttwist.masteraddress import MasterAddress
from salttwist.pki.credentials import MASTER_PUB_FILE, MasterIdentityError, MinionCredentials

__all__ = ["PinnedMasterCredentials", "ownPinFile"]


def ownPinFile(address: MasterAddress) -> str:
    """
    @return: the name of the file in C{pki_dir} that pins the key of the
        master at C{address} alone: C{minion_master_<host>_<port>.pub},
        every character of the host other than letters, digits, C{.} and
        C{-} replaced by C{_}.
    """
    host = re.sub(r"[^A-Za-z0-9.-]", "_", address.host)
    return f"minion_master_{host}_{address.port}.pub"


class PinnedMasterCredentials(MinionCredentials):
    """
    A minion's credentials for one master of a failover list.

    The key the master presents must be the one pinned for it alone
    (L{ownPinPath}) if that file exists, else the one in
    C{minion_master.pub} (L{sharedPinPath}: the key the masters of a
    cluster share, or the single master's); with neither file the key is
    pinned in C{minion_master.pub} on first contact, as before. So a
    cluster sharing one key pair needs nothing more; masters with keys of
    their own need each such key placed in its master's own file (the
    minion never pins a second key by itself: that would trust a key it
    has not pinned). C{master_finger} applies to every master.

    @ivar ownPinPath: the file pinning this master's key alone.
    @ivar sharedPinPath: C{pki_dir/minion_master.pub}.
    """

    def __init__(
        self,
        minionId: str,
        privateKey: Any,
        publicPem: bytes,
        pkiDir: str,
        address: MasterAddress,
        masterFinger: str = "",
    ) -> None:
        super().__init__(minionId, privateKey, publicPem, pkiDir, masterFinger)
        self.address = address
        self.sharedPinPath = os.path.join(pkiDir, MASTER_PUB_FILE)
        self.ownPinPath = os.path.join(pkiDir, ownPinFile(address))

    def openReply(self, reply: dict[str, Any], challenge: bytes, nonce: bytes) -> Any:
        """
        As L{MinionCredentials.openReply}, against this master's own pin if
        it has one, else the shared one. Blocking (RSA, the pinned-key
        files).

        @raise MasterIdentityError: the key presented is not the one pinned
            for this master (the message names the file to place its own
            key in).
        """
        own = os.path.exists(self.ownPinPath)
        self.pinnedPath = self.ownPinPath if own else self.sharedPinPath
        pinned = self.readPinned()
        presented = reply.get("master_pub")
        if not own and pinned is not None and isinstance(presented, (bytes, str)):
            try:
                masterPem = crypt.canonicalPublicPem(presented)
            except crypt.CryptError:
                masterPem = None  # the check below says it is malformed
            if masterPem is not None and masterPem != pinned:
                raise MasterIdentityError(
                    f"master {self.address} presents key {crypt.fingerprint(masterPem)}, "
                    f"not the pinned {crypt.fingerprint(pinned)} in {self.sharedPinPath}; if "
                    "this master has a key pair of its own, place its public key in "
                    f"{self.ownPinPath}"
                )
        return super().openReply(reply, challenge, nonce)
