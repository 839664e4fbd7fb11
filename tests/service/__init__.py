"""Tests of ``analysis.service``: jobs, workers, the sandbox, the spare worker, the store, Ray."""
