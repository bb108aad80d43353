# -*- test-case-name: tests.test_cli_key -*-
"""
Tests for L{salttwist.cli.key}, the C{salttwist-key} command.
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import socket
import stat
import struct
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import yaml
from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist import serial
from salttwist.cli import key as keycli
from salttwist.cli.key import main
from salttwist.config import loadMasterConfig
from salttwist.crypt import (
    fingerprint,
    generatePrivateKey,
    loadPrivateKey,
    privateKeyToPem,
    publicKeyToPem,
)
from salttwist.events.fire import fireMasterEvent
from salttwist.pki.keystore import (
    ACCEPTED,
    DENIED,
    PENDING,
    REJECTED,
    STATES,
    FilesystemKeyStore,
)
from tests.test_keystore import ProcessRace

# Key generation is slow; two keys serve every test.
PRIVATE_A = generatePrivateKey()
PEM_A = publicKeyToPem(PRIVATE_A.public_key())
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
        Without C{-y}, C{-d} lists the keys under their states and asks; as
        in Salt, the default answer of a deletion is no (C{[N/y]}). A denied
        key is shown with the fingerprint of the accepted key of its id too.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.setAnswer("n\n")
        self.assertEqual(self.run_("-d", "web1"), 1)
        self.assertTrue(
            self.stdout.getvalue().startswith(
                "The following keys are going to be deleted:\n"
                f"Accepted Keys:\nweb1  (SHA-256 fingerprint {FINGER_A})\n"
                "Denied Keys:\n"
                f"web1  (SHA-256 fingerprint {FINGER_B}; accepted: {FINGER_A})\n"
                "Proceed? [N/y] "
            ),
            self.stdout.getvalue(),
        )
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED, DENIED])

    def test_deletePromptDefaultNo(self) -> None:
        """
        An empty answer (or end of input) to the prompt of C{-d} deletes
        nothing and exits 1: deleting is never the default.
        """
        for answer in ["\n", ""]:
            self.setAnswer(answer)
            self.assertEqual(self.run_("-d", "web1"), 1)
            self.assertIn("Aborted; no keys were changed.", self.stdout.getvalue())
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])

    def test_deletePromptYes(self) -> None:
        """
        Answering C{y} to the prompt of C{-d} deletes the keys shown.
        """
        self.setAnswer("y\n")
        self.assertEqual(self.run_("-d", "web1"), 0)
        self.assertTrue(self.stdout.getvalue().endswith("Key for minion web1 deleted.\n"))
        self.assertEqual(self.store.stateOf("web1"), [])

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


class KeyOutputFormatTests(_KeyCommandBase):
    """
    C{--out json|yaml|txt} for every listing (C{-L}, C{-l}, C{-f}, C{-F},
    C{-p}, C{-P}): Salt's data, a mapping of state directory name to the
    ids (or to a mapping of id to fingerprint or key).
    """

    def test_listOneStateJson(self) -> None:
        """
        C{-l acc --out json} prints only the accepted state.
        """
        self.assertEqual(self.run_("-l", "acc", "--out", "json"), 0)
        self.assertOutput(json.dumps({"minions": ["web1"]}, indent=4) + "\n")

    def test_listAllTxt(self) -> None:
        """
        C{-L --out txt} prints one line C{state: value} per state, the value
        as Python prints it, as Salt's C{txt} outputter does.
        """
        self.assertEqual(self.run_("-L", "--out", "txt"), 0)
        self.assertOutput(
            "minions: ['web1']\n"
            "minions_pre: ['db1', 'web2']\n"
            "minions_rejected: []\n"
            "minions_denied: []\n"
        )

    def test_txtNeverWrapped(self) -> None:
        """
        However many keys a state holds, C{--out txt} keeps it on one line.
        """
        ids = [f"host{number:03d}.example.com" for number in range(30)]
        for minionId in ids:
            self.store.putKey(REJECTED, minionId, PEM_B)
        self.assertEqual(self.run_("-l", "rej", "--out", "txt"), 0)
        self.assertOutput(f"minions_rejected: {ids}\n")

    def test_fingerAllYaml(self) -> None:
        """
        C{-F --out yaml} maps every state, empty ones included, and the
        master's own key under C{local}, to id and fingerprint.
        """
        with open(os.path.join(self.pkiDir, "master.pub"), "wb") as f:
            f.write(PEM_B)
        self.assertEqual(self.run_("-F", "--out", "yaml"), 0)
        self.assertEqual(
            yaml.safe_load(self.stdout.getvalue()),
            {
                "local": {"master.pub": FINGER_B},
                "minions": {"web1": FINGER_A},
                "minions_pre": {"db1": FINGER_A, "web2": FINGER_B},
                "minions_rejected": {},
                "minions_denied": {},
            },
        )

    def test_fingerTxt(self) -> None:
        """
        C{-f ID --out txt} prints one line per state that matched.
        """
        self.assertEqual(self.run_("-f", "web*", "--out", "txt"), 0)
        self.assertOutput(
            f"minions: {{'web1': '{FINGER_A}'}}\nminions_pre: {{'web2': '{FINGER_B}'}}\n"
        )

    def test_printJson(self) -> None:
        """
        C{-p ID --out json} maps each state that matched to id and PEM text.
        """
        self.assertEqual(self.run_("-p", "web1", "--out", "json"), 0)
        self.assertEqual(
            json.loads(self.stdout.getvalue()), {"minions": {"web1": PEM_A.decode("ascii")}}
        )

    def test_printAllYaml(self) -> None:
        """
        C{-P --out yaml} maps every state, empty ones included, to id and
        PEM text, which reads back as the very key.
        """
        self.assertEqual(self.run_("-P", "--out", "yaml"), 0)
        data = yaml.safe_load(self.stdout.getvalue())
        self.assertEqual(
            data,
            {
                "minions": {"web1": PEM_A.decode("ascii")},
                "minions_pre": {"db1": PEM_A.decode("ascii"), "web2": PEM_B.decode("ascii")},
                "minions_rejected": {},
                "minions_denied": {},
            },
        )

    def test_printTxt(self) -> None:
        """
        C{-p ID --out txt} prints one line per state: the PEM's newlines are
        escaped, as Python prints a string inside a mapping.
        """
        self.assertEqual(self.run_("-p", "web2", "--out", "txt"), 0)
        self.assertOutput(f"minions_pre: {{'web2': {PEM_B.decode('ascii')!r}}}\n")
        self.assertEqual(self.stdout.getvalue().count("\n"), 1)


class PrintKeyTests(_KeyCommandBase):
    """
    C{-p ID} and C{-P} print public keys, as C{salt-key} does.
    """

    def test_print(self) -> None:
        """
        C{-p GLOB} prints, under each state heading that matched, C{id:  }
        followed by the PEM; the PEM ends with a newline, so a blank line
        follows each key, as in Salt's output.
        """
        self.assertEqual(self.run_("-p", "web*"), 0)
        self.assertOutput(
            f"Accepted Keys:\nweb1:  {PEM_A.decode()}\nUnaccepted Keys:\nweb2:  {PEM_B.decode()}\n"
        )

    def test_printCommaList(self) -> None:
        """
        C{-p} takes a comma-separated list of globs too.
        """
        self.assertEqual(self.run_("-p", "db1,web1"), 0)
        self.assertOutput(
            f"Accepted Keys:\nweb1:  {PEM_A.decode()}\nUnaccepted Keys:\ndb1:  {PEM_A.decode()}\n"
        )

    def test_printAll(self) -> None:
        """
        C{-P} prints every key under every state heading, empty states
        included; the master's own keys are not shown (as in Salt: C{-F}
        shows their fingerprints).
        """
        with open(os.path.join(self.pkiDir, "master.pub"), "wb") as f:
            f.write(PEM_B)
        self.store.putKey(REJECTED, "bad1", PEM_B)
        self.assertEqual(self.run_("-P"), 0)
        self.assertOutput(
            f"Accepted Keys:\nweb1:  {PEM_A.decode()}\n"
            "Denied Keys:\n"
            f"Unaccepted Keys:\ndb1:  {PEM_A.decode()}\nweb2:  {PEM_B.decode()}\n"
            f"Rejected Keys:\nbad1:  {PEM_B.decode()}\n"
        )

    def test_printNoMatch(self) -> None:
        """
        C{-p} with a glob that matches nothing says so and exits 1, as
        C{-f} does.
        """
        self.assertEqual(self.run_("-p", "nothing"), 1)
        self.assertOutput("The key glob 'nothing' does not match any keys.\n")

    def test_printExclusive(self) -> None:
        """
        C{-p} is an action: it cannot be combined with another one.
        """
        self.assertEqual(self.run_("-p", "web1", "-L"), 2)
        self.assertIn("not allowed with", self.stderr.getvalue())


class DeniedKeyTests(_KeyCommandBase):
    """
    A denied key (an id already accepted or pending, presented with another
    key) is shown with the fingerprint of the key it clashes with, so that
    an admin can tell a rebuilt host from an impostor.
    """

    def test_fingerDeniedAccepted(self) -> None:
        """
        C{-f ID} shows a denied key as C{id:  <its fingerprint>  (accepted:
        <fingerprint of the accepted key of that id>)}.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.assertEqual(self.run_("-f", "web1"), 0)
        self.assertOutput(
            f"Accepted Keys:\nweb1:  {FINGER_A}\n"
            f"Denied Keys:\nweb1:  {FINGER_B}  (accepted: {FINGER_A})\n"
        )

    def test_fingerDeniedPending(self) -> None:
        """
        A denied key whose id is pending with another key is shown with the
        pending key's fingerprint, marked C{unaccepted}.
        """
        self.store.putKey(DENIED, "db1", PEM_B)
        self.assertEqual(self.run_("-f", "db1"), 0)
        self.assertOutput(
            f"Denied Keys:\ndb1:  {FINGER_B}  (unaccepted: {FINGER_A})\n"
            f"Unaccepted Keys:\ndb1:  {FINGER_A}\n"
        )

    def test_fingerAllDenied(self) -> None:
        """
        C{-F} annotates denied keys the same way; a denied key whose id has
        no accepted or pending key any more is shown alone.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.store.putKey(DENIED, "gone1", PEM_A)
        self.assertEqual(self.run_("-F"), 0)
        self.assertOutput(
            f"Accepted Keys:\nweb1:  {FINGER_A}\n"
            f"Denied Keys:\ngone1:  {FINGER_A}\nweb1:  {FINGER_B}  (accepted: {FINGER_A})\n"
            f"Unaccepted Keys:\ndb1:  {FINGER_A}\nweb2:  {FINGER_B}\n"
            "Rejected Keys:\n"
        )

    def test_fingerDeniedJson(self) -> None:
        """
        The json output keeps Salt's shape: the denied key and the accepted
        one each under their own state, with no annotation.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.assertEqual(self.run_("-f", "web1", "--out", "json"), 0)
        self.assertEqual(
            json.loads(self.stdout.getvalue()),
            {"minions": {"web1": FINGER_A}, "minions_denied": {"web1": FINGER_B}},
        )

    def test_listDenied(self) -> None:
        """
        C{-L} stays as Salt's: ids only, a denied id under Denied Keys.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.assertEqual(self.run_("-l", "den"), 0)
        self.assertOutput("Denied Keys:\nweb1\n")

    def test_acceptDeniedPrompt(self) -> None:
        """
        The prompt of C{-a --include-denied} shows both fingerprints of a
        denied key: its own and the accepted one it would replace.
        """
        self.store.putKey(DENIED, "web1", PEM_B)
        self.setAnswer("n\n")
        self.assertEqual(self.run_("-a", "web1", "--include-denied"), 1)
        self.assertTrue(
            self.stdout.getvalue().startswith(
                "The following keys are going to be accepted:\n"
                "Denied Keys:\n"
                f"web1  (SHA-256 fingerprint {FINGER_B}; accepted: {FINGER_A})\n"
                "Proceed? [n/Y] "
            ),
            self.stdout.getvalue(),
        )
        self.assertEqual(self.store.getKey(ACCEPTED, "web1"), PEM_A)


class _FakeKeyGenerator:
    """
    Stands for L{salttwist.crypt.generatePrivateKey}: returns a key made
    beforehand, records the sizes asked for, and can run a hook first (for
    another process that writes a file meanwhile).

    @ivar sizes: the key sizes asked for.
    """

    def __init__(self, before: Callable[[], None] | None = None) -> None:
        """
        @param before: called with no arguments before each key is returned.
        """
        self.sizes: list[int] = []
        self._before = before

    def __call__(self, keysize: int = 2048) -> Any:
        """
        Record C{keysize}, run the hook, and return L{PRIVATE_A}.
        """
        self.sizes.append(keysize)
        if self._before is not None:
            self._before()
        return PRIVATE_A


class GenKeysTests(_KeyCommandBase):
    """
    C{--gen-keys NAME --gen-keys-dir DIR [--keysize N]} writes a key pair,
    as C{salt-key} does, and never overwrites one.
    """

    def setUp(self) -> None:
        """
        Replace the key generator, and break the master config: generating
        keys must not need it.
        """
        super().setUp()
        self.generator = _FakeKeyGenerator()
        self.patch(keycli, "generatePrivateKey", self.generator)
        with open(os.path.join(self.configDir, "master"), "w") as f:
            f.write("pki_dir: [unclosed\n")
        self.keyDir = os.path.join(self.root, "keys")

    def paths(self, name: str = "minion") -> tuple[str, str]:
        """
        @return: the paths of C{name.pem} and C{name.pub} in the key dir.
        """
        return (os.path.join(self.keyDir, f"{name}.pem"), os.path.join(self.keyDir, f"{name}.pub"))

    def test_genKeys(self) -> None:
        """
        C{--gen-keys NAME --gen-keys-dir DIR} writes C{DIR/NAME.pem}, the
        private key, mode 0600, and C{DIR/NAME.pub}, its public key, mode
        0644, and prints where and the public key's fingerprint. The key is
        2048 bits by default, and no master config is read.
        """
        self.addCleanup(os.umask, os.umask(0o022))
        pem, pub = self.paths()
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 0)
        self.assertOutput(
            f"Key pair written: {pem} (private, mode 0600) and {pub}.\nminion.pub:  {FINGER_A}\n"
        )
        self.assertEqual(self.stderr.getvalue(), "")
        self.assertEqual(self.generator.sizes, [2048])
        with open(pem, "rb") as f:
            self.assertEqual(f.read(), privateKeyToPem(PRIVATE_A))
        with open(pub, "rb") as f:
            self.assertEqual(f.read(), PEM_A)
        self.assertEqual(stat.S_IMODE(os.stat(pem).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(pub).st_mode), 0o644)

    def test_genKeysReal(self) -> None:
        """
        With the real generator, the private key reads back as an RSA key
        of the size asked for, whose public key is the one in C{NAME.pub}.
        """
        self.patch(keycli, "generatePrivateKey", generatePrivateKey)
        self.assertEqual(self.run_("--gen-keys", "m1", "--gen-keys-dir", self.keyDir), 0)
        pem, pub = self.paths("m1")
        with open(pem, "rb") as f:
            key = loadPrivateKey(f.read())
        with open(pub, "rb") as f:
            self.assertEqual(f.read(), publicKeyToPem(key.public_key()))
        self.assertEqual(key.key_size, 2048)

    def test_keysize(self) -> None:
        """
        C{--keysize N} asks for an N-bit key.
        """
        self.assertEqual(
            self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir, "--keysize", "4096"),
            0,
        )
        self.assertEqual(self.generator.sizes, [4096])

    def test_keysizeLimits(self) -> None:
        """
        A key size under 2048 or over 8192 (the largest key a master takes)
        is a usage error with Salt's wording, exit code 2, and nothing is
        generated or written.
        """
        for size, message in [
            ("1024", "error: The minimum value for keysize is 2048"),
            ("8193", "error: The maximum value for keysize is 8192"),
        ]:
            args = ("--gen-keys", "minion", "--gen-keys-dir", self.keyDir, "--keysize", size)
            self.assertEqual(self.run_(*args), 2)
            self.assertIn(message, self.stderr.getvalue())
        self.assertEqual(self.generator.sizes, [])
        self.assertFalse(os.path.exists(self.keyDir))

    def test_createsDirectory(self) -> None:
        """
        A missing key directory is created, with its parents, mode 0700.
        """
        self.keyDir = os.path.join(self.keyDir, "a", "b")
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 0)
        self.assertEqual(stat.S_IMODE(os.stat(self.keyDir).st_mode), 0o700)
        self.assertTrue(os.path.isfile(self.paths()[0]))

    def test_defaultDirectory(self) -> None:
        """
        Without C{--gen-keys-dir} the pair is written in the current
        directory, as in Salt.
        """
        os.makedirs(self.keyDir)
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.keyDir)
        self.assertEqual(self.run_("--gen-keys", "minion"), 0)
        self.assertEqual(sorted(os.listdir(self.keyDir)), ["minion.pem", "minion.pub"])

    def test_existingPrivateKey(self) -> None:
        """
        As in Salt, an existing C{NAME.pem} is never overwritten: nothing is
        generated or written. Unlike Salt, which then exits 0 silently, the
        command says so on stderr and exits 1.
        """
        os.makedirs(self.keyDir)
        pem, pub = self.paths()
        with open(pem, "wb") as f:
            f.write(b"the old key")
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 1)
        self.assertEqual(
            self.stderr.getvalue(),
            f"salttwist-key: {pem} already exists; not overwritten, no key pair written.\n",
        )
        self.assertOutput("")
        with open(pem, "rb") as f:
            self.assertEqual(f.read(), b"the old key")
        self.assertFalse(os.path.exists(pub))
        self.assertEqual(self.generator.sizes, [])

    def test_existingPublicKey(self) -> None:
        """
        An existing C{NAME.pub} alone is not overwritten either: no
        C{NAME.pem} is written.
        """
        os.makedirs(self.keyDir)
        pem, pub = self.paths()
        with open(pub, "wb") as f:
            f.write(PEM_B)
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 1)
        self.assertIn(f"{pub} already exists", self.stderr.getvalue())
        self.assertEqual(os.listdir(self.keyDir), ["minion.pub"])
        with open(pub, "rb") as f:
            self.assertEqual(f.read(), PEM_B)

    def test_danglingSymlink(self) -> None:
        """
        A symlink at C{NAME.pem}, even to nothing, counts as an existing
        file: nothing is written through it.
        """
        os.makedirs(self.keyDir)
        target = os.path.join(self.root, "elsewhere")
        os.symlink(target, self.paths()[0])
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 1)
        self.assertFalse(os.path.lexists(target))

    def test_writtenMeanwhile(self) -> None:
        """
        If another process writes C{NAME.pub} while the key is generated,
        it is kept, and the C{NAME.pem} just written is removed again: the
        two files never belong to different pairs.
        """
        pem, pub = self.paths()

        def otherProcess() -> None:
            with open(pub, "wb") as f:
                f.write(PEM_B)

        self.patch(keycli, "generatePrivateKey", _FakeKeyGenerator(otherProcess))
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 1)
        self.assertIn(f"{pub} already exists", self.stderr.getvalue())
        self.assertEqual(os.listdir(self.keyDir), ["minion.pub"])
        with open(pub, "rb") as f:
            self.assertEqual(f.read(), PEM_B)

    def test_privateWrittenMeanwhile(self) -> None:
        """
        If another process writes C{NAME.pem} while the key is generated,
        its key is kept and nothing is written.
        """
        pem, pub = self.paths()

        def otherProcess() -> None:
            with open(pem, "wb") as f:
                f.write(b"the winner's key")

        self.patch(keycli, "generatePrivateKey", _FakeKeyGenerator(otherProcess))
        self.assertEqual(self.run_("--gen-keys", "minion", "--gen-keys-dir", self.keyDir), 1)
        self.assertEqual(os.listdir(self.keyDir), ["minion.pem"])
        with open(pem, "rb") as f:
            self.assertEqual(f.read(), b"the winner's key")

    def test_nameNotPath(self) -> None:
        """
        NAME is a file name: one with a slash, or C{.} or C{..}, is refused
        with exit code 2 and nothing is written.
        """
        for name in ["../minion", "a/b", "..", "."]:
            self.assertEqual(self.run_("--gen-keys", name, "--gen-keys-dir", self.keyDir), 2, name)
        self.assertIn("--gen-keys takes a file name", self.stderr.getvalue())
        self.assertEqual(self.generator.sizes, [])
        self.assertFalse(os.path.exists(self.keyDir))

    def test_exclusive(self) -> None:
        """
        C{--gen-keys} is an action: it cannot be combined with another one.
        """
        self.assertEqual(self.run_("--gen-keys", "minion", "-L"), 2)
        self.assertIn("not allowed with", self.stderr.getvalue())
        self.assertEqual(self.generator.sizes, [])


def _runKeyCommand(configDir: str, *args: str) -> tuple[int, str]:
    """
    Run C{salttwist-key -c configDir ARGS} in this process with its output
    captured (a L{ProcessRace} action).

    @return: the exit code and standard output.
    """
    out = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        code = main(["-c", configDir, *args])
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue()


class ConcurrentCommandTests(_KeyCommandBase):
    """
    Two C{salttwist-key} runs in two processes act on the same pending key
    at the same moment.
    """

    ROUNDS = 50

    def test_acceptAndDelete(self) -> None:
        """
        C{salttwist-key -a ID -y} and C{salttwist-key -d ID -y}, racing 50
        times on a pending key: the key always ends in exactly one state,
        accepted with its bytes, or in none, and only when the delete
        reports that it deleted it. It is never left pending, never in two
        states, never lost without a word, and at least one of the two
        commands succeeds.
        """
        processes = ProcessRace(self, 2)
        accept = functools.partial(_runKeyCommand, self.configDir, "-a", "race1", "-y")
        delete = functools.partial(_runKeyCommand, self.configDir, "-d", "race1", "-y")
        for _ in range(self.ROUNDS):
            self.store.putKey(PENDING, "race1", PEM_B)
            (acceptCode, acceptOut), (deleteCode, deleteOut) = processes.round([accept, delete])
            context = f"accept: {acceptCode} {acceptOut!r}\ndelete: {deleteCode} {deleteOut!r}"
            states = self.store.stateOf("race1")
            deleted = "Key for minion race1 deleted." in deleteOut
            self.assertEqual(deleted, deleteCode == 0, context)
            if deleted:
                self.assertEqual(states, [], context)
            else:
                self.assertEqual(states, [ACCEPTED], context)
                self.assertEqual(self.store.getKey(ACCEPTED, "race1"), PEM_B, context)
                self.assertEqual(acceptCode, 0, context)
                self.assertIn("Key for minion race1 accepted.", acceptOut, context)
            for state in STATES:
                self.store.deleteKey(state, "race1")
                leftovers = [
                    name
                    for name in os.listdir(os.path.join(self.pkiDir, state))
                    if name.startswith(".")
                ]
                self.assertEqual(leftovers, [], context)


class LookAlikeIdTests(_KeyCommandBase):
    """
    Keys stored before the id rules of issue 22 whose ids look like
    others: listings show them escaped, and they can be named and deleted.
    """

    def setUp(self) -> None:
        """
        Add an impostor C{web1\\u3164} beside the accepted C{web1}.
        """
        super().setUp()
        self.store.putKey(ACCEPTED, "web1\u3164", PEM_B)

    def test_listEscaped(self) -> None:
        """
        C{-L} shows the impostor escaped, in the human and txt formats; json
        escapes it as JSON does.
        """
        self.assertEqual(self.run_("-L"), 0)
        lines = self.stdout.getvalue().splitlines()
        self.assertIn("web1", lines)
        self.assertIn("web1\\u3164", lines)
        self.assertTrue(self.stdout.getvalue().isascii())
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.assertEqual(self.run_("-L", "--out", "txt"), 0)
        self.assertIn("'web1\\\\u3164'", self.stdout.getvalue())
        self.assertTrue(self.stdout.getvalue().isascii())

    def test_fingerEscaped(self) -> None:
        """
        C{-F} shows the impostor escaped beside its fingerprint.
        """
        self.assertEqual(self.run_("-F"), 0)
        self.assertIn(f"web1\\u3164:  {FINGER_B}", self.stdout.getvalue())

    def test_deleteByEscapedName(self) -> None:
        """
        C{-d} with the escaped form deletes the impostor only; the prompt
        shows it escaped.
        """
        self.setAnswer("y\n")
        self.assertEqual(self.run_("-d", "web1\\u3164"), 0)
        self.assertIn("web1\\u3164  (SHA-256", self.stdout.getvalue())
        self.assertIn("Key for minion web1\\u3164 deleted.", self.stdout.getvalue())
        self.assertEqual(self.store.stateOf("web1\u3164"), [])
        self.assertEqual(self.store.stateOf("web1"), [ACCEPTED])

    def test_deleteByRealName(self) -> None:
        """
        C{-d} with the id itself deletes it too.
        """
        self.assertEqual(self.run_("-d", "web1\u3164", "-y"), 0)
        self.assertEqual(self.store.listKeys(ACCEPTED), ["web1"])


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


class VersionTests(SynchronousTestCase):
    """
    C{salttwist-key --version}, like every salttwist command.
    """

    def test_version(self) -> None:
        """
        It prints the version and exits 0.
        """
        out = io.StringIO()
        self.patch(sys, "stdout", out)
        self.assertEqual(main(["--version"]), 0)
        self.assertEqual(out.getvalue().split(), ["salttwist", salttwist.__version__])
