"""Tests of ``analysis.compile``: loading and compiling user code with JAX, XLA's dumps and flags."""
