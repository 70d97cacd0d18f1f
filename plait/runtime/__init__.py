"""Runtime: modules (compiled code and its functions), loading and exporting."""

from plait.runtime.module import CrossModule, CSourceModule, DSOModule, Module, PyModule, load_module

__all__ = ["CrossModule", "CSourceModule", "DSOModule", "Module", "PyModule", "load_module"]
