"""The `c` target kind: C source compiled by gcc or arm-none-eabi-gcc (see backend.py)."""
