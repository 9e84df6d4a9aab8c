# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: merged_options
short_description: A dict variable with each of its keys also settable as a variable of its own
version_added: 0.1.0
description:
  - Returns the dict variable named by the term (for example C(vllm_dr_store)) with the value of every variable
    C(<term>_<key>) laid over its C(<key>). An AWX or Automation Platform credential type injects flat extra
    variables (C(vllm_dr_store_login_password)), which cannot fill one key of a dict; the roles read both forms
    through this lookup.
  - A flat variable wins over the dict's key. An empty string counts as not given on both sides, so a credential
    field left empty never blanks an option the inventory sets, and the result holds no empty string.
  - An undefined dict variable counts as empty; one that is not a dict is an error naming it.
options:
  _terms:
    description: The names of the dict variables.
    type: list
    elements: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The session store options, from vllm_dr_store and vllm_dr_store_<option> (an AWX credential's extra vars)
  ansible.builtin.set_fact:
    store: "{{ lookup('inferops.vllm_dr.merged_options', 'vllm_dr_store') }}"
"""

RETURN = r"""
_raw:
  description: One dict per term, the merged options.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._merged_options import MergedOptionsError, flat_names, merge_flat


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        results = []
        for name in terms:
            base = self._templar.template(variables[name]) if name in variables else None
            flat = {var: self._templar.template(variables[var]) for var in flat_names(name, variables)}
            try:
                results.append(merge_flat(name, base, flat))
            except MergedOptionsError as exc:
                raise AnsibleError(str(exc)) from None
        return results
