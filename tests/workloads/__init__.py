"""Tests of the `workloads` package."""
