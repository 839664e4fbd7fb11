"""What a user picked in a Streamlit table or plotly chart (its selection event), read the same
way by every view. Streamlit hands the event as a dict or as an object, depending on version."""

from __future__ import annotations


def _selection(event, key: str) -> list:
    try:
        return event["selection"][key] or []
    except (KeyError, TypeError):
        return getattr(getattr(event, "selection", None), key, None) or []


def picked_row(event, values: list):
    """``values[i]`` for the first selected row ``i`` of a dataframe, or None."""
    rows = _selection(event, "rows")
    return values[rows[0]] if rows and 0 <= rows[0] < len(values) else None


def picked_point(event) -> str | None:
    """The ``customdata`` of the first selected point of a chart (a kernel name), or None."""
    for p in _selection(event, "points"):
        cd = p.get("customdata") if isinstance(p, dict) else None
        if isinstance(cd, list):
            cd = cd[0] if cd else None
        if cd:
            return str(cd)
    return None
