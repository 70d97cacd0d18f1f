"""TFLite converters of the shape and data-movement operators (to be filled)."""

from __future__ import annotations

from typing import Any, Callable

from plait.frontend.tflite_context import OpContext

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}
