"""Tests of ``analysis.render``: graphs, the layers view, the report."""
