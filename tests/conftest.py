"""Shared by every test: the collection is importable as ansible_collections.inferops.vllm_dr."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')
_LINK = os.path.join(COLLECTIONS, 'ansible_collections', 'inferops', 'vllm_dr')

if not os.path.exists(_LINK):  # `make deps` makes it; plain `pytest` must work too
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(ROOT, _LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
sys.path.insert(0, os.path.join(ROOT, 'tests'))
os.environ.setdefault('ANSIBLE_COLLECTIONS_PATH', COLLECTIONS)

pytest_plugins = ['harness.fixtures']
