# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_wait_outcome
short_description: What one read of a Deployment during a rollout wait says
version_added: 0.1.0
description:
  - V(complete) when the rollout finished (as P(inferops.vllm_dr.rollout_complete#filter) judges it), V(progressing)
    while it runs, V(gone) when the Deployment no longer exists, and V(error) when the read itself failed (the API
    server restarting, a dropped connection), so that a wait goes on until its deadline instead of ending there.
options:
  _input:
    description: The registered result of one kubernetes.core.k8s_info read of the Deployment, failed or not.
    type: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Wait for the rollout, through the API server's hiccups
  kubernetes.core.k8s_info:
    kind: Deployment
    namespace: vllm
    name: vllm
  register: deployment
  ignore_errors: true
  until: (deployment | inferops.vllm_dr.rollout_wait_outcome) in ['complete', 'gone']
  retries: 60
  delay: 2
"""

RETURN = r"""
_value:
  description: One of V(complete), V(progressing), V(gone), V(error).
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import wait_outcome


class FilterModule:
    def filters(self):
        return {'rollout_wait_outcome': wait_outcome}
