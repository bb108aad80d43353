"""
The service execution module (being written: issue 21).
"""
