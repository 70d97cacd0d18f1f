"""How runtime modules are written into an artifact and read again: a format per module type.

    register_format(ModuleFormat(".onnx", OrtModule, save=..., load=..., fields=...))
    fmt = format_of(module)        # the format of the most specific registered type of ``module``
    fmt = format_for("lib_2.onnx")  # the format that reads such a file (by suffix)

A format names its file suffix, the module type it writes (``isinstance``; the most derived registered
type wins), ``save(module, path) -> [extra file names]`` (files written next to ``path``, e.g. the object
file of a cross-compiled C module), ``fields(module) -> dict`` (what the artifact's manifest records for the
module besides its file: what ``load`` needs to make it again), and ``load(data, path, entry, signatures)
-> Module`` (the verified bytes, the file's path, the manifest entry, and the ``(name -> arg kinds)`` of
the functions the manifest places in it). The shared library and C source formats are registered here;
backends add theirs through ``Backend.module_formats`` (the executors' artifact code registers the
formats of every loaded kind), so it imports no backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from plait.errors import PlaitError
from plait.runtime.module import CrossModule, CSourceModule, DSOModule, Module, load_library


def _no_fields(module: Module) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ModuleFormat:
    suffix: str
    module_type: type
    save: Callable[[Any, Path], list[str]]
    load: Callable[[bytes, Path, Mapping[str, Any], Mapping[str, tuple[str, ...]]], Module]
    fields: Callable[[Any], dict[str, Any]] = field(default=_no_fields)

    def __post_init__(self) -> None:
        if not (self.suffix.startswith(".") and self.suffix[1:].replace("_", "").isalnum()):
            raise PlaitError(f"module format of {self.module_type.__name__}: suffix {self.suffix!r} is not "
                             "'.' and letters or digits")
        if not (isinstance(self.module_type, type) and issubclass(self.module_type, Module)):
            raise PlaitError(f"module format '{self.suffix}': {self.module_type!r} is not a Module subclass")


_FORMATS: list[ModuleFormat] = []


def register_format(fmt: ModuleFormat) -> ModuleFormat:
    """Add ``fmt`` (again: the same suffix and type replace the earlier one, so a kind registered twice in
    tests does not clash). A suffix another module type already writes is refused."""
    for k, f in enumerate(_FORMATS):
        if f.suffix == fmt.suffix and f.module_type is fmt.module_type:
            _FORMATS[k] = fmt
            return fmt
    taken = next((f for f in _FORMATS if f.suffix == fmt.suffix and not issubclass(fmt.module_type, f.module_type)),
                 None)
    if taken is not None:
        raise PlaitError(f"module format '{fmt.suffix}' of {fmt.module_type.__name__}: the suffix is taken by "
                         f"{taken.module_type.__name__}")
    _FORMATS.append(fmt)
    return fmt


def format_of(module: Module) -> ModuleFormat | None:
    """The format of the most derived registered type ``module`` is an instance of; None without one."""
    mro = type(module).__mro__
    found = [f for f in _FORMATS if f.module_type in mro]
    return min(found, key=lambda f: mro.index(f.module_type)) if found else None


def format_for(file_name: str) -> ModuleFormat | None:
    """The format that reads ``file_name`` (by its suffix: the first registered for it); None without one."""
    suffix = Path(file_name).suffix
    return next((f for f in _FORMATS if f.suffix == suffix), None)


def suffixes() -> list[str]:
    return sorted({f.suffix for f in _FORMATS})


def _save_library(m: Any, path: Path) -> list[str]:
    m.export_library(path)
    return []


def _save_cross(m: CrossModule, path: Path) -> list[str]:
    m.export_library(path)
    obj = path.with_suffix(".o")
    m.export_object(obj)  # the object file a firmware build links, next to its C
    return [obj.name]


def _load_dso(data: bytes, path: Path, entry: Mapping[str, Any], sigs: Mapping[str, tuple[str, ...]]) -> Module:
    return load_library(data, path)


def _load_c(data: bytes, path: Path, entry: Mapping[str, Any], sigs: Mapping[str, tuple[str, ...]]) -> Module:
    text = data.decode("utf-8")
    loaded = CSourceModule.from_full_source(text)  # as exported: name and signatures embedded
    return loaded if loaded is not None else CSourceModule(text, dict(sigs), name=path.stem)


register_format(ModuleFormat(".so", DSOModule, save=_save_library, load=_load_dso))
register_format(ModuleFormat(".c", CSourceModule, save=_save_library, load=_load_c))
register_format(ModuleFormat(".c", CrossModule, save=_save_cross, load=_load_c))

__all__ = ["ModuleFormat", "format_for", "format_of", "register_format", "suffixes"]
