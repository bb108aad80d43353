# -*- test-case-name: tests.test_master_rooms -*-
# ruff: noqa: N805 (zope.interface methods have no self)
"""
The master's rooms and what they see of the connections.

The master's logic is split into rooms with one job each (see
L{salttwist.master.core}): admission (L{IAdmission}), sessions and
subscriptions (L{ISessions}, L{ISubscriptions}), key watch and rotation
(L{IKeyWatch}), job publishing (L{IJobPublisher}), the requests of minion
sessions (L{IMinionRequests}) and runner dispatch (L{IRunnerDispatch}).

The protocols are typed against the narrow channel interfaces:
L{IPubChannel} (what L{salttwist.master.publisher.PubServerProtocol} calls)
and L{IReqChannel} (what L{salttwist.master.reqserver.ReqServerProtocol}
calls), so a test can hand a protocol a small fake. The rooms in turn see a
connection only through L{IMinionSession} and L{ISubscriber}, never as a
concrete protocol class.
"""

from zope.interface import Attribute, Interface


class IMinionSession(Interface):
    """
    What the rooms use of a minion's (or the local client's) req session:
    L{salttwist.master.reqserver.ReqServerProtocol}.
    """

    role = Attribute("C{'minion'}, C{'transient'} or C{'client'} once authenticated, else None.")
    minionId = Attribute("The authenticated minion's id (minion sessions), else None.")
    clientUser = Attribute("The local client's user (client sessions).")
    clientAcl = Attribute("Whether the client's key is a publisher_acl user's.")
    challenge = Attribute("This connection's challenge (bytes).")
    peerName = Attribute("The peer's address, for logs and rate limits.")
    sessionKey = Attribute("The session's key (bytes), or None before the session.")
    transport = Attribute("The connection's transport (C{loseConnection}).")

    def takeHeldAcknowledgements():
        """
        Take the replies held back for a publication to carry, if every one
        is a plain acknowledgement.

        @return: their request ids, oldest first; empty if nothing was taken.
        """

    def sendHeld():
        """
        Seal and send the replies held back, in one write.
        """


class ISubscriber(Interface):
    """
    A connection a minion's publications are written to: a pub connection
    or, for a minion with C{single_connection}, its req session's own.
    """

    minionId = Attribute("The subscribed minion's id, once it subscribed.")
    challenge = Attribute("This connection's challenge (bytes).")
    publicationMac = Attribute("The MAC of this subscription's publications.")
    carriesAcknowledgements = Attribute("Whether publications carry the session's held acks.")
    session = Attribute("The L{IMinionSession} this subscription proved.")
    transport = Attribute("The connection's transport (C{loseConnection}).")

    def sendString(data):
        """
        Write one frame already encoded.

        @param data: the frame's bytes, without the length prefix.
        """

    def sendFrame(message):
        """
        Encode and write one frame.

        @param message: the frame's map.
        """


class IAdmission(Interface):
    """
    Admission: the clear-text authentication of minions (with its caps,
    rate limits, C{minions_pre} bound and autosign) and of the local client.
    """

    def clearAuth(proto, load):
        """
        C{_auth}: a minion authenticates.

        @param proto: the L{IMinionSession} asking.
        @param load: the request's map.
        @return: a L{Deferred} firing with C{(reply, sessionKey or None,
            role, minionId)}.
        """

    def clearClientAuth(proto, load):
        """
        C{_client_auth}: the local client authenticates.

        @param proto: the L{IMinionSession} asking.
        @param load: the request's map.
        @return: C{(reply, sessionKey or None, role, minionId)}.
        """

    def authenticate(load, challenge, peer, allowNewPending=True):
        """
        Check one C{_auth} request off the reactor.

        @return: a L{Deferred} firing with an
            L{salttwist.master.auth.AuthOutcome}.
        """

    def keysChanged(act):
        """
        A C{salt/key} event with action C{act} was seen: the count of
        C{minions_pre} may be stale.
        """


class ISessions(Interface):
    """
    Sessions: the minions' req sessions, their transient sessions and the
    replies they hold back.
    """

    sessions = Attribute("Authenticated minion req sessions by minion id.")
    transients = Attribute("The transient sessions of each minion id, oldest first.")
    subscribers = Attribute("The L{ISubscriber} each subscribed minion is written to, by id.")

    def sessionStarted(proto):
        """
        A req session opened.

        @param proto: its L{IMinionSession}.
        """

    def sessionEnded(proto):
        """
        A req session closed.

        @param proto: its L{IMinionSession}.
        """

    def holdingReplies(proto):
        """
        C{proto} holds replies back: send them with the next publication or
        soon after.
        """

    def sendHeldReplies():
        """
        Send every reply held back now.
        """

    def sessionSubscribe(proto, load):
        """
        C{_subscribe}: a minion with C{single_connection} subscribes on its
        req session.

        @return: the subscription's confirmation.
        """

    def sessionUnsubscribe(proto, load):
        """
        C{_unsubscribe}: it stops taking jobs.

        @return: C{{"ret": True}}.
        """

    def cutOff(minionId):
        """
        Close every connection of C{minionId}.

        @return: whether it had any.
        """

    def connectedIds():
        """
        @return: the ids of the minions with a session, transient session
            or subscription.
        """

    def connectionsOf(minionId):
        """
        @return: what identifies C{minionId}'s connections now (compared
            before and after a key-store listing).
        """

    def deliver(prefix, acknowledgingPrefix, macMessage):
        """
        Write one publication to every subscriber, each with its own MAC,
        and the held acknowledgements with it.
        """


class ISubscriptions(Interface):
    """
    Subscriptions: minions ask for their publications.
    """

    def subscribe(proto, minionId, mac):
        """
        A minion asks for publications on pub connection C{proto}.

        @return: its id if the MAC proves its current session, else None.
        """

    def subscribedFrame(proto):
        """
        @return: the confirmation of C{proto}'s subscription.
        """

    def unsubscribe(proto):
        """
        A subscription ended.
        """


class IKeyWatch(Interface):
    """
    Key watch and rotation: the accepted keys as last listed, the
    reconciliation of connected minions with the key store, the
    publication key's rotation.
    """

    accepted = Attribute("The L{salttwist.master.keywatch.AcceptedIds} listing.")

    def keyEvent(tag, data):
        """
        A C{salt/key} event.
        """

    def reconcileKeys(rotateReason=None):
        """
        Cut off connected minions no longer accepted; rotate if needed.

        @return: a L{Deferred} firing when done.
        """

    def rotatePublicationKey(reason):
        """
        Make a new publication key and hand it to every subscribed minion.
        """


class IJobPublisher(Interface):
    """
    Job publishing: targeting, the publisher ACL, a job's record, and the
    sealed publication.
    """

    publicationKey = Attribute("The current L{salttwist.master.keys.PublicationKey}.")

    def clientPublish(proto, load):
        """
        C{publish}: the local client sends a job.

        @return: a L{Deferred} firing with C{{"jid", "minions", ...}}.
        """

    def newJob(minions, fun, arg, tgt, tgtType, user):
        """
        Give a new job its jid and record it.

        @return: the job's load, or a L{Deferred} firing with it once its
            jid is reserved in a job cache the masters share.
        """

    def publish(load):
        """
        Seal C{load} and write it to every subscriber.

        @return: a L{Deferred} that has fired.
        """


class IMinionRequests(Interface):
    """
    The requests of minion sessions: returns, grains and events.
    """

    def minionReturn(proto, load):
        """
        C{_return}: a minion returns a job's result.
        """

    def minionGrains(proto, load):
        """
        C{_grains}: a minion reports its grains.
        """

    def minionEvent(proto, load):
        """
        C{_minion_event}: a minion fires an event.
        """

    def minionPing(proto, load):
        """
        C{_ping}: a minion checks that its master answers; nothing is done.
        """


class IRunnerDispatch(Interface):
    """
    Runner dispatch: runs runners in the master or in a worker.
    """

    def clientRunner(proto, load):
        """
        C{runner}: the local client runs a runner function.

        @return: a L{Deferred} firing with C{{"jid", "return"}}.
        """


class IPubChannel(ISubscriptions):
    """
    What a pub-channel connection uses of the master.
    """

    clock = Attribute("The master's clock (L{IReactorTime}).")
    preauthTimeout = Attribute("Seconds a connection may take to subscribe.")


class IReqChannel(Interface):
    """
    What a req-channel connection uses of the master: the handlers its
    allow-lists name (L{salttwist.master.reqserver.ROLE_FUNCS}; each is the
    method of one room, see L{IAdmission}, L{ISessions}, L{IMinionRequests},
    L{IJobPublisher}, L{IRunnerDispatch}), the session notifications, and a
    few settings.
    """

    clock = Attribute("The master's clock (L{IReactorTime}).")
    config = Attribute("The master's config (C{master_stats}).")
    preauthTimeout = Attribute("Seconds a connection may take to authenticate.")
    maxFrameBytes = Attribute("The largest frame of an authenticated session.")
    requestStats = Attribute("The L{salttwist.master.maintenance.RequestStats}.")

    def clearAuth(proto, load):
        """
        C{_auth} (L{IAdmission.clearAuth}).
        """

    def clearClientAuth(proto, load):
        """
        C{_client_auth} (L{IAdmission.clearClientAuth}).
        """

    def minionReturn(proto, load):
        """
        C{_return} (L{IMinionRequests.minionReturn}).
        """

    def minionGrains(proto, load):
        """
        C{_grains} (L{IMinionRequests.minionGrains}).
        """

    def minionEvent(proto, load):
        """
        C{_minion_event} (L{IMinionRequests.minionEvent}).
        """

    def minionPing(proto, load):
        """
        C{_ping} (L{IMinionRequests.minionPing}).
        """

    def sessionSubscribe(proto, load):
        """
        C{_subscribe} (L{ISessions.sessionSubscribe}).
        """

    def sessionUnsubscribe(proto, load):
        """
        C{_unsubscribe} (L{ISessions.sessionUnsubscribe}).
        """

    def clientPublish(proto, load):
        """
        C{publish} (L{IJobPublisher.clientPublish}).
        """

    def clientRunner(proto, load):
        """
        C{runner} (L{IRunnerDispatch.clientRunner}).
        """

    def fileEnvs(proto, load):
        """
        C{_file_envs} (L{salttwist.master.fileserving.FileRequests}).
        """

    def masterOpts(proto, load):
        """
        C{_master_opts} (L{salttwist.master.fileserving.FileRequests}).
        """

    def fileList(proto, load):
        """
        C{_file_list} (L{salttwist.master.fileserving.FileRequests}).
        """

    def dirList(proto, load):
        """
        C{_dir_list} (L{salttwist.master.fileserving.FileRequests}).
        """

    def fileHash(proto, load):
        """
        C{_file_hash} (L{salttwist.master.fileserving.FileRequests}).
        """

    def fileHashes(proto, load):
        """
        C{_file_hashes} (L{salttwist.master.fileserving.FileRequests}).
        """

    def fileHashMany(proto, load):
        """
        C{_file_hash_many} (L{salttwist.master.fileserving.FileRequests}).
        """

    def serveFiles(proto, load):
        """
        C{_serve_files} (L{salttwist.master.fileserving.FileRequests}).
        """

    def serveFile(proto, load):
        """
        C{_serve_file} (L{salttwist.master.fileserving.FileRequests}).
        """

    def fileRecv(proto, load):
        """
        C{_file_recv} (L{salttwist.master.fileserving.FileRequests}).
        """

    def minionPillar(proto, load):
        """
        C{_pillar} (L{salttwist.master.pillarserving.PillarRequests}).
        """

    def sessionStarted(proto):
        """
        A req session opened (L{ISessions.sessionStarted}).
        """

    def sessionEnded(proto):
        """
        A req session closed (L{ISessions.sessionEnded}).
        """

    def holdingReplies(proto):
        """
        C{proto} holds replies back (L{ISessions.holdingReplies}).
        """


class IMasterStatus(Interface):
    """
    What the master's periodic reports read of it
    (L{salttwist.master.maintenance}): who is connected, the jobs, the
    workers, the request figures, and the bus they fire on.
    """

    bus = Attribute("The master's L{salttwist.interfaces.IEventBus}.")
    clock = Attribute("The master's clock (L{IReactorTime}).")
    config = Attribute("The master's config.")
    jobs = Attribute("The L{salttwist.master.jobs.JobRegistry} of recent jobs.")
    subscribers = Attribute("The subscribed minions, by id.")
    sessions = Attribute("The minions' req sessions, by id.")
    workers = Attribute("The worker pool, or None.")
    requestStats = Attribute("The L{salttwist.master.maintenance.RequestStats}.")
    publicationsDropped = Attribute(
        "Publications dropped since the master started for subscribers that did not "
        "read them (C{pub_write_buffer})."
    )


class IReactorMaster(Interface):
    """
    What Salt's reactor (L{salttwist.master.reactor.Reactor}) uses of the
    master: its bus, clock and C{runBlocking}, its runners, and the publish
    and runner paths a client session uses.
    """

    bus = Attribute("The master's L{salttwist.interfaces.IEventBus}.")
    clock = Attribute("The master's clock (L{IReactorTime}).")
    runBlocking = Attribute("Runs a blocking call off the reactor.")
    runners = Attribute("The master's runner functions, by name.")

    def clientPublish(proto, load):
        """
        Publish a job (L{IJobPublisher.clientPublish}; C{proto} L{None}: the
        master's own).
        """

    def clientRunner(proto, load):
        """
        Run a runner (L{IRunnerDispatch.clientRunner}; C{proto} L{None}).
        """


class IGrainsCache(Interface):
    """
    The grains each minion reported, read by master-side targeting: kept
    per master (L{salttwist.master.grainscache.GrainsCache}, C{cache:
    localfs}) or shared by a cluster's masters
    (L{salttwist.master.minioncache_pg.PostgresGrainsCache}, C{cache:
    postgres}).
    """

    grains = Attribute("Minion id -> its grains, in memory (read on the reactor).")

    def load():
        """
        Read what is kept (at start, before the reactor runs).
        """

    def update(minionId, grains):
        """
        Record C{grains} for C{minionId}.

        @return: a L{Deferred} firing once kept.
        @raise ValueError: not a map, or too large.
        """

    def forget(minionId):
        """
        Drop C{minionId}'s grains (its key was deleted).

        @return: a L{Deferred} firing once done.
        """


class IPillarCache(Interface):
    """
    Each minion's last compiled pillar, for pillar targeting and
    C{pillar_cache}: in memory per master
    (L{salttwist.master.pillarcache.PillarCache}) or shared by a cluster's
    masters (L{salttwist.master.minioncache_pg.PostgresPillarCache}).
    """

    pillars = Attribute("Minion id -> its pillar as msgpack bytes (read-only to others).")

    def get(minionId):
        """
        @return: C{minionId}'s pillar, or L{None}.
        """

    def store(minionId, pillar, stamp=None, env=(None, None)):
        """
        Keep C{pillar} as C{minionId}'s, compiled at C{stamp} for C{env}.
        """

    def storePacked(minionId, packed, stamp=None, env=(None, None)):
        """
        L{store} a pillar given as its msgpack bytes.
        """

    def fresh(minionId, env, now, ttl):
        """
        @return: the pillar if compiled for C{env} less than C{ttl} seconds
            before C{now}, else L{None}.
        """

    def freshPacked(minionId, env, now, ttl):
        """
        @return: what L{fresh} gives, as msgpack bytes.
        """

    def forget(minionId):
        """
        Drop C{minionId}'s pillar.
        """

    def keepOnly(acceptedIds):
        """
        Drop the pillar of every minion not in C{acceptedIds}, from memory.
        """

    def generation(minionId):
        """
        @return: how many times C{minionId} was forgotten.
        """

    def byId():
        """
        @return: every pillar by minion id, as a mapping decoded on demand.
        """
