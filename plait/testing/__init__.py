"""Helpers for tests, benchmarks and examples (not imported by the compiler itself)."""
