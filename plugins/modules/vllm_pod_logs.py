#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_pod_logs
short_description: Count the incident's error lines in the logs of many pods, read side by side in one call
version_added: 0.2.0
description:
  - Reads the log of every pod in O(pods) through the Kubernetes API (C(read_namespaced_pod_log)), several at a time,
    and counts the incident's error lines in them, the way P(inferops.vllm_dr.log_evidence#filter) does (the same
    O(since) and O(patterns)).
  - Each log is counted as soon as it is read and then dropped. The log text, which may hold secrets, never appears
    in the result; only the counts and, per pod, how many lines were read.
  - A pod deleted between listing and reading (the API answers 404) is named in RV(gone), not an error. Any other
    refusal (for example 403 without C(get) on C(pods/log)) fails with one line naming the pod, once every read has
    ended.
  - Only reads; nothing changes, so check mode runs it in full.
author:
  - inferops SRE (@inferops)
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - kubernetes.core.k8s_auth_options
attributes:
  check_mode:
    support: full
    details: The module only reads, so a check-mode run reads and counts exactly as a normal one.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  namespace:
    description:
      - The namespace of the pods.
    type: str
    required: true
  pods:
    description:
      - The names of the pods whose logs are read. A name given twice is read once; an empty list reads nothing.
    type: list
    elements: str
    required: true
  container:
    description:
      - The container whose log is read. Required by the API when a pod has more than one container.
    type: str
  since:
    description:
      - Only lines logged at or after this moment count (ISO 8601, for example V(2024-07-15T03:00:00Z), or epoch
        seconds). Lines are dated by their leading timestamp; a line without one belongs to the line before it in the
        same pod's log. Unset, every line counts.
    type: str
  patterns:
    description:
      - The substrings to count. Unset or empty, the incident's (C(TokenRefreshError),
        C(Invalid token in session state), C(Failed to refresh token), C(Session token mismatch after restore),
        C(Token cache not found or corrupted)).
    type: list
    elements: str
  workers:
    description:
      - How many logs are read at the same time. From 1 to 64.
    type: int
    default: 10
  timeout:
    description:
      - Seconds to wait for each log. More than 0 and at most 86400.
    type: float
    default: 60.0
notes:
  - It needs the same permission as M(kubernetes.core.k8s_log) for a pod, C(get) on C(pods/log) in the namespace.
  - The connection options are the ones of the kubernetes.core modules. The action group
    C(inferops.vllm_dr.kubernetes) holds this module, so they can be given once in C(module_defaults) for
    C(group/inferops.vllm_dr.kubernetes) next to C(group/kubernetes.core.k8s).
seealso:
  - plugin: inferops.vllm_dr.log_evidence
    plugin_type: filter
  - module: kubernetes.core.k8s_log
"""

EXAMPLES = r"""
- name: Count the incident's error lines since the restore, over every replica
  inferops.vllm_dr.vllm_pod_logs:
    kubeconfig: /etc/vllm-dr/kubeconfig
    namespace: vllm
    pods: "{{ pods.resources | map(attribute='metadata.name') | list }}"
    container: vllm
    since: "2024-07-15T03:00:00Z"
  register: logs

- name: The same, with the connection options given once for the kubernetes.core modules and this one
  module_defaults:
    group/kubernetes.core.k8s: "{{ k8s_auth }}"
    group/inferops.vllm_dr.kubernetes: "{{ k8s_auth }}"
  block:
    - name: Find the pods
      kubernetes.core.k8s_info:
        kind: Pod
        namespace: vllm
        label_selectors: [app=vllm]
      register: pods

    - name: Count the refresh failures in their logs
      inferops.vllm_dr.vllm_pod_logs:
        namespace: vllm
        pods: "{{ pods.resources | map(attribute='metadata.name') | list }}"
        container: vllm
        patterns: [TokenRefreshError, invalid_grant]
      register: logs
"""

RETURN = r"""
evidence:
  description:
    - Over all pods read, in the shape P(inferops.vllm_dr.log_evidence#filter) returns. Counts add up over the pods;
      C(first_seen) is the earliest and C(last_seen) the latest over the pods.
  type: dict
  returned: always
  contains:
    since:
      description: O(since) in ISO 8601 UTC, or V(null).
      type: str
      sample: "2024-07-15T03:00:00Z"
    lines_scanned:
      description: Lines logged at or after O(since), over all pods.
      type: int
      sample: 1200
    error_lines:
      description: Matches of the patterns in those lines, over all patterns and pods.
      type: int
      sample: 14
    patterns:
      description: Per pattern, C(count), C(first_seen) and C(last_seen) (ISO 8601 UTC, or V(null)).
      type: dict
      sample:
        TokenRefreshError: {count: 14, first_seen: "2024-07-15T03:02:11Z", last_seen: "2024-07-15T03:09:40Z"}
pods:
  description: Per pod, in the order of O(pods), what was read.
  type: list
  elements: dict
  returned: always
  contains:
    name:
      description: The pod.
      type: str
      sample: vllm-7d9c6b5f4-abcde
    state:
      description: V(read), or V(gone) when the pod no longer existed.
      type: str
      sample: read
    lines:
      description: Lines in its log (V(0) when gone).
      type: int
      sample: 600
    lines_scanned:
      description: Of those, lines logged at or after O(since).
      type: int
      sample: 600
    error_lines:
      description: Matches of the patterns in its log.
      type: int
      sample: 7
gone:
  description: The pods that no longer existed when their log was read.
  type: list
  elements: str
  returned: always
  sample: [vllm-7d9c6b5f4-fghij]
"""

import copy

from ansible_collections.inferops.vllm_dr.plugins.module_utils._log_evidence import chosen_patterns
from ansible_collections.inferops.vllm_dr.plugins.module_utils._pod_logs import (
    MAX_WORKERS,
    PodLogError,
    api_reader,
    read_logs,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import TimestampError, parse_optional
from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

try:
    from kubernetes.client import CoreV1Api
except ImportError:  # AnsibleK8SModule reports the missing library
    CoreV1Api = None


def argument_spec() -> dict:
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        namespace=dict(type='str', required=True),
        pods=dict(type='list', elements='str', required=True),
        container=dict(type='str'),
        since=dict(type='str'),
        patterns=dict(type='list', elements='str'),
        workers=dict(type='int', default=10),
        timeout=dict(type='float', default=60.0),
    )
    return spec


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    if not 1 <= params['workers'] <= MAX_WORKERS:
        module.fail_json(msg=f"workers must be from 1 to {MAX_WORKERS}, not {params['workers']}; set workers to fewer "
                             f"logs read at the same time")
    if not 0 < params['timeout'] <= 86400:
        module.fail_json(msg=f"timeout must be more than 0 and at most 86400 seconds, not {params['timeout']}")
    try:
        since = parse_optional(params['since'], 'since')
    except TimestampError as exc:
        module.fail_json(msg=str(exc))
    try:
        client = get_api_client(module=module)
    except CoreException as exc:
        module.fail_json(msg=str(exc))
    read = api_reader(CoreV1Api(client.client.client), params['namespace'], params['container'], params['timeout'])
    try:
        result = read_logs(read, params['pods'], since, chosen_patterns(params['patterns']), params['workers'])
    except PodLogError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
