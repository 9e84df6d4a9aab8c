# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_new_hash
short_description: The pod-template-hash of a Deployment's current ReplicaSet
version_added: 0.1.0
description:
  - Among the ReplicaSets given, the one the Deployment owns at the Deployment's revision
    (annotation C(deployment.kubernetes.io/revision)); its pods carry this hash in their C(pod-template-hash) label.
options:
  _input:
    description: The ReplicaSets, as kubernetes.core.k8s_info returns them.
    type: list
    elements: dict
    required: true
  deployment:
    description: The Deployment.
    type: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Pods not of the current ReplicaSet
  ansible.builtin.set_fact:
    old_pods: >-
      {{ pods.resources | rejectattr('metadata.labels.pod-template-hash', 'equalto',
                                     replicasets.resources | inferops.vllm_dr.rollout_new_hash(deployment)) }}
"""

RETURN = r"""
_value:
  description: The hash, or none when no ReplicaSet matches.
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import new_replicaset_hash


class FilterModule:
    def filters(self):
        return {'rollout_new_hash': new_replicaset_hash}
