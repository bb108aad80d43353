"""
The event bus: tagged events published and subscribed over UNIX sockets.
"""
