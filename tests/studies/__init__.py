"""Tests of ``analysis.studies``: compiles read together (Compare, the shape sweep, the passes)."""
