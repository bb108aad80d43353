# -*- test-case-name: tests.test_eauth_engine -*-
"""
Salt's external authentication (C{external_auth}): the ACL engine shared
with C{publisher_acl} (L{salttwist.eauth.engine}), the option's checks
(L{salttwist.eauth.config}), the backends that check passwords (C{pam},
C{file}) and the tokens a login gets.

Nothing is imported here: the master imports the engine, and the backends'
libraries load only where they are used.
"""
