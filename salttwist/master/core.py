# -*- test-case-name: tests.test_master_core -*-
"""
The master's logic, in rooms with one job each, and L{Master} that builds
them and shows them as one.

Protocols parse bytes and call one method of a room (through
L{salttwist.master.interfaces.IReqChannel} and
L{salttwist.master.interfaces.IPubChannel}):

  - L{Admission} (L{salttwist.master.admission}): C{_auth} and
    C{_client_auth}, with the rate limits, the cap on authentications in
    flight, the bound on C{minions_pre} and autosign;
  - L{Sessions} (L{salttwist.master.sessions}): req sessions, transient
    sessions, subscriptions, the replies held back for the next
    publication, and the publication's fan-out to every subscriber;
  - L{KeyWatch} (L{salttwist.master.keywatch}): the accepted ids as last
    listed, C{salt/key} events, the key store compared with the connected
    minions, the publication key's rotation;
  - L{JobPublisher} (L{salttwist.master.publishing}): C{publish}, with
    targeting and the publisher ACL, a job's record, the publication;
  - L{MinionRequests} (L{salttwist.master.returns}): returns, grains and
    events from minion sessions;
  - L{RunnerDispatch} (L{salttwist.master.runnerdispatch}): C{runner}.

Blocking or CPU-heavy work goes elsewhere: authentication to the worker
processes (or C{runBlocking} until they are up), key-store listings to
C{runBlocking} (a thread), job-cache writes to the cache's own thread or
worker. A publication is sealed once with the publication key (AES-256-GCM
and one SHA-256) and each subscriber's copy carries an HMAC-SHA256 under a
key only that subscription's minion and the master hold (about 2 us each):
nothing is RSA-signed per job. That, and targeting against the accepted ids
already listed, is done on the reactor: a job's path has no thread hop.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.blocking import RunBlocking, runSynchronously  # noqa: F401 (re-exported)
from salttwist.cluster.fanout import fromCluster
from salttwist.daemon import StartupError
from salttwist.interfaces import (
    IAutosignPolicy,
    IEventBus,
    IJobCache,
    IKeyStore,
    IRunnerMaster,
)
from salttwist.jid import JidGenerator
from salttwist.master.acl import PublisherAcl, SystemUserDatabase
from salttwist.master.admission import (  # noqa: F401 (re-exported)
    AUTH_BATCH_HOLD,
    AUTHENTICATE_MANY_TASK,
    MAX_AUTH_IN_FLIGHT,
    PENDING_RECOUNT_INTERVAL,
    Admission,
    AuthResult,
)
from salttwist.master.fileserving import FileRequests
from salttwist.master.grainscache import GrainsCache
from salttwist.master.interfaces import IMasterStatus, IPubChannel, IReactorMaster, IReqChannel
from salttwist.master.jobs import JobRegistry
from salttwist.master.keys import MasterKeys
from salttwist.master.keywatch import AcceptedIds, KeyWatch
from salttwist.master.maintenance import RequestStats
from salttwist.master.pillarcache import PillarCache
from salttwist.master.pillarserving import PillarRequests
from salttwist.master.publishing import (  # noqa: F401 (re-exported)
    FUNCTION_NAME,
    INLINE_TARGETING_MAX,
    JobPublisher,
    publishableTarget,
)
from salttwist.master.returns import (  # noqa: F401 (re-exported)
    MAX_EVENT_DATA_BYTES,
    MAX_EVENT_TAG,
    REQ_JID,
    MinionRequests,
    minionTagProblem,
)
from salttwist.master.runnerdispatch import (  # noqa: F401 (re-exported)
    RUN_IDEMPOTENT_RUNNER_TASK,
    RUN_RUNNER_TASK,
    RunnerDispatch,
)
from salttwist.master.sessions import (  # noqa: F401 (re-exported)
    ACK_DELAY,
    DEFAULT_PUB_WRITE_BUFFER,
    MAX_TRANSIENT_SESSIONS,
    Sessions,
)
from salttwist.pki.autosign import buildAutosignPolicy
from salttwist.runners import loadRunners


class _Shared:
    """
    An attribute of L{Master} kept by some of its rooms: read from the
    first, set on each (so a room reads its own attribute on its hot path,
    and whoever sets it on the master sets it everywhere).
    """

    def __init__(self, *rooms: str) -> None:
        self._rooms = rooms
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self._rooms[0]), self._name)

    def __set__(self, obj: Any, value: Any) -> None:
        for room in self._rooms:
            setattr(getattr(obj, room), self._name, value)


@implementer(IReqChannel, IPubChannel, IRunnerMaster, IMasterStatus, IReactorMaster)
class Master:
    """
    The master: its rooms, built and wired together, and shown as one
    object to the protocols (L{IReqChannel}, L{IPubChannel}), the services
    and the runners (L{salttwist.runners.RunnerContext}).

    The methods the protocols call are the rooms' own bound methods, set as
    attributes here: a request reaches its room with no call in between.

    @ivar admission: the L{Admission} room.
    @ivar sessionsRoom: the L{Sessions} room.
    @ivar keyWatch: the L{KeyWatch} room.
    @ivar jobPublisher: the L{JobPublisher} room.
    @ivar minionRequests: the L{MinionRequests} room.
    @ivar runnerDispatch: the L{RunnerDispatch} room.
    @ivar sessions: authenticated minion req sessions by minion id.
    @ivar transients: the transient sessions (C{salttwist-call}) of each
        minion id, oldest first; they never replace or close C{sessions}.
    @ivar subscribers: the connection each subscribed minion receives its
        publications on, by minion id.
    """

    log = Logger()

    #: The worker pool that checks authentication and runs runners marked
    #: L{salttwist.runners.inWorker}, or L{None} (threads; in the master).
    workers = _Shared("admission", "runnerDispatch", "pillarRequests")
    jobCache = _Shared("jobPublisher", "minionRequests", "runnerDispatch")
    runBlocking = _Shared("admission", "keyWatch", "jobPublisher")
    #: Who besides the master's own user may publish what.
    acl = _Shared("jobPublisher", "runnerDispatch")
    jids = _Shared("jobPublisher", "runnerDispatch")
    #: Seconds a connection may take to authenticate (C{preauth_timeout}).
    preauthTimeout = _Shared("admission", "sessionsRoom")
    #: Authentications worked on at once at most (C{max_auth_in_flight}).
    maxAuthInFlight = _Shared("admission")
    maxMinionsPre = _Shared("admission")
    authRate = _Shared("admission")
    authenticator = _Shared("admission")
    autosign = _Shared("admission")
    publishPort = _Shared("admission")
    publicationKey = _Shared("jobPublisher")
    eventRate = _Shared("minionRequests")
    #: Publications dropped for subscribers that did not read them.
    publicationsDropped = _Shared("sessionsRoom")

    def __init__(
        self,
        config: dict[str, Any],
        masterKeys: MasterKeys,
        keyStore: IKeyStore,
        bus: IEventBus,
        runBlocking: RunBlocking,
        clock: Any,
        grainsCache: GrainsCache | None = None,
        autosign: IAutosignPolicy | None = None,
        jobCache: IJobCache | None = None,
        workers: Any = None,
        pillarCache: PillarCache | None = None,
    ) -> None:
        self.config = config
        self.masterKeys = masterKeys
        self.keyStore = keyStore
        self.bus = bus
        self.clock = clock
        self.maxFrameBytes: int = config["max_frame_bytes"]
        self.grainsCache = grainsCache or GrainsCache(None, runBlocking)
        # With the custom runners synced into extension_modules (blocking:
        # they are imported, at start, before the reactor runs).
        self.runners = loadRunners(config=config)
        self.jobs = JobRegistry()
        #: Req-channel requests handled per command, for C{master_stats}.
        self.requestStats = RequestStats()
        try:
            acl = PublisherAcl.fromConfig(config, SystemUserDatabase())
        except ValueError as e:
            raise StartupError(f"{config.get('conf_file', 'the master config')}: {e}") from e
        jids = JidGenerator()
        accepted = AcceptedIds(keyStore)

        self.sessionsRoom = sessions = Sessions(
            bus, clock, accepted, config.get("pub_write_buffer", DEFAULT_PUB_WRITE_BUFFER)
        )
        self.keyWatch = keyWatch = KeyWatch(keyStore, runBlocking, self.grainsCache, accepted)
        #: Each minion's last compiled pillar (pillar targeting).
        self.pillarCache = pillarCache or PillarCache()
        self.jobPublisher = publisher = JobPublisher(
            config,
            bus,
            clock,
            runBlocking,
            sessions,
            accepted,
            self.grainsCache,
            acl,
            self.jobs,
            jids,
            jobCache,
            pillarCache=self.pillarCache,
        )
        self.admission = admission = Admission(
            config,
            masterKeys,
            keyStore,
            bus,
            runBlocking,
            clock,
            autosign or buildAutosignPolicy(config, clock, runBlocking=runBlocking),
            lambda: publisher.publicationKey,
            workers,
        )
        sessions.preauthTimeout = admission.preauthTimeout
        keyWatch.attach(sessions, admission, publisher)
        self.minionRequests = requests = MinionRequests(
            config, bus, clock, self.jobs, self.grainsCache, publisher, jobCache
        )
        self.runnerDispatch = runnerDispatch = RunnerDispatch(
            config, bus, self.runners, jids, acl, self, jobCache, workers
        )

        self.fileRequests = files = FileRequests(config, clock, runBlocking)
        self.pillarRequests = pillar = PillarRequests(
            config, clock, runBlocking, self.grainsCache, self.pillarCache
        )
        pillar.workers = workers

        # The rooms' state the services, maintenance and runners read (the
        # same objects, never replaced).
        self.sessions = sessions.sessions
        self.transients = sessions.transients
        self.subscribers = sessions.subscribers

        # The handlers, as the rooms' bound methods (see the class
        # docstring): clear-text functions (admission) ...
        self.clearAuth = admission.clearAuth
        self.clearClientAuth = admission.clearClientAuth
        self.authenticate = admission.authenticate
        # ... sessions and subscriptions ...
        self.sessionStarted = sessions.sessionStarted
        self.sessionEnded = self._sessionEnded
        self.holdingReplies = sessions.holdingReplies
        self.sendHeldReplies = sessions.sendHeldReplies
        self.subscribe = sessions.subscribe
        self.subscribedFrame = sessions.subscribedFrame
        self.unsubscribe = sessions.unsubscribe
        self.sessionSubscribe = sessions.sessionSubscribe
        self.sessionUnsubscribe = sessions.sessionUnsubscribe
        self.cutOff = sessions.cutOff
        # ... trust taken back ...
        self.rotatePublicationKey = keyWatch.rotatePublicationKey
        self.reconcileKeys = keyWatch.reconcileKeys
        self.keyEvent = keyWatch.keyEvent
        # ... jobs, returns and runners.
        self.clientPublish = publisher.clientPublish
        self.publish = publisher.publish
        self.minionReturn = requests.minionReturn
        self.minionGrains = requests.minionGrains
        self.minionEvent = requests.minionEvent
        self.minionPing = requests.minionPing
        self.clientRunner = runnerDispatch.clientRunner
        # ... the file server and pillar.
        self.fileEnvs = files.fileEnvs
        self.fileList = files.fileList
        self.dirList = files.dirList
        self.fileHash = files.fileHash
        self.fileHashes = files.fileHashes
        self.fileHashMany = files.fileHashMany
        self.serveFiles = files.serveFiles
        self.serveFile = files.serveFile
        self.fileRecv = files.fileRecv
        self.masterOpts = files.masterOpts
        self.minionPillar = pillar.minionPillar

        bus.subscribe(["salt/key"], self._keyChanged)
        keyWatch.onAcceptedListed = self.pillarCache.keepOnly

    @property
    def fileServer(self) -> Any:
        """
        The file server the file room serves from
        (L{IRunnerMaster.fileServer}, for the C{fileserver.*} runners).
        """
        return getattr(self.fileRequests, "fileServer", None)

    def _keyChanged(self, tag: str, data: Any) -> None:
        """
        A C{salt/key} event: the key watch acts on it, and a deleted or
        rejected key drops that minion's cached pillar (one subscription
        for both).

        A C{salt/key} another master of the cluster fired, and this one
        fires for its listeners (L{fromCluster}), is not acted on: with a
        shared key store, the store itself tells every master of the change
        (L{KeyWatch.storeChanged} cuts the minion off), and acting on the
        event too would check and rotate twice; with separate key stores,
        the change was to the other master's keys, not this one's.
        """
        if fromCluster(data):
            return
        self.keyWatch.keyEvent(tag, data)
        self.pillarRequests.keyEvent(tag, data)

    def _sessionEnded(self, proto: Any) -> None:
        """
        A req session closed: the sessions room and the file server's
        (which forgets the transfers it had in flight) hear of it.
        """
        self.sessionsRoom.sessionEnded(proto)
        self.fileRequests.sessionEnded(proto)
