# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_unfinished
short_description: Whether a Deployment's rollout is still running or ran since its pods were read
version_added: 0.1.0
description:
  - True while the rollout is not complete (as P(inferops.vllm_dr.rollout_complete#filter) judges it), or when one
    of the pods given is of an older ReplicaSet (the pods were read before the Deployment and are being replaced), so
    they must be read again once the rollout is done.
  - False for a paused Deployment, whose rollout nothing would finish.
options:
  _input:
    description: The Deployment, as kubernetes.core.k8s_info returns it.
    type: dict
    required: true
  pods:
    description: The pods read before the Deployment.
    type: list
    elements: dict
    required: true
  replicasets:
    description: The ReplicaSets of the namespace.
    type: list
    elements: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Wait for a rollout an earlier run left unfinished before reading the pods' logs
  ansible.builtin.include_tasks: wait_for_rollout.yml
  when: deployment | inferops.vllm_dr.rollout_unfinished(pods.resources, replicasets.resources)
"""

RETURN = r"""
_value:
  description: Whether to wait for the rollout and read the pods again.
  type: bool
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import rollout_unfinished


class FilterModule:
    def filters(self):
        return {'rollout_unfinished': rollout_unfinished}
