"""Runtime: modules (compiled code and its functions), loading and exporting."""

from plait.runtime.module import CSourceModule, DSOModule, Module, PyModule, load_module

__all__ = ["CSourceModule", "DSOModule", "Module", "PyModule", "load_module"]
