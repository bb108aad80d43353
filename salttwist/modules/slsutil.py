"""
The slsutil execution module (being written: issue 21).
"""
