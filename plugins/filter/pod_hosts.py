# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations
DOCUMENTATION = r"""
name: pod_hosts
short_description: One inventory host per pod, named after its target
version_added: 0.1.0
description:
  - For each pod name, a dict with C(name) (the prefix and the pod's name, the inventory host), C(pod) (the pod's
    name) and the options common to every pod (namespace, container, connection options...).
options:
  _input:
    description: The pods' names.
    type: list
    elements: str
    required: true
  prefix:
    description: What comes before each pod's name in its inventory host name.
    type: str
    required: true
  common:
    description: The keys every host gets besides C(name) and C(pod).
    type: dict
    default: {}
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: One inventory host per pod of the target
  ansible.builtin.set_fact:
    hosts: "{{ ['vllm-0', 'vllm-1'] | inferops.vllm_dr.pod_hosts('cluster-a/ns/', {'namespace': 'ns'}) }}"
"""

RETURN = r"""
_value:
  description: The hosts, in the order of the pods.
  type: list
  elements: dict
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import pod_hosts


class FilterModule:
    def filters(self):
        return {'pod_hosts': pod_hosts}
