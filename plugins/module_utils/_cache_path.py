# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where the token cache really is for a container of a pod template: the path the container sees, the volume mount
that holds it, and where that is inside the volume.

The one place that resolves it. The cache reach (plugin_utils/_cache_reach.py: exec, the init container, the
restart), the Velero hook, the audit and dr_harden (module_utils/_velero.py) all read this resolution; a path it
cannot resolve raises CachePathError with one line that names the problem and the fix, and nobody guesses instead.
- the path: an absolute vllm_dr_cache_path as it is; a relative one joined to the container's workingDir (with no
  workingDir the image's own decides, which the API server does not know: refused).
- the mount: the mountPath that is the cache file itself or the deepest directory above it, compared path component
  by path component (/var/lib/vl holds nothing of /var/lib/vllm), never as strings.
- inside the volume: the mount's subPath (or subPathExpr, kept as the expression: the kubelet expands it from the
  container's environment, per pod) joined to what follows the mountPath.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import posixpath
import re

# the volume sources whose content the kubelet projects read-only, whatever the mount says
READ_ONLY_KINDS = frozenset(('configMap', 'secret', 'downwardAPI', 'projected'))
_EXPR_VARIABLE = re.compile(r'\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)')


class CachePathError(ValueError):
    """The cache's place cannot be resolved from the pod template; the message is the one line the run prints."""


def parts(path: str) -> tuple:
    """The path's components: '/var/lib/' and '/var//lib' are ('var', 'lib'), '/' is ()."""
    return tuple(part for part in posixpath.normpath(path or '/').split('/') if part)


def holds(mount_path: str, location: str) -> bool:
    """Whether a mount at mount_path holds location: the same path, or a directory above it."""
    mount, path = parts(mount_path), parts(location)
    return path[:len(mount)] == mount


def holding_mount(mounts, location: str) -> dict | None:
    """The volume mount that holds location: the deepest by path components (the kubelet mounts the deeper one over
    the shallower)."""
    found = [mount for mount in mounts or [] if holds(mount.get('mountPath') or '', location)]
    return max(found, key=lambda mount: len(parts(mount['mountPath'])), default=None)


def volume_kind(volume: dict) -> str:
    kinds = [key for key in volume if key != 'name']
    return kinds[0] if len(kinds) == 1 else 'unknown'


def resolve(pod_spec: dict, container_name: str, cache_path: str, owner: str = 'the pod template') -> dict:
    """{container, location, mount, volume, kind, source, mount_path, sub_path, sub_path_expr, path_in_volume,
    file_mount, read_only}; mount and what follows are None when the cache is on the container's own file system.
    CachePathError when it cannot be resolved."""
    containers = [item for item in pod_spec.get('containers') or [] if item.get('name') == container_name]
    if not containers:
        raise CachePathError('%s has no container %s; set vllm_dr_k8s_container to one of: %s'
                             % (owner, container_name,
                                ', '.join(item.get('name', '?') for item in pod_spec.get('containers') or [])
                                or 'none'))
    container = containers[0]
    if not cache_path:
        raise CachePathError('vllm_dr_cache_path is empty; set it to the token cache\'s path in container %s'
                             % container_name)
    working_dir = container.get('workingDir') or ''
    if posixpath.isabs(cache_path):
        location = posixpath.normpath(cache_path)
    elif posixpath.isabs(working_dir):
        location = posixpath.normpath(posixpath.join(working_dir, cache_path))
    else:
        raise CachePathError('vllm_dr_cache_path %s is relative and container %s of %s names no workingDir, so '
                             'where the image starts it decides and the API server does not say; set '
                             'vllm_dr_cache_path to the absolute path' % (cache_path, container_name, owner))
    resolved = {'container': container_name, 'location': location, 'mount': None, 'volume': None, 'kind': None,
                'source': None, 'mount_path': None, 'sub_path': None, 'sub_path_expr': None, 'path_in_volume': None,
                'file_mount': False, 'read_only': False}
    mount = holding_mount(container.get('volumeMounts'), location)
    if mount is None:
        return resolved
    volume = next((item for item in pod_spec.get('volumes') or [] if item.get('name') == mount['name']), None)
    if volume is None:
        raise CachePathError('container %s of %s mounts volume %s at %s, but the pod template has no volume of that '
                             'name; fix the manifest' % (container_name, owner, mount['name'], mount['mountPath']))
    kind = volume_kind(volume)
    below = parts(location)[len(parts(mount['mountPath'])):]
    sub_path = mount.get('subPathExpr') or mount.get('subPath') or ''
    source = volume.get(kind) if isinstance(volume.get(kind), dict) else {}
    resolved.update({
        'mount': mount, 'volume': mount['name'], 'kind': kind, 'source': source,
        'mount_path': posixpath.normpath(mount['mountPath']),
        'sub_path': mount.get('subPath') or None, 'sub_path_expr': mount.get('subPathExpr') or None,
        'path_in_volume': posixpath.join(*((sub_path,) if sub_path else ()), *below) if sub_path or below else '',
        'file_mount': not below,
        'read_only': bool(mount.get('readOnly')) or bool(source.get('readOnly')) or kind in READ_ONLY_KINDS,
    })
    return resolved


def describe(resolved: dict) -> str:
    """The cache's place in words: '<location> (volume <v>, <kind>, <path in the volume>)'."""
    if resolved['mount'] is None:
        return '%s (the container\'s own file system)' % resolved['location']
    inside = resolved['path_in_volume'] or '(the volume itself)'
    return '%s (%s volume %s, %s in the volume%s)' % (
        resolved['location'], resolved['kind'], resolved['volume'], inside,
        ', expanded per pod from subPathExpr' if resolved['sub_path_expr'] else '')


def init_mount(resolved: dict, pod_spec: dict) -> dict:
    """The init container's way to the cache: {mount (its volumeMount), env (the variables subPathExpr reads)}.

    The same volume with the same subPath or subPathExpr, so that the init container sees at the cache's path the
    very file vLLM reads. When the container mounts the cache file itself, the init container mounts the directory
    that holds the file in the volume instead, at the file's directory: a file that is a mount point cannot be moved
    aside, the directory's entry can. CachePathError when there is no volume, or a variable of subPathExpr comes
    from nowhere the init container can be given.
    """
    if resolved['mount'] is None:
        raise CachePathError('container %s mounts no volume that holds %s, so an init container could not reach the '
                             'cache; check vllm_dr_cache_path and vllm_dr_k8s_container, or use '
                             'vllm_dr_k8s_purge_method=exec' % (resolved['container'], resolved['location']))
    if resolved['source'].get('readOnly') or resolved['kind'] in READ_ONLY_KINDS:
        raise CachePathError('%s volume %s that holds %s is read-only, so no container can move the cache aside '
                             'there; keep the token cache on a writable volume'
                             % (resolved['kind'], resolved['volume'], resolved['location']))
    mount = {'name': resolved['volume']}
    if resolved['file_mount']:
        mount['mountPath'] = posixpath.dirname(resolved['location'])
        directory = posixpath.dirname(resolved['path_in_volume'])
    else:
        mount['mountPath'] = resolved['mount_path']
        directory = resolved['sub_path_expr'] or resolved['sub_path'] or ''
    if directory:
        mount['subPathExpr' if resolved['sub_path_expr'] else 'subPath'] = directory
    env = []
    if resolved['sub_path_expr']:
        container = next(item for item in pod_spec['containers'] if item.get('name') == resolved['container'])
        declared = {item.get('name'): item for item in container.get('env') or []}
        for name in _EXPR_VARIABLE.findall(resolved['sub_path_expr']):
            if name not in declared:
                raise CachePathError('subPathExpr %s of volume %s reads $(%s), which container %s does not declare '
                                     'in env (from envFrom the init container could not be given it); declare it '
                                     'in env, or use vllm_dr_k8s_purge_method=exec'
                                     % (resolved['sub_path_expr'], resolved['volume'], name, resolved['container']))
            if declared[name] not in env:
                env.append(declared[name])
    return {'mount': mount, 'env': env}


def exec_problem(resolved: dict) -> str | None:
    """Why a process inside the container (kubectl exec) cannot move the cache aside, or None when it can."""
    if resolved['mount'] is None:
        return None
    if resolved['file_mount']:
        return ('%s is itself the mount point of volume %s (subPath %s): a file that is a mount point cannot be moved '
                'aside from inside the container; set vllm_dr_k8s_purge_method=init_container, whose container '
                'mounts the directory that holds it' % (resolved['location'], resolved['volume'],
                                                        resolved['sub_path_expr'] or resolved['sub_path'] or '-'))
    if resolved['read_only']:
        return ('volume %s is mounted read-only at %s in container %s, so the purge cannot move %s aside there; set '
                'vllm_dr_k8s_purge_method=init_container, whose container mounts it writable'
                % (resolved['volume'], resolved['mount_path'], resolved['container'], resolved['location']))
    return None


def backup_dir(resolved: dict, pod_spec: dict, given: str = '', mount: dict | None = None) -> str:
    """Where the purge keeps its backups in the container that purges: `given`, or beside the cache
    (<cache directory>/.vllm_dr_backups). Always on the cache's own volume, never on the container's root file
    system: CachePathError names a `given` that is not. `mount`: the purging container's mount (the init
    container's), else the vLLM container's own."""
    default = posixpath.join(posixpath.dirname(resolved['location']), '.vllm_dr_backups')
    wanted = given or default
    if not posixpath.isabs(wanted):
        raise CachePathError('vllm_dr_k8s_pod_backup_dir %s is not an absolute path; set it to a directory on the '
                             'volume that holds the token cache' % wanted)
    if mount is None:
        container = next(item for item in pod_spec['containers'] if item.get('name') == resolved['container'])
        held_by = holding_mount(container.get('volumeMounts'), wanted)
        on_volume = (held_by is not None and held_by.get('name') == resolved['volume']
                     and not held_by.get('readOnly') and not resolved['file_mount'])
        where = resolved['mount_path']
    else:
        on_volume = holds(mount['mountPath'], wanted)
        where = mount['mountPath']
    if not on_volume:
        raise CachePathError('vllm_dr_k8s_pod_backup_dir %s is not on volume %s that holds the token cache (mounted '
                             'at %s): a backup there would be written on the container\'s own file system and lost '
                             'with it; set it to a directory under %s, or leave it empty for %s'
                             % (wanted, resolved['volume'], where, where, default))
    return posixpath.normpath(wanted)
