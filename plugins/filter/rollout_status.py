# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_status
short_description: One line on where a Deployment's rollout stands
version_added: 0.1.0
description:
  - Updated, available and counted replicas against the wanted number, an unobserved generation, and every
    condition of the Deployment with its reason and message.
  - A Deployment's only. The P(inferops.vllm_dr.k8s_target#filter) filter's
    RV(inferops.vllm_dr.k8s_target#filter:_value.rollout) C(status) says it for every supported kind (Deployment,
    StatefulSet, LeaderWorkerSet); the roles use that.
options:
  _input:
    description: The Deployment, as kubernetes.core.k8s_info returns it.
    type: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Say why the rollout is not done
  ansible.builtin.debug:
    msg: "{{ deployment.resources[0] | inferops.vllm_dr.rollout_status }}"
"""

RETURN = r"""
_value:
  description: "The account, for example C(updated 1/2, available 1/2, replicas 3 (old ones included); conditions: ...)."
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import rollout_status


class FilterModule:
    def filters(self):
        return {'rollout_status': rollout_status}
