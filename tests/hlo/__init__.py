"""Tests of ``analysis.hlo``: the HLO parser, its grammar, shapes, XLA's parser as the oracle, fuzzing."""
