"""Tests of ``analysis.program``: kernels, provenance, links, metrics, memory."""
