"""
The config execution module (being written: issue 21).
"""
