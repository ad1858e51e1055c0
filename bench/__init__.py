"""Benchmarks: commands that print figures, never tests."""
