"""
The git execution module (being written: issue 21).
"""
