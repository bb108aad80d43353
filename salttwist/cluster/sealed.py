# -*- test-case-name: tests.test_cluster -*-
"""
The cluster's messages sealed with a key the masters share
(L{SealedClusterBus}), so the broker and whoever else reaches it can
neither read the jobs and returns that cross it nor forge one.

Every master of a cluster holds the same 256-bit key, in
C{cluster_pki_dir/cluster.key} (64 hex digits, mode 0600). Each message is
sealed with AES-256-GCM under it, bound to the cluster and the message's
kind; a message that does not open is dropped and logged. A job cannot be
replayed to run again: a master drops a jid it knows, and a job older than
C{cluster_job_max_age} (its time is inside the seal).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.cluster.interfaces import IClusterBus
from salttwist.crypt import newAesKey, writePrivateFile
from salttwist.symmetric import AES_KEY_BYTES, NONCE_BYTES, TAG_BYTES, AesCipher, CryptError

#: The shared key's file in C{cluster_pki_dir}.
CLUSTER_KEY_FILE = "cluster.key"
#: Bytes a seal adds to a message.
SEAL_BYTES = NONCE_BYTES + TAG_BYTES


class ClusterKeyError(ValueError):
    """
    The cluster key file is unusable; the message says why.
    """


def loadOrCreateClusterKey(directory: str) -> tuple[bytes, str, bool]:
    """
    Read the cluster key from C{directory}, making one (and the directory,
    mode 0700) if there is none.

    @return: the key, its file's path, and whether it was just made.
    @raise ClusterKeyError: the file is not 64 hex digits, or others than
        its owner may read it.
    """
    path = os.path.join(directory, CLUSTER_KEY_FILE)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        key = newAesKey()
        writePrivateFile(path, key.hex().encode() + b"\n")
        return key, path, True
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterKeyError(
            f"{path}: the cluster key may be read by others than its owner "
            f"(mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it"
        )
    with open(path, "rb") as f:
        text = f.read().strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != AES_KEY_BYTES:
        raise ClusterKeyError(f"{path}: not a cluster key ({AES_KEY_BYTES * 2} hex digits)")
    return key, path, False


@implementer(IClusterBus)
class SealedClusterBus:
    """
    An L{IClusterBus} whose messages are sealed with the cluster key,
    over another one.
    """

    log = Logger()

    def __init__(self, inner: Any, key: bytes, clusterId: str) -> None:
        self._inner = inner
        self._cipher = AesCipher(key)
        self._clusterId = clusterId
        self.memberId = inner.memberId

    @property
    def maxPayload(self) -> int:
        """
        The inner bus's limit less the seal.
        """
        return self._inner.maxPayload - SEAL_BYTES  # type: ignore[no-any-return]

    @property
    def outbox(self) -> Any:
        """
        The inner bus's outbox.
        """
        return self._inner.outbox

    @property
    def connected(self) -> bool:
        """
        Whether the inner bus is connected.
        """
        return self._inner.connected  # type: ignore[no-any-return]

    @property
    def unreachableLimit(self) -> float:
        """
        The inner bus's limit.
        """
        return self._inner.unreachableLimit  # type: ignore[no-any-return]

    def _aad(self, kind: str) -> bytes:
        return f"salttwist-cluster/{self._clusterId}/{kind}".encode()

    def subscribe(self, kind: str, handler: Callable[[bytes], Any]) -> None:
        """
        See L{IClusterBus.subscribe}: C{handler} gets the opened message; one
        that does not open is dropped (acknowledged) and logged.
        """
        aad = self._aad(kind)

        def opened(payload: bytes) -> Any:
            try:
                plaintext = self._cipher.decrypt(payload, aad)
            except CryptError:
                self.log.warn(
                    "cluster: dropped a {kind} message that does not open with this "
                    "master's cluster key (a master with another cluster.key, or a forgery)",
                    kind=kind,
                )
                return None
            return handler(plaintext)

        self._inner.subscribe(kind, opened)

    def publish(self, kind: str, payload: bytes) -> Any:
        """
        See L{IClusterBus.publish}.
        """
        return self._inner.publish(kind, self._cipher.encrypt(payload, self._aad(kind)))

    def start(self) -> None:
        """
        See L{IClusterBus.start}.
        """
        self._inner.start()

    def stop(self) -> Any:
        """
        See L{IClusterBus.stop}.
        """
        return self._inner.stop()

    def whyUnavailable(self) -> str | None:
        """
        See L{IClusterBus.whyUnavailable}.
        """
        return self._inner.whyUnavailable()  # type: ignore[no-any-return]
