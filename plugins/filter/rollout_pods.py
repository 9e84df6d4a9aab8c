# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_pods
short_description: The pods of one Deployment, found through its ReplicaSets
version_added: 0.1.0
description:
  - The pods owned by one of the Deployment's ReplicaSets (matched by uid), not merely those its selector matches.
    Two Deployments may share a selector (a canary beside the main one); only the ownership chain tells their
    pods apart, so naming the Deployment scopes the purge and the rollout wait to its own pods.
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
  running:
    description: Only pods in phase C(Running) that are not being deleted.
    type: bool
    default: false
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The pods of the vllm Deployment
  ansible.builtin.set_fact:
    vllm_pods: "{{ pods.resources | inferops.vllm_dr.rollout_pods(replicasets.resources, deployment.resources[0]) }}"
"""

RETURN = r"""
_value:
  description: The pods owned by the Deployment's ReplicaSets.
  type: list
  elements: dict
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import deployment_pods, running_pods


def rollout_pods(pods, replicasets, deployment, running=False):
    owned = deployment_pods(pods, replicasets, deployment)
    return running_pods(owned) if running else owned


class FilterModule:
    def filters(self):
        return {'rollout_pods': rollout_pods}
