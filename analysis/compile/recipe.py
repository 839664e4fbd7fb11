"""The one recipe from a model to its measured bundle, as JAX's stages go from a traced function
to a compiled one: a model loaded (``LoadedModel``) is compiled (``compile`` -> ``Compiled``),
and a compile is run and timed and compared with fusion off (``measured`` -> the same
``Compiled``, its bundle filled in). The worker, the command line (a trusted gallery model in its
own process) and the notebook each run these steps and nothing else, so a bundle means the same
wherever it was made."""

from __future__ import annotations

from typing import Callable

from analysis.compile import fusion_off, measure, stages
from analysis.compile.load import LoadedModel
from analysis.compile.user_errors import error_from_exception
from analysis.errors import ExplorerError

compile = stages.compile_model  # noqa: A001 - the recipe's first step, named as JAX names it


def measured(c: stages.Compiled, *, measure_it: bool, compare: bool, iterations: int | None = None,
             progress: Callable[[str], None] | None = None) -> stages.Compiled:
    """``c`` run and timed (``measure_it``: ``bundle.timings``) and compiled again with fusion
    off beside it (``compare``: ``bundle.fusion_comparison``, timed too with ``measure_it``), in
    that order, saying ``"measure"`` and ``"compare"`` to ``progress`` as each begins. Running
    the user's program may fail anywhere in it: that is one line at the user's own line."""
    say = progress or (lambda p: None)
    try:
        if measure_it:
            say("measure")
            measure.measure(c, iterations)
        if compare:
            say("compare")
            fusion_off.compare_fusion(c, measure_it=measure_it, iterations=iterations)
    except (ExplorerError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - the user's program failed as it ran: one line, at its line
        raise error_from_exception("measure", e, c.loaded.filename) from None
    return c


def beside_inductor(c: stages.Compiled, *, measure_it: bool, progress: Callable[[str], None] | None = None
                    ) -> stages.Compiled:
    """``c``'s PyTorch model also compiled by torch.compile (Inductor) in this process, its
    kernels read and (``measure_it``) timed beside XLA's program (``bundle.inductor``), saying
    ``"inductor"`` to ``progress`` as it begins. Imported here only when asked for: torch is
    only a PyTorch model's."""
    from analysis.compile import inductor

    (progress or (lambda p: None))("inductor")
    return inductor.beside_inductor(c, measure_it=measure_it)


__all__ = ["LoadedModel", "beside_inductor", "compile", "measured"]
