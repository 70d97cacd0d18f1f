"""The AOT executor: plain C with a fixed memory map, for the host and for microcontrollers.

``executor`` (:class:`AotExecutor`, the registered class), ``artifact`` (:class:`AotArtifact`: codegen
from the graph form, one memory plan per piece), ``c_writer`` (the C sources, each piece's C asked of
its kind), ``module`` (:class:`AotModule`: compiled and run on the host), ``firmware`` and
``firmware_composite`` (startup code, linker script, one image for a board), ``qemu`` (running it on an
emulated Cortex-M), ``measure`` and ``insn_plugin`` (instruction counts through a QEMU TCG plugin).
"""
