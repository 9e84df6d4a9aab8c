# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: detection_metrics
short_description: A detection run's verdict as a node-exporter textfile
version_added: 0.1.0
description:
  - Writes the verdict of P(inferops.vllm_dr.detection_verdict#filter) in the Prometheus text format, for
    node-exporter's textfile collector. V(vllm_dr_detection_stale) is 1 when the probe answered C(stale_token),
    V(vllm_dr_detection_inconclusive) is 1 when it gave no usable answer, V(vllm_dr_detection_repair_started) is 1
    when the run started the repair, V(vllm_dr_detection_last_run_timestamp_seconds) is the run's time.
  - The alerting rules of the collection fire on a stale detection and on a detection job that stopped running.
options:
  _input:
    description: The verdict.
    type: dict
    required: true
  now:
    description: The run's time, Unix seconds.
    type: float
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Write the detection metrics
  ansible.builtin.copy:
    content: "{{ detection | inferops.vllm_dr.detection_metrics(now=now().timestamp()) }}"
    dest: /var/lib/node_exporter/textfile_collector/vllm_dr_detect.prom
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The textfile.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._detection import DetectionError, render


def detection_metrics(result, now):
    try:
        return render(result, now)
    except DetectionError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {'detection_metrics': detection_metrics}
