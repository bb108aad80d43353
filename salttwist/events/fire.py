# -*- test-case-name: tests.test_events -*-
"""
Fire one event on a running master's bus from a short-lived command (such as
salttwist-key), without a reactor: a blocking write to
C{master_event_pull.ipc}, bounded by a timeout. L{fireEvent} does the same
for any bus's pull socket (a minion's, for C{salttwist-call --local
event.fire}).
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

from salttwist import serial
from salttwist.events import EVENT_PULL_SOCKET


def fireMasterEvent(sockDir: str, tag: str, data: dict[str, Any], timeout: float = 1.0) -> bool:
    """
    Send C{(tag, data)} to the master whose C{sock_dir} is C{sockDir}.

    @return: L{True} if it was handed to the master, L{False} if no master
        is listening (the caller carries on: the change it reports is
        already on disk, and the master also notices it by itself).
    """
    return fireEvent(os.path.join(sockDir, EVENT_PULL_SOCKET), tag, data, timeout)


def fireEvent(pullPath: str, tag: str, data: dict[str, Any], timeout: float = 1.0) -> bool:
    """
    Send C{(tag, data)} to the bus whose pull socket is C{pullPath} (the
    master's or a minion's), with a blocking write bounded by C{timeout}.

    @return: L{True} if it was handed to the bus, L{False} if nothing
        listens there (or the write did not finish in time).
    """
    body = serial.dumps({"tag": tag, "data": data})
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(pullPath)
            sock.sendall(struct.pack("!I", len(body)) + body)
    except OSError:
        return False
    return True
