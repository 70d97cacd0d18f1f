"""Errors of the target layer. Unknown or duplicate names raise :class:`plait.errors.RegistryError`."""

from __future__ import annotations

from plait.errors import PlaitError


class TargetError(PlaitError):
    """A target string, dict or composite target is malformed, or an option value is wrong."""


class HookError(TargetError):
    """A hook was registered with the wrong signature, or failed while running."""


class PluginError(TargetError):
    """A ``plait.backends`` entry point could not be loaded."""
