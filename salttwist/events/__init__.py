"""
The event bus: tagged events published and subscribed over UNIX sockets.
"""

#: The master's socket for subscribers, in its C{sock_dir}.
EVENT_PUB_SOCKET = "master_event_pub.ipc"
#: The master's socket for local publishers, in its C{sock_dir}.
EVENT_PULL_SOCKET = "master_event_pull.ipc"
