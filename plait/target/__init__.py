"""Targets: kinds, options, tags, composite targets with named pieces, and the hook registry.

    from plait.target import Target, CompositeTarget
    t = Target("c -mcpu=cortex-m7f")                 # or a tag: Target("cortex-m7f")
    ct = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")

A kind is a :class:`Backend` subclass, loaded lazily from the in-tree manifest
(``plait.backends.MANIFEST``) or an entry point of the ``plait.backends`` group. See docs/targets.md
and docs/backends.md.
"""

from plait.target.errors import HookError, PluginError, TargetError
from plait.target.options import Option
from plait.target.backend import HOOKS, Backend, CToolchain, CUnit, Hook, HookSpec, option
from plait.target.facts import Fact, Facts
from plait.target.kind import KINDS, TargetKind
from plait.target.tag import TAGS, Tag, TagDef
from plait.target.plugins import get_kind, get_tag, list_kinds, list_tags, register_backend, register_tag
from plait.target.target import Target
from plait.target.composite import PIECE_ATTR, CompositeTarget, Piece, Transfer, piece_of, with_piece
from plait.target.hooks import (
    call_cost, call_supports, get_hook, hooks_of, run_relay_to_runtime, run_relay_to_tir,
    run_tir_to_runtime,
)

__all__ = [
    "HOOKS", "KINDS", "PIECE_ATTR", "TAGS", "Backend", "CompositeTarget", "CToolchain", "CUnit", "Fact", "Facts", "Hook", "HookError", "HookSpec",
    "Option", "Piece", "PluginError", "Tag", "TagDef", "Target", "Transfer", "TargetError", "TargetKind", "call_cost",
    "call_supports", "get_hook", "get_kind", "get_tag", "hooks_of", "list_kinds", "list_tags",
    "option", "piece_of", "register_backend", "register_tag", "run_relay_to_runtime", "run_relay_to_tir", "run_tir_to_runtime",
    "with_piece",
]
