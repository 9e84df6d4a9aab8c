"""Roles meet only at declared entry points, facts included: a private fact (_vllm_dr_*) that an entry point reads is
set inside its own role, is one of its declared options, or is a result that the entry point of another role it calls
names in its description. A fact handed over from another role (one that ran before in the play) is an option of the
entry point that reads it."""

from __future__ import annotations

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NAME = re.compile(r'\b(_vllm_dr_\w+)')
# set_fact keys, vars keys, register and loop_var: where a role sets a private fact
DEFINED = re.compile(r'^\s*(?:-\s+)?(_vllm_dr_\w+):|register:\s*(_vllm_dr_\w+)|loop_var:\s*(_vllm_dr_\w+)',
                     re.MULTILINE)
CALL = re.compile(r'name:\s*inferops\.vllm_dr\.(\w+)\s*\n(?:\s*#.*\n)*\s*tasks_from:\s*(\w+)')
INCLUDE = re.compile(r'(?:include_tasks|import_tasks):\s*(?:\n\s*file:\s*)?["\']?([^"\'\n]+)')
TEMPLATE = re.compile(r'([\w.-]+\.j2)\b')


def read(path: str) -> str:
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def reached(root: str, role: str, entry: str) -> set:
    """The files of `role` that its entry point runs: its task file, the task files it includes (a templated name, such
    as platform/{{ vllm_dr_platform }}_cache.yml, stands for every file it can name), the templates they render and,
    for main, the handlers."""
    base = os.path.join(root, 'roles', role)
    todo = [os.path.join(base, 'tasks', f'{entry}.yml')]
    if entry == 'main':
        todo.append(os.path.join(base, 'handlers', 'main.yml'))
    seen = set()
    while todo:
        path = todo.pop()
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        text = read(path)
        for name in INCLUDE.findall(text):
            pattern = re.sub(r'\{\{.*?\}\}', '*', name.strip().replace('{{ role_path }}/', ''))
            todo += glob.glob(os.path.join(os.path.dirname(path), pattern)) or glob.glob(
                os.path.join(base, pattern)) or glob.glob(os.path.join(base, 'tasks', pattern))
        todo += [os.path.join(base, 'templates', name) for name in TEMPLATE.findall(text)]
    return seen


def specs(root: str) -> dict:
    return {os.path.basename(os.path.dirname(os.path.dirname(path))): yaml.safe_load(read(path))['argument_specs']
            for path in glob.glob(os.path.join(root, 'roles', '*', 'meta', 'argument_specs.yml'))}


def undeclared(root: str) -> list:
    every_spec, lines = specs(root), []
    for role, entries in sorted(every_spec.items()):
        own = set()
        for path in glob.glob(os.path.join(root, 'roles', role, '**', '*'), recursive=True):
            if os.path.isfile(path) and os.sep + 'meta' + os.sep not in path:
                own |= {name for found in DEFINED.findall(read(path)) for name in found if name}
        for entry, spec in sorted(entries.items()):
            files = reached(root, role, entry)
            names, calls = set(), set()
            for path in files:
                text = read(path)
                names |= set(NAME.findall(text))
                calls |= set(CALL.findall(text))
            results = {name for called, called_entry in calls
                       for name in NAME.findall(yaml.safe_dump(every_spec.get(called, {}).get(called_entry, {})))}
            for name in sorted(names - own - set(spec.get('options') or {}) - results):
                lines.append(f'{role} {entry}: reads {name}, which its role does not set and it does not declare')
    return lines


def test_every_fact_handed_to_an_entry_point_is_one_of_its_options():
    purge_main = {os.path.relpath(path, ROOT) for path in reached(ROOT, 'purge', 'main')}
    # the pattern still follows includes: the Kubernetes purge and its script template are reached from main
    assert {'roles/purge/tasks/platform/kubernetes_cache.yml', 'roles/purge/templates/purge-token-cache.sh.j2',
            'roles/purge/handlers/main.yml'} <= purge_main, purge_main
    assert undeclared(ROOT) == []


def test_a_fact_read_from_another_role_without_declaring_it_is_reported(tmp_path):
    for role, spec, task in (
            ('giver', {'main': {'options': {}}}, '- ansible.builtin.set_fact:\n    _vllm_dr_given: 1\n'),
            ('taker', {'main': {'options': {'_vllm_dr_declared': {'type': 'int'}}}},
             '- ansible.builtin.debug:\n    msg: "{{ _vllm_dr_given + _vllm_dr_declared }}"\n'
             '- ansible.builtin.include_tasks: "platform/{{ vllm_dr_platform }}.yml"\n')):
        (tmp_path / 'roles' / role / 'meta').mkdir(parents=True)
        (tmp_path / 'roles' / role / 'meta' / 'argument_specs.yml').write_text(yaml.safe_dump({'argument_specs': spec}))
        (tmp_path / 'roles' / role / 'tasks' / 'platform').mkdir(parents=True)
        (tmp_path / 'roles' / role / 'tasks' / 'main.yml').write_text(task)
    (tmp_path / 'roles' / 'taker' / 'tasks' / 'platform' / 'host.yml').write_text(
        '- ansible.builtin.debug:\n    msg: "{{ _vllm_dr_other }}"\n')
    (tmp_path / 'roles' / 'giver' / 'tasks' / 'other.yml').write_text(
        '- ansible.builtin.set_fact:\n    _vllm_dr_other: 1\n')
    why = 'which its role does not set and it does not declare'
    assert undeclared(str(tmp_path)) == [f'taker main: reads _vllm_dr_given, {why}',
                                         f'taker main: reads _vllm_dr_other, {why}']
