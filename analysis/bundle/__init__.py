"""The Bundle: everything a view shows about one compile, as versioned JSON (docs/bundle.md).

- ``core``: the Bundle, made by a worker or from a plain HLO text, its JSON both ways and what
  it derives from its texts;
- ``checks``: a bundle's JSON checked as the untrusted data it is before anything is built;
- ``content``: values a front end makes from a bundle, kept by the bundle's content
  (``ContentCache``), so the draft, the answer and a stored copy of one compile share them.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "Bundle": "core", "bundle_from_hlo": "core", "analyze": "core", "reanalyze": "core",
    "FusionComparison": "core", "FusionSide": "core", "SCHEMA_VERSION": "core", "STAGES": "core",
    "drop_object_files": "checks", "ContentCache": "content", "content_key": "content",
})
