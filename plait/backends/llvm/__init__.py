"""The `llvm` target kind: host code generated and JIT-compiled through LLVM (see backend.py)."""
