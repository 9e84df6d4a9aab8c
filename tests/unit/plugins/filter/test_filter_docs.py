"""Every filter of the collection is documented as itself, the way ansible-doc and the docs site find it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.inferops.vllm_dr.plugins import filter as filter_package

DIRECTORY = list(filter_package.__path__)[0]
# every public filter file of the collection, found as ansible-doc finds them: one module per file; the private
# module (__internal.py, its filters named _<name>) holds what only the collection's roles and playbooks call
MODULES = tuple(importlib.import_module(f'{filter_package.__name__}.{name[:-3]}')
                for name in sorted(os.listdir(DIRECTORY)) if name.endswith('.py') and not name.startswith('_'))
FILTERS = sorted(name for module in MODULES for name in module.FilterModule().filters())
PUBLIC = {'k8s_target', 'log_evidence', 'recovery_verdict', 'rollout_status', 'validation_verdict', 'yaml_set'}


def test_every_filter_file_defines_filters():
    assert set(FILTERS) == PUBLIC
    for module in MODULES:
        assert module.FilterModule().filters(), module.__name__


@pytest.fixture(scope='module')
def docs():
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-doc'), '-t', 'filter', '--json']
                         + [f'inferops.vllm_dr.{name}' for name in FILTERS],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize('name', FILTERS)
def test_filter_has_its_own_documentation(name, docs):
    doc = docs[f'inferops.vllm_dr.{name}']['doc']
    assert doc['name'] == name
    assert f'inferops.vllm_dr.{name}' in docs[f'inferops.vllm_dr.{name}']['examples']
