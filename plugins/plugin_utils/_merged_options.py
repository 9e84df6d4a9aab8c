# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A dict variable whose keys can also come as variables of their own: vllm_dr_store plus vllm_dr_store_<key>.

An AWX credential type injects flat extra vars (vllm_dr_store_login_password); an inventory writes the dict. The
flat variable wins over the dict's key; an empty string means "not given" on both sides, so a credential field left
empty never blanks an option the inventory sets.
"""

from __future__ import annotations


class MergedOptionsError(ValueError):
    pass


def flat_names(name: str, names) -> list:
    """The variables among `names` that carry one key of `name`: <name>_<key>, in sorted order."""
    prefix = name + '_'
    return sorted(var for var in names if var.startswith(prefix) and len(var) > len(prefix))


def _kind(value) -> str:
    for kind, name in ((bool, 'a boolean'), (str, 'a string'), (int, 'a number'), (float, 'a number'),
                       (list, 'a list')):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def merge_flat(name: str, base, flat: dict) -> dict:
    """`base` (the dict variable `name`, None when undefined) with each flat variable's value laid over its key."""
    if base is None:
        base = {}
    if not isinstance(base, dict):
        raise MergedOptionsError(f'{name} must be a dict of options (or leave it out and set {name}_<option> '
                                 f'variables), got {_kind(base)}')
    prefix = len(name) + 1
    merged = dict(base)
    merged.update({var[prefix:]: value for var, value in flat.items() if value != ''})
    return {key: value for key, value in merged.items() if value != ''}
