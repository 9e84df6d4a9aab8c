# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which pods the runbook must reach to read and purge the token cache, from the volume that holds it.

The one place that decides it. The kind of volume tells how many copies of the cache there are:
- shared: a volume every replica of the Deployment mounts (a PersistentVolumeClaim, a network file system): one copy,
  read and purged once, in the first pod.
- per_node: a hostPath: one copy per node, read and purged in one pod of each node.
- restart: the pod's own storage that dies with the pod (an emptyDir, a generic ephemeral volume, or no volume at all:
  the container's own file system). The restart replaces every pod and with it every copy: the restart is the purge,
  no exec is needed, and nothing that would survive the restart is deleted (so there is nothing to back up). The
  diagnosis still reads one copy, as evidence of what the restart discards.
- per_pod: anything else (a CSI volume, a subPathExpr that may name a directory per pod, a relative path with no
  working directory to resolve it): every pod, as before.
"""

from __future__ import annotations

import posixpath

SHARED_KINDS = frozenset(('persistentVolumeClaim', 'nfs', 'cephfs', 'glusterfs', 'azureFile', 'cinder', 'iscsi',
                          'rbd', 'fc', 'portworxVolume', 'quobyte', 'storageos', 'flocker'))
POD_LIFETIME_KINDS = frozenset(('emptyDir', 'ephemeral'))


def cache_location(container: dict, cache_path: str) -> str | None:
    """The cache's absolute path inside the container; a relative one is resolved against its workingDir."""
    if posixpath.isabs(cache_path):
        return posixpath.normpath(cache_path)
    working_dir = container.get('workingDir') or ''
    return posixpath.normpath(posixpath.join(working_dir, cache_path)) if posixpath.isabs(working_dir) else None


def cache_mount(container: dict, location: str) -> dict | None:
    """The volume mount that holds `location`: the deepest mountPath above it."""
    holding = [mount for mount in container.get('volumeMounts') or []
               if location.startswith(posixpath.normpath(mount['mountPath']).rstrip('/') + '/')]
    return max(holding, key=lambda mount: len(posixpath.normpath(mount['mountPath'])), default=None)


def container_cache_mount(containers: list, container_name: str, cache_path: str) -> dict | None:
    """The volume mount of the named container that holds the cache (None: no such container, or no volume holds it)."""
    container = next((c for c in containers or [] if c.get('name') == container_name), None)
    location = cache_location(container, cache_path) if container else None
    return cache_mount(container, location) if location else None


def volume_kind(volume: dict) -> str:
    kinds = [key for key in volume if key != 'name']
    return kinds[0] if len(kinds) == 1 else 'unknown'


def _first_pod_per_node(pods: list) -> list:
    chosen = {}
    for pod in pods:
        chosen.setdefault(pod.get('spec', {}).get('nodeName') or '', pod['metadata']['name'])
    return list(chosen.values())


def cache_reach(deployment: dict, pods: list, cache_path: str, container_name: str) -> dict:
    """{strategy, volume, kind, inspect, purge, reason}: the pod names to read the cache in, and to purge it in."""
    spec = deployment.get('spec', {}).get('template', {}).get('spec', {})
    container = next((c for c in spec.get('containers') or [] if c.get('name') == container_name), {})
    names = [pod['metadata']['name'] for pod in pods]
    location = cache_location(container, cache_path)
    mount = cache_mount(container, location) if location else None
    volume = next((v for v in spec.get('volumes') or [] if mount and v.get('name') == mount['name']), None)
    kind = volume_kind(volume) if volume else None

    def reach(strategy, inspect, purge, reason):
        return {'strategy': strategy, 'volume': mount['name'] if mount else None, 'kind': kind,
                'inspect': inspect, 'purge': purge, 'reason': reason}

    if location is None:
        return reach('per_pod', names, names,
                     f'{cache_path} is relative and container {container_name} names no workingDir: every pod')
    if mount is None:
        return reach('restart', names[:1], [],
                     f'{location} is on the container\'s own file system, gone with the pod at the restart')
    if mount.get('subPathExpr'):
        return reach('per_pod', names, names,
                     f'volume {mount["name"]} is mounted with subPathExpr (a directory per pod, maybe): every pod')
    if kind in POD_LIFETIME_KINDS:
        return reach('restart', names[:1], [], f'{kind} volume {mount["name"]} is gone with its pod at the restart')
    if kind in SHARED_KINDS:
        return reach('shared', names[:1], names[:1],
                     f'{kind} volume {mount["name"]} is the same for every replica: one copy')
    if kind == 'hostPath':
        per_node = _first_pod_per_node(pods)
        return reach('per_node', per_node, per_node, f'hostPath volume {mount["name"]}: one copy per node')
    return reach('per_pod', names, names, f'{kind} volume {mount["name"]}: every pod')
