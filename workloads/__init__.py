"""Workloads: seeded operation generators (pure data) and the clients that execute them."""
