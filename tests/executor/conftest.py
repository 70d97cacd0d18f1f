"""Fixtures shared by the artifact tests: the mlp built once per module, exported, and a fresh copy of
the export per test (to tamper with)."""

from __future__ import annotations

import shutil

import pytest

from tests.executor.artifacts import build


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cc")


@pytest.fixture(scope="module")
def art(cache):
    return build(cache)


@pytest.fixture(scope="module")
def exported(art, tmp_path_factory):
    return art.export(tmp_path_factory.mktemp("base") / "mlp")


@pytest.fixture
def d(exported, tmp_path):
    return shutil.copytree(exported, tmp_path / "mlp")
