# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations
DOCUMENTATION = r"""
name: running_pods
short_description: The pods that run, not those starting, finished or being deleted
version_added: 0.1.0
description:
  - The pods in phase C(Running) without a C(deletionTimestamp), the ones whose token cache can be read and purged.
options:
  _input:
    description: The pods, as kubernetes.core.k8s_info returns them.
    type: list
    elements: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The running pods of the workload
  ansible.builtin.set_fact:
    running: "{{ pods.resources | inferops.vllm_dr.running_pods }}"
"""

RETURN = r"""
_value:
  description: The running pods, in the order given.
  type: list
  elements: dict
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import running_pods


class FilterModule:
    def filters(self):
        return {'running_pods': running_pods}
