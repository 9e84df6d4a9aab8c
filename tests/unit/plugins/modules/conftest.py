"""Fixtures of the module shells' tests."""

from __future__ import annotations

import pytest

from harness.caches import expiring, make_cache, set_mtime


@pytest.fixture
def cache(tmp_path):
    """A token cache of 5 expired and 3 valid rows, last written on 2024-07-10, before the tests' restore."""
    path = str(tmp_path / 'token_cache.db')
    make_cache(path, expiring(5) + expiring(3, start=5, offset=3600))
    set_mtime(path, 1720612800)
    return path
