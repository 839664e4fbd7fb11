"""Many devices in the app: the sidebar's Devices setting (how many devices a job runs on).

The count is a job setting (``Job.devices``): None leaves it to the model file's ``DEVICES = N``
(read from its text, never run), else 1. On the CPU the worker started for the job has that many
of XLA's host devices; for the GPU target, the target is described with that many.
"""

from __future__ import annotations

import streamlit as st

from analysis.devices import MAX_DEVICES, devices_in_source
from analysis.errors import ExplorerError


def file_devices(source: str) -> int | None:
    """The file's own ``DEVICES = N`` (None where it sets none or sets a bad one: the compile says)."""
    try:
        return devices_in_source(source)
    except ExplorerError:
        return None


def devices_control(source: str) -> int | None:
    """The Devices select box for a job of ``source``; None: the file's own count."""
    own = file_devices(source) or 1
    options = [None] + list(range(1, MAX_DEVICES + 1))
    return st.selectbox(
        "Devices", options, key="devices",
        format_func=lambda n: f"as the file says ({own})" if n is None else str(n),
        help=f"How many devices the program runs on (1 to {MAX_DEVICES}). On the CPU these are XLA's host "
             "devices (--xla_force_host_platform_device_count) in the job's own worker; for the GPU target, "
             "that many GPUs. A model file sets its default with a module-level DEVICES = N.")
