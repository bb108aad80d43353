# -*- test-case-name: tests.test_keystore -*-
"""
The master's public key infrastructure: minion id validation, the key store
over C{pki_dir} and the autosign policies.
"""
