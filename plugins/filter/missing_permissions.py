# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations
DOCUMENTATION = r"""
name: missing_permissions
short_description: The permissions the API server refused, in words
version_added: 0.1.0
description:
  - The permissions asked about (one SelfSubjectAccessReview each) that the API server did not allow, each as
    C(<verb> <resource>[/<subresource>][.<group>][ <name>] in namespace <namespace>). An answer missing counts as
    refused.
options:
  _input:
    description: The permissions asked about, each a dict with C(verb), C(resource) and optionally C(subresource),
      C(group), C(name), C(namespace).
    type: list
    elements: dict
    required: true
  allowed:
    description: The API server's answers (C(status.allowed)), in the order asked.
    type: list
    elements: bool
    required: true
  namespace:
    description: The namespace of a permission that names none.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Name the permissions this identity lacks
  ansible.builtin.set_fact:
    missing: "{{ wanted | inferops.vllm_dr.missing_permissions(answers, 'vllm') }}"
"""

RETURN = r"""
_value:
  description: The refused permissions, in the order asked.
  type: list
  elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import missing_permissions


class FilterModule:
    def filters(self):
        return {'missing_permissions': missing_permissions}
