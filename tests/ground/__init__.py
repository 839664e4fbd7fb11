"""Tests of ``analysis/``'s ground floor: ``columns``, ``linear_re``, ``measures``, ``tuning``."""
