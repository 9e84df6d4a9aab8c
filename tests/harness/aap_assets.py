"""extensions/aap/assets.yml as Ansible reads it: a string tagged !unsafe comes back as an Unsafe (a str), so a test
can tell the templates Ansible must leave alone (a credential type's injectors, which AWX renders) from the rest."""

from __future__ import annotations

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = os.path.join(ROOT, 'extensions', 'aap', 'assets.yml')


class Unsafe(str):
    """A string tagged !unsafe."""


class _Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    pass


_Loader.add_constructor('!unsafe', lambda loader, node: Unsafe(loader.construct_scalar(node)))


def load_assets(path: str = ASSETS) -> dict:
    with open(path, encoding='utf-8') as handle:
        return yaml.load(handle, Loader=_Loader)  # noqa: S506  # a SafeLoader with one tag more


def leaves(value, path=()):
    """(path, leaf) of every scalar under value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, path + (index,))
    else:
        yield path, value
