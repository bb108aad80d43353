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

The process's cache (L{SHARED}) keeps a text's data only when the text
comes a second time: a pillar SLS that holds a minion's grains renders to
a text of its own for each minion, and packing its data for nothing cost
as much as a tenth of its compile.
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

    def __init__(
        self, maxEntries: int = MAX_ENTRIES, maxBytes: int = MAX_BYTES, admitAfter: int = 1
    ) -> None:
        """
        @param admitAfter: L{put} keeps a text's data the first time (1), or
            only when the same text was put once before (2).
        """
        self._maxEntries = maxEntries
        self._maxBytes = maxBytes
        self._admitAfter = admitAfter
        self._entries: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        #: The keys of the texts put once and not kept (with C{admitAfter}
        #: 2), newest last.
        self._seen: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Each thread's last key, with its text: a L{put} after a L{get}
        #: of the same text does not hash it again.
        self._last = threading.local()
        self.hits = 0
        self.misses = 0

    def _key(self, kind: str, text: str) -> tuple[str, bytes]:
        last = getattr(self._last, "entry", None)
        if last is not None and last[0] is text and last[1][0] == kind:
            return last[1]  # type: ignore[no-any-return]
        key = kind, hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        self._last.entry = (text, key)
        return key

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
        Keep C{data}, parsed from C{text}, if msgpack can hold it (and,
        with C{admitAfter} 2, if C{text} was put before).
        """
        if self._admitAfter > 1:
            key = self._key(kind, text)
            with self._lock:
                if key not in self._entries:
                    if key in self._seen:
                        del self._seen[key]
                    else:
                        self._seen[key] = None
                        while len(self._seen) > 8 * self._maxEntries:
                            self._seen.popitem(last=False)
                        return
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
            self._seen.clear()
            self._bytes = 0


#: What L{DataCache.get} returns for a miss.
MISSING = _MISSING

#: The process's cache, used by L{salttwist.render.renderText} with
#: C{cacheData=True}.
SHARED = DataCache(admitAfter=2)
