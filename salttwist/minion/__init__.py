"""
The salttwist minion daemon.
"""
