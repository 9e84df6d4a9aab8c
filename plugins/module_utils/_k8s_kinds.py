# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where each workload kind keeps its pod templates and its volumeClaimTemplates: the one table that the modules (the
Velero exclusion, the audit) and the controller's target model (plugin_utils/_k8s_target.py, _k8s_lws.py) read.

Keys go from the object's spec down. A LeaderWorkerSet's workers use workerTemplate; its leaders use leaderTemplate
when it has one, workerTemplate otherwise.
"""

from __future__ import annotations

POD_TEMPLATES = {
    'Deployment': (('template',),),
    'StatefulSet': (('template',),),
    'LeaderWorkerSet': (('leaderWorkerTemplate', 'workerTemplate'), ('leaderWorkerTemplate', 'leaderTemplate')),
}
CLAIM_TEMPLATES = {'StatefulSet': ('volumeClaimTemplates',),
                   'LeaderWorkerSet': ('leaderWorkerTemplate', 'volumeClaimTemplates')}


def dig(obj, keys):
    """The value under `keys` (from the object down), or None where a key is missing."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _spec(workload) -> dict:
    spec = workload.get('spec') if isinstance(workload, dict) else None
    return spec if isinstance(spec, dict) else {}


def present_templates(workload, kind: str) -> list:
    """[(keys from spec down, the pod template)] of the workload: its first template always (None when it is missing),
    then each further one it has (a LeaderWorkerSet's leader template). `kind` must be a key of POD_TEMPLATES."""
    found = [(keys, dig(_spec(workload), keys)) for keys in POD_TEMPLATES[kind]]
    return [(keys, template) for index, (keys, template) in enumerate(found) if index == 0 or template]


def pod_template(workload, kind: str, role: str = 'worker') -> dict:
    """The pod template of the workload's pods; of a LeaderWorkerSet's leaders with `role` leader (its leader template,
    or the worker template when there is none)."""
    templates = present_templates(workload, kind)
    if role == 'leader' and len(templates) > 1:
        return templates[1][1]
    return templates[0][1] or {}


def claims_of(workload, kind: str) -> list:
    """The workload's volumeClaimTemplates, as written (a StatefulSet's, a LeaderWorkerSet's); none for a Deployment."""
    keys = CLAIM_TEMPLATES.get(kind)
    claims = dig(_spec(workload), keys) if keys else None
    return [claim for claim in claims or [] if isinstance(claim, dict)]
