"""Tests of ``analysis.cli``: the console script."""
