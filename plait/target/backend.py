"""``Backend``: the one extension point. A target kind is a subclass of it.

    @dataclass(frozen=True)
    class MyOptions:
        lanes: int = option(4, "vector lanes")         # -lanes=<int>; the doc is the option's doc

    class MyAccel(Backend):
        name = "myaccel"
        Options = MyOptions
        device_type, can_host = "npu", False

        def supports(self, call, target):              # a hook: the subclass overrides the method
            return call.op_name == "nn.dense"

        def relay_to_runtime(self, func, target):
            ...

A kind has: a ``name``, a typed ``Options`` dataclass (each field an option of the target string;
``option(default, doc, ...)`` gives its doc, choices and limits; ``_`` in a field name is written ``-``),
``device_type``, ``can_host``, ``default_keys``, ``identity`` (the options naming the processor; tags
match on them), ``tags`` (:class:`plait.target.tag.TagDef`, registered with the kind) and methods with
defaults: ``normalize``/``validate`` (resolved options), ``device(target)``, ``schedule_rules(target)``,
``legalize(target)`` (Relay passes run before default lowering and before pricing), and the hooks below. A hook the subclass does not override is absent: the pipeline's default runs
(default lowering; code generation by the ``default_codegen`` kind, ``c``: C for this machine).

| hook | signature | replaces |
|---|---|---|
| relay_to_tir | ``(mod, target) -> IRModule`` (``(mod, target, ctx)`` too) | default lowering |
| tir_to_runtime | ``(mod, target) -> runtime module`` (``(mod, target, ctx)`` too) | default code generation |
| relay_to_runtime | ``(func, target) -> runtime module`` | both (external codegen) |
| supports | ``(call, target) -> bool`` or ``(bool, reason)`` | capability, for placement |
| cost | ``(call, target) -> float | None``: seconds, None = no estimate | cost model entry |
| patterns | ``(target) -> [(name, Pattern)]`` | region claims, for placement |

The target is always an explicit argument (the piece's :class:`Target`); ``ctx`` is the build's
:class:`plait.ir.transform.PassContext` (its ``config``, e.g. ``cc.cache_dir``). The module a
``relay_to_tir`` hook gets names the piece being lowered in ``mod.attrs["piece"]``
(:func:`plait.lowering.hook_lowering.lower_regions` reads it).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from plait.registry import Registry
from plait.target.errors import HookError, TargetError
from plait.target.options import Option

#: the hook methods, in the order they are listed
HOOK_NAMES = ("relay_to_tir", "tir_to_runtime", "relay_to_runtime", "supports", "cost", "patterns")
_TYPES = {str: str, int: int, bool: bool, list: list, tuple: list, "str": str, "int": int, "bool": bool}


def option(default: Any = None, doc: str = "", *, choices: tuple = (), nullable: bool = False,
           minimum: int | None = None, name: str | None = None) -> Any:
    """A field of a kind's ``Options`` dataclass: its default, doc, choices and limits (see
    :class:`plait.target.options.Option`); ``name`` overrides the option name (the field's, ``-`` for ``_``)."""
    meta = {"doc": doc, "choices": tuple(choices), "nullable": nullable, "minimum": minimum, "name": name}
    value = tuple(default) if isinstance(default, list) else default
    return dataclasses.field(default=value, metadata=meta)


def options_of(cls: type) -> tuple[Option, ...]:
    """The :class:`Option` of each field of an options dataclass."""
    if not dataclasses.is_dataclass(cls):
        raise TargetError(f"Options must be a dataclass, got {cls!r}")
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name, str)
        base = typing.get_origin(hint) or hint
        if base is typing.Union or str(base) == "types.UnionType":  # Optional[int] / int | None
            base = next(a for a in typing.get_args(hint) if a is not type(None))
            base = typing.get_origin(base) or base
        if base not in _TYPES:
            raise TargetError(f"option field '{f.name}' of {cls.__name__}: type must be str, int, bool or "
                              f"tuple[str, ...], got {hint!r}")
        m = f.metadata
        default = None if f.default is dataclasses.MISSING else f.default
        out.append(Option(m.get("name") or f.name.replace("_", "-"), _TYPES[base], default, m.get("doc", ""),
                          choices=m.get("choices", ()), nullable=m.get("nullable", False),
                          minimum=m.get("minimum")))
    return tuple(out)


class Backend:
    """A target kind (see the module docstring). One instance per registered kind."""

    name: ClassVar[str] = ""
    Options: ClassVar[type | None] = None
    device_type: ClassVar[str] = "cpu"
    can_host: ClassVar[bool] = True  # can this kind run the executor (be the host of a composite target)?
    default_keys: ClassVar[tuple[str, ...]] = ()
    identity: ClassVar[tuple[str, ...]] = ()
    doc: ClassVar[str] = ""  # one line for `plait targets`; the class docstring's first line when empty
    tags: ClassVar[tuple[Any, ...]] = ()  # TagDef: the tags of this kind
    #: the kind whose ``tir_to_runtime`` builds this kind's PrimFuncs when the class does not override
    #: it (called with this kind's target): ``c``, the host C compiler, by default; None: no code generation
    default_codegen: ClassVar[str | None] = "c"
    #: does this kind's own ``tir_to_runtime`` write portable C from the PrimFuncs (so that executors that
    #: compile the C themselves, AOT and firmware, can build its calls)? See :meth:`generates_c`.
    emits_c: ClassVar[bool] = False
    #: how the runtime modules this kind's code generation returns are written into an artifact and read
    #: again (:class:`plait.runtime.formats.ModuleFormat`); the executors' artifact code registers them
    module_formats: ClassVar[tuple[Any, ...]] = ()

    # ---- options ---------------------------------------------------------------------------------

    def normalize(self, options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Resolved options -> (new options, notes saying what changed). Default: unchanged."""
        return options, []

    def validate(self, options: dict[str, Any]) -> None:
        """Check resolved options when a target is parsed; raise TargetError (without the target's text)."""

    def options(self, target: Any) -> Any:
        """The target's options as an instance of :attr:`Options`."""
        cls = type(self).Options
        if cls is None:
            raise TargetError(f"target kind '{self.name}' declares no Options dataclass")
        names = {f.name: (f.metadata.get("name") or f.name.replace("_", "-")) for f in dataclasses.fields(cls)}
        return cls(**{f: target.options[o] for f, o in names.items()})

    # ---- facts for the pipeline -------------------------------------------------------------------

    def device(self, target: Any) -> str:
        """The device the target's code runs on; pieces on the same device share memory. Default: ``host``."""
        return "host"

    def schedule_rules(self, target: Any) -> str:
        """The default-schedule rule set (:mod:`plait.schedule`) of default lowering. Default: ``cpu``."""
        return "cpu"

    def legalize(self, target: Any) -> list:
        """Relay passes (:class:`plait.ir.transform.Pass`) that rewrite the piece's functions before default
        lowering fuses and lowers them, and a call's function before placement prices it on the piece (so
        that the price is of what the piece runs): the ``c`` kind's fixed-point requantization. Default: none."""
        return []

    # ---- hooks (absent unless overridden) ------------------------------------------------------------

    def supports(self, call: Any, target: Any) -> Any:
        """Can this kind run ``call``: a bool or ``(bool, reason)``. Default: default lowering decides."""
        return None

    def cost(self, call: Any, target: Any) -> float | None:
        """Estimated seconds for ``call`` (or a Region it claimed); None: no estimate (the default)."""
        return None

    def patterns(self, target: Any) -> list:
        """``(name, Pattern)`` groups of calls this kind runs together. Default: none."""
        return []

    def relay_to_tir(self, mod: Any, target: Any) -> Any:
        """Replace the piece's region functions by PrimFuncs. Default: default lowering."""
        raise HookError(f"target kind '{self.name}' has no 'relay_to_tir' hook")

    def tir_to_runtime(self, mod: Any, target: Any) -> Any:
        """The lowered PrimFuncs -> a runtime module. Default: :attr:`default_codegen`'s."""
        raise HookError(f"target kind '{self.name}' has no 'tir_to_runtime' hook")

    def relay_to_runtime(self, func: Any, target: Any) -> Any:
        """A region function -> a runtime module with a function of its name (external codegen)."""
        raise HookError(f"target kind '{self.name}' has no 'relay_to_runtime' hook")

    # ---- introspection ------------------------------------------------------------------------------

    @classmethod
    def overrides(cls, method: str) -> bool:
        """Does this kind override ``method`` (has it the hook)?"""
        return getattr(cls, method) is not getattr(Backend, method)

    def c_unit(self, funcs: Any, target: Any, name: str) -> "CUnit":
        """The portable C of ``funcs`` (PrimFuncs, in order) for ``target``, for the executors that compile
        the C themselves (AOT, firmware). A kind with :attr:`emits_c` implements it and :meth:`c_toolchain`;
        a kind that generates C through its :attr:`default_codegen` is written by that kind."""
        raise TargetError(f"target kind '{self.name}' does not write C for the AOT executor (emits_c is set but "
                          "c_unit is not implemented)")

    def c_toolchain(self, target: Any) -> "CToolchain":
        """How the C that :meth:`c_unit` writes for ``target`` is compiled."""
        raise TargetError(f"target kind '{self.name}' does not write C for the AOT executor (emits_c is set but "
                          "c_toolchain is not implemented)")

    @classmethod
    def generates_c(cls) -> bool:
        """Are this kind's PrimFuncs compiled as portable C: it says so (:attr:`emits_c`), or it has no
        ``tir_to_runtime`` of its own and its :attr:`default_codegen` is ``c``?"""
        return cls.emits_c or (not cls.overrides("tir_to_runtime") and cls.default_codegen == "c")

    @classmethod
    def summary(cls) -> str:
        if cls.doc:
            return cls.doc
        text = (cls.__doc__ or "").strip()
        return " ".join(text.split("\n\n")[0].split())

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


# ---- the hooks: their specs, and the hooks of a backend (signatures checked) ---------------------


@dataclass(frozen=True)
class CUnit:
    """One piece's C as :meth:`Backend.c_unit` writes it: the source, the C symbol of each PrimFunc (in
    order), the libraries it links."""

    text: str
    function_names: tuple[str, ...]
    link_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CToolchain:
    """How a piece's C is compiled (:meth:`Backend.c_toolchain`): the compiler and flags for the target,
    the flags that build the same C for this machine (host simulation), and the flags the generated C
    needs whatever else a build adds."""

    cc: str
    flags: tuple[str, ...]
    host_flags: tuple[str, ...]
    required_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class HookSpec:
    name: str
    signature: str  # as shown in messages and docs
    arities: tuple[int, ...]  # numbers of positional arguments the hook may take
    doc: str


HOOKS: Registry[HookSpec] = Registry("hook")
for _spec in (
    HookSpec("relay_to_tir", "(mod: IRModule, target: Target) -> IRModule or (mod, target, ctx) -> IRModule", (2, 3),
             "replaces default lowering: Relay functions -> TIR PrimFuncs"),
    HookSpec("tir_to_runtime", "(mod: IRModule, target: Target) -> runtime module or (mod, target, ctx) -> "
             "runtime module", (2, 3), "replaces default code generation: TIR -> runtime module"),
    HookSpec("relay_to_runtime", "(func: Function, target: Target) -> runtime module", (2,),
             "replaces lowering and code generation (external codegen)"),
    HookSpec("supports", "(call, target) -> bool (or -> (bool, reason))", (2,),
             "capability: can this kind run the call? (placement)"),
    HookSpec("cost", "(call, target) -> float | None", (2,),
             "cost-model entry: estimated seconds for the call, None for no estimate (placement)"),
    HookSpec("patterns", "(target) -> list of (name, Pattern)", (1,),
             "region patterns: groups of calls this kind runs together (placement)"),
):
    HOOKS.register(_spec.name, _spec)
assert tuple(HOOKS) == tuple(sorted(HOOK_NAMES))


@dataclass(frozen=True)
class Hook:
    kind: str
    name: str
    fn: Any
    nargs: int  # positional arguments it is called with (0 for a Pass)


def hooks_of_backend(kind: str, backend: Any) -> dict[str, Hook]:
    """The hooks of a Backend instance (the hook methods its class overrides), signatures checked."""
    out = {}
    for name in HOOK_NAMES:
        if type(backend).overrides(name):
            fn = getattr(backend, name)
            out[name] = Hook(kind, name, fn, _check_signature(HOOKS.get(name), kind, fn))
    return out


def _check_signature(spec: HookSpec, kind: str, fn: Any) -> int:
    bad = f"hook '{spec.name}' of target kind '{kind}' must be {spec.signature}; got "
    if not callable(fn):
        raise HookError(bad + f"{fn!r} ({type(fn).__name__}), which is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: nothing to check
        return max(spec.arities)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    kw_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    for n in sorted(spec.arities, reverse=True):
        if not kw_required and len(required) <= n and (len(positional) >= n or varargs):
            return n
    raise HookError(bad + f"{getattr(fn, '__name__', type(fn).__name__)}{sig}")
