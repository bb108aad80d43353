# -*- test-case-name: tests.test_reqclient -*-
"""
The errors of the req channel that callers on and off the reactor share.
"""

from __future__ import annotations

__all__ = ["RequestError"]


class RequestError(Exception):
    """
    The master answered a request with an error.
    """
