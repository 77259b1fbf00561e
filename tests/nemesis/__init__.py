"""Tests of the `nemesis` package."""
