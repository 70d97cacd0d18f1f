"""TIR PrimFuncs inside the Relay module text: the ``primfn`` block. The Relay printer and parser
call these (imported on first use, so pure-Relay work does not load TIR)::

    primfn @fused_add {
      @prim_func(global_symbol="fused_add")
      def fused_add(A: Buffer((4,), float32), B: Buffer((4,), float32)):
          for i in serial(0, 4):
              B[i] = A[i] + 1.0
    }

The block holds the TIR text of :mod:`plait.tir.printer`, indented by two spaces.
"""

from __future__ import annotations

from plait.errors import ParseError
from plait.relay.text_lex import PRIMFN_KEYWORD as KEYWORD, name_text
from plait.tir.parser import parse_prim_funcs
from plait.tir.printer import print_prim_func
from plait.tir.stmt import PrimFunc


def print_block(name: str, func: PrimFunc) -> str:
    """The ``primfn @name { ... }`` block of ``func`` (ends with a line ``}``)."""
    body = "".join("  " + line + "\n" for line in print_prim_func(func, name).splitlines())
    return f"{KEYWORD} {name_text('@', name)} {{\n{body}}}\n"


def parse_block(block: str, source_name: str, first_line: int) -> PrimFunc:
    """Parse one ``primfn`` block starting at line ``first_line`` (errors carry module line numbers)."""
    lines = block.split("\n")
    if lines[-1].rstrip() != "}":
        raise ParseError(f"'{KEYWORD}' block is not closed by a line '}}'", first_line, 1, source_name)
    inner = "\n" * first_line + "\n".join(lines[1:-1])  # keep line numbers
    funcs = parse_prim_funcs(inner, source_name)
    if len(funcs) != 1:
        raise ParseError(f"a '{KEYWORD}' block holds exactly one function, found {len(funcs)}", first_line, 1,
                         source_name)
    return funcs[0][1]

