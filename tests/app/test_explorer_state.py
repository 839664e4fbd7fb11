"""app.explorer_state: what the Explorer shows next replaces what it showed, a measuring job's
late bundle included."""

from __future__ import annotations

from analysis.bundle.core import bundle_from_hlo
from analysis.service.job import upload_job
from app.explorer_state import ExplorerState

HLO = """HloModule m
ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}
"""


def test_an_upload_opened_while_a_compile_measures_is_not_replaced_by_that_measurement():
    class Measuring:  # a compile's ``Pending``, still measuring, held after its preview
        released = False

        def release(self):
            self.released = True

    state = ExplorerState()
    state.pending, state.pending_error = (measuring := Measuring()), "an earlier measurement's reason"
    b = bundle_from_hlo(HLO, name="m.hlo")
    state.show_upload(b, upload_job("m.hlo", HLO.encode()))
    assert state.bundle is b and state.pending is None and state.pending_error is None
    assert measuring.released  # nothing of it is drawn any more: it is measured now
