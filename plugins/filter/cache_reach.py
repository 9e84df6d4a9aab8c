# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cache_reach
short_description: The pods to read and purge the token cache in, from the volume that holds it
version_added: 0.2.0
description:
  - Decides, from the Deployment's pod template, how many copies of the token cache there are and which pods hold
    them, so that the runbook reads and purges each copy once instead of once per pod.
  - C(shared) (a PersistentVolumeClaim or a network file system every replica mounts) reads and purges the first pod
    only; C(per_node) (a hostPath) one pod per node; C(restart) (an emptyDir, a generic ephemeral volume, or the
    container's own file system) purges in no pod, since the restart replaces every pod and its cache with it, and
    reads the first pod as evidence; C(per_pod) (any other volume, a subPathExpr) every pod.
  - Where the cache is, is resolved from the container's workingDir, the mount that holds the cache (the file itself
    or the deepest directory above it, compared by path components) and its subPath or subPathExpr; and how O(method)
    reaches it there, with the backup directory on the cache's own volume. What cannot be resolved or reached is
    RV(_value.problem), one line; nothing is guessed.
options:
  _input:
    description: The workload (a Deployment, a StatefulSet), as kubernetes.core.k8s_info returns it.
    type: dict
    required: true
  pods:
    description: The workload's running pods.
    type: list
    elements: dict
    required: true
  cache_path:
    description: The token cache's path inside the container; a relative one is resolved against its workingDir.
    type: str
    required: true
  container:
    description: The name of the vLLM container.
    type: str
    required: true
  method:
    description: The purge method (C(vllm_dr_k8s_purge_method)) whose reach is decided.
    type: str
    default: exec
    choices: [exec, init_container, velero_hook]
  pod_backup_dir:
    description:
      - Where the purge keeps its backups in the container (C(vllm_dr_k8s_pod_backup_dir)); it must be on the
        volume that holds the cache. Empty for beside the cache, C(<cache directory>/.vllm_dr_backups).
    type: str
    default: ''
  kind:
    description:
      - The workload's kind, for the messages; a StatefulSet's C(volumeClaimTemplates) are the volumes of its pods
        (a PersistentVolumeClaim per pod, every pod's own copy of the cache).
    type: str
    default: Deployment
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The pods that hold a copy of the token cache
  ansible.builtin.set_fact:
    reach: "{{ deployment.resources[0] | inferops.vllm_dr.cache_reach(pods, cache_path='/var/lib/vllm/token_cache.db',
                                                                       container='vllm') }}"
"""

RETURN = r"""
_value:
  description: The decision.
  type: dict
  contains:
    strategy:
      description: One of C(shared), C(per_node), C(restart), C(per_pod).
      type: str
    volume:
      description: The name of the volume that holds the cache, none when it is on the container's file system.
      type: str
    kind:
      description: The volume's kind (C(persistentVolumeClaim), C(emptyDir), ...).
      type: str
    inspect:
      description: The names of the pods to read the cache in.
      type: list
      elements: str
    purge:
      description: The names of the pods to purge the cache in; empty for C(restart).
      type: list
      elements: str
    reason:
      description: One line that says why.
      type: str
    location:
      description: The cache's absolute path inside the container.
      type: str
    path_in_volume:
      description: The cache's path inside its volume (the subPath or subPathExpr joined to the rest); empty when
        the volume itself is the file, none on the container's file system.
      type: str
    where:
      description: The cache's place in words, for a report.
      type: str
    init:
      description: For C(init_container), the init container's C(mount) (the same volume and subPath) and the
        C(env) entries its subPathExpr reads.
      type: dict
    backup_dir:
      description: The backup directory inside the purging container, on the cache's volume; none when nothing is
        purged inside a container.
      type: str
    problem:
      description: None, or the one line why the cache cannot be resolved or reached by O(method).
      type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import cache_reach as _cache_reach
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import KINDS


def cache_reach(workload, pods, cache_path, container, method='exec', pod_backup_dir='', kind='Deployment'):
    # a kind whose pods come from more than one template (a LeaderWorkerSet) has a reach of its own
    reach = KINDS[kind].reach if kind in KINDS and KINDS[kind].reach else _cache_reach
    return reach(workload, pods, cache_path, container, method=method, pod_backup_dir=pod_backup_dir or '', kind=kind)


class FilterModule:
    def filters(self):
        return {'cache_reach': cache_reach}
