"""Tests of ``analysis.inputs``: what a user hands over (dumps, traces) to a bundle."""
