# -*- test-case-name: tests.test_cli_key -*-
"""
C{salttwist-key}: list, accept, reject, delete, fingerprint and print minion
keys, and generate key pairs, with the flags and output of Salt's
C{salt-key}.

It works on the master's key store directly (C{keys.cache_driver}), so it
needs no running master: by default C{pki_dir} through L{FilesystemKeyStore}
(every change is one atomic rename or unlink, so this command and the
master can run at the same time); with C{keys.cache_driver: postgres} the
database every master of a cluster shares, so a change made here is seen by
every master within milliseconds (each cuts off the minions it holds whose
key is no longer accepted).

An accepted key is always the one the admin saw: the prompt shows each
key's fingerprint, and a key whose bytes changed after that is not accepted.

A denied key (an id already accepted or pending, presented again with
another key) is shown by C{-f}/C{-F} with the fingerprint of the key it
clashes with, so that an admin can tell a rebuilt host from an impostor.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from salttwist.cli import addCommonArguments
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.crypt import (
    MAX_RSA_BITS,
    MIN_RSA_BITS,
    fingerprint,
    generatePrivateKey,
    privateKeyToPem,
    publicKeyToPem,
)
from salttwist.events.fire import fireMasterEvent
from salttwist.pki.ids import escapeId
from salttwist.pki.keystore import (
    ACCEPTED,
    DENIED,
    PENDING,
    REJECTED,
    STATES,
    FilesystemKeyStore,
    KeyChanged,
)
from salttwist.pki.keystore_pg import KeyStoreError
from salttwist.pki.stores import KeyStoreSetupError, keyStoreSpec, openKeyStore

__all__ = ["main"]

LOCAL = "local"
"""
The pseudo-state of the master's own keys in fingerprint output, as Salt.
"""

LOCAL_KEYS = ("master.pub",)
"""
The master's own key files shown by C{-f}/C{-F}. Only the public key: its
fingerprint is what minions pin (C{master_finger}), and the private key is
never read by this command.
"""

_HEADINGS = {
    LOCAL: "Local Keys:",
    ACCEPTED: "Accepted Keys:",
    DENIED: "Denied Keys:",
    PENDING: "Unaccepted Keys:",
    REJECTED: "Rejected Keys:",
}

# Salt's key outputter walks the states in sorted order of their names,
# which puts the headings in this order.
_HUMAN_ORDER = (LOCAL, ACCEPTED, DENIED, PENDING, REJECTED)

# The order of the keys in json, yaml and txt output.
_DATA_ORDER = (LOCAL, ACCEPTED, PENDING, REJECTED, DENIED)

_ADJECTIVES = {
    ACCEPTED: "accepted",
    PENDING: "unaccepted",
    REJECTED: "rejected",
    DENIED: "denied",
}

_LIST_CHOICES = {
    "acc": (ACCEPTED,),
    "accepted": (ACCEPTED,),
    "pre": (PENDING,),
    "un": (PENDING,),
    "unaccepted": (PENDING,),
    "rej": (REJECTED,),
    "rejected": (REJECTED,),
    "den": (DENIED,),
    "denied": (DENIED,),
    "all": STATES,
}


@dataclass(frozen=True)
class _Match:
    """
    One key chosen by a glob, as it was when the admin was shown it.

    @ivar state: the state it is in.
    @ivar minionId: its minion id.
    @ivar pem: its bytes at that time.
    """

    state: str
    minionId: str
    pem: bytes


#: The C{act} of the C{salt/key} event for each verb.
_ACTS = {"accepted": "accept", "rejected": "reject", "deleted": "delete"}


def _makeParser() -> argparse.ArgumentParser:
    """
    Build the argument parser, with C{salt-key}'s flags.
    """
    parser = argparse.ArgumentParser(
        prog="salttwist-key",
        description="Manage the minion public keys of a salttwist master.",
    )
    addCommonArguments(parser, "master")
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument(
        "-L", "--list-all", action="store_true", help="List all public keys (the default)."
    )
    actions.add_argument(
        "-l",
        "--list",
        choices=list(_LIST_CHOICES),
        metavar="{acc,pre,un,rej,den,all}",
        help="List the public keys in one state.",
    )
    actions.add_argument("-a", "--accept", metavar="ID", help="Accept the keys matching a glob.")
    actions.add_argument("-A", "--accept-all", action="store_true", help="Accept all pending keys.")
    actions.add_argument("-r", "--reject", metavar="ID", help="Reject the keys matching a glob.")
    actions.add_argument("-R", "--reject-all", action="store_true", help="Reject all pending keys.")
    actions.add_argument("-d", "--delete", metavar="ID", help="Delete the keys matching a glob.")
    actions.add_argument("-D", "--delete-all", action="store_true", help="Delete all keys.")
    actions.add_argument(
        "-f", "--finger", metavar="ID", help="Print the fingerprints of the keys matching a glob."
    )
    actions.add_argument(
        "-F", "--finger-all", action="store_true", help="Print the fingerprints of all keys."
    )
    actions.add_argument(
        "-p", "--print", metavar="ID", help="Print the public keys matching a glob."
    )
    actions.add_argument("-P", "--print-all", action="store_true", help="Print all public keys.")
    actions.add_argument(
        "--gen-keys",
        metavar="NAME",
        help="Generate a key pair, NAME.pem (private, mode 0600) and NAME.pub; an"
        " existing pair is never overwritten.",
    )
    parser.add_argument(
        "--gen-keys-dir",
        default=".",
        metavar="DIR",
        help="The directory --gen-keys writes to, created if missing (default: the"
        " current directory).",
    )
    parser.add_argument(
        "--keysize",
        type=int,
        default=MIN_RSA_BITS,
        metavar="N",
        help=f"The size in bits of the key --gen-keys makes, {MIN_RSA_BITS} to"
        f" {MAX_RSA_BITS} (default: %(default)s).",
    )
    parser.add_argument("-y", "--yes", action="store_true", help="Answer yes to every question.")
    parser.add_argument(
        "--include-rejected",
        action="store_true",
        help="Let -a/-A also accept rejected keys.",
    )
    parser.add_argument(
        "--include-denied",
        action="store_true",
        help="Let -a/-A and -r/-R also act on denied keys.",
    )
    parser.add_argument(
        "--include-accepted",
        action="store_true",
        help="Let -r/-R also reject accepted keys.",
    )
    parser.add_argument(
        "--out",
        choices=["nested", "json", "yaml", "txt"],
        default="nested",
        help="The output format of listings (default: %(default)s).",
    )
    return parser


def _write(text: str = "") -> None:
    """
    Print one line on standard output, looked up at call time so that tests
    can replace it.
    """
    sys.stdout.write(text + "\n")


def _error(text: str) -> None:
    """
    Print one error line on standard error.
    """
    sys.stderr.write(f"salttwist-key: {text}\n")


def _globs(pattern: str) -> list[str]:
    """
    Split a target as Salt does: a comma-separated list of globs.
    """
    return pattern.split(",")


def _matches(name: str, globs: Sequence[str]) -> bool:
    """
    Does C{name} match one of C{globs}? Matching is case-sensitive, as ids are.
    An id that listings show escaped (L{escapeId}: invisible or non-ASCII
    letters) also matches by that escaped form, so an admin can name
    C{web1\\u3164} apart from C{web1} (C{salttwist-key -d 'web1\\u3164'}).
    """
    if any(fnmatch.fnmatchcase(name, glob) for glob in globs):
        return True
    shown = escapeId(name)
    return shown != name and any(fnmatch.fnmatchcase(shown, glob) for glob in globs)


def _escapedIds(value: Any) -> Any:
    """
    A list of ids, or a mapping by id, with each id escaped (L{escapeId}).
    """
    if isinstance(value, dict):
        return {escapeId(name): entry for name, entry in value.items()}
    if isinstance(value, list):
        return [escapeId(name) for name in value]
    return value


def _fingerprintOrNote(pem: bytes) -> str:
    """
    The fingerprint of C{pem}, or a note if the file does not hold a PEM
    body (the store only writes valid keys, but an admin may not have).
    """
    try:
        return fingerprint(pem)
    except ValueError:
        return "(unreadable key)"


def _orList(words: Sequence[str]) -> str:
    """
    Join words as C{a}, C{a or b}, C{a, b or c}.
    """
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _output(data: dict[str, Any], fmt: str, line: Callable[[str, str, Any], str]) -> None:
    """
    Print C{data}, a mapping of state to the keys in it, in format C{fmt}.

    The C{txt} format is Salt's: one line C{state: value} per state, the
    value as Python prints it, never wrapped.

    @param line: formats one entry of the human C{nested} format, given its
        state, its key and (for a mapping) its value.
    """
    ordered = {state: data[state] for state in _DATA_ORDER if state in data}
    if fmt == "txt":
        # Python's repr shows blank and lookalike letters as they are.
        ordered = {state: _escapedIds(value) for state, value in ordered.items()}
    if fmt == "json":
        _write(json.dumps(ordered, indent=4))
    elif fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(ordered, default_flow_style=False, sort_keys=False))
    elif fmt == "txt":
        for state, value in ordered.items():
            _write(f"{state}: {value}")
    else:
        for state in _HUMAN_ORDER:
            if state in data:
                _write(_HEADINGS[state])
                entries = data[state]
                for name in entries:
                    value = entries[name] if isinstance(entries, dict) else None
                    text = line(state, name, value)
                    if text.startswith(name):
                        # Shown escaped: blank and lookalike letters visible.
                        text = escapeId(name) + text[len(name) :]
                    _write(text)


def _listKeys(store: FilesystemKeyStore, states: Sequence[str], fmt: str) -> int:
    """
    Print the ids in C{states}, as C{-L} and C{-l} do.
    """
    data = {state: store.listKeys(state) for state in states}
    _output(data, fmt, lambda state, name, value: name)
    return 0


def _readMatching(
    store: FilesystemKeyStore, pattern: str | None, convert: Callable[[bytes], str]
) -> dict[str, dict[str, str]]:
    """
    Read the keys whose ids match C{pattern}, in every state.

    @param pattern: a comma-separated list of globs; L{None} for every key,
        in which case every state is in the result, even an empty one.
    @param convert: turns the bytes of one key into what is shown.
    @return: a mapping of state to a mapping of id to C{convert}'s result,
        with only the states that matched (unless C{pattern} is L{None}).
        A key that cannot be read is reported on standard error and left
        out.
    """
    globs = _globs(pattern) if pattern is not None else ["*"]
    data: dict[str, dict[str, str]] = {}
    for state in STATES:
        if pattern is None:
            data[state] = {}
        for minionId in store.listKeys(state):
            if not _matches(minionId, globs):
                continue
            try:
                pem = store.getKey(state, minionId)
            except OSError as e:
                _error(f"cannot read the key of {escapeId(minionId)} in {state}: {e}")
                continue
            if pem is not None:
                data.setdefault(state, {})[minionId] = convert(pem)
    return data


def _clashes(store: FilesystemKeyStore, minionIds: Sequence[str]) -> dict[str, str]:
    """
    For each denied id, the fingerprints of the keys it clashes with: the
    key of the same id that is accepted or pending. The admin compares them
    to tell a rebuilt host (whose new key should replace the old one) from
    an impostor.

    @return: a mapping of id to text such as C{accepted: 3a:...}; ids with
        no accepted or pending key (deleted since) are left out.
    """
    found = {}
    for minionId in minionIds:
        parts = []
        for state in (ACCEPTED, PENDING):
            try:
                pem = store.getKey(state, minionId)
            except OSError as e:
                _error(f"cannot read the key of {escapeId(minionId)} in {state}: {e}")
                continue
            if pem is not None:
                parts.append(f"{_ADJECTIVES[state]}: {_fingerprintOrNote(pem)}")
        if parts:
            found[minionId] = "; ".join(parts)
    return found


def _fingerKeys(store: FilesystemKeyStore, pattern: str | None, fmt: str) -> int:
    """
    Print the fingerprints of the keys matching C{pattern} (all keys, with
    every heading, if it is L{None}), as C{-f} and C{-F} do.

    In the human format a denied key is followed by the fingerprint of the
    accepted or pending key of the same id, in parentheses; the json, yaml
    and txt formats keep Salt's shape (state, id, fingerprint), where the
    other key is under its own state.
    """
    globs = _globs(pattern) if pattern is not None else ["*"]
    data: dict[str, dict[str, str]] = {}
    for name in LOCAL_KEYS:
        path = os.path.join(store.pkiDir, name)
        if _matches(name, globs) and os.path.isfile(path):
            with open(path, "rb") as f:
                data.setdefault(LOCAL, {})[name] = _fingerprintOrNote(f.read())
    data.update(_readMatching(store, pattern, _fingerprintOrNote))
    if pattern is not None and not data:
        _write(f"The key glob '{pattern}' does not match any keys.")
        return 1
    clashes = _clashes(store, list(data.get(DENIED, {}))) if fmt == "nested" else {}

    def line(state: str, name: str, value: str) -> str:
        if state == DENIED and name in clashes:
            return f"{name}:  {value}  ({clashes[name]})"
        return f"{name}:  {value}"

    _output(data, fmt, line)
    return 0


def _printKeys(store: FilesystemKeyStore, pattern: str | None, fmt: str) -> int:
    """
    Print the public keys matching C{pattern} (all keys, with every
    heading, if it is L{None}), as C{-p} and C{-P} do: under each state
    heading, C{id:  } then the PEM, which ends with its own newline, so a
    blank line follows each key, as in Salt. The master's own keys are not
    shown, as in Salt.
    """
    data = _readMatching(store, pattern, lambda pem: pem.decode("ascii", "replace"))
    if pattern is not None and not data:
        _write(f"The key glob '{pattern}' does not match any keys.")
        return 1
    _output(data, fmt, lambda state, name, value: f"{name}:  {value}")
    return 0


def _genKeys(name: str, directory: str, keysize: int) -> int:
    """
    Write a new key pair, C{directory/name.pem} (mode 0600) and
    C{directory/name.pub} (mode 0644), as C{--gen-keys} does; create
    C{directory} (mode 0700) if it is missing, as Salt does.

    Like Salt, it never overwrites an existing key: if either file exists,
    nothing is written. Unlike Salt, which then exits 0 without a word, it
    says so and fails, so that a script never takes the old key for a new
    one.

    @return: 0 once both files are written; 1 if one of them existed; 2 if
        they cannot be written.
    """
    if name in ("", ".", "..") or os.sep in name or (os.altsep and os.altsep in name):
        _error(f"--gen-keys takes a file name, not a path: {name!r}")
        return 2
    privPath = os.path.join(directory, f"{name}.pem")
    pubPath = os.path.join(directory, f"{name}.pub")
    for path in (privPath, pubPath):
        if os.path.lexists(path):
            _error(f"{path} already exists; not overwritten, no key pair written.")
            return 1
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as e:
        _error(f"cannot create {directory}: {e.strerror or e}")
        return 2

    key = generatePrivateKey(keysize)
    publicPem = publicKeyToPem(key.public_key())
    written: list[str] = []
    try:
        for path, data, mode in (
            (privPath, privateKeyToPem(key), 0o600),
            (pubPath, publicPem, 0o644),
        ):
            # O_EXCL: a file created meanwhile (another run) is never replaced.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            written.append(path)
            try:
                os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as e:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
        if isinstance(e, FileExistsError):
            _error(f"{e.filename} already exists; not overwritten, no key pair written.")
            return 1
        _error(f"cannot write {e.filename}: {e.strerror or e}")
        return 2
    _write(f"Key pair written: {privPath} (private, mode 0600) and {pubPath}.")
    _write(f"{name}.pub:  {fingerprint(publicPem)}")
    return 0


def _findMatches(store: FilesystemKeyStore, pattern: str, sources: Sequence[str]) -> list[_Match]:
    """
    The keys in C{sources} whose ids match C{pattern}, with their bytes now.
    """
    globs = _globs(pattern)
    found = []
    for state in sources:
        for minionId in store.listKeys(state):
            if not _matches(minionId, globs):
                continue
            try:
                pem = store.getKey(state, minionId)
            except OSError as e:
                _error(f"cannot read the key of {escapeId(minionId)} in {state}: {e}")
                continue
            if pem is not None:
                found.append(_Match(state, minionId, pem))
    return found


def _confirm(verb: str, found: Sequence[_Match], clashes: dict[str, str], defaultYes: bool) -> bool:
    """
    Show the keys about to change, with their fingerprints (and for a denied
    key, those of the key it clashes with), and ask.

    @param clashes: see L{_clashes}.
    @param defaultYes: whether an empty answer means yes. As in Salt, it
        does for accepting and rejecting (C{[n/Y]}) but not for deleting
        (C{[N/y]}).
    @return: L{True} for C{y}, C{Y}, or an empty line if C{defaultYes};
        L{False} for anything else, including end of input (so that
        C{</dev/null} never agrees).
    """
    _write(f"The following keys are going to be {verb}:")
    for state in _HUMAN_ORDER:
        inState = [match for match in found if match.state == state]
        if inState:
            _write(_HEADINGS[state])
            for match in inState:
                finger = f"SHA-256 fingerprint {_fingerprintOrNote(match.pem)}"
                if state == DENIED and match.minionId in clashes:
                    finger += f"; {clashes[match.minionId]}"
                _write(f"{escapeId(match.minionId)}  ({finger})")
    sys.stdout.write("Proceed? [n/Y] " if defaultYes else "Proceed? [N/y] ")
    sys.stdout.flush()
    answer = sys.stdin.readline()
    if not answer:
        _write()
        return False
    answer = answer.strip()
    return answer in ("y", "Y") or (defaultYes and answer == "")


def _changeKeys(
    store: FilesystemKeyStore,
    pattern: str,
    sources: Sequence[str],
    target: str | None,
    verb: str,
    yes: bool,
    notify: Callable[[str, str], None] | None = None,
) -> int:
    """
    Move (or, if C{target} is L{None}, delete) the keys in C{sources} that
    match C{pattern}, after asking unless C{yes}.

    Keys being accepted are moved only if their bytes are still the ones
    shown (L{FilesystemKeyStore.moveKey}'s C{expected}); a key that another
    process moved or deleted meanwhile is reported and skipped.

    @param notify: called with (act, minion id) for every key changed, to
        fire the C{salt/key} event.
    @return: 0 if every matched key was changed, 1 otherwise (no match, the
        admin said no, or a key had changed or gone).
    """
    found = _findMatches(store, pattern, sources)
    if not found:
        adjectives = [_ADJECTIVES[state] for state in sources]
        _write(f"The key glob '{pattern}' does not match any {_orList(adjectives)} keys.")
        return 1
    denied = [match.minionId for match in found if match.state == DENIED]
    if not yes and not _confirm(verb, found, _clashes(store, denied), target is not None):
        _write("Aborted; no keys were changed.")
        return 1

    status = 0
    done: list[str] = []
    for match in found:
        minionId = match.minionId
        try:
            if target is None:
                changed = store.deleteKey(match.state, minionId)
            else:
                # Only an acceptance grants trust, so only it insists on the
                # exact bytes the admin saw.
                expected = match.pem if target == ACCEPTED else None
                changed = store.moveKey(minionId, match.state, target, expected=expected)
        except KeyChanged:
            _write(
                f"Key for minion {escapeId(minionId)} changed after it was listed;"
                f" not {verb}. Check its fingerprint and try again."
            )
            status = 1
            continue
        except OSError as e:
            _error(f"cannot change the key of {escapeId(minionId)} in {match.state}: {e}")
            status = 1
            continue
        if not changed:
            _write(
                f"Key for minion {escapeId(minionId)} is no longer "
                f"{_ADJECTIVES[match.state]}; not {verb}."
            )
            status = 1
        elif minionId not in done:
            done.append(minionId)
            _write(f"Key for minion {escapeId(minionId)} {verb}.")
            if notify is not None:
                notify(_ACTS[verb], minionId)
    return status


def main(argv: list[str] | None = None) -> int:
    """
    Run C{salttwist-key}.

    @param argv: the arguments, without the program name; L{None} for
        C{sys.argv[1:]}.
    @return: the exit code: 0 on success; 1 if nothing matched, the admin
        declined, a key could not be changed or C{--gen-keys} found a key
        already there; 2 for a usage or configuration error.
    """
    parser = _makeParser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as e:
        # argparse exits on --help and on usage errors; return its code instead.
        return e.code if isinstance(e.code, int) else 2

    if not MIN_RSA_BITS <= options.keysize <= MAX_RSA_BITS:
        # Salt's words and limits, except that the master refuses keys over
        # MAX_RSA_BITS, so making one would be of no use.
        which = "minimum" if options.keysize < MIN_RSA_BITS else "maximum"
        limit = MIN_RSA_BITS if which == "minimum" else MAX_RSA_BITS
        try:
            parser.error(f"The {which} value for keysize is {limit}")
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 2
    if options.gen_keys is not None:
        # Needs no master config: a key pair for a minion or another master
        # is often made on a host without one.
        return _genKeys(options.gen_keys, options.gen_keys_dir, options.keysize)

    try:
        config = loadMasterConfig(options.config_dir)
    except ConfigError as e:
        _error(str(e))
        return 2
    try:
        spec = keyStoreSpec(config)
        # A PostgreSQL store loads every key before answering: wait for it
        # as long as a connection may take, and a little more.
        store = openKeyStore(
            spec, readyTimeout=float(config.get("keys.postgres.connect_timeout", 10)) + 5
        )
    except KeyStoreSetupError as e:
        _error(f"cannot use the key store: {e}")
        return 2
    except OSError as e:
        _error(f"cannot use pki_dir {config['pki_dir']!r}: {e.strerror or e}")
        return 2

    def notify(act: str, minionId: str) -> None:
        # A running master acts on the change at once (cuts a rejected or
        # deleted minion off and rotates the publication key); without a
        # master the change simply waits on disk.
        fireMasterEvent(config["sock_dir"], "salt/key", {"act": act, "id": minionId})

    try:
        return _dispatch(store, options, notify)
    except OSError as e:
        _error(str(e))
        return 2
    except KeyStoreError as e:
        _error(str(e))
        return 2
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def _dispatch(
    store: FilesystemKeyStore,
    options: argparse.Namespace,
    notify: Callable[[str, str], None] | None = None,
) -> int:
    """
    Run the one action chosen on the command line.
    """
    yes = options.yes
    if options.accept is not None or options.accept_all:
        sources = [PENDING]
        if options.include_rejected:
            sources.append(REJECTED)
        if options.include_denied:
            sources.append(DENIED)
        pattern = options.accept if options.accept is not None else "*"
        return _changeKeys(store, pattern, sources, ACCEPTED, "accepted", yes, notify)
    if options.reject is not None or options.reject_all:
        sources = [PENDING]
        if options.include_accepted:
            sources.append(ACCEPTED)
        if options.include_denied:
            sources.append(DENIED)
        pattern = options.reject if options.reject is not None else "*"
        return _changeKeys(store, pattern, sources, REJECTED, "rejected", yes, notify)
    if options.delete is not None or options.delete_all:
        pattern = options.delete if options.delete is not None else "*"
        sources = [ACCEPTED, PENDING, REJECTED, DENIED]
        return _changeKeys(store, pattern, sources, None, "deleted", yes, notify)
    if options.finger is not None:
        return _fingerKeys(store, options.finger, options.out)
    if options.finger_all:
        return _fingerKeys(store, None, options.out)
    if options.print is not None:
        return _printKeys(store, options.print, options.out)
    if options.print_all:
        return _printKeys(store, None, options.out)
    if options.list is not None:
        return _listKeys(store, _LIST_CHOICES[options.list], options.out)
    return _listKeys(store, STATES, options.out)


if __name__ == "__main__":
    sys.exit(main())
