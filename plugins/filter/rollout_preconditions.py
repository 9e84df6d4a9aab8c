# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_preconditions
short_description: Every reason the Kubernetes purge could not run to its end, before it changes anything
version_added: 0.1.0
description:
  - Judges, before the first change, what the purge on Kubernetes relies on. The ConfigMap exists and holds the
    configuration key, the key parses as YAML and the ConfigMap is mutable when the edit is needed. The Deployment
    exists and is not paused. The pods the diagnosis reached are still running. The backup directory inside the pods
    is an absolute path.
  - Returns one line per problem, each naming the fix; an empty list means the purge may start.
options:
  _input:
    description: The named Deployment (an empty dict or V(null) when it is gone).
    type: dict
    required: true
  pods:
    description: The pods of the namespace.
    type: list
    elements: dict
    required: true
  replicasets:
    description: The ReplicaSets of the namespace.
    type: list
    elements: dict
    required: true
  config_maps:
    description: What reading the ConfigMap by name returned (empty when it is missing).
    type: list
    elements: dict
    required: true
  namespace:
    description: The namespace, for the messages.
    type: str
    required: true
  config_map:
    description: The ConfigMap's name.
    type: str
    required: true
  config_key:
    description: The key of the ConfigMap that holds the service configuration.
    type: str
    required: true
  edit_path:
    description: The dotted key the purge sets in the configuration.
    type: str
    required: true
  edit_value:
    description: The value it sets.
    type: raw
    required: true
  expected_pods:
    description: The names of the pods the diagnosis reached; the purge runs in them.
    type: list
    elements: str
    default: []
  quotas:
    description:
      - The namespace's ResourceQuotas. The restart starts up to maxSurge new pods before it stops old ones; a quota
        (without scopes) whose status leaves no room for them (pods, cpu, memory, ephemeral-storage, requests and
        limits) is a problem that names it and how to make room.
    type: list
    elements: dict
    default: []
  limit_ranges:
    description: The namespace's LimitRanges, whose container defaults count for a container that sets no request.
    type: list
    elements: dict
    default: []
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Check every precondition before the first change
  ansible.builtin.fail:
    msg: "{{ problems | join('\n') }}"
  vars:
    problems: >-
      {{ deployment.resources | first | default({})
         | inferops.vllm_dr.rollout_preconditions(pods.resources, replicasets.resources, config_map.resources,
             namespace='vllm', config_map='vllm-config', config_key='vllm.yaml',
             edit_path='session_state_store.refresh_on_startup', edit_value=true) }}
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: One line per problem; empty when the purge may start.
  type: list
  elements: str
"""

# the name the roles call is inferops.vllm_dr._rollout_preconditions; this one stays until they all do
from ansible_collections.inferops.vllm_dr.plugins.filter.__internal import rollout_preconditions


class FilterModule:
    def filters(self):
        return {'rollout_preconditions': rollout_preconditions}
