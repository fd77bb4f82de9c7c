"""The escaped-solution suite: its table of cases is :mod:`escapes.cases`, run by tests/test_escapes.py."""
