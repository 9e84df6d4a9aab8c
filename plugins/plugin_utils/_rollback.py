# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which token cache backup of a run goes back into which pod on Kubernetes.

A run keeps each pod's backup on the controller in ``<run backup dir>/<namespace>_<pod>/``, named as
``vllm_token_cache`` names them: ``<cache file>.<stamp>.bak`` and ``.bak-wal``, ``.bak-shm``, ``.bak-journal`` for the
sidecars it found. The rule (dr_rollback.yml's header and docs/runbook.md say it too):

- a pod of the run still running gets its own backup set back, the newest one in its directory;
- a pod with none of its own (one that replaced a pod of the run: the restart replaces them all) gets the backup
  of the pods gone when they held one cache content (the same files, byte for byte: replicas sharing a volume,
  where the first pod's purge took the only backup, or replicas restored from one snapshot), or the one chosen with
  ``pod_dir``; when they held different caches, nothing is put back and each such pod gets one line naming the
  backup directories to choose from;
- with no backup of a pod gone, a pod with none of its own is left as it is.
"""

from __future__ import annotations

import os

SIDECARS = ('-wal', '-shm', '-journal')


def _backup_sets(files: list, backup_dir: str) -> tuple[dict, list]:
    """The newest complete backup set of each pod directory: {directory: {suffix: {path, checksum}}}, and the
    directories that hold only sidecars (no .bak to restore them by)."""
    found: dict = {}
    root = os.path.normpath(backup_dir)
    for item in files or []:
        path = str(item.get('path', ''))
        relative = os.path.relpath(os.path.normpath(path), root).split(os.sep)
        if len(relative) != 2 or relative[0] in (os.curdir, os.pardir):
            continue  # not <run>/<namespace>_<pod>/<file>
        directory, name = relative
        for suffix in ('',) + SIDECARS:
            if name.endswith('.bak' + suffix):
                main = name[:len(name) - len(suffix)]
                found.setdefault(directory, {}).setdefault(main, {})[suffix] = {
                    'path': path, 'checksum': item.get('checksum')}
                break
    sets, incomplete = {}, []
    for directory, by_main in found.items():
        complete = {main: members for main, members in by_main.items() if '' in members}
        if complete:
            sets[directory] = complete[max(complete)]  # the stamp in the name: the newest sorts last
        else:
            incomplete.append(directory)
    return sets, sorted(incomplete)


def _content(members: dict):
    """What a backup set holds, for comparing: None when a checksum is unknown (never equal to another)."""
    if any(not member.get('checksum') for member in members.values()):
        return None
    return tuple(sorted((suffix, member['checksum']) for suffix, member in members.items()))


def _restore(pod: str, namespace: str, directory: str, members: dict, why: str) -> dict:
    main = os.path.basename(members['']['path'])
    return {
        'target': f'{namespace}/{pod}', 'pod': pod, 'source': directory, 'restore_from': main,
        'files': [members[suffix]['path'] for suffix in ('',) + SIDECARS if suffix in members],
        'why': why,
    }


def rollback_plan(files: list, pods: list, *, namespace: str, backup_dir: str, pod_dir: str = '') -> dict:
    """What the rollback puts back into each pod running now, or why it cannot, decided before anything changes.

    `files` are the backup files found under `backup_dir` (ansible.builtin.find's `files`: path and checksum), `pods`
    the names of the pods running now. Returns `restores` (per pod: target `<namespace>/<pod>`, the files to copy in,
    the `.bak` to restore from, its directory and why it goes there), `summary` (one line per pod) and `problems`
    (one line per pod that cannot be served, plus the fix; nothing may be restored when there is one).
    """
    backup_dir = os.path.normpath(str(backup_dir))
    sets, incomplete = _backup_sets(files, backup_dir)
    running = sorted(str(pod) for pod in pods or [])
    own = {pod: f'{namespace}_{pod}' for pod in running}
    gone = sorted(directory for directory in sets if directory not in own.values())
    problems = [f'{backup_dir}/{directory} holds sidecar backups but no .bak file to restore them by; '
                'put them back by hand or remove them' for directory in incomplete]
    chosen = None
    if pod_dir:
        if pod_dir not in sets:
            problems.append(f'vllm_dr_rollback_pod_dir {pod_dir} is no pod directory with a backup in {backup_dir}; '
                            f'choose one of: {", ".join(sorted(sets)) or "none"}')
        else:
            chosen = (pod_dir, 'the backup chosen with vllm_dr_rollback_pod_dir')
    else:
        contents = {_content(sets[directory]) for directory in gone}
        if len(gone) == 1 or (len(contents) == 1 and None not in contents):
            chosen = (gone[-1], 'the backup of the pod gone' if len(gone) == 1
                      else 'the one cache content the pods gone left')
    restores, summary = [], []
    for pod in running:
        if own[pod] in sets:
            restores.append(_restore(pod, namespace, own[pod], sets[own[pod]], 'its own backup'))
        elif chosen:
            restores.append(_restore(pod, namespace, chosen[0], sets[chosen[0]],
                                     f'no backup of its own, it replaced a pod of the run: {chosen[1]}'))
        elif gone:
            if pod_dir:
                continue  # the choice itself was refused above
            problems.append(
                f'pod {pod} in namespace {namespace} has no backup of its own in {backup_dir} (it replaced a pod of '
                f'the run) and the pods gone left different caches ({", ".join(gone)}): nothing was put back; choose '
                'the one for the pods without their own with -e vllm_dr_rollback_pod_dir=<one of them>')
            continue
        else:
            summary.append(f'{namespace}/{pod}: no backup of its own and none of a pod gone in {backup_dir}; '
                           'left as it is')
            continue
        item = restores[-1]
        summary.append(f"{item['target']}: {item['source']}/{item['restore_from']} ({item['why']})")
    return {'restores': restores, 'summary': summary, 'problems': problems}


TARGET_FILE = 'target.json'


def _pod_namespaces(files: list, backup_dir: str) -> set:
    """The namespaces the run's pod directories (<namespace>_<pod>) name."""
    root = os.path.normpath(str(backup_dir))
    found = set()
    for item in files or []:
        relative = os.path.relpath(os.path.normpath(str(item.get('path', ''))), root).split(os.sep)
        if len(relative) == 2 and '_' in relative[0] and relative[0] not in (os.curdir, os.pardir):
            found.add(relative[0].split('_', 1)[0])
    return found


def target_mismatch(recorded, current: dict, files: list, *, backup_dir: str) -> str | None:
    """None when the run directory `backup_dir` was made for the target the rollback runs on, else the one line why not.

    `recorded` is what the run wrote in <run>/target.json (cluster, namespace, kind, deployment: the workload's name,
    and the pods' uids), None
    for a run directory made before runs recorded it: then the namespaces its pod directories name are the record.
    `current` is the target now: cluster, namespace, kind, deployment (the workload's name). `files` the backup files found under the directory.
    """
    here = (f"{current.get('kind') or 'Deployment'} {current.get('deployment')} in namespace {current.get('namespace')} "
            f"of {current.get('cluster')}")
    fix = ('give the backup directory of a run on this target, or run dr_rollback.yml against the target the run was '
           'made for')
    if recorded:
        for key in ('cluster', 'namespace', 'deployment'):
            if recorded.get(key) != current.get(key):
                there = (f"{recorded.get('kind') or 'Deployment'} {recorded.get('deployment')} in namespace "
                         f"{recorded.get('namespace')} of {recorded.get('cluster')}")
                return f'{backup_dir} holds the backups of {there}, not of {here} (its {key} differs); {fix}'
        return None
    others = sorted(_pod_namespaces(files, backup_dir) - {current.get('namespace')})
    if others:
        return (f"{backup_dir} holds the backups of pods in namespace {', '.join(others)}, not of {here}; {fix}")
    return None
