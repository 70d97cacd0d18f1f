"""Fuzz harness for issue 10: hostile models, input files and tampered artifacts through the CLI and
the API. See README.md here; the suite test is test_fuzz.py, a big run ``python3 -m tests.fuzz.run``."""
