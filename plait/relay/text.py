"""The Relay text format: a deterministic printer and a parser for the whole IR.

    #[version = "0.1"]
    def @main(%x: Tensor[(n, 3), float32]) -> Tensor[(n, 3), float32] {
      %0 = nn.relu(%x) #[name="relu1"];
      add(%0, meta[constant][0])
    }

``parse_module(print_module(m))`` is structurally equal to ``m`` (see
:mod:`plait.relay.analysis`), and printing it again gives the same bytes. The format is
documented in docs/text-format.md; the printer lives in :mod:`plait.relay.text_print`, the
parser in :mod:`plait.relay.text_parse`, the shared lexical rules in :mod:`plait.relay.text_lex`.
"""

from plait.relay.text_parse import parse_expr, parse_module
from plait.relay.text_print import print_expr, print_module, print_with_constants, type_text

__all__ = ["parse_expr", "parse_module", "print_expr", "print_module", "print_with_constants", "type_text"]
