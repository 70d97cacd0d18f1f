"""plait.limits: sizes, the default limit, the exact refusal message."""

import pytest

from plait.errors import PlaitError
from plait.limits import MemoryLimitError, check_bytes, default_limit, format_bytes, parse_size, usable_memory


@pytest.mark.parametrize("text,n", [("1048576", 1048576), ("8GiB", 8 * 1024**3), ("500MB", 500 * 1000**2),
                                    ("1.5k", 1500), (" 2 kib ", 2048), ("3TB", 3 * 1000**4), (7, 7)])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "GiB", "-5", "5 parsecs", "0", 0, -1, "1e9"])
def test_parse_size_rejects(text):
    with pytest.raises(PlaitError):
        parse_size(text)


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536, 4 * 1024**4)] == ["0 B", "1023 B", "1.0 KiB", "1.5 KiB",
                                                                           "4.0 TiB"]


def test_default_limit_is_half_the_usable_memory():
    mem = usable_memory()
    assert mem is None or default_limit() == mem // 2
    assert default_limit() > 0


def test_check_bytes_message():
    check_bytes(1024, "x", 1024)
    with pytest.raises(MemoryLimitError) as e:
        check_bytes(4 * 1024**4, "input 'x' (float32[1048576, 1048576])", "1GiB")
    assert str(e.value) == ("input 'x' (float32[1048576, 1048576]) needs 4.0 TiB (4398046511104 bytes), more than "
                            "the memory limit of 1.0 GiB; raise it with --max-memory or the config key 'memory.limit'")
