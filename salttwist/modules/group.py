"""
The group execution module (being written: issue 21).
"""
