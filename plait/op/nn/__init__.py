"""Neural-network operator definitions (ONNX semantics, NCHW / OIHW), one file per family:
:mod:`~plait.op.nn.conv` (convolutions, matmul, dense), :mod:`~plait.op.nn.pool` (pooling) and
:mod:`~plait.op.nn.norm` (normalizations). The manifest in :mod:`plait.op` lists them.
"""
