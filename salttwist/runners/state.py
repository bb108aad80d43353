"""
The state runners (state.orchestrate; being written: issue 21).
"""
