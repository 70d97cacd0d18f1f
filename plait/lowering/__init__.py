"""Default lowering: Relay region functions -> scheduled TIR PrimFuncs.

``lower.py`` is the pass every piece without a ``relay_to_tir`` hook runs (fusion, one TE compute per
fused group, the target's default schedule); ``hook_lowering.py`` is the shared helper of
``relay_to_tir`` hooks (lower the calls a kind does not claim by default lowering). This layer sits
below placement (the cost model prices calls by lowering them) and below the backends (which use it).
"""
