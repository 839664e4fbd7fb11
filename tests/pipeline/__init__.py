"""Tests of ``analysis.pipeline``: a compile's texts parsed and analyzed once each."""
