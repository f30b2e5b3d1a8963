"""The slow runs behind results that chapters load from ``lmbook/data`` (``python -m lmbook.experiments.<name>``)."""
