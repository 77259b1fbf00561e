"""Tests of the `checkers` package."""
