# -*- test-case-name: tests.test_keystore -*-
"""
The interfaces between salttwist's parts.

Implementations declare them with C{@implementer} and their tests call
C{verifyObject}, so a fake and a real implementation cannot drift apart.
"""

from zope.interface import Interface


class IKeyStore(Interface):
    """
    Where the master keeps minion public keys, one per minion id, in one of
    four states: C{minions_pre} (pending), C{minions} (accepted),
    C{minions_rejected} and C{minions_denied}.
    """

    def getKey(state, minionId):
        """
        @param state: one of L{salttwist.pki.keystore.STATES}.
        @param minionId: a valid minion id.
        @return: the PEM bytes stored for C{minionId} in C{state}, or L{None}.
        """

    def putKey(state, minionId, pem):
        """
        Store C{pem} for C{minionId} in C{state} atomically, replacing any key
        already there in that state.
        """

    def moveKey(minionId, fromState, toState):
        """
        Move the key of C{minionId} from C{fromState} to C{toState} atomically.

        @return: L{True} if a key was moved, L{False} if there was none.
        """

    def deleteKey(state, minionId):
        """
        Remove the key of C{minionId} from C{state}.

        @return: L{True} if a key was removed.
        """

    def listKeys(state):
        """
        @return: the sorted list of minion ids in C{state}.
        """

    def stateOf(minionId):
        """
        @return: the list of states that hold a key for C{minionId}.
        """


class IAutosignPolicy(Interface):
    """
    Decides whether a new (unknown) minion key is accepted without an admin.
    """

    def decide(minionId, pem, context):
        """
        @param minionId: the validated minion id.
        @param pem: the minion's public key, PEM bytes.
        @param context: a L{dict} with C{peer} and C{autosign_grains}.
        @return: a L{Deferred} firing with C{"accept"}, C{"reject"} or
            C{"pending"}.
        """


class IEventBus(Interface):
    """
    A tagged publish/subscribe bus (Salt's event bus).
    """

    def fire(tag, data):
        """
        Publish one event.

        @param tag: the event tag, for example C{salt/job/<jid>/new}.
        @param data: a msgpack-able L{dict}; C{_stamp} is added.
        """

    def subscribe(prefixes, callback):
        """
        Call C{callback(tag, data)} for every event whose tag starts with one
        of C{prefixes} (all events when C{prefixes} is empty).

        @return: an object with a C{stop()} method that ends the subscription.
        """


class IJobCache(Interface):
    """
    Stores published jobs and their returns.
    """

    def storeJob(jid, load, minions):
        """
        Record a published job and the minions expected to answer it.
        """

    def storeReturn(jid, minionId, ret):
        """
        Record one minion's return for C{jid}.
        """
