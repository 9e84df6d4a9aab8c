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
  - Its companions are P(inferops.vllm_dr.rollout_status#filter), P(inferops.vllm_dr.rollout_new_hash#filter),
    P(inferops.vllm_dr.rollout_pods#filter), P(inferops.vllm_dr.rollout_wait_outcome#filter) and
    P(inferops.vllm_dr.rollout_preconditions#filter).
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

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import rollout_complete


class FilterModule:
    def filters(self):
        return {'rollout_complete': rollout_complete}
