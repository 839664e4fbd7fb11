"""What XLA did to a program, read from what it printed: the packages, from the ground up.

- ``errors``, ``linear_re``, ``columns``, ``measures``, ``text_search``, ``tuning``: the ground
  floor (one-line errors, linear-time patterns, rows by column, every measured number's one
  definition, searching a text, how a process runs);
- ``hlo``: HLO text -> modules, computations, instructions, shapes;
- ``codegen``: the code XLA generated for each kernel, by stage, and the facts read from it;
- ``program``: what XLA made of a program: kernels and their routes, which op went where, the
  model's layers, the numbers per compile, the memory it allocates;
- ``timing``: profiler events -> per-kernel times;
- ``devices``: devices, shardings, collectives, what each device holds;
- ``fusion``: why XLA fused, or did not;
- ``bundle``: the Bundle, everything a view shows about one compile, and its checks;
- ``inputs``: the gate, everything a user hands over -> a bundle;
- ``studies``: several compiles read together (two side by side, a shape sweep, the passes);
- ``options``, ``pipeline``: a compile's options; a compile's texts -> what every view derives;
- ``compile``: the only code that runs JAX; ``service``: jobs, workers, the sandbox, the store;
- ``render``: views of a bundle (graphs, tables, the report); ``cli``: the command line.

Each package imports only the ones above it in this list (``tests/test_layering.py``). A
package's ``__init__`` says what its concept is and names its public names, imported from
their module when first asked for (``exports``).
"""

from __future__ import annotations

import importlib
from typing import Callable


def exports(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A package's module ``__getattr__`` (PEP 562) for its public ``names`` (name -> the module
    under ``package`` that defines it): the module is imported when the name is first asked
    for, so a package's face costs nothing at start-up and its modules may import each other."""
    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)
    return __getattr__
