"""
Adversarial tests: the master and the minion attacked, in memory, by real
protocol code written as an attacker would (see C{docs/security.md}).
"""
