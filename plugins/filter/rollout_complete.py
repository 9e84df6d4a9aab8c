# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_complete
short_description: Whether a Deployment's rollout has finished
version_added: 0.1.0
description:
  - True when the controller observed the latest generation, every wanted replica is updated and available,
    and no replica of an older ReplicaSet is counted, as C(kubectl rollout status) decides.
  - Its companions are P(inferops.vllm_dr.rollout_status#filter) and
    P(inferops.vllm_dr.rollout_new_hash#filter); in this file, C(rollout_pods) (the pods of a Deployment, through its
    ReplicaSets), C(rollout_wait_outcome) (what one read of the Deployment during a wait says, a failed read
    included) and C(rollout_preconditions) (every reason the purge could not run to its end, one line each).
options:
  _input:
    description: The Deployment, as kubernetes.core.k8s_info returns it.
    type: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Wait for the rollout
  kubernetes.core.k8s_info:
    kind: Deployment
    namespace: vllm
    name: vllm
  register: deployment
  until: deployment.resources[0] | inferops.vllm_dr.rollout_complete
  retries: 60
  delay: 2
"""

RETURN = r"""
_value:
  description: Whether the rollout is complete.
  type: bool
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import (
    deployment_pods,
    purge_preconditions,
    rollout_complete,
    running_pods,
    wait_outcome,
)


def rollout_pods(pods, replicasets, deployment, running=False):
    owned = deployment_pods(pods, replicasets, deployment)
    return running_pods(owned) if running else owned


def rollout_preconditions(deployment, pods, replicasets, config_maps, **options):
    return purge_preconditions(deployment or None, pods, replicasets, config_maps, **options)


class FilterModule:
    def filters(self):
        return {
            'rollout_complete': rollout_complete,
            'rollout_pods': rollout_pods,
            'rollout_preconditions': rollout_preconditions,
            'rollout_wait_outcome': wait_outcome,
        }
