"""
The pkg state module (being written: issue 21).
"""
