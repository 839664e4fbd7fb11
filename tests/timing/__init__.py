"""Tests of ``analysis.timing``: profiler events and traces to per-kernel times, and measuring them."""
