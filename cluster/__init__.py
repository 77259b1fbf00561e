"""The system under test that ships with the harness: a replicated node implementing the seeds'
leader elections and LSN-ordered replication, with switchable known bugs.

Standard library only, so that it runs in a bare container that has nothing but ``python3``.
"""
