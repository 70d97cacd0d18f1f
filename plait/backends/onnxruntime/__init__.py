"""The `onnxruntime` target kind: regions run by ONNX Runtime (see backend.py)."""
