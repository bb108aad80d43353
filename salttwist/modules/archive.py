"""
The archive execution module (being written: issue 21).
"""
