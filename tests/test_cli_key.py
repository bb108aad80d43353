# -*- test-case-name: tests.test_cli_key -*-
"""
Tests for L{salttwist.cli.key}, the C{salttwist-key} command.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import yaml
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.cli import key as keycli
from salttwist.cli.key import main
from salttwist.config import loadMasterConfig
from salttwist.crypt import fingerprint, generatePrivateKey, publicKeyToPem
from salttwist.events.fire import fireMasterEvent
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, REJECTED, FilesystemKeyStore

# Key generation is slow; two keys serve every test.
PEM_A = publicKeyToPem(generatePrivateKey().public_key())
PEM_B = publicKeyToPem(generatePrivateKey().public_key())
FINGER_A = fingerprint(PEM_A)
FINGER_B = fingerprint(PEM_B)


class _SwappingStdin(io.StringIO):
    """
    A standard input whose C{readline} calls a function first: it stands for
    another process that acts while the admin reads the prompt.
    """

    def __init__(self, answer: str, before: Callable[[], None]) -> None:
        """
        @param answer: what C{readline} returns.
        @param before: called with no arguments before returning it.
        """
        super().__init__(answer)
        self._before = before

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        """
        Call the hook, then read as usual.
        """
        self._before()
        return super().readline()


class _KeyCommandBase(SynchronousTestCase):
    """
    Runs L{main} against a temporary config and C{pki_dir}, with standard
    input and output replaced.
    """

    def setUp(self) -> None:
        """
        Write a master config whose C{pki_dir} is under a temporary root,
        fill the key store, and capture standard output and error.
        """
        self.root = os.path.abspath(self.mktemp())
        self.configDir = os.path.join(self.root, "etc")
        os.makedirs(self.configDir)
        self.pkiDir = os.path.join(self.root, "pki")
        with open(os.path.join(self.configDir, "master"), "w") as f:
            yaml.safe_dump({"root_dir": self.root, "pki_dir": self.pkiDir}, f)
        self.store = FilesystemKeyStore(self.pkiDir)
        self.store.putKey(ACCEPTED, "web1", PEM_A)
        self.store.putKey(PENDING, "web2", PEM_B)
        self.store.putKey(PENDING, "db1", PEM_A)
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        self.setAnswer("")

    def setAnswer(self, text: str) -> None:
        """
        Make standard input hold C{text}.
        """
        self.patch(sys, "stdin", io.StringIO(text))

    def run_(self, *args: str) -> int:
        """
        Run the command with C{-c} pointing at the test config.

        @return: its exit code.
        """
        return main(["-c", self.configDir, *args])

    def assertOutput(self, expected: str) -> None:
        """
        Assert that standard output is exactly C{expected}.
        """
        self.assertEqual(self.stdout.getvalue(), expected)


class KeyCommandTests(_KeyCommandBase):
    """
    Tests for L{main}.
    """

    def test_listAllHuman(self) -> None:
        """
        C{-L} prints each state under Salt's heading, in Salt's order.
        """
        self.store.putKey(REJECTED, "bad1", PEM_B)
        self.assertEqual(self.run_("-L"), 0)
        self.assertOutput(
            "Accepted Keys:\nweb1\nDenied Keys:\nUnaccepted Keys:\ndb1\nweb2\n"
            "Rejected Keys:\nbad1\n"
        )

    def test_defaultIsListAll(self) -> None:
        """
        With no action, the command lists all keys, as C{salt-key} does.
        """
        self.assertEqual(self.run_(), 0)
        self.assertOutput(
            "Accepted Keys:\nweb1\nDenied Keys:\nUnaccepted Keys:\ndb1\nweb2\nRejected Keys:\n"
        )

    def test_listAllJson(self) -> None:
        """
        C{-L --out json} prints the sorted ids of each state, keyed by state
        directory name, indented by four.
        """
        self.assertEqual(self.run_("-L", "--out", "json"), 0)
        expected = {
            "minions": ["web1"],
            "minions_pre": ["db1", "web2"],
            "minions_rejected": [],
            "minions_denied": [],
        }
        self.assertOutput(json.dumps(expected, indent=4) + "\n")

    def test_listAllYaml(self) -> None:
        """
        C{--out yaml} prints the same data as YAML.
        """
        self.assertEqual(self.run_("-L", "--out", "yaml"), 0)
        self.assertEqual(
            yaml.safe_load(self.stdout.getvalue()),
            {
                "minions": ["web1"],
                "minions_pre": ["db1", "web2"],
                "minions_rejected": [],
                "minions_denied": [],
            },
        )

    def test_listOneState(self) -> None:
        """
        C{-l un} lists only the pending keys.
        """
        self.assertEqual(self.run_("-l", "un"), 0)
        self.assertOutput("Unaccepted Keys:\ndb1\nweb2\n")

    def test_acceptYes(self) -> None:
        """
        C{-a ID -y} accepts a pending key without asking.
        """
        self.setAnswer("n\n")
        self.assertEqual(self.run_("-a", "web2", "-y"), 0)
        self.assertOutput("Key for minion web2 accepted.\n")
        self.assertEqual(self.store.getKey(ACCEPTED, "web2"), PEM_B)
        self.assertEqual(self.store.listKeys(PENDING), ["db1"])

    def test_acceptPromptNo(self) -> None:
        """
        Without C{-y}, C{-a} shows the keys and their fingerprints and asks;
        C{n} aborts with exit code 1 and changes nothing.
        """
        self.setAnswer("n\n")
        self.assertEqual(self.run_("-a", "web*"), 1)
        output = self.stdout.getvalue()
        self.assertTrue(
            output.startswith(
                "The following keys are going to be accepted:\n"
                "Unaccepted Keys:\n"
                f"web2  (SHA-256 fingerprint {FINGER_B})\n"
                "Proceed? [n/Y] "
            ),
            output,
        )
        self.assertEqual(self.store.listKeys(PENDING), ["db1", "web2"])
        self.assertEqual(self.store.listKeys(ACCEPTED), ["web1"])

    def test_acceptPromptOther(self) -> None:
        """
        Any answer but C{y}, C{Y} or an empty line aborts, and so does end
        of input.
        """
        for answer in ["yes please\n", "N\n", "q\n", ""]:
            self.setAnswer(answer)
            self.assertEqual(self.run_("-a", "web2"), 1)
        self.assertEqual(self.store.listKeys(PENDING), ["db1", "web2"])

    def test_acceptPromptYes(self) -> None:
        """
        Answering C{y} accepts the keys shown.
        """
        self.setAnswer("y\n")
        self.assertEqual(self.run_("-a", "web2"), 0)
        self.assertTrue(self.stdout.getvalue().endswith("Key for minion web2 accepted.\n"))
        self.assertEqual(self.store.stateOf("web2"), [ACCEPTED])

    def test_acceptPromptEmpty(self) -> None:
        """
        An empty line is the default, yes.
        """
        self.setAnswer("\n")
        self.assertEqual(self.run_("-a", "web2"), 0)
        self.assertEqual(self.store.stateOf("web2"), [ACCEPTED])

    def test_acceptChangedKey(self) -> None:
        """
        If the pending key changes between the prompt and the answer, it is
        not accepted: the new key stays pending and the command says why.
        """

        def swap() -> None:
            with open(os.path.join(self.pkiDir, PENDING, "web2"), "wb") as f:
                f.write(PEM_A)

        self.patch(sys, "stdin", _SwappingStdin("y\n", swap))
        self.assertEqual(self.run_("-a", "web2"), 1)
        self.assertIn(
            "Key for minion web2 changed after it was listed; not accepted.",
            self.stdout.getvalue(),
        )
        self.assertNotIn("Key for minion web2 accepted.", self.stdout.getvalue())
        self.assertEqual(self.store.listKeys(ACCEPTED), ["web1"])
        self.assertEqual(self.store.getKey(PENDING, "web2"), PEM_A)

    def test_acceptGoneKey(self) -> None:
        """
        If another process accepted the key between the prompt and the
        answer, the command says so and exits 1.
        """

        def moveAway() -> None:
            self.store.moveKey("web2", PENDING, ACCEPTED)

        self.patch(sys, "stdin", _SwappingStdin("y\n", moveAway))
        self.assertEqual(self.run_("-a", "web2"), 1)
        self.assertIn(
            "Key for minion web2 is no longer unaccepted; not accepted.", self.stdout.getvalue()
        )

    def test_acceptAll(self) -> None:
        """
        C{-A} accepts every pending key.
        """
        self.assertEqual(self.run_("-A", "-y"), 0)
        self.assertOutput("Key for minion db1 accepted.\nKey for minion web2 accepted.\n")
        self.assertEqual(self.store.listKeys(ACCEPTED), ["db1", "web1", "web2"])
        self.assertEqual(self.store.listKeys(PENDING), [])

    def test_acceptRejectedNeedsFlag(self) -> None:
        """
        C{-a} leaves rejected and denied keys alone unless
        C{--include-rejected} or C{--include-denied} is given.
        """
        self.store.putKey(REJECTED, "bad1", PEM_B)
        self.store.putKey(DENIED, "bad2", PEM_B)
        self.assertEqual(self.run_("-a", "bad*", "-y"), 1)
        self.assertIn(
            "The key glob 'bad*' does not match any unaccepted keys.", self.stdout.getvalue()
        )
        self.assertEqual(self.run_("-a", "bad*", "-y", "--include-rejected"), 0)
        self.assertEqual(self.store.stateOf("bad1"), [ACCEPTED])
        self.assertEqual(self.store.stateOf("bad2"), [DENIED])
        self.assertEqual(self.run_("-a", "bad2", "-y", "--include-denied"), 0)
        self.assertEqual(self.store.stateOf("bad2"), [ACCEPTED])

    def test_commaList(self) -> None:
        """
        As in Salt, a target may be a comma-separated list of globs.
        """
        self.assertEqual(self.run_("-a", "db1,web2", "-y"), 0)
        self.assertEqual(self.store.listKeys(PENDING), [])

    def test_globNoMatch(self) -> None:
        """
        A glob that matches no key prints Salt's message and exits 1.
        """
        self.assertEqual(self.run_("-a", "x*", "-y"), 1)
        self.assertOutput("The key glob 'x*' does not match any unaccepted keys.\n")

    def test_reject(self) -> None:
        """
        C{-r} rejects a pending key.
        """
        self.assertEqual(self.run_("-r", "web2", "-y"), 0)
        self.assertOutput("Key for minion web2 rejected.\n")
        self.assertEqual(self.store.stateOf("web2"), [REJECTED])

    def test_rejectAcceptedNeedsFlag(self) -> None:
        """
        C{-r} rejects an accepted key only with C{--include-accepted}.
        """
        self.assertEqual(self.run_("-r", "web1", "-y"), 1)
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])
        self.assertEqual(self.run_("-r", "web1", "-y", "--include-accepted"), 0)
        self.assertEqual(self.store.stateOf("web1"), [REJECTED])

    def test_rejectAll(self) -> None:
        """
        C{-R} rejects every pending key and leaves accepted ones alone.
        """
        self.assertEqual(self.run_("-R", "-y"), 0)
        self.assertEqual(self.store.listKeys(REJECTED), ["db1", "web2"])
        self.assertEqual(self.store.listKeys(ACCEPTED), ["web1"])

    def test_delete(self) -> None:
        """
        C{-d} deletes a key from every state it is in, and says so once.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.assertEqual(self.run_("-d", "web1", "-y"), 0)
        self.assertOutput("Key for minion web1 deleted.\n")
        self.assertEqual(self.store.stateOf("web1"), [])

    def test_deletePrompt(self) -> None:
        """
        Without C{-y}, C{-d} lists the keys under their states and asks.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.setAnswer("n\n")
        self.assertEqual(self.run_("-d", "web1"), 1)
        self.assertTrue(
            self.stdout.getvalue().startswith(
                "The following keys are going to be deleted:\n"
                f"Accepted Keys:\nweb1  (SHA-256 fingerprint {FINGER_A})\n"
                f"Denied Keys:\nweb1  (SHA-256 fingerprint {FINGER_B})\n"
                "Proceed? [n/Y] "
            )
        )
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED, DENIED])

    def test_deleteAll(self) -> None:
        """
        C{-D} deletes every key.
        """
        self.assertEqual(self.run_("-D", "-y"), 0)
        self.assertEqual(self.store.listKeys(ACCEPTED) + self.store.listKeys(PENDING), [])

    def test_finger(self) -> None:
        """
        C{-f ID} prints the fingerprints of the matching keys under their
        states.
        """
        self.assertEqual(self.run_("-f", "web*"), 0)
        self.assertOutput(
            f"Accepted Keys:\nweb1:  {FINGER_A}\nUnaccepted Keys:\nweb2:  {FINGER_B}\n"
        )

    def test_fingerNoMatch(self) -> None:
        """
        C{-f} with a glob that matches nothing says so and exits 1.
        """
        self.assertEqual(self.run_("-f", "nothing"), 1)
        self.assertOutput("The key glob 'nothing' does not match any keys.\n")

    def test_fingerAll(self) -> None:
        """
        C{-F} prints the master's own public key under Local Keys first,
        then every state, empty ones included.
        """
        with open(os.path.join(self.pkiDir, "master.pub"), "wb") as f:
            f.write(PEM_B)
        self.assertEqual(self.run_("-F"), 0)
        self.assertOutput(
            f"Local Keys:\nmaster.pub:  {FINGER_B}\n"
            f"Accepted Keys:\nweb1:  {FINGER_A}\n"
            "Denied Keys:\n"
            f"Unaccepted Keys:\ndb1:  {FINGER_A}\nweb2:  {FINGER_B}\n"
            "Rejected Keys:\n"
        )

    def test_fingerJson(self) -> None:
        """
        C{-f --out json} prints a mapping of state to id to fingerprint.
        """
        self.assertEqual(self.run_("-f", "web1", "--out", "json"), 0)
        self.assertEqual(json.loads(self.stdout.getvalue()), {"minions": {"web1": FINGER_A}})

    def test_badConfig(self) -> None:
        """
        A config error is printed on standard error and the exit code is 2.
        """
        with open(os.path.join(self.configDir, "master"), "w") as f:
            f.write("pki_dir: [unclosed\n")
        self.assertEqual(self.run_("-L"), 2)
        self.assertIn("salttwist-key: ", self.stderr.getvalue())
        self.assertIn(os.path.join(self.configDir, "master"), self.stderr.getvalue())
        self.assertOutput("")

    def test_createsPkiDirs(self) -> None:
        """
        A missing C{pki_dir} is created, and lists as empty.
        """
        pkiDir = os.path.join(self.root, "newpki")
        with open(os.path.join(self.configDir, "master"), "w") as f:
            yaml.safe_dump({"root_dir": self.root, "pki_dir": pkiDir}, f)
        self.assertEqual(self.run_("-l", "acc"), 0)
        self.assertOutput("Accepted Keys:\n")
        self.assertTrue(os.path.isdir(os.path.join(pkiDir, PENDING)))

    def test_usageError(self) -> None:
        """
        Conflicting actions are a usage error: exit code 2, nothing changed.
        """
        self.assertEqual(self.run_("-A", "-D", "-y"), 2)
        self.assertIn("not allowed with", self.stderr.getvalue())
        self.assertEqual(self.store.listKeys(PENDING), ["db1", "web2"])


class KeyEventTests(_KeyCommandBase):
    """
    Every key change made by C{salttwist-key} is reported to a running master
    as a C{salt/key} event.
    """

    def setUp(self) -> None:
        """
        Record the events C{salttwist-key} fires instead of sending them.
        """
        super().setUp()
        self.fired: list[tuple[str, str, dict[str, Any]]] = []

        def record(sockDir: str, tag: str, data: dict[str, Any], timeout: float = 1.0) -> bool:
            self.fired.append((sockDir, tag, data))
            return True

        self.patch(keycli, "fireMasterEvent", record)

    def test_acceptFires(self) -> None:
        """
        Accepting fires C{salt/key} with C{act: accept} to the master's
        C{sock_dir}.
        """
        self.assertEqual(self.run_("-a", "web2", "-y"), 0)
        config = loadMasterConfig(self.configDir)
        self.assertEqual(
            self.fired, [(config["sock_dir"], "salt/key", {"act": "accept", "id": "web2"})]
        )

    def test_rejectAndDeleteFire(self) -> None:
        """
        Rejecting and deleting fire C{reject} and C{delete}, one event per key.
        """
        self.run_("-r", "db1", "-y")
        self.run_("-d", "web*", "-y")
        self.assertEqual(
            [data for _, _, data in self.fired],
            [
                {"act": "reject", "id": "db1"},
                {"act": "delete", "id": "web1"},
                {"act": "delete", "id": "web2"},
            ],
        )

    def test_declinedFiresNothing(self) -> None:
        """
        Nothing is fired when the admin declines.
        """
        self.setAnswer("n\n")
        self.run_("-a", "web2")
        self.assertEqual(self.fired, [])


class FireMasterEventTests(SynchronousTestCase):
    """
    L{fireMasterEvent} writes one frame to C{master_event_pull.ipc}.
    """

    def test_noMaster(self) -> None:
        """
        Without a listening master it returns L{False} at once.
        """
        self.assertFalse(fireMasterEvent(os.path.abspath(self.mktemp()), "salt/key", {}))

    def test_frame(self) -> None:
        """
        With a listener, one length-prefixed msgpack map C{{tag, data}} is sent.
        """
        # A short path: UNIX socket paths are limited to 107 bytes.
        sockDir = tempfile.mkdtemp(prefix="st-")
        self.addCleanup(shutil.rmtree, sockDir, True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(os.path.join(sockDir, "master_event_pull.ipc"))
            server.listen(1)
            self.assertTrue(fireMasterEvent(sockDir, "salt/key", {"act": "delete", "id": "a"}))
            conn, _ = server.accept()
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
        (size,) = struct.unpack("!I", data[:4])
        self.assertEqual(
            serial.loads(data[4 : 4 + size]),
            {"tag": "salt/key", "data": {"act": "delete", "id": "a"}},
        )
