# -*- test-case-name: tests.test_keystore -*-
"""
Tests for L{salttwist.pki.keystore}.

L{KeyStoreContractMixin} holds the L{IKeyStore} behaviour every store must
have and runs against both L{FilesystemKeyStore} and L{InMemoryKeyStore};
L{FilesystemKeyStoreTests} adds what only the files on disk can show.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import stat
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from cryptography.hazmat.primitives import serialization
from twisted.trial.unittest import FailTest, SynchronousTestCase
from zope.interface.verify import verifyObject

from salttwist.crypt import CryptError, generatePrivateKey, publicKeyToPem
from salttwist.interfaces import IKeyStore
from salttwist.pki import keystore
from salttwist.pki.keystore import (
    ACCEPTED,
    DENIED,
    MAX_KEY_BYTES,
    PENDING,
    REJECTED,
    STATES,
    FilesystemKeyStore,
    IdClash,
    InMemoryKeyStore,
    InvalidMinionId,
    KeyChanged,
    checkNewId,
    nonconformingIds,
)

# Key generation is slow; two keys serve every test.
_KEY_A = generatePrivateKey().public_key()
_KEY_B = generatePrivateKey().public_key()
PEM_A = publicKeyToPem(_KEY_A)
PEM_B = publicKeyToPem(_KEY_B)
# The same key as PEM_A, in another encoding (PKCS#1 "RSA PUBLIC KEY").
PEM_A_PKCS1 = _KEY_A.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)

BAD_IDS = ["../x", "..", "", "a/b", "web\u202e1", "web 1", ".hidden", 7]


class KeyStoreContractMixin:
    """
    The behaviour of every L{IKeyStore}. Subclasses are
    L{SynchronousTestCase}s that define C{makeStore}.
    """

    def makeStore(self) -> IKeyStore:
        """
        @return: a new, empty store.
        """
        raise NotImplementedError()

    def setUp(self) -> None:
        """
        Make a fresh store for each test.
        """
        self.store = self.makeStore()

    def test_interface(self) -> None:
        """
        The store provides L{IKeyStore}.
        """
        self.assertTrue(verifyObject(IKeyStore, self.store))

    def test_putRefusesTwoBlocks(self) -> None:
        """
        A PEM with a second key block after the first, or trailing bytes,
        is refused and nothing is stored (issue 22).
        """
        for pem in (PEM_A + PEM_B, PEM_A + b"x"):
            self.assertRaises(CryptError, self.store.putKey, PENDING, "m1", pem)
        self.assertIsNone(self.store.getKey(PENDING, "m1"))

    def test_idClashesEveryState(self) -> None:
        """
        C{idClashes} names the id with a key in any state that a new id is
        the same as regardless of ASCII case; not the id itself.
        """
        self.assertEqual(self.store.idClashes("WEB1"), [])
        for state in STATES:
            self.store.putKey(state, "web1", PEM_A)
            self.assertEqual(self.store.idClashes("WEB1"), [(state, "web1")])
            self.assertEqual(self.store.idClashes("web1"), [])
            self.assertEqual(self.store.idClashes("Web1"), [(state, "web1")])
            self.store.deleteKey(state, "web1")
        self.assertEqual(self.store.idClashes("WEB1"), [])

    def test_checkNewId(self) -> None:
        """
        L{checkNewId} refuses an id breaking the rules, naming the rule, and
        an id clashing with an existing one (L{IdClash}, naming it).
        """
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        self.assertEqual(checkNewId(self.store, "web2"), "web2")
        with self.assertRaises(IdClash) as caught:
            checkNewId(self.store, "WEB1")
        self.assertIn("'web1'", str(caught.exception))
        self.assertEqual(caught.exception.clashes, [(ACCEPTED, "web1")])
        with self.assertRaises(InvalidMinionId) as refused:
            checkNewId(self.store, "web1\u3164")
        self.assertIn("U+3164", str(refused.exception))

    def test_nonconformingIds(self) -> None:
        """
        L{nonconformingIds} lists stored keys whose ids break the rules or
        clash with another id; they can still be read and deleted.
        """
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        self.store.putKey(PENDING, "WEB1", PEM_B)
        self.store.putKey(ACCEPTED, "web1\u3164", PEM_B)
        self.store.putKey(ACCEPTED, "good", PEM_A)
        found = nonconformingIds(self.store)
        self.assertEqual(
            [(state, minionId) for state, minionId, _ in found],
            [(PENDING, "WEB1"), (ACCEPTED, "web1"), (ACCEPTED, "web1\u3164")],
        )
        self.assertIn("U+3164", found[2][2])
        self.assertIn("'WEB1'", found[1][2])
        self.assertEqual(self.store.getKey(ACCEPTED, "web1\u3164"), PEM_B)
        self.assertTrue(self.store.deleteKey(ACCEPTED, "web1\u3164"))

    def test_empty(self) -> None:
        """
        A new store has no keys: every state lists nothing and L{getKey}
        returns L{None}.
        """
        for state in STATES:
            self.assertEqual(self.store.listKeys(state), [])
            self.assertIsNone(self.store.getKey(state, "web1"))
        self.assertEqual(self.store.stateOf("web1"), [])

    def test_putAndGet(self) -> None:
        """
        L{putKey} stores a key that L{getKey} returns, in that state only.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_A)
        self.assertIsNone(self.store.getKey(ACCEPTED, "web1"))
        self.assertIsNone(self.store.getKey(PENDING, "web2"))

    def test_putCanonical(self) -> None:
        """
        L{putKey} stores the canonical encoding, so another encoding of the
        same key reads back as the canonical PEM.
        """
        self.store.putKey(PENDING, "web1", PEM_A_PKCS1)
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_A)

    def test_putRefusesNonKey(self) -> None:
        """
        L{putKey} refuses anything that is not an acceptable public key and
        stores nothing.
        """
        self.assertRaises(CryptError, self.store.putKey, PENDING, "web1", b"not a key")
        self.assertRaises(CryptError, self.store.putKey, PENDING, "web1", "a str")
        self.assertEqual(self.store.listKeys(PENDING), [])

    def test_putReplaces(self) -> None:
        """
        A second L{putKey} for the same id and state replaces the first.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.store.putKey(PENDING, "web1", PEM_B)
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_B)
        self.assertEqual(self.store.listKeys(PENDING), ["web1"])

    def test_oneDeniedKeyPerId(self) -> None:
        """
        As in Salt, only one denied key is kept per id: the latest.
        """
        self.store.putKey(DENIED, "web1", PEM_A)
        self.store.putKey(DENIED, "web1", PEM_B)
        self.assertEqual(self.store.listKeys(DENIED), ["web1"])
        self.assertEqual(self.store.getKey(DENIED, "web1"), PEM_B)

    def test_listSorted(self) -> None:
        """
        L{listKeys} returns the ids of one state, sorted.
        """
        for minionId in ["web2", "db1", "web10"]:
            self.store.putKey(PENDING, minionId, PEM_A)
        self.store.putKey(ACCEPTED, "other", PEM_B)
        self.assertEqual(self.store.listKeys(PENDING), ["db1", "web10", "web2"])
        self.assertEqual(self.store.listKeys(ACCEPTED), ["other"])

    def test_unicodeId(self) -> None:
        """
        Non-ASCII ids are stored and listed like any other.
        """
        self.store.putKey(ACCEPTED, "ÄÖ_host", PEM_A)
        self.assertEqual(self.store.listKeys(ACCEPTED), ["ÄÖ_host"])
        self.assertEqual(self.store.getKey(ACCEPTED, "ÄÖ_host"), PEM_A)

    def test_move(self) -> None:
        """
        L{moveKey} moves a key between states and returns L{True}.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.assertIs(self.store.moveKey("web1", PENDING, ACCEPTED), True)
        self.assertIsNone(self.store.getKey(PENDING, "web1"))
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_A)
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])

    def test_moveMissing(self) -> None:
        """
        L{moveKey} returns L{False} when there is no key to move (for
        example because another process moved it first).
        """
        self.assertIs(self.store.moveKey("web1", PENDING, ACCEPTED), False)
        self.store.putKey(PENDING, "web1", PEM_A)
        self.store.moveKey("web1", PENDING, ACCEPTED)
        self.assertIs(self.store.moveKey("web1", PENDING, ACCEPTED), False)
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_A)

    def test_moveReplaces(self) -> None:
        """
        L{moveKey} replaces a key already in the target state.
        """
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        self.store.putKey(DENIED, "web1", PEM_B)
        self.assertIs(self.store.moveKey("web1", DENIED, ACCEPTED), True)
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_B)
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])

    def test_moveToSameState(self) -> None:
        """
        Moving a key to the state it is in is a L{ValueError}.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.assertRaises(ValueError, self.store.moveKey, "web1", PENDING, PENDING)
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_A)

    def test_moveExpected(self) -> None:
        """
        With C{expected} equal to the stored bytes, L{moveKey} moves the key.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.assertIs(self.store.moveKey("web1", PENDING, ACCEPTED, expected=PEM_A), True)
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_A)

    def test_moveExpectedMismatch(self) -> None:
        """
        With C{expected} different from the stored bytes, L{moveKey} raises
        L{KeyChanged} and leaves the key where it was.
        """
        self.store.putKey(PENDING, "web1", PEM_B)
        self.assertRaises(KeyChanged, self.store.moveKey, "web1", PENDING, ACCEPTED, expected=PEM_A)
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_B)
        self.assertEqual(self.store.stateOf("web1"), [PENDING])

    def test_moveExpectedMissing(self) -> None:
        """
        With C{expected} and no key, L{moveKey} returns L{False}.
        """
        self.assertIs(self.store.moveKey("web1", PENDING, ACCEPTED, expected=PEM_A), False)

    def test_delete(self) -> None:
        """
        L{deleteKey} removes a key from one state and returns L{True}, then
        L{False} once there is nothing left to remove.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.store.putKey(REJECTED, "web1", PEM_B)
        self.assertIs(self.store.deleteKey(PENDING, "web1"), True)
        self.assertIs(self.store.deleteKey(PENDING, "web1"), False)
        self.assertEqual(self.store.stateOf("web1"), [REJECTED])

    def test_stateOf(self) -> None:
        """
        L{stateOf} lists every state that holds a key for the id, in
        L{STATES} order.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        self.store.putKey(PENDING, "web2", PEM_A)
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED, DENIED])
        self.assertEqual(self.store.stateOf("web2"), [PENDING])

    def test_invalidIds(self) -> None:
        """
        Every method taking an id raises L{InvalidMinionId} for an invalid
        one, even when the state is invalid too: the id is checked first.
        """
        for badId in BAD_IDS:
            for state in (PENDING, "nonsense"):
                self.assertRaises(InvalidMinionId, self.store.getKey, state, badId)
                self.assertRaises(InvalidMinionId, self.store.putKey, state, badId, PEM_A)
                self.assertRaises(InvalidMinionId, self.store.deleteKey, state, badId)
                self.assertRaises(InvalidMinionId, self.store.moveKey, badId, state, ACCEPTED)
            self.assertRaises(InvalidMinionId, self.store.stateOf, badId)

    def test_invalidStates(self) -> None:
        """
        Every method taking a state raises L{ValueError} for an unknown one.
        """
        for badState in ["pending", "", "../minions", None]:
            self.assertRaises(ValueError, self.store.getKey, badState, "web1")
            self.assertRaises(ValueError, self.store.putKey, badState, "web1", PEM_A)
            self.assertRaises(ValueError, self.store.deleteKey, badState, "web1")
            self.assertRaises(ValueError, self.store.listKeys, badState)
            self.assertRaises(ValueError, self.store.moveKey, "web1", badState, ACCEPTED)
            self.assertRaises(ValueError, self.store.moveKey, "web1", PENDING, badState)


class InMemoryKeyStoreTests(KeyStoreContractMixin, SynchronousTestCase):
    """
    L{InMemoryKeyStore} keeps the L{IKeyStore} contract.
    """

    def makeStore(self) -> InMemoryKeyStore:
        """
        @return: a new L{InMemoryKeyStore}.
        """
        return InMemoryKeyStore()


class FilesystemKeyStoreTests(KeyStoreContractMixin, SynchronousTestCase):
    """
    L{FilesystemKeyStore} keeps the L{IKeyStore} contract, and uses files
    with the right names, modes and safeguards.
    """

    def makeStore(self) -> FilesystemKeyStore:
        """
        @return: a new L{FilesystemKeyStore} in C{base/pki}, under a fresh
            temporary C{base}.
        """
        self.base = self.mktemp()
        os.mkdir(self.base)
        self.pkiDir = os.path.join(self.base, "pki")
        return FilesystemKeyStore(self.pkiDir)

    def test_idClashesSeesOtherWriters(self) -> None:
        """
        The index of ids behind C{idClashes} is listed again when a state
        directory changes, even within the same file-time tick: a key
        another process (here a second store) writes is seen at once.
        """
        self.assertEqual(self.store.idClashes("WEB1"), [])
        FilesystemKeyStore(self.pkiDir).putKey(PENDING, "web1", PEM_A)
        self.assertEqual(self.store.idClashes("WEB1"), [(PENDING, "web1")])

    def test_idClashesIndexKept(self) -> None:
        """
        While no state directory changed (and none changed recently), the
        index is not listed again.
        """
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        old = os.stat(self.pkiDir).st_mtime - 10
        for state in STATES:
            os.utime(os.path.join(self.pkiDir, state), (old, old))
        self.assertEqual(self.store.idClashes("WEB1"), [(ACCEPTED, "web1")])
        listed = []
        self.patch(self.store, "listKeys", lambda state: listed.append(state) or [])
        self.assertEqual(self.store.idClashes("WEB1"), [(ACCEPTED, "web1")])
        self.assertEqual(listed, [])

    def test_idClashesOwnWritesNotListed(self) -> None:
        """
        While this store itself writes new keys (an auth storm of new ids),
        the index keeps its writes and is not listed again per new id, only
        every L{keystore.INDEX_REFRESH_SECONDS}; its moves and deletions are
        kept too.
        """
        self.patch(keystore, "INDEX_REFRESH_SECONDS", 3600.0)
        self.assertEqual(self.store.idClashes("WEB1"), [])
        listed = []
        original = self.store.listKeys
        self.patch(self.store, "listKeys", lambda state: listed.append(state) or original(state))
        for n in range(50):
            self.store.putKey(PENDING, f"new{n}", PEM_A)
            self.assertEqual(self.store.idClashes(f"NEW{n}"), [(PENDING, f"new{n}")])
        self.store.moveKey("new1", PENDING, ACCEPTED)
        self.assertEqual(self.store.idClashes("NEW1"), [(ACCEPTED, "new1")])
        self.store.deleteKey(PENDING, "new2")
        self.assertEqual(self.store.idClashes("NEW2"), [])
        self.assertEqual(listed, [])

    def tree(self) -> list[str]:
        """
        @return: every path under C{self.base}, relative and sorted.
        """
        found = []
        for directory, dirs, files in os.walk(self.base):
            for name in dirs + files:
                found.append(os.path.relpath(os.path.join(directory, name), self.base))
        return sorted(found)

    def test_directories(self) -> None:
        """
        The constructor creates C{pki_dir} and one directory per state, each
        mode 0700.
        """
        self.assertEqual(sorted(os.listdir(self.pkiDir)), sorted(STATES))
        for path in [self.pkiDir] + [os.path.join(self.pkiDir, s) for s in STATES]:
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o700)

    def test_existingDirectories(self) -> None:
        """
        The constructor accepts an existing layout and keeps its keys.
        """
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        again = FilesystemKeyStore(self.pkiDir)
        self.assertEqual(again.getKey(ACCEPTED, "web1"), PEM_A)

    def test_layout(self) -> None:
        """
        A key is the file C{pki_dir/<state>/<id>} holding the PEM, and
        writing it leaves no temporary file behind.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        with open(os.path.join(self.pkiDir, PENDING, "web1"), "rb") as f:
            self.assertEqual(f.read(), PEM_A)
        self.assertEqual(os.listdir(os.path.join(self.pkiDir, PENDING)), ["web1"])

    def test_fileMode(self) -> None:
        """
        Key files are mode 0644 whatever the umask.
        """
        self.addCleanup(os.umask, os.umask(0o077))
        self.store.putKey(PENDING, "web1", PEM_A)
        mode = os.stat(os.path.join(self.pkiDir, PENDING, "web1")).st_mode
        self.assertEqual(stat.S_IMODE(mode), 0o644)

    def test_symlinkNotFollowed(self) -> None:
        """
        A symlink planted at C{minions/<id>} is not followed: L{getKey}
        raises L{OSError} rather than return the target's bytes, and the
        symlink is neither listed nor reported by L{stateOf}.
        """
        target = os.path.join(self.base, "target")
        with open(target, "wb") as f:
            f.write(PEM_B)
        os.symlink(target, os.path.join(self.pkiDir, ACCEPTED, "web1"))
        self.assertRaises(OSError, self.store.getKey, ACCEPTED, "web1")
        self.assertEqual(self.store.listKeys(ACCEPTED), [])
        self.assertEqual(self.store.stateOf("web1"), [])

    def test_putReplacesSymlink(self) -> None:
        """
        L{putKey} replaces a planted symlink with a file and never writes
        through it.
        """
        target = os.path.join(self.base, "target")
        with open(target, "wb") as f:
            f.write(b"original")
        link = os.path.join(self.pkiDir, PENDING, "web1")
        os.symlink(target, link)
        self.store.putKey(PENDING, "web1", PEM_A)
        self.assertFalse(os.path.islink(link))
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_A)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"original")

    def test_fifoNotRead(self) -> None:
        """
        L{getKey} raises L{OSError} for a FIFO instead of blocking on it.
        """
        os.mkfifo(os.path.join(self.pkiDir, PENDING, "web1"))
        self.assertRaises(OSError, self.store.getKey, PENDING, "web1")
        self.assertEqual(self.store.listKeys(PENDING), [])

    def test_oversizedFile(self) -> None:
        """
        L{getKey} refuses a file larger than L{MAX_KEY_BYTES} with L{OSError}.
        """
        with open(os.path.join(self.pkiDir, PENDING, "web1"), "wb") as f:
            f.write(b"x" * (MAX_KEY_BYTES + 1))
        self.assertRaises(OSError, self.store.getKey, PENDING, "web1")

    def test_idsValidatedBeforeDisk(self) -> None:
        """
        An invalid id such as C{../x} is refused before any path is built:
        no method creates, moves or removes anything anywhere.
        """
        self.store.putKey(PENDING, "x", PEM_A)
        with open(os.path.join(self.pkiDir, "x"), "wb") as f:
            f.write(b"bait")
        before = self.tree()
        for badId in ["../x", "../../x", "..", "../minions_pre/x"]:
            self.assertRaises(InvalidMinionId, self.store.putKey, ACCEPTED, badId, PEM_A)
            self.assertRaises(InvalidMinionId, self.store.getKey, PENDING, badId)
            self.assertRaises(InvalidMinionId, self.store.moveKey, badId, PENDING, ACCEPTED)
            self.assertRaises(InvalidMinionId, self.store.deleteKey, PENDING, badId)
            self.assertRaises(InvalidMinionId, self.store.stateOf, badId)
        self.assertEqual(self.tree(), before)

    def test_listIgnoresStrangers(self) -> None:
        """
        L{listKeys} reports valid ids of regular files only: it skips
        dotfiles (our temporary files), names that are not valid ids,
        directories and symlinks.
        """
        directory = os.path.join(self.pkiDir, PENDING)
        self.store.putKey(PENDING, "web1", PEM_A)
        for name in [".tmp-123-abc", ".claim-1-2", "bad name", "tab\tname", "web\u200b2"]:
            with open(os.path.join(directory, name), "wb") as f:
                f.write(PEM_A)
        os.mkdir(os.path.join(directory, "subdir"))
        os.symlink(os.path.join(directory, "web1"), os.path.join(directory, "link"))
        self.assertEqual(self.store.listKeys(PENDING), ["web1"])

    def test_moveExpectedLeavesNoClaim(self) -> None:
        """
        A refused C{moveKey(..., expected=...)} puts the key back under its
        own name and leaves no claim file behind.
        """
        self.store.putKey(PENDING, "web1", PEM_B)
        self.assertRaises(KeyChanged, self.store.moveKey, "web1", PENDING, ACCEPTED, expected=PEM_A)
        self.assertEqual(os.listdir(os.path.join(self.pkiDir, PENDING)), ["web1"])
        self.assertEqual(os.listdir(os.path.join(self.pkiDir, ACCEPTED)), [])

    def test_putBackKeepsNewerKey(self) -> None:
        """
        If a new key was written while a key was claimed for comparison, the
        newer one is kept and the claimed one is dropped.
        """
        self.store.putKey(PENDING, "web1", PEM_B)
        directory = os.path.join(self.pkiDir, PENDING)
        claim = os.path.join(directory, ".claim-test")
        source = os.path.join(directory, "web1")
        os.rename(source, claim)
        self.store.putKey(PENDING, "web1", PEM_A)
        self.store._putBack(claim, source)
        self.assertEqual(os.listdir(directory), ["web1"])
        self.assertEqual(self.store.getKey(PENDING, "web1"), PEM_A)

    def test_longestId(self) -> None:
        """
        An id of 255 bytes, the most a file name may have, can be stored:
        temporary names do not include the id.
        """
        minionId = "x" * 255
        self.store.putKey(PENDING, minionId, PEM_A)
        self.assertIs(self.store.moveKey(minionId, PENDING, ACCEPTED, expected=PEM_A), True)
        self.assertEqual(self.store.listKeys(ACCEPTED), [minionId])


def _raceWorker(conn: Connection, barrier: Barrier) -> None:
    """
    The body of one L{ProcessRace} worker process: for each action the
    parent sends, wait at the barrier for the other workers, run it and
    send back what it returned (or the name of the exception it raised),
    until the parent sends L{None}.
    """
    while (action := conn.recv()) is not None:
        try:
            barrier.wait(30)
            result: object = action()
        except Exception as e:
            result = type(e).__name__
        conn.send(result)


class ProcessRace:
    """
    Worker processes that each run one action at the same moment (they wait
    at a shared barrier first), round after round, so that tests can race
    real processes against one key store.

    The workers are forked: a spawned worker would import the test module
    again, which takes about a second. They run only file operations and
    pipe I/O, which a fork handles well. Actions are pickled: each must be a
    module-level function or a L{functools.partial} of one.
    """

    TIMEOUT = 30.0

    def __init__(self, testCase: SynchronousTestCase, count: int) -> None:
        """
        Start C{count} worker processes, stopped by a cleanup of
        C{testCase}.
        """
        context = multiprocessing.get_context("fork")
        testCase.addCleanup(self.stop)
        # Kept for the life of the race: the semaphores behind it go away
        # with the last reference in this process, perhaps before a child
        # has unpickled its copy.
        self._barrier = context.Barrier(count)
        self._conns: list[Connection] = []
        self._processes: list[Any] = []
        for _ in range(count):
            parentEnd, childEnd = context.Pipe()
            process = context.Process(
                target=_raceWorker, args=(childEnd, self._barrier), daemon=True
            )
            process.start()
            childEnd.close()
            self._conns.append(parentEnd)
            self._processes.append(process)

    def round(self, actions: list[Callable[[], object]]) -> list[object]:
        """
        Let each worker run one of C{actions}, all at the same moment.

        @return: what each action returned, in the order of the actions.
        @raise FailTest: if a worker does not answer within L{TIMEOUT}
            seconds (it died, or the barrier broke).
        """
        for conn, action in zip(self._conns, actions, strict=True):
            conn.send(action)
        results = []
        for conn in self._conns:
            try:
                if not conn.poll(self.TIMEOUT):
                    raise FailTest("a race worker process did not answer")
                results.append(conn.recv())
            except (EOFError, OSError) as e:
                raise FailTest(f"a race worker process died: {e}") from e
        return results

    def stop(self) -> None:
        """
        Tell the workers to exit and wait for them; terminate (by its own
        handle) any that does not exit.
        """
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(None)
            conn.close()
        for process in self._processes:
            process.join(self.TIMEOUT)
            if process.is_alive():
                process.terminate()
                process.join()
        self._conns, self._processes = [], []


def _accept(pkiDir: str, minionId: str, pem: bytes) -> object:
    """
    Accept the pending key of C{minionId} if it is still C{pem}, as
    C{salttwist-key -a} does.
    """
    return FilesystemKeyStore(pkiDir).moveKey(minionId, PENDING, ACCEPTED, expected=pem)


def _reject(pkiDir: str, minionId: str) -> object:
    """
    Reject the pending key of C{minionId}, as C{salttwist-key -r} does.
    """
    return FilesystemKeyStore(pkiDir).moveKey(minionId, PENDING, REJECTED)


def _deletePending(pkiDir: str, minionId: str) -> object:
    """
    Delete the pending key of C{minionId}, as C{salttwist-key -d} does.
    """
    return FilesystemKeyStore(pkiDir).deleteKey(PENDING, minionId)


class ConcurrentMoveTests(SynchronousTestCase):
    """
    Two processes change the same pending key at the same moment, many
    times: the key always ends in exactly one state (or none, when a delete
    won), exactly one of them succeeds, and nothing is left behind.
    """

    ROUNDS = 50

    def setUp(self) -> None:
        """
        Make a key store in a fresh directory.
        """
        self.pkiDir = os.path.abspath(self.mktemp())
        self.store = FilesystemKeyStore(self.pkiDir)

    def race(
        self, actions: list[Callable[[], object]], check: Callable[[list[object]], None]
    ) -> None:
        """
        For L{ROUNDS} rounds: put C{web1}'s key in C{minions_pre}, run
        C{actions} in separate processes at once, call C{check} with their
        results, check that no temporary file is left, then clear the store.
        """
        processes = ProcessRace(self, len(actions))
        for _ in range(self.ROUNDS):
            self.store.putKey(PENDING, "web1", PEM_A)
            results = processes.round(actions)
            check(results)
            for state in STATES:
                leftovers = [
                    name
                    for name in os.listdir(os.path.join(self.pkiDir, state))
                    if name.startswith(".")
                ]
                self.assertEqual(leftovers, [], f"temporary files left in {state}")
                self.store.deleteKey(state, "web1")

    def assertOneWinner(self, results: list[object]) -> int:
        """
        Exactly one of the racers moved or deleted the key; the others found
        it gone (L{False}), and none failed.

        @return: the index of the winner.
        """
        self.assertEqual(sorted(map(repr, results)), ["False", "True"], results)
        return results.index(True)

    def test_acceptAccept(self) -> None:
        """
        Two acceptances of the same pending key: one wins, the other finds
        no key; the key is accepted once, with its bytes, and is no longer
        pending.
        """
        accept = functools.partial(_accept, self.pkiDir, "web1", PEM_A)

        def check(results: list[object]) -> None:
            self.assertOneWinner(results)
            self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])
            self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_A)

        self.race([accept, accept], check)

    def test_acceptDelete(self) -> None:
        """
        An acceptance and a deletion of the same pending key: exactly one
        wins. If the acceptance won, the key is accepted (with its bytes);
        if the deletion won, the key is gone from every state. It is never
        both, and never left pending.
        """
        accept = functools.partial(_accept, self.pkiDir, "web1", PEM_A)
        delete = functools.partial(_deletePending, self.pkiDir, "web1")

        def check(results: list[object]) -> None:
            winner = self.assertOneWinner(results)
            if winner == 0:
                self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])
                self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_A)
            else:
                self.assertEqual(self.store.stateOf("web1"), [])

        self.race([accept, delete], check)

    def test_acceptReject(self) -> None:
        """
        An acceptance and a rejection of the same pending key: exactly one
        wins, and the key is in the winner's state only.
        """
        accept = functools.partial(_accept, self.pkiDir, "web1", PEM_A)
        reject = functools.partial(_reject, self.pkiDir, "web1")

        def check(results: list[object]) -> None:
            winner = self.assertOneWinner(results)
            self.assertEqual(self.store.stateOf("web1"), [[ACCEPTED], [REJECTED]][winner])
            self.assertEqual(self.store.getKey(self.store.stateOf("web1")[0], "web1"), PEM_A)

        self.race([accept, reject], check)
