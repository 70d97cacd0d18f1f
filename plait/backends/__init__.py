"""Backends: one package per in-tree target kind (``c``, ``llvm``, ``blas``, ``onnxruntime``), each a
:class:`plait.target.Backend` subclass.

:data:`MANIFEST` is the in-tree manifest the target layer loads kinds from, lazily (only the kind
asked for is imported): kind name -> ``"module:Class"``, the same form as an entry point of the
``plait.backends`` group. pyproject.toml's ``[project.entry-points."plait.backends"]`` table equals it
(tests/target/test_backend_class.py checks so). Importing this package imports no backend.
"""

MANIFEST: dict[str, str] = {
    "blas": "plait.backends.blas.backend:BlasBackend",
    "c": "plait.backends.c.backend:CBackend",
    "llvm": "plait.backends.llvm.backend:LLVMBackend",
    "onnxruntime": "plait.backends.onnxruntime.backend:OnnxRuntimeBackend",
}
