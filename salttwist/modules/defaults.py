"""
The defaults execution module (being written: issue 21).
"""
