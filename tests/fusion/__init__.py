"""Tests of ``analysis.fusion``: XLA's fusion decisions, read and shown."""
