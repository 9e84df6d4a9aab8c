# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_old_pods
short_description: The pods of a Deployment that a rollout has yet to replace
version_added: 0.1.0
description:
  - The names of the Deployment's own pods (found through its ReplicaSets, see P(inferops.vllm_dr.rollout_pods#filter))
    whose C(pod-template-hash) is not that of the Deployment's current ReplicaSet, in name order.
  - An empty list once the rollout has replaced every pod.
options:
  _input:
    description: The pods of the namespace, as kubernetes.core.k8s_info returns them.
    type: list
    elements: dict
    required: true
  replicasets:
    description: The ReplicaSets of the namespace.
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
- name: Wait until no pod of an older ReplicaSet is left
  kubernetes.core.k8s_info:
    kind: Pod
    namespace: vllm
  register: pods
  until: pods.resources | inferops.vllm_dr.rollout_old_pods(replicasets.resources, deployment) | length == 0
  retries: 60
  delay: 2
"""

RETURN = r"""
_value:
  description: The names of the pods still of an older ReplicaSet.
  type: list
  elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import old_pods


class FilterModule:
    def filters(self):
        return {'rollout_old_pods': old_pods}
