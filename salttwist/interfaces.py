# -*- test-case-name: tests.test_keystore -*-
"""
The interfaces between salttwist's parts.

Implementations declare them with C{@implementer} and their tests call
C{verifyObject}, so a fake and a real implementation cannot drift apart.
"""

from twisted.plugin import IPlugin
from zope.interface import Attribute, Interface


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
    Decides whether a new (unknown or pending) minion key is accepted, or
    rejected, without an admin. Implementations and their composition are in
    L{salttwist.pki.autosign}; they are used from the reactor thread.
    """

    name = Attribute(
        "The policy's name, as found in the C{policy} of its decisions: for example"
        " C{autosign_file}, C{policy_executable} or C{auto_accept}."
    )

    def decide(minionId, pem, context):
        """
        Decide about one key.

        @param minionId: the validated minion id.
        @param pem: the minion's public key, PEM bytes.
        @param context: a L{dict} with C{peer} (C{"host:port"}) and
            C{autosign_grains} (what the minion sent: treated as C{{}} when it
            is not a dict); either may be missing.
        @return: a L{Deferred} firing with an
            L{salttwist.pki.autosign.AutosignDecision} whose C{verdict} is
            C{"accept"}, C{"reject"} or C{"pending"}. It never fails: an error
            is a C{"pending"} decision whose reason says what went wrong.
        """


class IRunnerMaster(Interface):
    """
    What a runner (L{salttwist.runners}) may use of the master, as
    C{RunnerContext.master}: exactly what the runners read and call, and
    nothing else, so the runners know no L{salttwist.master} class and a
    test can hand them a fake.

    In a worker process (L{salttwist.master.runnertasks}) a runner marked
    C{inWorker} gets a partial provider: C{config}, C{jobCache} (read-only)
    and C{runBlocking} only.
    """

    config = Attribute("The master's configuration, a L{dict} of Salt's options.")
    clock = Attribute("The master's L{IReactorTime <twisted.internet.interfaces.IReactorTime>}.")
    bus = Attribute("The master's L{IEventBus}.")
    keyStore = Attribute("The master's L{IKeyStore} of minion keys.")
    jobCache = Attribute("The master's L{IJobCache}, or L{None} when it keeps none.")
    jobs = Attribute(
        "The jobs published lately: C{get(jid)} returns one (with C{load}, the"
        " published load, and C{returned}, the ids of the minions that returned)"
        " or L{None}."
    )
    grainsCache = Attribute(
        "The minions' grains as the master last heard them: C{grains}, a mapping"
        " of minion id to grains."
    )
    pillarCache = Attribute(
        "The minions' pillar as the master last compiled it: C{byId()}, a mapping"
        " of minion id to pillar (read it on the reactor thread; never log it)."
    )
    subscribers = Attribute(
        "The minions connected now: a mapping of minion id to the protocol of"
        " its connection (whose C{transport.getPeer()} says where it is)."
    )
    workers = Attribute("The master's L{IWorkerPool}, or L{None} before it runs or without one.")
    fileServer = Attribute(
        "The master's L{salttwist.fileserver.server.FileServer} (its C{fileserver_backend}"
        " in order), for the C{fileserver.*} runners; its methods block (use C{runBlocking})."
    )

    def runBlocking(f, *args, **kwargs):
        """
        Run the blocking C{f(*args, **kwargs)} off the reactor thread.

        @return: a L{Deferred} firing with its result.
        """

    def clientPublish(proto, load):
        """
        Publish a job as a local client does (targeting, ACL, sealing).

        @param proto: the client's session, or L{None} for the master
            itself (a runner publishing as C{load["user"]}).
        @param load: the client's C{publish} load: C{fun}, C{arg}, C{tgt},
            C{tgt_type}, C{user}.
        @return: a L{Deferred} firing with C{{"jid": ..., "minions": [...],
            "connected": [...]}}.
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

    def subscribe(prefixes, callback, globs=()):
        """
        Call C{callback(tag, data)} for every event whose tag starts with one
        of C{prefixes} or matches one of the shell-style C{globs} (all events
        when both are empty).

        @return: an object with a C{stop()} method that ends the subscription.
        """


class IJobCache(Interface):
    """
    Stores published jobs and their returns (Salt's master job cache).

    Every method returns a L{Deferred}. Invalid arguments (a C{jid} that is
    not 20 digits, an invalid minion id, a value msgpack cannot encode) fail
    that L{Deferred} with L{ValueError} before anything is stored or queried.
    Operations take effect in the order they were called.
    """

    def storeJob(jid, load, minions):
        """
        Record a published job and the minions expected to answer it, with
        the current time as its start time. A C{jid} stored twice keeps the
        first job.

        @param jid: the job id.
        @param load: a L{dict} with C{fun} (a string), C{arg}, C{tgt},
            C{tgt_type} and C{user}; other keys are not kept.
        @param minions: the ids of the minions expected to return.
        @return: a L{Deferred} firing with L{None} once the job is stored.
        """

    def storeReturn(jid, minionId, ret):
        """
        Record one minion's return for C{jid}, with the current time as its
        receive time. A second return for the same C{jid} and C{minionId}
        is ignored: the first return is never replaced.

        @param ret: a L{dict} with C{return}, C{retcode} and C{success}; other
            keys are not kept.
        @return: a L{Deferred} firing with L{None} once the return is stored.
        """

    def getJob(jid):
        """
        @return: a L{Deferred} firing with the job as a L{dict} with C{jid},
            C{fun}, C{arg}, C{tgt}, C{tgt_type}, C{user}, C{minions} (a list)
            and C{start_time} (POSIX seconds), or with L{None} if unknown.
        """

    def getReturns(jid):
        """
        @return: a L{Deferred} firing with a L{dict} mapping each minion id
            that returned for C{jid} to a L{dict} with C{return}, C{retcode},
            C{success} and C{time} (POSIX seconds of receipt); empty if none.
        """

    def listJobs(searchFunction=None, searchTarget=None, startTime=None, endTime=None, limit=None):
        """
        List jobs as Salt's C{jobs.list_jobs} does, newest first. A job is
        listed when it matches every filter given.

        @param searchFunction: a glob (L{fnmatch}) or a list of globs; a string
            is split at commas. A job matches if its C{fun} matches any glob.
        @param searchTarget: the same, matched against the job's C{tgt} (each
            element when the target is a list).
        @param startTime: only jobs that started at or after this time (POSIX
            seconds or a L{datetime.datetime}).
        @param endTime: only jobs that started at or before this time.
        @param limit: at most this many jobs.
        @return: a L{Deferred} firing with a L{list} of job L{dict}s shaped
            like those of L{getJob}.
        """

    def prune(olderThanSeconds):
        """
        Remove the jobs that started more than C{olderThanSeconds} ago, with
        their returns.

        @return: a L{Deferred} firing with the number of rows removed (jobs
            and returns together).
        """

    def close():
        """
        Finish every operation already called, then release the storage.
        Operations called afterwards fail.

        @return: a L{Deferred} firing with L{None} when closed.
        """


class IWorkerPool(Interface):
    """
    Runs registered tasks (see L{salttwist.workers.tasks}) away from the
    reactor thread. Implementations: L{salttwist.workers.pool.WorkerPool}
    (processes) and L{salttwist.workers.pool.InlineWorkerPool} (in-process,
    for tests); the errors are in L{salttwist.workers}.
    """

    def start():
        """
        Start the workers.

        @return: a L{Deferred} that fires when every initial worker has
            started (or failed to start and is being retried); L{run} may be
            called before it fires, requests then wait in the queue.
        """

    def run(taskOrName, *args, **kwargs):  # noqa: N805
        """
        Run one task.

        @param taskOrName: the task's dotted name, or the decorated function.
        @param args: msgpack-able positional arguments.
        @param kwargs: msgpack-able keyword arguments.
        @return: a L{Deferred} firing with the task's result, or failing with
            L{salttwist.workers.TaskError}, L{salttwist.workers.WorkerFailed},
            L{salttwist.workers.QueueFull}, L{salttwist.workers.PoolStopped},
            L{salttwist.workers.PayloadTooLarge} or
            L{salttwist.serial.SerialError}.
        """

    def call(command, **kwargs):  # noqa: N805
        """
        Run the task of a typed command (a
        L{salttwist.workers.commands.TaskCommand}), as L{run} runs a task
        named by a string.

        @param command: the command class.
        @param kwargs: its arguments, of its AMP types.
        @return: a L{Deferred} firing with the C{result} of its answer
            (L{None} if it has none), or failing as L{run}'s does.
        """

    def stop():
        """
        Refuse new work, fail queued requests with
        L{salttwist.workers.PoolStopped}, let running tasks finish within a
        grace period, then stop the workers.

        @return: a L{Deferred} that fires when every worker has exited.
        """

    def stats():
        """
        @return: a L{dict} with C{size}, C{busy}, C{idle}, C{queued},
            C{restarts}, C{completed} and C{failed}.
        """


class ITransport(IPlugin):
    """
    A way to carry the pub and req channels: server endpoints for the master,
    client endpoints for minions and the local client (see
    L{salttwist.transport.interfaces} for the roles and the plugin rules).

    Implementations are module-level objects in a C{twisted/plugins/} module,
    declared with C{@implementer(ITransport)}; C{transport: NAME} in the
    master's and the minions' configs picks one by L{name}. Plugin modules
    are imported by every plugin scan, so they (and this interface's methods
    until called) must import nothing heavy, such as pyOpenSSL.
    """

    name = Attribute("The name the C{transport} option selects, such as C{'tcp'}.")

    needsTLS = Attribute(
        "Whether the transport uses Twisted's TLS support (pyOpenSSL). The CLIs "
        "start the reactor without pyOpenSSL unless the configured transport "
        "sets this (see L{salttwist._startup.withoutTLS})."
    )

    def prepareMaster(config):
        """
        Prepare what the master's side needs, once, as the master starts and
        before it listens: called after the master's key pair exists
        (C{pki_dir/master.pem}). Blocking is fine (the reactor is not
        running yet). The TLS transport makes the master's certificate here.

        @param config: the master's configuration.
        @raise Exception: anything raised stops the master's start with that
            message.
        """

    def serverEndpoint(reactor, config, interface, port, role):
        """
        Make the endpoint the master listens on for one channel. Called in
        C{privilegedStartService}, before twistd drops privileges, so reading
        root-only key files here is fine.

        @param reactor: the reactor to listen with.
        @param config: the master's configuration.
        @param interface: the address to bind (the C{interface} option; IPv4
            or IPv6).
        @param port: the port (C{publish_port} or C{ret_port}); C{0} means one
            chosen by the OS, which the endpoint's port must then report
            through C{getHost().port}.
        @param role: C{ROLE_PUB} or C{ROLE_REQ}
            (L{salttwist.transport.interfaces}).
        @return: an L{IStreamServerEndpoint
            <twisted.internet.interfaces.IStreamServerEndpoint>}.
        """

    def clientEndpoint(reactor, config, host, port, role):
        """
        Make an endpoint that connects to one of the master's channels.
        Called for every connection (a minion reconnecting calls it again),
        so it may read files that change, such as a pinned key.

        The C{Deferred} of the endpoint's C{connect} must fire with the
        application protocol built from the given factory (as
        L{wrapClientTLS <twisted.internet.endpoints.wrapClientTLS>} does),
        whose C{transport} the callers use as usual.

        @param reactor: the reactor to connect with.
        @param config: the minion's configuration for C{ROLE_PUB} and
            C{ROLE_REQ}; the master's for C{ROLE_CLIENT}.
        @param host: the master's host name or address.
        @param port: the channel's port.
        @param role: C{ROLE_PUB} or C{ROLE_REQ} (a minion), or C{ROLE_CLIENT}
            (the local client, on the master's host, to the req channel).
        @return: an L{IStreamClientEndpoint
            <twisted.internet.interfaces.IStreamClientEndpoint>}.
        """
