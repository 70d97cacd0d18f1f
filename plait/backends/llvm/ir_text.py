"""LLVM IR text: the types of TIR dtypes, exact literals, names, and :class:`ModuleState` (what the
functions of one module share: declarations, globals, metadata)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

from plait.tir.dtype import bits

VALUE_TYPES = {
    "bool": "i1", "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16", "int32": "i32", "uint32": "i32",
    "int64": "i64", "uint64": "i64", "float16": "half", "float32": "float", "float64": "double",
    "handle": "ptr", "void": "void",
}
STORAGE_TYPES = dict(VALUE_TYPES, bool="i8")
_FSUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}

# math intrinsics LLVM knows (llvm.<name>.f32); the others call libm (expf, erff, ...)
LLVM_INTRINSICS = {"exp", "exp2", "log", "log2", "log10", "sqrt", "sin", "cos", "fabs", "floor", "ceil", "trunc",
                   "round", "nearbyint", "pow", "copysign", "fma"}
# what the loop vectorizer can vectorize without a vector math library
VECTOR_INTRINSICS = {"sqrt", "rsqrt", "fabs", "floor", "ceil", "trunc", "round", "nearbyint", "copysign", "fma", "isnan",
                     "isinf", "isfinite"}
# C symbols LLVM itself may call: libgcc's float16 conversions, libc's memset/memcpy (loop idioms)
HALF_SYMBOLS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2")  # libgcc (GCC >= 12)
RUNTIME_SYMBOLS = ("memset", "memcpy", "memmove", *HALF_SYMBOLS)

def libm_name(name: str, dtype: str) -> str:
    """The libm function computing intrinsic ``name`` on ``dtype`` (float16 uses the float one)."""
    return name if dtype == "float64" else name + "f"


def float_literal(value: float, dtype: str) -> str:
    """The exact LLVM literal: ``0xH....`` for half, the double's bits in hex for float/double."""
    if dtype == "float16":
        return "0xH%04X" % int(np.array(value, np.float16).view(np.uint16))
    if dtype == "float32":
        value = float(np.float32(value))
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(value)))[0]


def int_literal(value: int, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    n = bits(dtype)
    value &= (1 << n) - 1
    if value >= 1 << (n - 1):
        value -= 1 << n
    return str(value)


_SAFE = re.compile(r"[^A-Za-z0-9_]")


def local_name(name: str) -> str:
    """A safe, short LLVM local name from a TIR name."""
    s = _SAFE.sub("_", name)[:24]
    return s or "v"


@dataclass
class ModuleState:
    """What the functions of one LLVM module share: declarations, globals, metadata."""

    decls: dict[str, str] = field(default_factory=dict)  # symbol -> declare line
    externals: set[str] = field(default_factory=set)  # C symbols the module calls by name
    globals: list[str] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    _md_cache: dict[str, str] = field(default_factory=dict)
    # (intrinsic, dtype) -> [(lanes, vector function)]: glibc's libmvec versions LLVM may call
    vector_variants: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    call_attrs: dict[str, str] = field(default_factory=dict)
    c_uses: dict[str, tuple[str, str]] = field(default_factory=dict)  # C symbol -> (who, LLVM signature)
    attr_groups: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)  # kept from dead-code elimination until vectorized
    vnni_bits: int = 0  # 512 / 256: vpdpbusd for u8 x s8 dot products (plait.backends.llvm.dot)

    def declare(self, symbol: str, line: str, external: bool = True) -> None:
        if symbol not in self.decls:
            self.decls[symbol] = line
            if external:
                self.externals.add(symbol)

    def variant_attrs(self, fn: str, ct: str, nargs: int, variants: list[tuple[int, str]]) -> str:
        """The call-site attribute group naming the vector versions of libm function ``fn``
        (``vector-function-abi-variant``: the loop vectorizer calls them); declares them."""
        if fn not in self.call_attrs:
            names = []
            for lanes, vname in variants:
                vt = f"<{lanes} x {ct}>"
                self.declare(vname, f"declare {vt} @{vname}({', '.join([vt] * nargs)}) #1")
                names.append(f"_ZGV_LLVM_N{lanes}{'v' * nargs}_{fn}({vname})")
                self.used.append(vname)
            self.call_attrs[fn] = f"#{2 + len(self.call_attrs)}"
            self.attr_groups.append(f'attributes {self.call_attrs[fn]} = {{ "vector-function-abi-variant"='
                                    f'"{",".join(names)}" }}')
        return self.call_attrs[fn]

    def md(self, text: str | None = None, cache: bool = True) -> str:
        """A new metadata node ``!N`` (``text`` may contain ``{self}`` for a self reference)."""
        if cache and text is not None and text in self._md_cache:
            return self._md_cache[text]
        ref = f"!{len(self.metadata)}"
        self.metadata.append((text or "").replace("{self}", ref))
        if cache and text is not None:
            self._md_cache[text] = ref
        return ref

    def set_md(self, ref: str, text: str) -> None:
        self.metadata[int(ref[1:])] = text.replace("{self}", ref)


def global_name(name: str) -> str:
    """``@name``, quoted unless it is a plain identifier."""
    if re.fullmatch(r"[A-Za-z_.$][A-Za-z0-9_.$]*", name):
        return "@" + name
    return '@"' + "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else "\\%02X" % c
                          for c in name.encode("utf-8")) + '"'
