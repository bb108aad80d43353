# -*- test-case-name: tests.test_render -*-
"""
Parsed data kept by the text it was parsed from, for callers that render
the same files for many minions (the pillar: thousands of minions whose
SLS files often render to the same text).

YAML parsing is most of a pillar's cost (PyYAML builds its objects in
Python even with the C parser). The cache holds the data packed with
msgpack, and every hit unpacks a fresh copy (a tenth of the cost of
parsing), so callers may change what they get. Data msgpack cannot hold
exactly (sets, tuple keys ...) is not cached.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import msgpack

#: Entries kept, and their total packed size, at most.
MAX_ENTRIES = 512
MAX_BYTES = 64 * 1024 * 1024

_MISSING = object()


class DataCache:
    """
    A bounded LRU of parsed data, keyed by renderer and a SHA-256 of the
    text; safe to share between threads.
    """

    def __init__(self, maxEntries: int = MAX_ENTRIES, maxBytes: int = MAX_BYTES) -> None:
        self._maxEntries = maxEntries
        self._maxBytes = maxBytes
        self._entries: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(kind: str, text: str) -> tuple[str, bytes]:
        return kind, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def get(self, kind: str, text: str) -> Any:
        """
        @return: a fresh copy of the data C{text} parsed to with renderer
            C{kind}, or L{MISSING}.
        """
        key = self._key(kind, text)
        with self._lock:
            packed = self._entries.get(key)
            if packed is None:
                self.misses += 1
                return _MISSING
            self._entries.move_to_end(key)
        try:
            data = msgpack.unpackb(packed, raw=False, strict_map_key=False)
        except (ValueError, TypeError):
            self._drop(key)
            self.misses += 1
            return _MISSING
        self.hits += 1
        return data

    def put(self, kind: str, text: str, data: Any) -> None:
        """
        Keep C{data}, parsed from C{text}, if msgpack can hold it.
        """
        try:
            packed = msgpack.packb(data, use_bin_type=True)
        except (ValueError, TypeError, OverflowError):
            return
        if len(packed) > self._maxBytes // 4:
            return
        key = self._key(kind, text)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._entries[key] = packed
            self._bytes += len(packed)
            while self._entries and (
                len(self._entries) > self._maxEntries or self._bytes > self._maxBytes
            ):
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)

    def _drop(self, key: tuple[str, bytes]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


#: What L{DataCache.get} returns for a miss.
MISSING = _MISSING

#: The process's cache, used by L{salttwist.render.renderText} with
#: C{cacheData=True}.
SHARED = DataCache()
