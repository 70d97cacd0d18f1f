"""The version of plait (kept equal to pyproject.toml's by a test); ``plait.__version__`` re-exports it."""

__version__ = "0.1.0"
