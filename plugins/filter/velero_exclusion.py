# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: velero_exclusion
short_description: The changes that keep the token cache's volume out of Velero backups, or let it back in
version_added: 0.2.0
description:
  - Finds the pod volume that holds the token cache in the container, and decides every change before any is made.
  - C(annotation), for Velero file-system backups (restic, kopia) - the volume is added to the pod template's
    C(backup.velero.io/backup-volumes-excludes), after the entries already there; the volumes this collection added
    are recorded in C(vllm-dr.inferops.io/backup-volumes-excludes), so removal takes out only those.
  - C(resource_policy), for snapshot backups (volume snapshots, CSI snapshots, data movement) - the cache's PVC gets
    the label C(vllm-dr.inferops.io/token-cache=true) and a Velero resource-policy ConfigMap gets, as its first rule,
    C(pvcLabels) on that label with C(action.type=skip). An existing ConfigMap keeps its rules; removal takes out only
    that rule, and deletes the ConfigMap only when this collection created it and it is left empty.
  - Fails, naming the fix, when no volume holds the cache or it is on a hostPath volume.
options:
  _input:
    description: The Deployments of the workload's namespace, as the API server returns them.
    type: list
    elements: dict
    required: true
  pvcs:
    description: The PersistentVolumeClaims of the workload's namespace.
    type: list
    elements: dict
  config_maps:
    description: The ConfigMaps of Velero's namespace.
    type: list
    elements: dict
  selector:
    description: Label selector (V(key=value,...)) of the workload's pods; the Deployment is the one whose pods it selects.
    type: str
    default: app=vllm
  deployment:
    description: The Deployment's name; empty picks it by O(selector).
    type: str
    default: ""
  container:
    description: The container that holds the cache.
    type: str
    default: vllm
  cache_path:
    description: The token cache file in the container.
    type: str
    required: true
  present:
    description: V(true) to exclude the volume, V(false) to remove the exclusion.
    type: bool
    default: true
  exclusions:
    description: Which exclusions, V(annotation), V(resource_policy) or both.
    type: list
    elements: str
    default: [annotation, resource_policy]
  policy_name:
    description: The resource-policy ConfigMap's name.
    type: str
    default: vllm-dr-token-cache
  velero_namespace:
    description: The namespace Velero runs in, where its resource-policy ConfigMaps live.
    type: str
    default: velero
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Decide the exclusion
  ansible.builtin.set_fact:
    plan: >-
      {{ deployments.resources | inferops.vllm_dr.velero_exclusion(pvcs.resources, velero_config_maps.resources,
                                                                    cache_path='/var/lib/vllm/token_cache.db') }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    deployment:
      description: The Deployment's name.
      type: str
    volume:
      description: The cache's volume, with C(name), C(type), C(mount_path) and C(claim).
      type: dict
    annotation:
      description: C(patch) for the pod template's annotations (V(null) deletes one), C(before), C(after), C(changed).
      type: dict
    label:
      description: C(patch) for the PVC's labels and C(changed); V(null) when no resource policy applies.
      type: dict
    policy:
      description: C(action) (V(none), V(create), V(replace), V(delete)), C(definition), C(before), C(after), C(changed).
      type: dict
    notes:
      description: Why an exclusion asked for does not apply to this volume.
      type: list
      elements: str
    diff:
      description: One line per change, without the objects' contents.
      type: list
      elements: str
    changed:
      description: Whether anything changes.
      type: bool
"""

# the name the roles call is inferops.vllm_dr._velero_exclusion; this one stays until they all do
from ansible_collections.inferops.vllm_dr.plugins.filter.__internal import velero_exclusion


class FilterModule:
    def filters(self):
        return {'velero_exclusion': velero_exclusion}
