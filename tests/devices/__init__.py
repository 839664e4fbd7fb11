"""Tests of ``analysis.devices``: device counts, shardings, collectives, what each device holds."""
