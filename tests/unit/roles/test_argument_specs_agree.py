"""A variable several roles read is declared the same way in each: type, default, choices, elements, description."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIELDS = ('type', 'default', 'choices', 'elements', 'description')


def declarations(root: str) -> dict:
    """{variable: [(role:entry_point, its declaration), ...]} over every roles/*/meta/argument_specs.yml."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root, 'roles', '*', 'meta', 'argument_specs.yml'))):
        role = path.split(os.sep)[-3]
        with open(path, encoding='utf-8') as handle:
            specs = yaml.safe_load(handle)['argument_specs']
        for entry_point, spec in specs.items():
            for name, option in (spec.get('options') or {}).items():
                found.setdefault(name, []).append((f'{role}:{entry_point}', option))
    return found


def disagreements(found: dict) -> list:
    """One line per shared variable and field on which two declarations differ."""
    lines = []
    for name, declared in sorted(found.items()):
        for field in FIELDS:
            values = {repr(option.get(field)) for _place, option in declared}
            if len(values) > 1:
                where = '; '.join(f'{place}={option.get(field)!r}' for place, option in declared)
                lines.append(f'{name}.{field} differs: {where}')
    return lines


def test_every_role_has_an_argument_spec():
    roles = {os.path.basename(path) for path in glob.glob(os.path.join(ROOT, 'roles', '*'))}
    assert roles and all(os.path.exists(os.path.join(ROOT, 'roles', role, 'meta', 'argument_specs.yml'))
                         for role in roles)


def test_shared_variables_are_declared_alike_in_every_argument_spec():
    assert disagreements(declarations(ROOT)) == []


@pytest.mark.parametrize('field, other', [('type', 'int'), ('default', 'other'), ('choices', ['a']),
                                          ('description', 'Said another way.'), ('elements', 'int')])
def test_the_check_names_a_variable_whose_declarations_differ(field, other):
    first = {'type': 'str', 'default': 'x', 'choices': ['x', 'y'], 'elements': 'str', 'description': 'The thing.'}
    found = {'vllm_dr_thing': [('a:main', first), ('b:main', dict(first, **{field: other}))],
             'vllm_dr_alone': [('a:main', {'type': 'int'})]}
    assert disagreements(found) == [f"vllm_dr_thing.{field} differs: a:main={first[field]!r}; b:main={other!r}"]
