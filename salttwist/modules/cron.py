"""
The cron execution module (being written: issue 21).
"""
