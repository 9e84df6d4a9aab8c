# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: validation_metrics
short_description: The validation result as a node-exporter textfile
version_added: 0.1.0
description:
  - Writes the validate role's verdict in the Prometheus text format, for node-exporter's textfile collector or a
    Pushgateway. V(vllm_dr_validation_success) is 1 when every check passed, 0 otherwise;
    V(vllm_dr_validation_check_success) has one sample per check (label C(check), the check's name in lower case
    with every other character run replaced by C(_)); V(vllm_dr_validation_last_run_timestamp_seconds) is the run's
    time.
  - V(vllm_dr_validation_last_success_timestamp_seconds) is the run's time when it passed. When it failed, the value
    the previous textfile recorded is kept, so an alert on "no successful drill for N days" still sees the last
    success; it is left out when no run ever passed.
options:
  _input:
    description: The validation result (the fact vllm_dr_validation that the validate role sets).
    type: dict
    required: true
  now:
    description: The run's time, Unix seconds.
    type: float
    required: true
  previous:
    description: The previous textfile's content, or an empty string when there is none.
    type: str
    default: ""
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Write the textfile node-exporter reads
  ansible.builtin.copy:
    content: "{{ vllm_dr_validation | inferops.vllm_dr.validation_metrics(now=now().timestamp(), previous='') }}"
    dest: /var/lib/node_exporter/textfile/vllm_dr.prom
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The textfile, in the Prometheus text exposition format, ending with a newline.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_metrics import MetricsError, render


def validation_metrics(validation, now, previous=''):
    try:
        return render(validation, now, previous)
    except MetricsError as exc:
        raise AnsibleFilterError('validation_metrics: %s' % exc) from exc


class FilterModule:
    def filters(self):
        return {'validation_metrics': validation_metrics}
