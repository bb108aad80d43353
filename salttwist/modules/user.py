"""
The user execution module (being written: issue 21).
"""
