#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_pod_token_cache
short_description: Read or purge the token cache inside many pods at once, each backup copied to the controller and checked
version_added: 0.1.0
description:
  - Runs M(inferops.vllm_dr.vllm_token_cache_info) (a read) or M(inferops.vllm_dr.vllm_token_cache) (for example
    O(inferops.vllm_dr.vllm_token_cache#module:state=absent), the purge) with O(module_args) inside every pod in
    O(pods), O(parallel) pods at a time. In each pod the module does what it does on a host; a purge copies the cache
    and its sidecars to the backup directory on the pod's own volume before it removes them.
  - As soon as a pod's module returns, each backup it wrote is copied to O(dest) on the controller, into
    C(<namespace>_<pod>/) (the layout the collection's C(dr_rollback.yml) playbook reads), with mode C(0600). A copy
    is kept only when its SHA-256 is the one the module reported for the file it wrote; otherwise nothing is kept and
    the copy counts as failed. The backup on the pod's volume is never removed.
  - Each pod is reached the way a task delegated to it would be, through the C(kubernetes.core.kubectl) connection
    with the pod's own inventory variables (C(ansible_kubectl_*), C(ansible_python_interpreter)); the roles add one
    inventory host per pod (the C(k8s_target) role).
  - A pod whose module gives no result (deleted or replaced meanwhile, so that C(kubectl exec) finds no pod) is
    reported in RV(pods) with C(module_stderr), and a copy that fails in RV(copies) with C(failed); neither fails the
    task, so that the caller can judge them once every other pod's backup is safe. A pod where the module itself
    fails (for example a cache that is not SQLite) fails the task, once every pod has ended.
  - This module is the controller side (an action plugin); it runs no code of its own on a host.
author:
  - inferops SRE (@inferops)
requirements:
  - kubectl on the controller, as for the C(kubernetes.core.kubectl) connection
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Each pod's module runs in check mode and reports what it would do; nothing is copied.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  pods:
    description:
      - The inventory hosts of the pods, each reached through the C(kubernetes.core.kubectl) connection.
      - The results come back in this order. An empty list runs nothing.
    type: list
    elements: str
    required: true
  module:
    description:
      - The module to run in each pod.
    type: str
    required: true
    choices: [vllm_token_cache, vllm_token_cache_info]
  module_args:
    description:
      - The module's options, the same for every pod. A relative O(inferops.vllm_dr.vllm_token_cache#module:path) is
        resolved against the container's working directory, as C(kubectl exec) resolves it.
    type: dict
    required: true
  dest:
    description:
      - The run's backup directory on the controller. Each pod's backups go to C(<dest>/<namespace>_<pod>/).
      - Required with O(module=vllm_token_cache), which may write backups.
      - It is made (mode V(0700)) when missing, and a file is written in it and removed before any pod is worked on;
        when that fails the task fails and no pod's cache is touched. In check mode it is neither made nor written.
    type: path
  parallel:
    description:
      - How many pods are worked on at the same time, each with its own C(kubectl exec). From 1 to 64.
      - V(1) runs the pods one after the other, in the order of O(pods). Give V(1) for a purge of pods that reach one
        file between them (a volume they share), where two purges would race.
    type: int
    default: 8
notes:
  - It needs what a task delegated to each pod needs, C(create) on C(pods/exec) in the pods' namespace.
seealso:
  - module: inferops.vllm_dr.vllm_token_cache
  - module: inferops.vllm_dr.vllm_token_cache_info
"""

EXAMPLES = r"""
- name: Read the token cache inside each pod, 8 at a time
  inferops.vllm_dr.vllm_pod_token_cache:
    pods: "{{ groups['vllm_dr_pods'] }}"
    module: vllm_token_cache_info
    module_args:
      path: token_cache.db
      restored_at: "2024-07-15T03:00:00Z"
  register: caches

- name: Purge it, keeping the backups on the pods' volumes and on the controller
  inferops.vllm_dr.vllm_pod_token_cache:
    pods: "{{ groups['vllm_dr_pods'] }}"
    module: vllm_token_cache
    module_args:
      path: token_cache.db
      state: absent
      backup_dir: /var/lib/vllm/dr-backups/20240715T031500Z
    dest: /var/backups/vllm-dr/20240715T031500Z
    parallel: 8
  register: purge
"""

RETURN = r"""
pods:
  description:
    - One result per pod, in the order of O(pods), as the module returned it, with C(item) the pod's inventory host.
    - A pod with no module result has C(failed), C(msg) and the output in C(module_stdout) and C(module_stderr).
  type: list
  elements: dict
  returned: always
  sample:
    - item: lab/vllm/vllm-0
      changed: true
      removed_files: [/var/lib/vllm/token_cache.db]
      backup_files: [/var/lib/vllm/dr-backups/20240715T031500Z/token_cache.db.20240715T031500.000000Z.bak]
copies:
  description:
    - One result per backup copied (or not) to O(dest), pod by pod. C(item) holds the pod's result and the backup's
      path on the pod. A copy kept has C(dest) and C(checksum) (SHA-256); one that failed has C(failed) and C(msg),
      and the backup stays on the pod's volume.
  type: list
  elements: dict
  returned: always
  sample:
    - dest: /var/backups/vllm-dr/20240715T031500Z/vllm_vllm-0/token_cache.db.20240715T031500.000000Z.bak
      checksum: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
      changed: true
"""
