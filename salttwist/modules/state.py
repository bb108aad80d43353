"""
The state execution module (being written: issue 21).
"""
