"""Many devices in the app: the sidebar's Devices setting (how many devices a job runs on).

The count is a job setting (``Job.devices``): None leaves it to the model file's ``DEVICES = N``
(read from its text, never run), else 1. On the CPU the worker started for the job has that many
of XLA's host devices; for the GPU target, the target is described with that many.
"""

from __future__ import annotations

import streamlit as st

from analysis.devices.catalog import MAX_DEVICES, devices_in_source
from analysis.errors import ExplorerError
from app.explorer_state import explorer_state


def file_devices(source: str) -> int | None:
    """The file's own ``DEVICES = N`` (None where it sets none or sets a bad one: the compile says)."""
    try:
        return devices_in_source(source)
    except ExplorerError:
        return None


def devices_control(source: str) -> int | None:
    """The Devices select box for a job of ``source``; None: the file's own count."""
    own = file_devices(source) or 1
    # 0 stands for "as the file says": Streamlit sends a selected None to the browser as no
    # selection at all, so a None option read "Choose an option" once the page reran
    options = [0] + list(range(1, MAX_DEVICES + 1))
    chosen = st.selectbox(
        "Devices", options, key="devices",
        format_func=lambda n: f"as the file says ({own})" if n == 0 else str(n),
        help=f"How many devices the program runs on (1 to {MAX_DEVICES}). On the CPU these are XLA's host "
             "devices (--xla_force_host_platform_device_count) in the job's own worker; for the GPU target, "
             "that many GPUs. A model file sets its default with a module-level DEVICES = N.")
    return chosen or None


# ----------------------------------------------------------------------------- the Devices tab

def measured_collectives(bundle) -> dict[str, float]:
    """Each collective's measured time per step (seconds) where the compile was measured on the
    CPU: its devices are threads of one process there, so this is no network's time."""
    t = bundle.timings or {}
    kernels = t.get("kernels") if isinstance(t, dict) else None
    if t.get("platform") != "cpu" or not isinstance(kernels, dict):
        return {}
    out = {}
    for name, row in kernels.items():
        if isinstance(row, dict) and row.get("route") == "collective" and isinstance(row.get("median_s"), (int, float)):
            out[name] = float(row["median_s"])
    return out


def render_devices_view(bundle, key_prefix: str = "dev") -> None:
    """The mesh, what each device holds of every input and output (a grid of blocks per array,
    the bytes per device), and the collectives with the traffic they cause (a ring estimate);
    picking an array or a collective selects its kernel in the graphs."""
    import pandas as pd

    from analysis.devices.collectives import NVLINK_H200_BYTES_PER_S
    from analysis.devices.layout import device_layout
    from analysis.render.format import human_bytes, human_seconds
    from app.picks import picked_row

    ss = st.session_state
    layout = device_layout(bundle)
    if layout is None:
        st.info("This program runs on one device. Pick a sharded gallery model (dp_train_step, tp_mlp, fsdp_train, "
                "ring_shard_map, moe_all_to_all) or set Devices in the sidebar for a file that builds a mesh.")
        return
    axes = (layout.mesh or {}).get("axes") or {}
    st.markdown(f"**{layout.devices} devices**" + (" · mesh " + " × ".join(f"`{a}` = {n}" for a, n in axes.items())
                                                    if axes else ""))
    picks: list[str] = []
    rows = [{"array": a.name, "role": a.role, "shape": f"{a.dtype}[{','.join(map(str, a.shape))}]",
             "sharding": a.words, "per device": human_bytes(a.device_bytes), "whole": human_bytes(a.total_bytes)}
            for a in layout.arrays]
    st.markdown("**Arrays** — pick one to select the kernel that reads it (an input) or writes it (an output)")
    ev = st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", on_select="rerun",
                      selection_mode="single-row", key=f"{key_prefix}_arrays")
    p = picked_row(ev, [a.reader for a in layout.arrays])
    if p:
        picks.append(p)
    split = [a for a in layout.arrays if a.grid and (len(a.grid) > 1 or len(a.grid[0]) > 1)]
    if split:
        st.markdown("**Which block each device holds** (rows × columns of the array's first two dimensions; "
                    "each cell: the devices holding that block)")
        cols = st.columns(min(3, len(split)))
        for i, a in enumerate(split[:9]):
            with cols[i % len(cols)]:
                st.caption(f"{a.role} {a.name}: {a.words}")
                grid = pd.DataFrame(a.grid, columns=[f"column block {j}" for j in range(len(a.grid[0]))],
                                    index=[f"row block {r}" for r in range(len(a.grid))])
                st.dataframe(grid, width="stretch", key=f"{key_prefix}_grid_{i}")
    st.markdown("**Collectives** — pick one to select it in the graphs")
    if not layout.collectives:
        st.caption("XLA put no collective into this program: every device works on its own blocks.")
    else:
        timed = measured_collectives(bundle)
        crow = [{"kernel": c.name, "what": c.kind + (" (async)" if c.is_async else ""), "devices": c.words(),
                 "buffer per device": human_bytes(c.buffer_bytes),
                 "sent = received per device (est.)": human_bytes(c.sent_bytes),
                 "at H200 NVLink (est.)": human_seconds(c.estimate_seconds()),
                 "kernels inside (async)": (", ".join(c.overlapped[:4]) + (" ..." if len(c.overlapped) > 4 else "")
                                            if c.overlapped else "none") if c.is_async else "",
                 **({"measured here (CPU threads, no network)": human_seconds(timed[c.name]) if c.name in timed else ""}
                    if timed else {})}
                for c in layout.collectives]
        ev = st.dataframe(pd.DataFrame(crow), hide_index=True, width="stretch", on_select="rerun",
                          selection_mode="single-row", key=f"{key_prefix}_colls")
        p = picked_row(ev, [c.name for c in layout.collectives])
        if p:
            picks.append(p)
        total = layout.sent_bytes
        st.caption(f"In all, each device sends and receives about {human_bytes(total)}: an estimate under the ring "
                   "algorithms (all-reduce 2(n-1)/n of the buffer, all-gather and reduce-scatter (n-1)/n, a "
                   f"collective-permute its whole operand). At an H200's NVLink ({NVLINK_H200_BYTES_PER_S / 1e9:.0f} GB/s "
                   f"both ways, data sheet) that is about {human_seconds(total / (NVLINK_H200_BYTES_PER_S / 2))} "
                   "of bandwidth alone (no latency counted), "
                   "also an estimate. On the CPU these devices are threads of one process: no network is involved.")
    # only a new pick moves the selection (a row left selected must not undo a click in the graph)
    state_key = f"{key_prefix}_last_picks"
    before = ss.get(state_key, [])
    ss[state_key] = list(dict.fromkeys(picks))
    new = next((p for p in picks if p not in before), None)
    state = explorer_state()
    if new and new != state.sel.get("name"):
        state.sel = {"side": "post", "name": new}
        st.rerun()
