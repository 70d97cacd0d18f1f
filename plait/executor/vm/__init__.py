"""The VM executor: bytecode interpreted in Python, with control flow and run-time shapes.

``executor`` (:class:`VMExecutor`, the registered class), ``codegen`` (lowered Relay ``main`` ->
bytecode), ``insn`` (the instruction set), ``executable`` (:class:`VMExecutable`), ``artifact`` (its
export and load), ``shapes`` (the one place a run-time shape is decided), ``machine``
(:class:`VirtualMachine`, the interpreter).
"""
