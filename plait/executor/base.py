"""The executor interface: one typed class per executor, beside :class:`plait.target.Backend`.

An executor turns a lowered module (``main`` calls only PrimFuncs) and the runtime module implementing
them into an artifact, and runs it. It says what it can do (:class:`Capabilities`), which command-line
flags it owns (:class:`Flag`; the CLI adds them to ``plait run``/``plait compile`` and refuses them with
another executor), and how its artifacts are loaded and run::

    class Tracing(Executor):
        name = "trace"
        summary = "the graph executor, printing each call"
        capabilities = Capabilities(runs_in_process=True)

        def codegen(self, lowered, built, composite, ctx):
            return graph_executor_codegen(lowered, built, composite)   # (plan: the default, the graph's)

        def runner(self, art, options):
            return TracingModule(art)

    register_executor(Tracing())         # or an entry point in the plait.executors group

The pipeline (:mod:`plait.pipeline`) asks an executor for its memory plan once per build
(:meth:`Executor.plan`: the fit check reads it, and ``codegen`` gets it back in ``lowered.plan``), then
for its artifact (:meth:`Executor.codegen`, given the lowered stage, the runtime modules and the
:class:`~plait.target.CompositeTarget`, never a string to parse again).

The driver (``plait.build(..., executor=NAME)``) and the CLI only ever ask the registry
(:data:`plait.executor.EXECUTORS`) and these methods: no code outside ``plait/executor/`` branches on an
executor's name.
"""

from __future__ import annotations

import argparse
import inspect
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

from plait.errors import PlaitError, UsageError
from plait.ir.transform import PassContext
from plait.pipeline.stages import Built, Lowered, ProgramPlan
from plait.relay.module import IRModule

if TYPE_CHECKING:
    from plait.target import CompositeTarget

#: the commands whose flags an executor may own
COMMANDS = ("run", "compile")


@dataclass(frozen=True)
class Capabilities:
    """What an executor does.

    ``symbolic_shapes``: takes inputs with symbolic dims (their shapes are known at run time);
    ``control_flow``: runs If/Loop; ``runs_in_process``: its artifact runs in this Python process
    (``plait run``); ``exports``: ``export(dir)`` writes it and :meth:`Executor.load` reads it again;
    ``profiles``: times each call (``plait run --profile``); ``device``: its artifact also runs as firmware
    on an emulated board (``plait run --on qemu``)."""

    symbolic_shapes: bool = False
    control_flow: bool = False
    runs_in_process: bool = True
    exports: bool = True
    profiles: bool = False
    device: bool = False

    def names(self) -> list[str]:
        """The capabilities it has, by field name."""
        return [f.name for f in fields(self) if getattr(self, f.name)]


@dataclass(frozen=True)
class Flag:
    """A command-line flag an executor owns: ``command`` (run or compile), the argparse ``names`` and
    keyword arguments. The CLI adds it to that command's parser, and refuses it (a UsageError naming
    the executor) when another executor is chosen and the flag differs from its default."""

    command: str
    names: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: what the refusal adds after "--flag needs --executor NAME" (e.g. ": why")
    refusal: str = ""

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise PlaitError(f"flag {self.names[0]}: command '{self.command}' is not one of {', '.join(COMMANDS)}")

    @property
    def dest(self) -> str:
        if "dest" in self.kwargs:
            return str(self.kwargs["dest"])
        long = next((n for n in self.names if n.startswith("--")), self.names[0])
        return long.lstrip("-").replace("-", "_")

    @property
    def default(self) -> Any:
        if "default" in self.kwargs:
            return self.kwargs["default"]
        return False if self.kwargs.get("action") == "store_true" else None

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.names, **dict(self.kwargs))

    def given(self, args: argparse.Namespace) -> bool:
        """Whether ``args`` sets this flag to something other than its default."""
        return getattr(args, self.dest, self.default) != self.default

    def shown(self, args: argparse.Namespace) -> str:
        """The flag as given: its name, with the value for a flag of choices (``--on qemu``)."""
        return f"{self.names[0]} {getattr(args, self.dest)}" if "choices" in self.kwargs else self.names[0]


@dataclass(frozen=True)
class RunOptions:
    """What ``plait run`` asks of a runner: the memory limit, and the flags (``args``) for the
    executor's own flags."""

    memory_limit: int | None = None
    args: argparse.Namespace | None = None
    #: called with a short description of each step ("running", "building the firmware")
    progress: Callable[[str], None] = lambda what: None

    def flag(self, dest: str, default: Any = None) -> Any:
        return getattr(self.args, dest, default) if self.args is not None else default


class Executor:
    """The base of every executor. Subclasses set :attr:`name`, :attr:`summary`, :attr:`capabilities`
    and :attr:`flags`, and implement :meth:`codegen` and :meth:`runner`; those that export implement
    :meth:`load` and name their artifact's :attr:`marker` file."""

    name: ClassVar[str] = ""
    #: how messages call it ("VM", "AOT"); default: the name
    label: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: why a capability it lacks is missing: capability name -> text appended to the refusal (": why")
    refusals: ClassVar[Mapping[str, str]] = {}
    flags: ClassVar[tuple[Flag, ...]] = ()
    #: the file whose presence in a directory makes it this executor's exported artifact (``plait run DIR``);
    #: None: its exports are not run again by plait
    marker: ClassVar[str | None] = None

    @property
    def title(self) -> str:
        return self.label or self.name

    # ---- build ------------------------------------------------------------------------------------
    def configure(self, args: argparse.Namespace, command: str) -> dict[str, Any]:
        """Build config entries from this executor's flags (``args``) for ``command``; a UsageError for
        a bad value. Default: none."""
        return {}

    def plan(self, mod: IRModule, composite: CompositeTarget, config: Mapping[str, Any]) -> ProgramPlan:
        """The memory plan of the lowered ``mod``, made once per build (the fit check reads its ``graph``;
        :meth:`codegen` gets it back as ``lowered.plan``). Default: the graph form planned by the one
        memory planner with a pool per memory (:func:`plait.executor.graph_codegen.graph_plan`)."""
        from plait.executor.graph_codegen import graph_plan

        return graph_plan(mod)

    def codegen(self, lowered: Lowered, built: Built, composite: CompositeTarget, ctx: PassContext) -> Any:
        """The artifact of ``lowered`` (its ``mod``, and ``plan``: what :meth:`plan` made) whose PrimFuncs
        ``built.lib`` implements (``built.modules``: each piece's module), for ``composite``; build config
        in ``ctx.config``."""
        raise NotImplementedError(f"executor '{self.name}' has no codegen")

    def needs_output(self, args: argparse.Namespace) -> bool:
        """Whether ``plait compile`` needs ``-o`` with these flags (the VM's ``--print`` alone does not)."""
        return True

    # ---- after the build ---------------------------------------------------------------------------
    def prepare_export(self, art: Any, args: argparse.Namespace) -> list[str]:
        """Add what the flags ask for to ``art`` before ``plait compile`` exports it; lines to print."""
        return []

    def export_summary(self, art: Any, out: Any) -> list[str]:
        """The lines ``plait compile`` prints after exporting ``art`` into ``out`` (a Path)."""
        mem = getattr(art, "memory", None) or {}
        files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
        return [f"memory: {mem.get('peak_bytes', 0)} bytes at peak (params {mem.get('param_bytes', 0)}, "
                f"pools {mem.get('activation_bytes', 0)}, lower bound {mem.get('lower_bound_bytes', 0)})",
                f"wrote {out}: {', '.join(files)}"]

    def load(self, path: str, memory_limit: int | None = None) -> Any:
        """The artifact exported into the directory ``path``."""
        raise UsageError(f"the {self.name} executor's artifacts cannot be loaded again")

    def runner(self, art: Any, options: RunOptions) -> Any:
        """A callable module running ``art`` (``module(**inputs) -> list of arrays``, ``output_names``)."""
        raise UsageError(f"the {self.name} executor's artifacts do not run in this process")

    def on_device(self, options: RunOptions) -> bool:
        """Whether :meth:`runner` runs the artifact on an emulated device rather than this machine."""
        return False

    def input_types(self, art: Any) -> dict[str, Any]:
        """A loaded artifact's inputs in order: name -> TensorType."""
        raise NotImplementedError

    def describe(self) -> str:
        caps = ", ".join(self.capabilities.names()) or "none"
        own = ", ".join(f"{f.names[0]} ({f.command})" for f in self.flags) or "none"
        return f"{self.name}: {self.summary}\n  capabilities: {caps}\n  flags: {own}"

    def __repr__(self) -> str:
        return f"<executor {self.name}>"


def check_executor(executor: Any) -> Executor:
    """``executor`` if it is a well-formed Executor instance; else a PlaitError saying what is wrong."""
    if isinstance(executor, type) and issubclass(executor, Executor):
        executor = executor()
    if not isinstance(executor, Executor):
        raise PlaitError(f"an executor must be an instance of plait.executor.Executor, got {type(executor).__name__}")
    name = executor.name
    if not isinstance(name, str) or not name.isidentifier():
        raise PlaitError(f"executor {type(executor).__name__}: its name must be an identifier, got {name!r}")
    if type(executor).codegen is Executor.codegen:
        raise PlaitError(f"executor '{name}' ({type(executor).__name__}) does not implement codegen")
    params = list(inspect.signature(type(executor).codegen).parameters)[1:]
    if params[:4] == ["mod", "lib", "target", "config"]:
        raise PlaitError(f"executor '{name}' ({type(executor).__name__}): codegen(mod, lib, target, config) is the "
                         "old interface; it is now codegen(lowered, built, composite, ctx): lowered.mod, built.lib, "
                         "the CompositeTarget, ctx.config (docs/executors.md, 'Executors are classes')")
    return executor


__all__ = ["COMMANDS", "Capabilities", "Executor", "Flag", "RunOptions", "check_executor"]
