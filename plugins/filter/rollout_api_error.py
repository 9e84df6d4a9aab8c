# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_api_error
short_description: What a failed call to the API server says, without the object it carried
version_added: 0.1.0
description:
  - The HTTP status and reason when the API server answered, else the first line of the error (a connection refused,
    a timeout), at most 200 characters. The body sent or answered is left out, so a Deployment's pod template (its
    env values) never reaches a message.
  - Its companions are P(inferops.vllm_dr.k8s_target#filter) and P(inferops.vllm_dr.rollout_status#filter).
options:
  _input:
    description: The registered result of a failed kubernetes.core module call.
    type: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Fail when the API server refused the restart
  ansible.builtin.fail:
    msg: "restarting Deployment vllm failed: {{ restart | inferops.vllm_dr.rollout_api_error }}"
  when: restart is failed
"""

RETURN = r"""
_value:
  description: One line.
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import api_error


class FilterModule:
    def filters(self):
        return {'rollout_api_error': api_error}
