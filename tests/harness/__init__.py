"""Tests of the `harness` package."""
