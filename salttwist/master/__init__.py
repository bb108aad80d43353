"""
The salttwist master daemon.
"""
