"""Tests of ``analysis.codegen``: the generated code read from XLA's dumps and the facts read from it."""
