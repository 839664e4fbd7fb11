"""Profiler events -> per-kernel times, steps and device-busy time (what every measured number
is defined on is ``analysis.measures``).

- ``profiles``: the events that name an HLO instruction, attributed to kernels and steps;
- ``xplane``: a profiler trace's XSpace protobuf, decoded without JAX.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "Timings": "profiles", "TraceEvent": "profiles", "attribute": "profiles",
    "events_from_profile": "profiles", "read_xspace": "xplane", "Space": "xplane",
})
