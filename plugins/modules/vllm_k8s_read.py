#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_k8s_read
short_description: Check the Kubernetes permissions a run needs and read the objects it relies on, in one call
version_added: 0.2.0
description:
  - Asks the API server one C(SelfSubjectAccessReview) per permission in O(permissions) (every authenticated identity
    may ask), then, only when every one is granted, reads each object of O(reads) as M(kubernetes.core.k8s_info) reads
    it. One module call in place of one M(kubernetes.core.k8s) call for the reviews and one
    M(kubernetes.core.k8s_info) call per read.
  - A permission refused is named in RV(missing), in words as an RBAC rule names it, and nothing is read; the module
    does not fail, so that the caller words the fix. A read the API server refuses or cannot answer fails with one
    line naming the read.
  - Only asks and reads; nothing changes, so check mode runs it in full.
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
    details: The module only asks and reads, so a check-mode run does exactly what a normal one does.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  namespace:
    description:
      - The namespace of every permission and read that names none.
    type: str
    required: true
  permissions:
    description:
      - The permissions to ask for, in order. Each has C(verb) and C(resource), and optionally C(group) (the core
        group when unset), C(subresource), C(namespace) and C(name). With a C(name), a Role that grants the verb only
        for that object (C(resourceNames)) answers yes too.
    type: list
    elements: dict
    default: []
  reads:
    description:
      - The objects to read once every permission is granted, in order. Each has C(key) (the name of its answer in
        RV(resources), unique) and C(kind), and optionally C(api_version) (default V(v1)), C(name) (unset reads every
        object of the kind), C(namespace) and C(label_selectors) (a list, as M(kubernetes.core.k8s_info) takes them).
    type: list
    elements: dict
    default: []
  on_error:
    description:
      - What a permission check or read the API server refuses or cannot answer does. V(fail) fails the task with one
        line naming it. V(return) returns that line in RV(error) and does not fail, for a task that sets C(no_log)
        (C(no_log) hides a failed task's message) and fails in a task of its own.
    type: str
    choices: [fail, return]
    default: fail
notes:
  - It needs the permissions it reads with (C(get) or C(list) on each kind read); asking for O(permissions) needs
    none.
  - The connection options are the ones of the kubernetes.core modules. The action group
    C(inferops.vllm_dr.kubernetes) holds this module, so they can be given once in C(module_defaults) for
    C(group/inferops.vllm_dr.kubernetes) next to C(group/kubernetes.core.k8s).
  - What is read may hold secrets (a ConfigMap's data, a pod template's environment); set C(no_log) on the task when
    it reads them.
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Check the run's permissions and read the workload, its pods and the namespace's quotas
  inferops.vllm_dr.vllm_k8s_read:
    kubeconfig: /etc/vllm-dr/kubeconfig
    namespace: vllm
    permissions:
      - {verb: get, resource: deployments, group: apps, name: vllm}
      - {verb: list, resource: pods}
      - {verb: list, resource: resourcequotas}
    reads:
      - {key: workload, kind: Deployment, api_version: apps/v1, name: vllm}
      - {key: pods, kind: Pod, label_selectors: [app=vllm]}
      - {key: quotas, kind: ResourceQuota}
  register: target
  no_log: true

- name: Fail with the permissions that are missing
  ansible.builtin.fail:
    msg: "missing Kubernetes permissions: {{ target.missing | join('; ') }}"
  when: target.missing | length > 0
"""

RETURN = r"""
allowed:
  description: The API server's answer to each permission of O(permissions), in order.
  type: list
  elements: bool
  returned: always
  sample: [true, false]
missing:
  description: The permissions refused, in words (verb, resource, subresource, group, object name, namespace).
  type: list
  elements: str
  returned: always
  sample: ["list pods in namespace vllm"]
resources:
  description:
    - Per key of O(reads), the objects read, as M(kubernetes.core.k8s_info) returns them in its C(resources) (an
      empty list when none exists), without their C(metadata.managedFields) (the API server's record of which client
      set which field, a large part of a pod that nothing here reads). Empty when a permission is missing.
  type: dict
  returned: always
  sample: {pods: [{kind: Pod, metadata: {name: vllm-0, namespace: vllm}}]}
api_found:
  description: Per key of O(reads), whether the API server serves the kind (as M(kubernetes.core.k8s_info) says).
  type: dict
  returned: always
  sample: {pods: true}
api_server:
  description:
    - The URL of the API server the module talked to, as the connection options resolved it (the C(connection.host)
      of kubernetes.core's cluster information module, without the API discovery that module makes).
  type: str
  returned: success
  sample: https://127.0.0.1:6443
error:
  description: With O(on_error=return), the one line that names the check or read that failed; nothing else is returned.
  type: str
  returned: when a check or read failed (or no client could be made) and O(on_error=return)
  sample: "could not read the Pod objects in namespace vllm: 503 Service Unavailable"
"""

import copy

from ansible_collections.inferops.vllm_dr.plugins.module_utils._k8s_read import K8sReadError, ask
from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.service import K8sService

try:
    from kubernetes.dynamic.exceptions import DynamicApiError
    from urllib3.exceptions import HTTPError as Urllib3Error
except ImportError:  # AnsibleK8SModule reports the missing library before any request
    DynamicApiError = Urllib3Error = CoreException


def argument_spec() -> dict:
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        namespace=dict(type='str', required=True),
        permissions=dict(type='list', elements='dict', default=[]),
        reads=dict(type='list', elements='dict', default=[]),
        on_error=dict(type='str', choices=['fail', 'return'], default='fail'),
    )
    return spec


def api_reason(exc: Exception) -> str:
    """One line for what the API server answered (its status and reason), or the client's error."""
    if isinstance(exc, DynamicApiError) and getattr(exc, 'status', None):
        return f'{exc.status} {getattr(exc, "reason", "") or ""}'.strip()
    return ' '.join(str(exc).split())


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params

    def refuse(text):
        if params['on_error'] == 'return':
            module.exit_json(changed=False, error=text)
        module.fail_json(msg=text)

    try:
        # the client asks the API server its version first: an API server that does not answer fails here
        client = get_api_client(module=module)
    except (CoreException, DynamicApiError, Urllib3Error, OSError) as exc:  # refused, or no answer
        refuse(f'could not reach the Kubernetes API server: {api_reason(exc)}')
    service = K8sService(client, module)

    def review(body):
        try:
            answer = service.find_resource('SelfSubjectAccessReview', 'authorization.k8s.io/v1', fail=True)
            return client.create(answer, body).to_dict().get('status', {}).get('allowed')
        except (CoreException, DynamicApiError, Urllib3Error, OSError) as exc:  # refused, or no answer
            raise K8sReadError(f'could not ask the API server for a permission: {api_reason(exc)}') from exc

    def find(kind, api_version, name, namespace, label_selectors):
        try:
            return service.find(kind, api_version, name=name, namespace=namespace, label_selectors=label_selectors)
        except (CoreException, DynamicApiError, Urllib3Error, OSError) as exc:  # refused, or no answer
            what = f'{kind} {name}' if name else f'the {kind} objects'
            raise K8sReadError(f'could not read {what} in namespace {namespace}: {api_reason(exc)}') from exc

    try:
        result = ask(params['permissions'], params['reads'], params['namespace'], review, find)
    except K8sReadError as exc:
        refuse(str(exc))
    module.exit_json(changed=False, api_server=client.configuration.host, **result)


if __name__ == '__main__':
    main()
