"""Tests of ``analysis.bundle``: the Bundle and its JSON."""
