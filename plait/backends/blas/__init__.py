"""The `blas` target kind: dense/matmul/conv2d through OpenBLAS sgemm (see backend.py)."""
