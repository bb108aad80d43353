# -*- test-case-name: tests.test_keystore -*-
"""
Key stores: where the master keeps minion public keys.

L{FilesystemKeyStore} uses Salt's layout, one PEM file per minion id under
C{pki_dir/<state>/<id>}, so that an admin can inspect it with C{ls} and a
second process (C{salttwist-key}) can change it while the master runs.
L{InMemoryKeyStore} implements the same L{IKeyStore} for tests.

Both take keyword argument C{expected} to C{moveKey}, beyond L{IKeyStore}:
the move happens only if the stored key is still exactly those bytes, which
is how C{salttwist-key} refuses to accept a key that changed after the admin
looked at its fingerprint.

Every method validates the minion id before anything else, so a hostile id
never reaches a path.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
import time
from typing import Any

from zope.interface import implementer

from salttwist.crypt import canonicalPublicPem
from salttwist.files import atomicWrite
from salttwist.interfaces import IKeyStore
from salttwist.pki.ids import (
    DEFAULT_ID_RULES,
    IdClash,
    IdIndex,
    IdRules,
    InvalidMinionId,
    escapeId,
    validateMinionId,
)

__all__ = [
    "ACCEPTED",
    "DENIED",
    "PENDING",
    "REJECTED",
    "STATES",
    "FilesystemKeyStore",
    "IdClash",
    "InMemoryKeyStore",
    "InvalidMinionId",
    "KeyChanged",
    "checkNewId",
    "nonconformingIds",
]

PENDING = "minions_pre"
ACCEPTED = "minions"
REJECTED = "minions_rejected"
DENIED = "minions_denied"

STATES: tuple[str, ...] = (PENDING, ACCEPTED, REJECTED, DENIED)
"""
The four key states, each a directory under C{pki_dir}.
"""

MAX_KEY_BYTES = 65536
"""
The largest key file L{FilesystemKeyStore.getKey} reads. L{loadPublicKey}
accepts at most 16 KiB, so anything bigger was not written by us.

@see: L{salttwist.crypt.loadPublicKey}
"""

_PUBLIC_MODE = 0o644
_DIR_MODE = 0o700

RACY_SECONDS = 1.0
"""
A state directory changed less than this long ago is listed again for
L{FilesystemKeyStore.idClashes} even if its modification time is the one
last seen: file times are coarser than writes are apart (as git's "racy"
index entries).
"""

INDEX_REFRESH_SECONDS = 0.5
"""
While this store itself writes keys (an auth storm of new ids), the index
of L{FilesystemKeyStore.idClashes} keeps its own writes as they happen and
lists the state directories again at most this often, not per new id
(listing 10,000 pending keys per new id made a storm quadratic). A key
another process wrote meanwhile is seen at most this late; when this store
has not written since its last listing, any change is listed at once.
"""


class KeyChanged(Exception):
    """
    Raised by C{moveKey(..., expected=...)} when the stored key is not the
    expected one; nothing was moved.
    """


def _checkState(state: object) -> str:
    """
    @return: C{state} if it is one of L{STATES}.
    @raise ValueError: otherwise.
    """
    if not isinstance(state, str) or state not in STATES:
        raise ValueError(f"unknown key state {state!r}; expected one of {', '.join(STATES)}")
    return state


def _checkMove(minionId: object, fromState: object, toState: object) -> None:
    """
    Validate the arguments of C{moveKey}: the id first, then both states.

    @raise InvalidMinionId: if C{minionId} is not valid.
    @raise ValueError: if a state is unknown or both are the same.
    """
    validateMinionId(minionId)
    _checkState(fromState)
    _checkState(toState)
    if fromState == toState:
        raise ValueError(f"cannot move a key from {fromState!r} to itself")


@implementer(IKeyStore)
class FilesystemKeyStore:
    """
    An L{IKeyStore} over C{pki_dir/<state>/<id>}, one PEM file per id.

    Files are replaced atomically (written beside the target, then
    C{os.replace}d) and moved with C{os.rename}, so a reader in another
    process sees either the old or the new key, never a partial one. A
    minion has at most one file per state; in particular a second denied key
    for an id replaces the first, as Salt keeps only one denied file per id.

    All I/O here blocks; the files are small. The master calls it from a
    thread.

    @ivar pkiDir: the directory holding the state directories.
    """

    def __init__(self, pkiDir: str, idRules: IdRules = DEFAULT_ID_RULES) -> None:
        """
        Create C{pkiDir} and its state directories, mode 0700, if missing.
        Existing directories are left as they are.

        @param pkiDir: the master's C{pki_dir}.
        @param idRules: the rules new ids must meet (L{checkNewId}).
        """
        self.pkiDir = pkiDir
        self.idRules = idRules
        # The index of idClashes: the directories' stamps when listed, when
        # that was, and whether this store wrote since (threads share it).
        self._index: IdIndex | None = None
        self._indexStamps: tuple[Any, ...] | None = None
        self._indexAt = float("-inf")
        self._wroteSinceIndex = False
        self._indexLock = threading.Lock()
        os.makedirs(pkiDir, mode=_DIR_MODE, exist_ok=True)
        for state in STATES:
            try:
                os.mkdir(os.path.join(pkiDir, state), _DIR_MODE)
            except FileExistsError:
                pass

    def _path(self, state: str, minionId: str) -> str:
        """
        The file of C{minionId} in C{state}; both must already be validated.
        """
        return os.path.join(self.pkiDir, state, minionId)

    def _tempPath(self, state: str, kind: str) -> str:
        """
        A fresh name for a temporary file in the directory of C{state}.

        It starts with a dot, so L{listKeys} never reports it, and does not
        include the minion id, so it stays short of C{NAME_MAX} even for the
        longest id.
        """
        return os.path.join(self.pkiDir, state, f".{kind}-{os.getpid()}-{secrets.token_hex(8)}")

    def _readFile(self, path: str) -> bytes | None:
        """
        Read a key file without following a symlink or blocking on a FIFO.

        @return: its bytes, or L{None} if there is no such file.
        @raise OSError: if it is a symlink or not a regular file, or larger
            than L{MAX_KEY_BYTES}.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "key entry is not a regular file", path)
            chunks = []
            size = 0
            while size <= MAX_KEY_BYTES:
                chunk = os.read(fd, MAX_KEY_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > MAX_KEY_BYTES:
                raise OSError(errno.EFBIG, f"key file is larger than {MAX_KEY_BYTES} bytes", path)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def getKey(self, state: str, minionId: str) -> bytes | None:
        """
        @param state: one of L{STATES}.
        @param minionId: a valid minion id.
        @return: the PEM bytes stored for C{minionId} in C{state}, or L{None}.
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if C{state} is not one of L{STATES}.
        @raise OSError: if the entry is a symlink (it is never followed), not
            a regular file, or too large.
        """
        validateMinionId(minionId)
        _checkState(state)
        return self._readFile(self._path(state, minionId))

    def putKey(self, state: str, minionId: str, pem: bytes) -> None:
        """
        Store C{pem} for C{minionId} in C{state} atomically, replacing any key
        already there in that state.

        The key is vetted and stored in canonical form
        (L{canonicalPublicPem}), so the store holds nothing but valid public
        keys and two encodings of one key compare equal.

        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if C{state} is not one of L{STATES}.
        @raise salttwist.crypt.CryptError: if C{pem} is not an acceptable
            public key.
        """
        validateMinionId(minionId)
        _checkState(state)
        # Public keys are 0644 whatever the umask; the temporary file's name
        # starts with a dot, so listKeys never reports it.
        atomicWrite(self._path(state, minionId), canonicalPublicPem(pem), _PUBLIC_MODE)
        self._noteWrite(minionId, added=state)

    def moveKey(
        self, minionId: str, fromState: str, toState: str, expected: bytes | None = None
    ) -> bool:
        """
        Move the key of C{minionId} from C{fromState} to C{toState}
        atomically, replacing any key of C{minionId} in C{toState}.

        @param expected: if given, move the key only if its bytes are exactly
            these. The file is first renamed to a private name, so the bytes
            compared are the bytes moved even if another process writes a new
            key meanwhile; on a mismatch it is put back unless a newer key
            has already taken its place.
        @return: L{True} if a key was moved, L{False} if there was none (for
            example because another process moved it first).
        @raise KeyChanged: if C{expected} was given and the key differs.
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if a state is not one of L{STATES}, or both are
            the same.
        """
        _checkMove(minionId, fromState, toState)
        source = self._path(fromState, minionId)
        target = self._path(toState, minionId)
        if expected is None:
            try:
                os.rename(source, target)
            except FileNotFoundError:
                return False
            self._noteWrite(minionId, added=toState, removed=fromState)
            return True

        claim = self._tempPath(fromState, "claim")
        try:
            os.rename(source, claim)
        except FileNotFoundError:
            return False
        try:
            data = self._readFile(claim)
            if data != expected:
                raise KeyChanged(f"the key of {minionId} in {fromState} has changed")
        except BaseException:
            self._putBack(claim, source)
            raise
        os.rename(claim, target)
        self._noteWrite(minionId, added=toState, removed=fromState)
        return True

    def _putBack(self, claim: str, source: str) -> None:
        """
        Return a claimed file to its name, unless a new file was written
        there while it was claimed: that one is newer and wins.
        """
        try:
            os.link(claim, source)
        except FileExistsError:
            pass
        except FileNotFoundError:
            # The claimed file itself is gone; there is nothing to put back.
            return
        except OSError:
            # No hard links on this file system: fall back to a rename,
            # which cannot tell whether a newer file arrived meanwhile.
            if not os.path.lexists(source):
                os.rename(claim, source)
                return
        os.unlink(claim)

    def deleteKey(self, state: str, minionId: str) -> bool:
        """
        Remove the key of C{minionId} from C{state}.

        @return: L{True} if a key was removed, L{False} if there was none.
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if C{state} is not one of L{STATES}.
        """
        validateMinionId(minionId)
        _checkState(state)
        try:
            os.unlink(self._path(state, minionId))
        except FileNotFoundError:
            return False
        self._noteWrite(minionId, removed=state)
        return True

    def listKeys(self, state: str) -> list[str]:
        """
        @param state: one of L{STATES}.
        @return: the sorted list of minion ids in C{state}: regular files
            only, skipping dotfiles (our temporary files), and names that are
            not valid minion ids.
        @raise ValueError: if C{state} is not one of L{STATES}.
        """
        _checkState(state)
        ids = []
        with os.scandir(os.path.join(self.pkiDir, state)) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    validateMinionId(entry.name)
                except InvalidMinionId:
                    continue
                if entry.is_file(follow_symlinks=False):
                    ids.append(entry.name)
        return sorted(ids)

    def idClashes(self, minionId: str) -> list[tuple[str, str]]:
        """
        The ids with a key in any state that C{minionId} clashes with under
        L{idRules} (the same regardless of ASCII case, or confusable).

        The ids are indexed once and listed again only when a state
        directory has changed (or changed within L{RACY_SECONDS}), so a new
        id costs a few C{stat} calls while keys do not change.

        @return: C{(state, id)} pairs, other than C{minionId} itself.
        """
        now = time.time()
        stamps: list[Any] | None = []
        for state in STATES:
            info = os.stat(os.path.join(self.pkiDir, state))
            if now - info.st_mtime < RACY_SECONDS:
                stamps = None
                break
            assert stamps is not None
            stamps.append((info.st_ino, info.st_mtime_ns))
        key = tuple(stamps) if stamps is not None else None
        with self._indexLock:
            index = self._index
            unchanged = key is not None and key == self._indexStamps
            ownWritesOnly = self._wroteSinceIndex and now - self._indexAt < INDEX_REFRESH_SECONDS
            if index is None or not (unchanged or ownWritesOnly):
                index = IdIndex(self.idRules)
                for state in STATES:
                    for other in self.listKeys(state):
                        index.add(state, other)
                self._index = index
                self._indexStamps = key
                self._indexAt = now
                self._wroteSinceIndex = False
            return index.clashes(minionId)

    def _noteWrite(
        self, minionId: str, added: str | None = None, removed: str | None = None
    ) -> None:
        """
        Keep the index of L{idClashes} up to date with a write of this store.
        """
        with self._indexLock:
            if self._index is None:
                return
            self._index.move(minionId, added, removed)
            self._wroteSinceIndex = True

    def stateOf(self, minionId: str) -> list[str]:
        """
        @return: the states, in L{STATES} order, that hold a key (a regular
            file) for C{minionId}.
        @raise InvalidMinionId: if C{minionId} is not valid.
        """
        validateMinionId(minionId)
        states = []
        for state in STATES:
            try:
                mode = os.lstat(self._path(state, minionId)).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISREG(mode):
                states.append(state)
        return states


@implementer(IKeyStore)
class InMemoryKeyStore:
    """
    An L{IKeyStore} in a L{dict}, for tests. It validates ids, states and
    keys exactly as L{FilesystemKeyStore} does.

    @ivar keys: maps each state to a L{dict} of minion id to PEM bytes.
    """

    def __init__(self, idRules: IdRules = DEFAULT_ID_RULES) -> None:
        """
        Start with no keys.

        @param idRules: the rules new ids must meet (L{checkNewId}).
        """
        self.idRules = idRules
        self.keys: dict[str, dict[str, bytes]] = {state: {} for state in STATES}
        self._index: IdIndex | None = None

    def _currentIndex(self) -> IdIndex:
        """
        The index of every id, kept up to date by every write (made again
        if C{idRules} was replaced).
        """
        if self._index is None or self._index.rules is not self.idRules:
            self._index = IdIndex(self.idRules)
            for state in STATES:
                for other in self.keys[state]:
                    self._index.add(state, other)
        return self._index

    def _noteWrite(
        self, minionId: str, added: str | None = None, removed: str | None = None
    ) -> None:
        """
        @see: L{FilesystemKeyStore._noteWrite}
        """
        if self._index is None:
            return
        self._index.move(minionId, added, removed)

    def idClashes(self, minionId: str) -> list[tuple[str, str]]:
        """
        @see: L{FilesystemKeyStore.idClashes}
        """
        return self._currentIndex().clashes(minionId)

    def getKey(self, state: str, minionId: str) -> bytes | None:
        """
        @see: L{FilesystemKeyStore.getKey}
        """
        validateMinionId(minionId)
        return self.keys[_checkState(state)].get(minionId)

    def putKey(self, state: str, minionId: str, pem: bytes) -> None:
        """
        @see: L{FilesystemKeyStore.putKey}
        """
        validateMinionId(minionId)
        _checkState(state)
        self.keys[state][minionId] = canonicalPublicPem(pem)
        self._noteWrite(minionId, added=state)

    def moveKey(
        self, minionId: str, fromState: str, toState: str, expected: bytes | None = None
    ) -> bool:
        """
        @see: L{FilesystemKeyStore.moveKey}
        """
        _checkMove(minionId, fromState, toState)
        data = self.keys[fromState].get(minionId)
        if data is None:
            return False
        if expected is not None and data != expected:
            raise KeyChanged(f"the key of {minionId} in {fromState} has changed")
        self.keys[toState][minionId] = self.keys[fromState].pop(minionId)
        self._noteWrite(minionId, added=toState, removed=fromState)
        return True

    def deleteKey(self, state: str, minionId: str) -> bool:
        """
        @see: L{FilesystemKeyStore.deleteKey}
        """
        validateMinionId(minionId)
        removed = self.keys[_checkState(state)].pop(minionId, None) is not None
        if removed:
            self._noteWrite(minionId, removed=state)
        return removed

    def listKeys(self, state: str) -> list[str]:
        """
        @see: L{FilesystemKeyStore.listKeys}
        """
        return sorted(self.keys[_checkState(state)])

    def stateOf(self, minionId: str) -> list[str]:
        """
        @see: L{FilesystemKeyStore.stateOf}
        """
        validateMinionId(minionId)
        return [state for state in STATES if minionId in self.keys[state]]


def _clashes(store: Any, rules: IdRules, minionId: str) -> list[tuple[str, str]]:
    """
    L{FilesystemKeyStore.idClashes} of any L{IKeyStore} (listing its keys
    if it has no index of its own).
    """
    idClashes = getattr(store, "idClashes", None)
    if idClashes is not None:
        return list(idClashes(minionId))
    index = IdIndex(rules)
    for state in STATES:
        for other in store.listKeys(state):
            index.add(state, other)
    return index.clashes(minionId)


def checkNewId(store: Any, minionId: str) -> str:
    """
    May C{minionId}, which has no key yet, get one (in C{minions_pre})?
    Checked before anything is written for it.

    @param store: an L{IKeyStore}; its C{idRules} (default
        L{DEFAULT_ID_RULES}) are the rules.
    @return: C{minionId}.
    @raise InvalidMinionId: it breaks the rules (the message names the rule).
    @raise IdClash: it clashes with an id that has a key in any state: the
        same regardless of ASCII case (or, with Unicode ids, confusable).
        Blocking: may list the state directories.
    """
    rules: IdRules = getattr(store, "idRules", DEFAULT_ID_RULES)
    rules.check(minionId)
    clashes = _clashes(store, rules, minionId)
    if clashes:
        state, other = clashes[0]
        raise IdClash(
            f"minion id '{escapeId(minionId)}' {rules.sameness(minionId, other)} "
            f"the id '{escapeId(other)}', which has a key in {state}; minion ids must be "
            "unique regardless of case",
            clashes,
        )
    return minionId


def nonconformingIds(store: Any) -> list[tuple[str, str, str]]:
    """
    The keys a master holds whose ids a new minion could not take today:
    they break the store's C{idRules} or clash with another id. A master
    warns of them at start; they still work, and C{salttwist-key -d} deletes
    them. Blocking: lists the state directories.

    @return: C{(state, id, problem)} for each, in L{STATES} then id order.
    """
    rules: IdRules = getattr(store, "idRules", DEFAULT_ID_RULES)
    listed = [(state, minionId) for state in STATES for minionId in store.listKeys(state)]
    index = IdIndex(rules)
    for state, minionId in listed:
        index.add(state, minionId)
    found = []
    for state, minionId in listed:
        try:
            rules.check(minionId)
        except InvalidMinionId as e:
            found.append((state, minionId, str(e)))
            continue
        clashes = index.clashes(minionId)
        if clashes:
            other = clashes[0][1]
            found.append(
                (
                    state,
                    minionId,
                    f"{rules.sameness(minionId, other)} '{escapeId(other)}' "
                    f"({', '.join(s for s, _ in clashes)})",
                )
            )
    return found
