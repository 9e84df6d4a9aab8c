"""The roles that only read (restore: the diagnosis; audit) read the token cache and the session store through the
_info modules, so a job with read-only access to them can run: never through a module that can change them."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# the collection's modules that can change the token cache or the session store, and their read-only counterparts
CHANGING = {'inferops.vllm_dr.vllm_token_cache': 'inferops.vllm_dr.vllm_token_cache_info',
            'inferops.vllm_dr.vllm_session_sweep': 'inferops.vllm_dr.vllm_session_info'}
BLOCK_KEYS = ('block', 'rescue', 'always')


def tasks_of(items):
    """Every task of a task list, the tasks inside blocks included."""
    for item in items or []:
        if any(key in item for key in BLOCK_KEYS):
            for key in BLOCK_KEYS:
                yield from tasks_of(item.get(key))
        else:
            yield item


def modules_called(role: str) -> dict:
    """{module name: [task file: task name, ...]} over every task file of the role."""
    called = {}
    for path in sorted(glob.glob(os.path.join(ROOT, 'roles', role, 'tasks', '**', '*.yml'), recursive=True)):
        with open(path, encoding='utf-8') as handle:
            for task in tasks_of(yaml.safe_load(handle)):
                for key in task:
                    if key.startswith('inferops.vllm_dr.'):
                        called.setdefault(key, []).append(f'{os.path.relpath(path, ROOT)}: {task.get("name")}')
    return called


@pytest.mark.parametrize('role', ['restore', 'audit'])
def test_read_only_role_reads_the_cache_and_the_store_with_info_modules_only(role):
    called = modules_called(role)
    wrong = [f'{where} calls {module}; use {CHANGING[module]}'
             for module, places in called.items() if module in CHANGING for where in places]
    assert not wrong, '\n'.join(wrong)
    assert set(CHANGING.values()) & set(called), f'roles/{role} reads neither the cache nor the store'
