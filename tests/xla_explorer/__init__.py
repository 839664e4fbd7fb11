"""Tests of ``xla_explorer``, the notebook front end."""
