"""Bad-input cases, one file per concept module of lmbook; driven by tests/test_bad_input.py (see README.md)."""
