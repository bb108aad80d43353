"""
The salt state module (orchestration: salt.state, salt.function, salt.runner,
salt.wait_for_event; being written: issue 21).
"""

__virtualname__ = "salt"
