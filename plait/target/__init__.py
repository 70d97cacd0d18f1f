"""Targets: kinds, options, tags, composite targets with named pieces, and the hook registry.

    from plait.target import Target, CompositeTarget
    t = Target("c -mcpu=cortex-m7f")                 # or a tag: Target("cortex-m7f")
    ct = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")

A backend attaches behaviour to a kind with :func:`register_hook`; an out-of-tree package adds kinds
through the ``plait.backends`` entry-point group. See docs/targets.md.
"""

from plait.target.errors import HookError, PluginError, TargetError
from plait.target.options import Option
from plait.target.kind import KINDS, TargetKind, get_kind, list_kinds, register_kind
from plait.target.tag import TAGS, Fact, Facts, Tag, get_tag, list_tags, register_tag
from plait.target.target import Target
from plait.target.composite import CompositeTarget, Piece, Transfer, current_piece
from plait.target.hooks import (
    HOOKS, Hook, HookSpec, call_cost, call_supports, get_hook, hooks_of, register_hook, run_relay_to_runtime,
    run_relay_to_tir, run_tir_to_runtime,
)
from plait.target import kinds as _kinds  # noqa: F401  registers c, llvm
from plait.target import tags as _tags  # noqa: F401  registers the in-tree tags

__all__ = [
    "HOOKS", "KINDS", "TAGS", "CompositeTarget", "Fact", "Facts", "Hook", "HookError", "HookSpec", "Option",
    "Piece", "PluginError", "Tag", "Target", "Transfer", "TargetError", "TargetKind", "call_cost", "call_supports",
    "current_piece", "get_hook", "get_kind", "get_tag", "hooks_of", "list_kinds", "list_tags", "register_hook",
    "register_kind", "register_tag", "run_relay_to_runtime", "run_relay_to_tir", "run_tir_to_runtime",
]
