"""The C language as plait writes it: identifiers and comments (every name from a model made safe), and
the C types of values and buffers. Shared by every writer of C (the c kind, the AOT executor's entry
point, kernels a backend ships), so none imports another's internals.

Names in PrimFuncs come from models (ONNX node names, user strings) and may hold anything: quotes,
``*/``, newlines, ``??/`` trigraphs, C keywords, names of libm functions. :func:`sanitize` maps a
name to ``[A-Za-z_][A-Za-z0-9_]*`` that is not reserved; :class:`NameTable` makes names unique
(deterministic suffixes ``_1``, ``_2``... in the order names are asked for); :func:`comment_text`
escapes text for a ``/* ... */`` comment (only characters that cannot end a comment, start a
trigraph or splice a line are kept; everything else is written as ``\\xNN`` / ``\\uNNNN``).
"""

from __future__ import annotations

import hashlib
import re

C_TYPES = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "float", "float32": "float", "float64": "double", "handle": "void*", "void": "void",
}
STORAGE_TYPES = dict(C_TYPES, float16="uint16_t")  # element type of a buffer (float16: its bits)


def value_type(dtype: str) -> str:
    """The C type holding a value of ``dtype`` in expressions."""
    return C_TYPES[dtype]


def storage_type(dtype: str) -> str:
    """The C element type of a buffer of ``dtype``."""
    return STORAGE_TYPES[dtype]


C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local
asm typeof
""".split())

# Identifiers declared by the headers the generated code includes (<math.h>, <stdint.h>, <stdbool.h>,
# <stddef.h>): functions and macros. Extern calls of these names use the header's declaration.
_MATH_FUNCS = """
acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp ilogb ldexp log log10
log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc lgamma tgamma ceil floor nearbyint rint
lrint llrint round lround llround trunc fmod remainder remquo copysign nan nextafter nexttoward fdim fmax fmin
fma
""".split()
HEADER_NAMES = frozenset(
    [f + s for f in _MATH_FUNCS for s in ("", "f", "l")]
    + """
    fpclassify isfinite isinf isnan isnormal signbit isgreater isgreaterequal isless islessequal islessgreater
    isunordered HUGE_VAL HUGE_VALF HUGE_VALL INFINITY NAN FP_INFINITE FP_NAN FP_NORMAL FP_SUBNORMAL FP_ZERO
    FP_FAST_FMA FP_FAST_FMAF FP_FAST_FMAL FP_ILOGB0 FP_ILOGBNAN MATH_ERRNO MATH_ERREXCEPT math_errhandling
    float_t double_t
    bool true false __bool_true_false_are_defined
    size_t ptrdiff_t wchar_t NULL offsetof max_align_t
    intptr_t uintptr_t intmax_t uintmax_t INTPTR_MIN INTPTR_MAX UINTPTR_MAX INTMAX_MIN INTMAX_MAX UINTMAX_MAX
    PTRDIFF_MIN PTRDIFF_MAX SIZE_MAX SIG_ATOMIC_MIN SIG_ATOMIC_MAX WCHAR_MIN WCHAR_MAX WINT_MIN WINT_MAX
    INTMAX_C UINTMAX_C
    """.split()
    + [f"{u}int{w}{k}_t" for u in ("", "u") for w in (8, 16, 32, 64) for k in ("", "_least", "_fast")]
    + [f"{u}INT{w}{k}_{m}" for u in ("", "U") for w in (8, 16, 32, 64) for k in ("", "_LEAST", "_FAST")
       for m in ("MIN", "MAX")]
    + [f"{u}INT{w}_C" for u in ("", "U") for w in (8, 16, 32, 64)]
)

# Global symbols a generated function must not take: program entry, common libc functions a shared
# library would otherwise export (and interpose), and plait's own runtime symbols.
_LIBC = frozenset("""
main abort atexit exit _Exit calloc free malloc realloc memcpy memmove memset memcmp memchr strlen strcpy strcmp
printf fprintf sprintf snprintf puts putchar abs labs llabs div ldiv lldiv errno assert raise signal setjmp
longjmp qsort bsearch rand srand time clock getenv system
""".split())
PLAIT_SYMBOLS = frozenset({"plait_manifest"})
HELPER_PREFIX = "plait_c_"  # static helpers and macros of the generated file (see c_helpers.py)

RESERVED = C_KEYWORDS | HEADER_NAMES | _LIBC | PLAIT_SYMBOLS

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_LEN = 64


def is_identifier(name: str) -> bool:
    return isinstance(name, str) and _IDENT.match(name) is not None


def is_reserved(name: str) -> bool:
    """Reserved in generated code: C keywords, header names, libc and plait symbols, names that
    begin with ``_`` (reserved by C at file scope) and the helper prefix ``plait_c_`` / ``PLAIT_C_``."""
    return (name in RESERVED or name.startswith("_") or name.startswith(HELPER_PREFIX)
            or name.startswith(HELPER_PREFIX.upper()))


def sanitize(name: str, fallback: str = "v") -> str:
    """A valid, unreserved C identifier for ``name`` (deterministic; not yet unique).

    Characters outside ``[A-Za-z0-9_]`` become ``_``; a name starting with a digit or ``_`` gets a
    ``v`` prefix; reserved names get a ``_`` suffix; names longer than 64 characters are cut and
    given a hash of the full name.
    """
    text = name if isinstance(name, str) else str(name)
    s = re.sub(r"[^A-Za-z0-9_]", "_", text) or fallback
    if s[0].isdigit() or s[0] == "_" or s.startswith((HELPER_PREFIX, HELPER_PREFIX.upper())):
        s = fallback + s
    if len(s) > _MAX_LEN:
        s = s[:_MAX_LEN - 9] + "_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    if is_reserved(s):
        s += "_"
    return s


class NameTable:
    """Unique identifiers within one scope. ``fresh(name)`` returns ``sanitize(name)``, or that plus
    ``_1``, ``_2``, ... when it is taken. ``parent`` names (an enclosing scope) are never reused."""

    def __init__(self, parent: "NameTable | None" = None):
        self.parent = parent
        self.used: set[str] = set()
        self.counters: dict[str, int] = {}

    def taken(self, name: str) -> bool:
        t: NameTable | None = self
        while t is not None:
            if name in t.used:
                return True
            t = t.parent
        return is_reserved(name)

    def reserve(self, name: str) -> None:
        """Mark an exact identifier (an extern function's name) as taken."""
        self.used.add(name)

    def fresh(self, name: str, fallback: str = "v") -> str:
        base = sanitize(name, fallback)
        if not self.taken(base):
            self.used.add(base)
            return base
        k = self.counters.get(base, 0)
        while True:
            k += 1
            cand = f"{base}_{k}"
            if not self.taken(cand):
                self.counters[base] = k
                self.used.add(cand)
                return cand


_COMMENT_SAFE = re.compile(r"[A-Za-z0-9 _.,:;=+\-()\[\]{}<>#@!$%^&|~'\"`]")


def comment_text(text: object, limit: int = 120) -> str:
    """``text`` made safe inside ``/* ... */``: no ``*``, ``/``, ``\\``, ``?`` or control characters
    (so it cannot close the comment, form a trigraph or splice lines); those are escaped."""
    s = text if isinstance(text, str) else str(text)
    out = []
    for ch in s[:limit]:
        if _COMMENT_SAFE.match(ch):
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    if len(s) > limit:
        out.append("...")
    return "".join(out)
