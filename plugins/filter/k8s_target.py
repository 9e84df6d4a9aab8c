# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_target
short_description: The Kubernetes target a run acts on, from the API server's raw reads
version_added: 0.3.0
description:
  - The one model of the workload the roles act on. They read the workload, the objects between it and its pods and
    the pods, and hand what kubernetes.core.k8s_info returned to this filter; it decides the rest.
  - The workload's own pods are found through the owner chain, matched by uid (a Deployment's through its
    ReplicaSets, a LeaderWorkerSet's through its StatefulSets, a StatefulSet's directly), so that a canary on the same
    selector is never taken. Only pods in phase C(Running) not being deleted count.
  - The rollout is finished as C(kubectl rollout status) judges it (the latest spec observed, every wanted replica
    updated and available) and no pod of an older revision is left.
  - With O(cache_path), the token cache's reach, the pods the cache is read and purged in, from the volume that
    holds it (the path resolved against the container's workingDir and the mount's subPath).
  - The preconditions of a change of the workload, one line each (paused, no running pod, a pod of the diagnosis
    replaced since, no room in a ResourceQuota for the restart's surge).
  - Supported kinds (O(kind)) are C(Deployment), C(StatefulSet) and C(LeaderWorkerSet) (leaderworkerset.x-k8s.io/v1).
    Another kind is refused in one line naming those supported, and so is a workload another resource controls (an
    operator's, such as KServe's InferenceService).
  - With O(kind=auto) the kind is read from the running pods (a pod labelled with a LeaderWorkerSet's name is that
    LeaderWorkerSet's, else its controller decides, a ReplicaSet's pod being a Deployment's); pods of a kind not
    supported (a DaemonSet, a Job, a bare pod) are refused in one line (RV(_value.refused)).
options:
  _input:
    description:
      - The registered result of kubernetes.core.k8s_info's read of the workload by name (failed or not), or the
        workload itself. None when it is not read yet; RV(_value.workloads) then names the workloads that own the
        running pods.
      - Or the registered result of M(inferops.vllm_dr.vllm_k8s_read) whose O(inferops.vllm_dr.vllm_k8s_read#module:reads)
        read the workload, what lies between it and its pods and the pods under the keys C(workload), C(owners) and
        C(pods), each taken from it in place of O(owners) and O(pods). A failed one (only C(error) returned)
        finds the workload's read an error.
    type: raw
    required: true
  owners:
    description: The objects between the workload and its pods (a Deployment's ReplicaSets), as k8s_info returns them.
    type: list
    elements: dict
    default: []
  pods:
    description: The pods the selector or the namespace lists, as k8s_info returns them.
    type: list
    elements: dict
    default: []
  namespace:
    description: The workload's namespace, for the messages.
    type: str
    required: true
  kind:
    description: The workload's kind, or C(auto) to read it from the running pods' owner chain.
    type: str
    default: Deployment
  cache_path:
    description: The token cache's path inside the container; without it no cache reach is decided.
    type: str
  container:
    description: The name of the vLLM container.
    type: str
    default: vllm
  method:
    description: The purge method whose cache reach is decided.
    type: str
    default: exec
  pod_backup_dir:
    description: Where the purge keeps its backups in the container (C(vllm_dr_k8s_pod_backup_dir)).
    type: str
    default: ''
  cache_reach:
    description: C(auto) decides the pods that hold a copy of the cache from its volume; C(every_pod) takes each pod.
    type: str
    default: auto
    choices: [auto, every_pod]
  quotas:
    description: The namespace's ResourceQuotas.
    type: list
    elements: dict
    default: []
  limit_ranges:
    description: The namespace's LimitRanges.
    type: list
    elements: dict
    default: []
  expected_pods:
    description: The pods an earlier phase reached; each no longer running is a precondition that fails.
    type: list
    elements: str
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The target, from the reads
  ansible.builtin.set_fact:
    target: >-
      {{ deployment_read | inferops.vllm_dr.k8s_target(replicasets.resources, pods.resources, namespace='vllm',
                                                       cache_path='/var/lib/vllm/token_cache.db') }}
"""

RETURN = r"""
_value:
  description: The target.
  type: dict
  contains:
    kind:
      description: The workload's kind (with O(kind=auto), the one the running pods' owner chain names; none if none).
      type: str
    api_version:
      description: The API version of the kind (C(apps/v1)); none when the kind is not supported.
      type: str
    resource:
      description: The kind's resource, plural (C(deployments)), as RBAC names it; none when the kind is not supported.
      type: str
    group:
      description: The kind's API group (C(apps)), as RBAC names it; none when the kind is not supported.
      type: str
    refused:
      description:
        - None, or the one line why the runbook does not act on the workload (its kind is not supported, another
          resource controls it).
      type: str
    restart:
      description:
        - How the kind's restart rolls out, C(strategy) (C(RollingUpdate), C(Recreate), C(OnDelete)), C(partition) (a
          StatefulSet's, or none) and C(stay_old), the pods a restart leaves at their revision.
      type: dict
    name:
      description: The workload's name, none unless it was found.
      type: str
    found:
      description: C(found), C(gone) (the read answered with nothing) or C(error) (the read failed, or none was made).
      type: str
    selected:
      description: C(count), how many pods were handed in, and C(running), the names of the running ones.
      type: dict
    workloads:
      description: The names of the workloads of the kind that own the running pods, through the owner chain.
      type: list
      elements: str
    pods:
      description: The names of the workload's own running pods, in name order.
      type: list
      elements: str
    pod_uids:
      description: Each of those pods' uid, by name.
      type: dict
    stable_pod_names:
      description:
        - Whether a pod of this kind that is replaced comes back under its name (a StatefulSet's, a
          LeaderWorkerSet's), so that only its uid tells the replacement.
      type: bool
    rollout:
      description:
        - C(finished), C(complete) (by the workload's status alone), C(old_pods) (of an older revision),
          C(paused), C(unfinished) (a rollout to wait for before the pods are taken), C(wait) (C(complete),
          C(progressing), C(gone) or C(error), what this read tells a rollout wait) and C(status) (why not finished).
      type: dict
    cache_reach:
      description: Which pods the token cache is read and purged in, from the volume that holds it; none without
        O(cache_path).
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
    preconditions:
      description: Every reason a change of the workload cannot run to its end, one line each.
      type: list
      elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target as _k8s_target


def k8s_target(read, owners=None, pods=None, namespace='', kind='Deployment', cache_path=None, container='vllm',
               method='exec', pod_backup_dir='', cache_reach='auto', expected_pods=None, quotas=None,
               limit_ranges=None):
    return _k8s_target(read, owners or [], pods or [], namespace=namespace, kind=kind, cache_path=cache_path,
                       container=container, method=method, pod_backup_dir=pod_backup_dir or '',
                       cache_reach_mode=cache_reach, expected_pods=expected_pods, quotas=quotas or [],
                       limit_ranges=limit_ranges or [])


class FilterModule:
    def filters(self):
        return {'k8s_target': k8s_target}
