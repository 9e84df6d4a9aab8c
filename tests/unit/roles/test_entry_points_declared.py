"""Roles meet only at declared entry points: every tasks_from names an entry point of that role's argument_specs."""

from __future__ import annotations

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# the whole value: a templated one ("kinds/{{ kind }}") names no declared entry point, and is reported as it is written
INCLUDE = re.compile(r'^\s*name:\s*inferops\.vllm_dr\.(\w+)\s*\n(?:\s*#.*\n)*\s*tasks_from:\s*(.+?)\s*$', re.MULTILINE)


def includes(root: str) -> list:
    """(file, role, tasks_from) of every include_role/import_role of this collection's roles with a tasks_from."""
    found = []
    for path in sorted(glob.glob(os.path.join(root, 'playbooks', '*.yml'))
                       + glob.glob(os.path.join(root, 'roles', '*', 'tasks', '**', '*.yml'), recursive=True)):
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
        found += [(os.path.relpath(path, root), role, entry) for role, entry in INCLUDE.findall(text)]
    return found


def undeclared(root: str) -> list:
    lines = []
    for where, role, entry in includes(root):
        with open(os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
            specs = yaml.safe_load(handle)['argument_specs']
        if entry.strip('"\'') not in specs:
            lines.append(f'{where}: {role} tasks_from {entry} is not an entry point of its argument_specs')
    return lines


def test_every_tasks_from_is_a_declared_entry_point():
    assert includes(ROOT), 'no tasks_from found: the pattern no longer matches the playbooks'
    assert undeclared(ROOT) == []


def test_the_run_lock_and_the_stopped_run_are_among_them():
    entries = {(role, entry) for _where, role, entry in includes(ROOT)}
    assert {('purge', 'run_lock'), ('validate', 'stopped_run')} <= entries


def test_a_templated_tasks_from_is_reported(tmp_path):
    role = tmp_path / 'roles' / 'k8s_target'
    (role / 'meta').mkdir(parents=True)
    (role / 'meta' / 'argument_specs.yml').write_text('argument_specs: {main: {}}\n')
    (role / 'tasks').mkdir()
    (role / 'tasks' / 'main.yml').write_text(
        '- ansible.builtin.include_role:\n    name: inferops.vllm_dr.k8s_target\n'
        '    tasks_from: "kinds/{{ kind | lower }}"\n')
    assert undeclared(str(tmp_path)) == [
        'roles/k8s_target/tasks/main.yml: k8s_target tasks_from "kinds/{{ kind | lower }}" is not an entry point of '
        'its argument_specs']
