# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: kubectl_logs_argv
short_description: One kubectl logs command for the logs of every replica
version_added: 0.2.0
description:
  - The argv of one C(kubectl logs --selector ... --prefix --max-log-requests N) that reads the logs of every pod given,
    side by side, instead of one module run per pod. The selector is narrowed to the pods' ReplicaSets (their
    C(pod-template-hash)), so another Deployment on the same selector is left out.
  - The connection options become kubectl flags only when none is a secret (C(kubeconfig) file, C(context), C(host),
    C(ca_cert), C(client_cert), C(client_key), C(validate_certs)). With a bearer token (C(api_key)), an inline
    kubeconfig or any other option the result is none, and the caller reads each pod through the API instead.
options:
  _input:
    description: The connection options of kubernetes.core (vllm_dr_k8s_auth).
    type: dict
    required: true
  namespace:
    description: The namespace.
    type: str
    required: true
  selector:
    description: The label selector of the pods.
    type: str
    required: true
  pods:
    description: The pods whose logs are read, as kubernetes.core.k8s_info returns them.
    type: list
    elements: dict
    required: true
  container:
    description: The container whose log is read.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Read the logs of every replica in one call
  ansible.builtin.command:
    argv: "{{ vllm_dr_k8s_auth | inferops.vllm_dr.kubectl_logs_argv(namespace='vllm', selector='app=vllm', pods=pods,
                                                                    container='vllm') }}"
  changed_when: false
"""

RETURN = r"""
_value:
  description: The argv, or none when the connection options cannot be given to kubectl without a secret.
  type: list
  elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._kubectl_logs import kubectl_logs_argv as _argv


def kubectl_logs_argv(auth, namespace, selector, pods, container):
    return _argv(auth, namespace, selector, pods, container)


class FilterModule:
    def filters(self):
        return {'kubectl_logs_argv': kubectl_logs_argv}
