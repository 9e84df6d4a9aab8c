# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations
DOCUMENTATION = r"""
name: owner_names
short_description: The names of the objects of one kind that own the objects given
version_added: 0.1.0
description:
  - The names in the objects' C(metadata.ownerReferences) whose C(kind) is the one asked, each once, in the order first
    met. The pods' owners of kind C(ReplicaSet) are their ReplicaSets; those ReplicaSets' owners of kind C(Deployment),
    the Deployment that runs the pods.
options:
  _input:
    description: The objects, as kubernetes.core.k8s_info returns them.
    type: list
    elements: dict
    required: true
  kind:
    description: The owners' kind.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The ReplicaSets that own the pods
  ansible.builtin.set_fact:
    replicaset_names: "{{ pods.resources | inferops.vllm_dr.owner_names('ReplicaSet') }}"
"""

RETURN = r"""
_value:
  description: The owners' names.
  type: list
  elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import owner_names


class FilterModule:
    def filters(self):
        return {'owner_names': owner_names}
