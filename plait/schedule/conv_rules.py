"""Convolution-specific steps of the ``cpu`` rules (plait/schedule/rules.py calls them).

- :func:`deinterleave_strided_inputs`: a strided convolution (stride 2 along the output row) reads
  its padded input at ``2 * z + rx``; the padded copy is stored deinterleaved by the stride
  (:func:`plait.schedule.layout.split_phases`) so that the row loop is contiguous in every load
  and the register tile vectorizes along it without gathers. ResNet-8's stride-2 3x3 convolution
  (16 -> 32 channels, 32x32) went from 3.7x to 1.0x ONNX Runtime on AVX-512, MobileNet's stem
  (3 -> 16, 96x96) from 3.3x to 1.2x, its stride-2 depthwise convolutions from 1.4-1.7x to 1.3x.
  Knob ``<stage root>.deinterleave`` (False, True; default True: :mod:`plait.schedule.knobs`).
"""

from __future__ import annotations

from plait.schedule import knobs
from plait.schedule.analysis import linear
from plait.schedule.errors import ScheduleError
from plait.schedule.schedule import Schedule
from plait.schedule.stage import Stage, contiguous, uses

MAX_STRIDE = 4
"""Strides up to this are deinterleaved (each phase is a padded row of its own)."""


def deinterleave_strided_inputs(sch: Schedule, st: Stage, padded: list[str]) -> bool:
    """Store each buffer of ``padded`` (allocated padded copies) that the stage reads at a stride
    ``2..MAX_STRIDE`` along its innermost spatial loop deinterleaved by that stride, when the output
    is contiguous along that loop. True if any was."""
    if not st.spatial or st.output is None:
        return False
    z = st.spatial[-1].loop_var
    if not contiguous(st.output.indices, z):
        return False
    if not knobs.choose(f"{st.root.loop_var.name}.deinterleave", (False, True), default=True):
        return False
    done = False
    for name in padded:
        strides = set()
        for ld in st.loads():
            if ld.buffer.name != name:
                continue
            if uses(ld.indices[:-1], z):
                strides.add(0)  # z in another dimension: leave it
                continue
            form = linear(ld.indices[-1])
            strides.add(form[0].get(z, 0) if form else 0)
        if len(strides) != 1:
            continue
        s = strides.pop()
        if 2 <= s <= MAX_STRIDE:
            try:
                sch.split_phases(name, s)
            except ScheduleError:
                continue
            done = True
    return done


__all__ = ["MAX_STRIDE", "deinterleave_strided_inputs"]
