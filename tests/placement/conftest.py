import pytest

from plait.target.testing import isolated_registry


@pytest.fixture(autouse=True)
def _isolated_targets():
    """Kinds and hooks a test registers are forgotten after it."""
    with isolated_registry():
        yield
