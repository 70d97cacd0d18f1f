"""Composite targets: named pieces, one of which hosts the executor.

    low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f

The host is, in order: the piece a ``host: <piece name>`` entry names; the piece called ``host``;
the first piece whose kind can run the executor. A plain single target is a composite with one piece
named after its kind. Also accepted as a dict / JSON:
``{"pieces": {"low_power_cpu": "c -mcpu=cortex-m0", ...}, "host": "low_power_cpu",
"transfer": {"bandwidth": "50MB/s", "switch": "20us"}}``.

Moving data between pieces (:class:`Transfer`, the entry ``transfer: -bandwidth=50MB/s -switch=20us
-shared-memory=auto``): pieces on the same device (``Target.device``) share memory, so no copy is
made and nothing is charged; otherwise a copy costs ``bytes / bandwidth + switch``.
``-shared-memory=yes`` makes every pair share memory, ``no`` none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from plait.errors import PlaitError
from plait.registry import Registry
from plait.target.errors import TargetError
from plait.target.target import Target, _load_json

_BANDWIDTH_UNITS = {"": 1.0, "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_QUANTITY = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*\Z")
_SHARED = ("auto", "yes", "no")


def _quantity(value: Any, units: Mapping[str, float], what: str, example: str) -> float:
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        m = _QUANTITY.match(str(value))
        lower = {u.lower(): scale for u, scale in units.items()}
        if not m or m.group(2).lower() not in lower:
            raise TargetError(f"composite target: transfer {what} '{value}' is not understood; "
                              f"expected a number with an optional unit ({', '.join(u for u in units if u)}), "
                              f"e.g. {example}")
        number = float(m.group(1)) * lower[m.group(2).lower()]
    if not number >= 0 or number == float("inf"):
        raise TargetError(f"composite target: transfer {what} must be a finite number >= 0, got {value!r}")
    return number


def _fmt(value: float, units: list[tuple[str, float]]) -> str:
    for unit, scale in units:
        if value >= scale and float(f"{value / scale:g}") * scale == value:
            return f"{value / scale:g}{unit}"
    return f"{value:g}{units[-1][0] if value == 0 else ''}"


@dataclass(frozen=True)
class Transfer:
    """How data moves between pieces: link ``bandwidth`` (bytes/s), ``switch`` overhead (seconds) per
    copy, and ``shared_memory`` (``auto``: pieces on the same device share memory; ``yes``; ``no``)."""

    bandwidth: float = 100e6  # an on-board bus or shared SRAM between two cores
    switch: float = 10e-6  # handing control to another piece: a few thousand MCU cycles
    shared_memory: str = "auto"

    OPTIONS = ("bandwidth", "switch", "shared-memory")

    @classmethod
    def parse(cls, spec: "str | Mapping[str, Any] | Transfer") -> "Transfer":
        if isinstance(spec, Transfer):
            return spec
        if isinstance(spec, str):
            items: dict[str, Any] = {}
            for word in spec.split():
                if not word.startswith("-") or "=" not in word:
                    raise TargetError(f"composite target: transfer option '{word}' must be written "
                                      "-name=value (options: -bandwidth, -switch, -shared-memory)")
                k, v = word[1:].split("=", 1)
                items[k] = v
        elif isinstance(spec, Mapping):
            items = {str(k).replace("_", "-"): v for k, v in spec.items()}
        else:
            raise TargetError(f"composite target: 'transfer' must be a string or a dict, got {type(spec).__name__}")
        unknown = [k for k in items if k not in cls.OPTIONS]
        if unknown:
            raise TargetError(f"composite target: unknown transfer option '-{unknown[0]}'; "
                              "options: -bandwidth, -switch, -shared-memory")
        t = cls()
        bw = _quantity(items["bandwidth"], _BANDWIDTH_UNITS, "bandwidth", "100MB/s") if "bandwidth" in items else t.bandwidth
        if bw == 0:
            raise TargetError("composite target: transfer bandwidth must be > 0")
        sw = _quantity(items["switch"], _TIME_UNITS, "switch", "10us") if "switch" in items else t.switch
        shared = str(items.get("shared-memory", t.shared_memory)).lower()
        if shared not in _SHARED:
            raise TargetError(f"composite target: transfer -shared-memory must be one of auto, yes, no; got "
                              f"'{items['shared-memory']}'")
        return cls(bw, sw, shared)

    def shares_memory(self, a: "Piece", b: "Piece") -> bool:
        """Do pieces ``a`` and ``b`` see the same memory (no copy between them)?"""
        if a.name == b.name or self.shared_memory == "yes":
            return True
        if self.shared_memory == "no":
            return False
        return a.target.device == b.target.device

    def is_default(self) -> bool:
        return self == Transfer()

    def __str__(self) -> str:
        d = Transfer()
        parts = []
        if self.bandwidth != d.bandwidth:
            parts.append("-bandwidth=" + _fmt(self.bandwidth, [("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3), ("B/s", 1.0)]))
        if self.switch != d.switch:
            parts.append("-switch=" + _fmt(self.switch, [("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)]))
        if self.shared_memory != d.shared_memory:
            parts.append(f"-shared-memory={self.shared_memory}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"bandwidth": self.bandwidth, "switch": self.switch, "shared_memory": self.shared_memory}


#: The attribute that carries placement: on region functions, on every PrimFunc (default-lowered,
#: hook-made, external declarations) and on the module a ``relay_to_tir`` hook gets, it names the piece
#: (:attr:`Piece.name`, an id that :meth:`CompositeTarget.placed_on` resolves to the Piece). It has no
#: other meaning; the target of a piece is found through the composite, never re-parsed from a string.
PIECE_ATTR = "piece"


def piece_of(node: Any) -> str | None:
    """The piece a function (or hook module) is placed on: its ``piece`` attribute; None without one."""
    attrs = getattr(node, "attrs", None) or {}
    value = attrs.get(PIECE_ATTR)
    return value if isinstance(value, str) else None


def with_piece(node: Any, piece: "Piece | str") -> Any:
    """``node`` (a Function, PrimFunc or IRModule) placed on ``piece``: its ``piece`` attribute set."""
    return node.with_attrs(**{PIECE_ATTR: piece.name if isinstance(piece, Piece) else piece})


_NAMED = re.compile(r"\s*([^\s:;]+)\s*:(.*)\Z", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Piece:
    """One named target of a composite target: default lowering and every hook get it (or its target) as
    an explicit argument."""

    name: str
    target: Target
    written: Any = field(default=None, compare=False, repr=False)  # the text or dict it was read from

    def __str__(self) -> str:
        return f"{self.name}: {self.target}"


class CompositeTarget:
    """Named pieces plus the host. Immutable and hashable; ``str()`` is canonical and parses back."""

    __slots__ = ("_pieces", "_host_ref", "_plain", "_host", "_host_reason", "_transfer")

    def __init__(self, spec: "str | Mapping[str, Any] | Target | CompositeTarget", *, require_host: bool = False):
        transfer = Transfer()
        if isinstance(spec, CompositeTarget):
            pieces, host_ref, plain, transfer = spec._pieces, spec._host_ref, spec._plain, spec._transfer
        elif isinstance(spec, Target):
            pieces, host_ref, plain = (Piece(spec.kind_name, spec, str(spec)),), None, True
        elif isinstance(spec, str) and not spec.lstrip().startswith("{"):
            pieces, host_ref, plain, transfer = _parse_text(spec)
        elif isinstance(spec, (str, Mapping)):
            pieces, host_ref, plain, transfer = _from_dict(
                _load_json(spec, "composite target") if isinstance(spec, str) else spec)
        else:
            raise TargetError(f"cannot make a CompositeTarget from {type(spec).__name__}: expected a string, "
                              "a dict, a Target or a CompositeTarget")
        object.__setattr__(self, "_pieces", tuple(pieces))
        object.__setattr__(self, "_host_ref", host_ref)
        object.__setattr__(self, "_plain", plain)
        object.__setattr__(self, "_transfer", transfer)
        host, reason = self._find_host()
        object.__setattr__(self, "_host", host)
        object.__setattr__(self, "_host_reason", reason)
        if require_host:
            self.host  # noqa: B018 - raises when there is none

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("CompositeTarget is immutable")

    @classmethod
    def from_json(cls, text: str) -> "CompositeTarget":
        return cls(_load_json(text, "composite target"))

    # ---- pieces and host ------------------------------------------------------------------------

    @property
    def pieces(self) -> tuple[Piece, ...]:
        return self._pieces

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self._pieces)

    def piece(self, name: str) -> Piece:
        reg: Registry[Piece] = Registry("piece")
        for p in self._pieces:
            reg.register(p.name, p)
        return reg.get(name)

    def placed_on(self, node: Any, default: "Piece | None" = None) -> Piece:
        """The Piece ``node`` (a function or hook module) is placed on (:func:`piece_of`); ``default`` for
        one that carries no piece (the host when not given). An unknown piece name is a TargetError."""
        name = piece_of(node)
        if name is None:
            return default if default is not None else self.host
        if name not in self.names:
            what = (getattr(node, "attrs", None) or {}).get("global_symbol") or "a function"
            raise TargetError(f"'{what}' is placed on piece '{name}', which composite target '{self}' does not "
                              f"have (its pieces: {', '.join(self.names)})")
        return self.piece(name)

    def __getitem__(self, name: str) -> Target:
        return self.piece(name).target

    def __iter__(self) -> Iterator[Piece]:
        return iter(self._pieces)

    def __len__(self) -> int:
        return len(self._pieces)

    def _find_host(self) -> tuple[Piece | None, str]:
        if self._host_ref is not None:
            return self._check_host(self.piece(self._host_ref), f"named by the entry 'host: {self._host_ref}'")
        for p in self._pieces:
            if p.name == "host":
                return self._check_host(p, "the piece called 'host'")
        for p in self._pieces:
            if p.target.kind.can_host:
                return p, "the first piece whose kind can run the executor"
        return None, "no piece's kind can run the executor"

    @staticmethod
    def _check_host(p: Piece, why: str) -> tuple[Piece, str]:
        if not p.target.kind.can_host:
            raise TargetError(f"composite target: the host piece '{p.name}' ({why}) cannot run the executor: "
                              f"target kind '{p.target.kind_name}' cannot host")
        return p, why

    @property
    def host(self) -> Piece:
        """The piece that runs the executor; raises when no piece can."""
        if self._host is None:
            raise TargetError(f"composite target '{self}' has no host: no piece's kind can run the executor; "
                              "add a piece that can, e.g. 'host: c'")
        return self._host

    @property
    def host_reason(self) -> str:
        return self._host_reason

    @property
    def transfer(self) -> Transfer:
        """How data moves between the pieces (bandwidth, switch overhead, shared memory)."""
        return self._transfer

    def shares_memory(self, a: "Piece | str", b: "Piece | str") -> bool:
        """Do the two pieces see the same memory (no ``device_copy`` between them)?"""
        pa = a if isinstance(a, Piece) else self.piece(a)
        pb = b if isinstance(b, Piece) else self.piece(b)
        return self._transfer.shares_memory(pa, pb)

    # ---- printing -------------------------------------------------------------------------------

    def __str__(self) -> str:
        if self._plain:
            return str(self._pieces[0].target)
        parts = [str(p) for p in self._pieces]
        if self._host_ref is not None:
            parts.append(f"host: {self._host_ref}")
        if not self._transfer.is_default():
            parts.append(f"transfer: {self._transfer}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"CompositeTarget({str(self)!r})"

    def to_dict(self) -> dict[str, Any]:
        if self._plain:
            return self._pieces[0].target.to_dict()
        d: dict[str, Any] = {"pieces": {p.name: p.target.to_dict() for p in self._pieces}}
        if self._host_ref is not None:
            d["host"] = self._host_ref
        if not self._transfer.is_default():
            d["transfer"] = self._transfer.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompositeTarget):
            return NotImplemented
        return (self._pieces, self._host_ref, self._plain, self._transfer) == \
            (other._pieces, other._host_ref, other._plain, other._transfer)

    def __hash__(self) -> int:
        return hash((self._pieces, self._host_ref, self._plain, self._transfer))


def _piece_target(name: str, spec: Any) -> Target:
    try:
        return Target(spec)
    except PlaitError as exc:  # keep the error's type, say which piece
        msg = f"composite target: piece '{name}': {exc}"
        try:
            err = type(exc)(msg)
        except TypeError:
            err = TargetError(msg)
        raise err from None


def _parse_text(text: str) -> tuple[list[Piece], str | None, bool, Transfer]:
    if not text.strip():
        raise TargetError("empty target string")
    parts = text.split(";")
    if len(parts) == 1 and not _NAMED.match(parts[0]):
        t = Target(parts[0])
        return [Piece(t.kind_name, t, parts[0].strip())], None, True, Transfer()
    named: list[tuple[str, str]] = []
    for i, part in enumerate(parts, 1):
        if not part.strip():
            raise TargetError(f"composite target: piece {i} is empty")
        m = _NAMED.match(part)
        if not m:
            raise TargetError(f"composite target: piece {i} ('{part.strip()}') has no name; "
                              "write 'name: target'")
        named.append((m.group(1), m.group(2).strip()))
    names = {n for n, _ in named}
    pieces: list[Piece] = []
    host_ref = None
    transfer: Transfer | None = None
    for name, body in named:
        if name == "transfer" and body.startswith("-"):
            if transfer is not None:
                raise TargetError("composite target: the 'transfer' entry is given twice")
            transfer = Transfer.parse(body)
            continue
        _check_name(name, [p.name for p in pieces] + (["host"] if host_ref else []))
        if not body:
            raise TargetError(f"composite target: piece '{name}' is empty")
        if name == "host" and body in names and body != "host":
            host_ref = body  # a reference to another piece, not a piece of its own
            continue
        pieces.append(Piece(name, _piece_target(name, body), body))
    if not pieces:
        raise TargetError("composite target: no pieces (only settings)")
    return pieces, host_ref, False, transfer or Transfer()


def _check_name(name: str, seen: list[str]) -> None:
    if not _IDENT.match(name):
        raise TargetError(f"composite target: piece name '{name}' must be an identifier "
                          "(letters, digits and '_', not starting with a digit)")
    if name in seen:
        raise TargetError(f"composite target: duplicate piece name '{name}'")


def _from_dict(d: Mapping[str, Any]) -> tuple[list[Piece], str | None, bool, Transfer]:
    if "kind" in d or "tag" in d:
        t = Target(d)
        return [Piece(t.kind_name, t, dict(d))], None, True, Transfer()
    unknown = sorted(set(d) - {"pieces", "host", "transfer"})
    if unknown or "pieces" not in d:
        raise TargetError(f"composite target dict: expected keys 'pieces' and optionally 'host', 'transfer', "
                          f"got {', '.join(repr(k) for k in d) or 'none'}")
    raw = d["pieces"]
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, (list, tuple)) and all(isinstance(x, Mapping) and set(x) == {"name", "target"} for x in raw):
        items = [(x["name"], x["target"]) for x in raw]
    else:
        raise TargetError("composite target dict: 'pieces' must map piece names to targets, "
                          "or be a list of {\"name\": ..., \"target\": ...}")
    if not items:
        raise TargetError("composite target dict: 'pieces' is empty")
    pieces: list[Piece] = []
    for name, spec in items:
        _check_name(str(name), [p.name for p in pieces])
        if isinstance(spec, str) and not spec.strip():
            raise TargetError(f"composite target: piece '{name}' is empty")
        pieces.append(Piece(name, _piece_target(name, spec), spec))
    host_ref = d.get("host")
    if host_ref is not None and host_ref not in [p.name for p in pieces]:
        raise TargetError(f"composite target dict: 'host' names the piece '{host_ref}', which does not exist; "
                          f"pieces: {', '.join(p.name for p in pieces)}")
    transfer = Transfer.parse(d["transfer"]) if "transfer" in d else Transfer()
    return pieces, host_ref, False, transfer
