# -*- test-case-name: tests.test_modules_key -*-
"""
Salt's C{key} module: the fingerprints of the minion's own public key and
of the master's key it pinned, read from the minion's C{pki_dir}.

Before accepting a minion's key, compare C{salttwist-call --local
key.finger} on the minion with C{salttwist-key -f <id>} on the master;
C{key.finger_master} on the minion is what C{salttwist-key -F} shows for
the master's C{master.pub} (and the value C{master_finger} takes). The
fingerprints are SHA-256, in the format C{salttwist-key} prints.

Where Salt returns an empty string for a key file that does not exist,
these functions fail with a message saying why the file is not there yet.
"""

from __future__ import annotations

import os

from salttwist.crypt import CryptError, fingerprint, loadPublicKey
from salttwist.files import MASTER_PUB_FILE, MINION_PUB_FILE
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    needsContext,
)


@needsContext
def finger(context: LoaderContext, hash_type: str | None = None) -> str:
    """
    Return the fingerprint of the minion's public key
    (C{pki_dir/minion.pub}), as C{salttwist-key -f <id>} shows it on the
    master: compare the two before accepting the key.

    hash_type
        The hash of the fingerprint: only C{sha256} (the default).

    CLI Example:

        salttwist '*' key.finger
        salttwist-call --local key.finger
    """
    return _finger(
        context,
        MINION_PUB_FILE,
        "salttwist-minion creates the minion's key pair when it first starts",
        hash_type,
    )


@needsContext
def finger_master(context: LoaderContext, hash_type: str | None = None) -> str:
    """
    Return the fingerprint of the master's public key that the minion
    pinned (C{pki_dir/minion_master.pub}), as C{salttwist-key -F} shows the
    master's C{master.pub} on the master.

    hash_type
        The hash of the fingerprint: only C{sha256} (the default).

    CLI Example:

        salttwist '*' key.finger_master
        salttwist-call --local key.finger_master
    """
    return _finger(
        context,
        MASTER_PUB_FILE,
        "the minion pins its master's key when it first authenticates",
        hash_type,
    )


def _finger(context: LoaderContext, name: str, whyMissing: str, hashType: str | None) -> str:
    """
    @param name: the key file's name in C{pki_dir}.
    @param whyMissing: when the file gets written, for the error if it
        does not exist yet.
    @return: the SHA-256 fingerprint of the key file C{name}.
    @raise SaltInvocationError: C{hashType} is not SHA-256.
    @raise CommandExecutionError: the file is missing, unreadable or not a
        PEM key.
    """
    if hashType is not None and str(hashType).lower().replace("-", "") != "sha256":
        raise SaltInvocationError(
            f"hash_type {hashType!r} is not supported: salttwist fingerprints are sha256"
        )
    path = os.path.join(context.opts["pki_dir"], name)
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except FileNotFoundError:
        raise CommandExecutionError(f"No key at {path} yet: {whyMissing}") from None
    except OSError as e:
        raise CommandExecutionError(f"Cannot read {path}: {e.strerror or e}") from None
    try:
        # Vetted as the master vets keys: an unreadable body would still
        # give a fingerprint (of whatever base64 it holds).
        loadPublicKey(pem)
    except CryptError as e:
        raise CommandExecutionError(f"{path} does not hold a usable public key: {e}") from None
    return fingerprint(pem)
