# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of vllm_pod_token_cache (documented in plugins/modules/vllm_pod_token_cache.py): builds the
token cache module once, opens a kubernetes.core.kubectl connection per pod from the pod's inventory variables, and
hands both to _pod_token_cache.run_in_pods, which runs them `parallel` pods at a time.

Two uses of ansible-core beyond the documented action plugin API, both here only, tested on ansible-core 2.16 to 2.21:
- ActionBase._configure_module builds the module's payload (AnsiballZ) with the pod's interpreter, as _execute_module
  does for a pipelined module; it returns (style, shebang, data, path) up to 2.18 and (_BuiltModule, path) from 2.19.
- the connection is made as the task executor makes a delegated task's: connection_loader.get with the play context,
  then set_options with the pod's variables."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import connection_loader
from ansible.utils.display import Display

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._pod_token_cache import run_in_pods, unwritable

CONNECTION = 'kubernetes.core.kubectl'
MODULES = ('vllm_token_cache', 'vllm_token_cache_info')

display = Display()

ARGUMENT_SPEC = {
    'pods': {'type': 'list', 'elements': 'str', 'required': True},
    'module': {'type': 'str', 'required': True, 'choices': list(MODULES)},
    'module_args': {'type': 'dict', 'required': True},
    'dest': {'type': 'path'},
    'parallel': {'type': 'int', 'default': 8},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if not 1 <= args['parallel'] <= 64:
            raise AnsibleActionFail(f"parallel is {args['parallel']}; give 1 to 64 pods at a time")
        if args['module'] == 'vllm_token_cache' and not args['dest']:
            raise AnsibleActionFail('vllm_token_cache writes backups on the pods: give dest, the directory on the '
                                    'controller they are copied to')
        pods = args['pods']
        result.update(changed=False, pods=[], copies=[])
        if not pods:
            return result
        # in check mode no backup is written, so nothing is made on the controller either
        problem = unwritable(args['dest']) if args['dest'] and not self._task.check_mode else ''
        if problem:
            raise AnsibleActionFail(f'{problem}; give dest a directory the controller can write (nothing was purged)')
        hostvars = task_vars['hostvars']
        variables = {pod: self._pod_variables(hostvars, pod) for pod in pods}
        interpreters = {str(found.get('ansible_python_interpreter', '')) for found in variables.values()}
        if len(interpreters) != 1 or '' in interpreters:
            raise AnsibleActionFail('the pods must share one ansible_python_interpreter (the roles give each '
                                    'vllm_dr_k8s_python)')
        interpreter, payload = self._payload(task_vars, interpreters.pop(), f"inferops.vllm_dr.{args['module']}",
                                             dict(args['module_args']))
        connections = {pod: self._pod_connection(found) for pod, found in variables.items()}

        def destination(pod: str, path: str) -> str:
            found = variables[pod]
            return os.path.join(args['dest'], f"{found['ansible_kubectl_namespace']}_{found['ansible_kubectl_pod']}",
                                os.path.basename(path))

        results, copies = run_in_pods(
            pods,
            run=lambda pod: connections[pod].exec_command(interpreter, in_data=payload),
            copy=lambda pod, source, target: connections[pod].fetch_file(source, target),
            destination=destination,
            limit=args['parallel'])
        for found in results:
            for warning in found.pop('warnings', None) or []:
                display.warning(f"{found['item']}: {warning}")
        result.update(pods=results, copies=copies, changed=any(found.get('changed') for found in results))
        refused = [found for found in results if found.get('failed') and 'module_stderr' not in found]
        if refused:
            result.update(failed=True, msg='; '.join(f"{args['module']} in {found['item']} failed: "
                                                     f"{found.get('msg', 'no message')}" for found in refused))
        return result

    @staticmethod
    def _pod_variables(hostvars, pod: str) -> dict:
        if pod not in hostvars:
            raise AnsibleActionFail(f'{pod} is not an inventory host: the pods are added by '
                                    'inferops.vllm_dr.k8s_target (tasks_from: discover)')
        found = hostvars[pod]
        names = [name for name in found if name.startswith('ansible_kubectl_')] + ['ansible_python_interpreter']
        picked = {name: found[name] for name in names if name in found}
        if not picked.get('ansible_kubectl_pod') or not picked.get('ansible_kubectl_namespace'):
            raise AnsibleActionFail(f'{pod} has no ansible_kubectl_pod and ansible_kubectl_namespace: the pods are '
                                    'added by inferops.vllm_dr.k8s_target (tasks_from: discover)')
        return picked

    def _pod_connection(self, variables: dict):
        connection = connection_loader.get(CONNECTION, self._play_context, None)
        connection.set_options(var_options=variables)
        return connection

    def _payload(self, task_vars: dict, interpreter: str, module: str, module_args: dict) -> tuple:
        """(the command that runs `module`, its payload), for a pod whose Python is `interpreter`."""
        pod_vars = dict(task_vars, ansible_python_interpreter=interpreter)
        self._update_module_args(module, module_args, pod_vars)
        built = self._configure_module(module_name=module, module_args=module_args, task_vars=pod_vars)
        if isinstance(built[0], str):  # ansible-core up to 2.18: (style, shebang, data, path)
            shebang, data = built[1], built[2]
        else:  # from 2.19: (_BuiltModule, path)
            shebang, data = built[0].shebang, built[0].b_module_data
        return shebang.replace('#!', '', 1).strip(), data
