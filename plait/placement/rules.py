"""Manual placement: ``--place`` rules, ``on_target`` call-site annotations and ``target`` function attributes.

    rules = parse_place("Conv=inference_cpu,/head/*=low_power_cpu,*=blas?", composite)
    pins = pins_for(func, composite, rules)    # {call: Pin(piece, prefer, source)}

A PATTERN is an ``fnmatch`` glob (case-sensitive) matched against the call's ONNX node name
(``meta["name"]``), its ONNX op type (``meta["op_type"]``) and its plait op name; the first rule
matching any of the three applies. ``PIECE?`` only prefers: the call goes there when that piece can
run it, else it is placed automatically. Precedence, most specific first: an ``on_target`` annotation
on the call (``meta["target"]``), then the ``target`` attribute of the enclosing function, then the
rules. A pin (not a preference) to a piece that cannot run the call is a :class:`PlacementError`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from plait.errors import PlaitError
from plait.placement.capability import piece_supports
from plait.relay.expr import Call, Expr, Function, If, Loop
from plait.relay.visitor import post_order
from plait.target import CompositeTarget


class PlacementError(PlaitError):
    """A placement request is malformed or cannot be satisfied."""


@dataclass(frozen=True)
class Rule:
    pattern: str
    piece: str
    prefer: bool = False

    def __str__(self) -> str:
        return f"{self.pattern}={self.piece}{'?' if self.prefer else ''}"

    def matches(self, call: Call) -> bool:
        names = (call.meta.get("name"), call.meta.get("op_type"), call.op_name)
        return any(isinstance(n, str) and fnmatch.fnmatchcase(n, self.pattern) for n in names)


@dataclass(frozen=True)
class Pin:
    """Where a call is asked to go: ``piece``; ``prefer`` for a ``?`` rule; ``source`` for explain."""

    piece: str
    prefer: bool
    source: str


def parse_place(text: str, target: CompositeTarget | None = None) -> tuple[Rule, ...]:
    """Parse ``"PATTERN=PIECE,PATTERN=PIECE?,..."``; with ``target``, check every piece exists."""
    if not isinstance(text, str) or not text.strip():
        raise PlacementError("--place: empty rule list; expected PATTERN=PIECE[,PATTERN=PIECE...]")
    rules = []
    for k, raw in enumerate(text.split(","), 1):
        item = raw.strip()
        if not item:
            raise PlacementError(f"--place: rule {k} of {text!r} is empty")
        if "=" not in item:
            raise PlacementError(f"--place: rule {item!r} has no '=': expected PATTERN=PIECE or PATTERN=PIECE?")
        if item.count("=") > 1:
            raise PlacementError(f"--place: rule {item!r} has more than one '=': expected PATTERN=PIECE")
        pattern, piece = (s.strip() for s in item.split("="))
        prefer = piece.endswith("?")
        piece = piece[:-1].strip() if prefer else piece
        if not pattern:
            raise PlacementError(f"--place: rule {item!r} has an empty pattern")
        if not piece:
            raise PlacementError(f"--place: rule {item!r} names no piece")
        if target is not None and piece not in target.names:
            raise PlacementError(f"--place: rule {item!r}: {_unknown(piece, target)}")
        rules.append(Rule(pattern, piece, prefer))
    return tuple(rules)


def on_target(expr: Expr, piece: str) -> Call:
    """The call ``expr`` annotated to run on ``piece`` (``meta["target"]``); a new Call (nodes are immutable)."""
    if not isinstance(expr, Call):
        raise PlacementError(f"on_target: expected a call, got {type(expr).__name__}")
    if not isinstance(piece, str) or not piece:
        raise PlacementError(f"on_target: the piece must be a non-empty string, got {piece!r}")
    return Call(expr.op, expr.args, expr.attrs, expr.meta.with_(target=piece))


def call_name(call: Call) -> str:
    """How messages name a call: its node name, else its op."""
    name = call.meta.get("name")
    return f"call '{name}' ({call.op_name})" if name else f"call to '{call.op_name}'"


def _check_piece(piece: str, target: CompositeTarget, where: str) -> None:
    if piece not in target.names:
        raise PlacementError(f"{where}: {_unknown(piece, target)}")


def _unknown(piece: str, target: CompositeTarget) -> str:
    from plait.registry import Registry

    reg: Registry[str] = Registry("piece")
    for n in target.names:
        reg.register(n, n)
    return reg.unknown_message(piece) + f" (pieces: {', '.join(target.names)})"


def check_rules_match(func: Function, rules: tuple[Rule, ...]) -> None:
    """Every rule matches at least one operator call of ``func`` (a typo such as ``Cnv=cpu`` would be ignored
    silently); else a :class:`PlacementError` listing what this model's patterns could match."""
    calls = [n for n in post_order(func.body if isinstance(func, Function) else func)
             if isinstance(n, Call) and not isinstance(n.op, Expr)]
    for r in rules:
        if any(r.matches(c) for c in calls):
            continue
        kinds = [("ONNX op types", "op_type"), ("plait ops", None), ("node names", "name")]
        lists = []
        for label, key in kinds:
            values = list(dict.fromkeys(c.op_name if key is None else c.meta.get(key) for c in calls))
            values = [v for v in values if isinstance(v, str) and v]
            if values:
                lists.append(f"{label}: {_some(values)}")
        what = "; ".join(lists) if lists else "the model has no operator calls"
        raise PlacementError(f"--place: rule '{r}' matches no call of the model (a pattern is a glob over ONNX "
                             f"node names, ONNX op types and plait op names; {what})")


def _some(values: list[str], most: int = 8) -> str:
    """``values`` joined, the first ``most`` and a count of the rest; long names shortened."""
    shown = [v if len(v) <= 60 else v[:57] + "..." for v in values[:most]]
    rest = len(values) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest else "")


def pins_for(func: Function, target: CompositeTarget, rules: tuple[Rule, ...] = ()) -> dict[Call, Pin]:
    """Per operator call of ``func``: the pin or preference that applies, checked against capability."""
    fn_piece = func.attrs.get("target") if isinstance(func, Function) else None
    if fn_piece is not None:
        _check_piece(fn_piece, target, "function attribute target")
    out: dict[Call, Pin] = {}
    nodes = list(post_order(func.body if isinstance(func, Function) else func))
    flow = sorted({type(n).__name__ for n in nodes if isinstance(n, (If, Loop))})
    for node in nodes:
        if not isinstance(node, Call) or isinstance(node.op, Expr):
            continue
        pin = None
        if node.meta.get("target") is not None:
            p = node.meta["target"]
            _check_piece(p, target, f"on_target of {call_name(node)}")
            pin = Pin(p, False, f"on_target('{p}')")
        elif fn_piece is not None:
            pin = Pin(fn_piece, False, f"function attribute target='{fn_piece}'")
        else:
            for r in rules:
                if r.matches(node):
                    pin = Pin(r.piece, r.prefer, f"--place rule '{r}'")
                    break
        if pin is None and flow:  # (partition does not split a model with control flow across pieces yet)
            pin = Pin(target.host.name, False, f"the model's control flow ({', '.join(flow)}): its calls stay on "
                                               "the host piece")
        if pin is None:
            continue
        ans = piece_supports(target.piece(pin.piece), node)
        if not ans.ok:
            if pin.prefer:
                continue
            raise PlacementError(f"{call_name(node)} is pinned to piece '{pin.piece}' by {pin.source}, "
                                 f"but that piece cannot run it: {ans.reason}")
        out[node] = pin
    return out
