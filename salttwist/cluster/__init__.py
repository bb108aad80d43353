# -*- test-case-name: tests.test_cluster -*-
"""
Several active masters (issue 23): the fan-out between them through a
message broker, behind one interface (L{salttwist.cluster.interfaces.IClusterBus}).

  - L{salttwist.cluster.interfaces}: the interface and the message kinds;
  - L{salttwist.cluster.outbox}: the bounded buffer of durable messages not
    yet acknowledged by the broker;
  - L{salttwist.cluster.memory}: an in-memory broker and bus (unit tests);
  - L{salttwist.cluster.nats}: the NATS JetStream bus, a Twisted-native
    client of NATS's protocol;
  - L{salttwist.cluster.fanout}: what a master sends and does with what it
    receives (jobs, returns, events).
"""
