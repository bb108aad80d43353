"""
The event bus: tagged events published and subscribed over UNIX sockets.
"""

from __future__ import annotations

import os
from typing import Any

#: The master's socket for subscribers, in its C{sock_dir}.
EVENT_PUB_SOCKET = "master_event_pub.ipc"
#: The master's socket for local publishers, in its C{sock_dir}.
EVENT_PULL_SOCKET = "master_event_pull.ipc"


def minionEventSockets(sockDir: str, minionId: str) -> tuple[str, str]:
    """
    The paths of a minion's own bus in its C{sock_dir}, named as Salt names
    them: C{minion_event_<hash>_pub.ipc} and C{minion_event_<hash>_pull.ipc},
    where C{<hash>} is the first 10 hex digits of the SHA-256 of the minion
    id (short enough for a UNIX socket path whatever the id).

    @return: C{(pubPath, pullPath)}.
    """
    # cryptography's SHA-256, not hashlib's (see salttwist.symmetric).
    from salttwist.symmetric import sha256

    idHash = sha256(minionId.encode("utf-8")).hex()[:10]
    return (
        os.path.join(sockDir, f"minion_event_{idHash}_pub.ipc"),
        os.path.join(sockDir, f"minion_event_{idHash}_pull.ipc"),
    )


def jsonPlain(value: Any) -> Any:
    """
    Event data as JSON can carry it: bytes, as values or keys, become text
    (undecodable bytes replaced); lists, tuples and maps are copied.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {jsonPlain(key): jsonPlain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonPlain(item) for item in value]
    return value
