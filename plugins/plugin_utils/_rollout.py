# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""When a Deployment's rollout is finished, judged as `kubectl rollout status` judges it, and what to say when not."""

from __future__ import annotations

REVISION = 'deployment.kubernetes.io/revision'


def _counts(deployment: dict) -> dict:
    spec = deployment.get('spec') or {}
    status = deployment.get('status') or {}
    return {
        'generation': (deployment.get('metadata') or {}).get('generation', 0),
        'observed': status.get('observedGeneration', 0),
        'wanted': spec.get('replicas', 1),
        'replicas': status.get('replicas', 0),
        'updated': status.get('updatedReplicas', 0),
        'available': status.get('availableReplicas', 0),
    }


def rollout_complete(deployment: dict) -> bool:
    """The controller saw the latest spec, every wanted replica is updated and available, and no older one runs."""
    c = _counts(deployment)
    return (c['observed'] >= c['generation'] and c['updated'] == c['wanted']
            and c['replicas'] == c['updated'] and c['available'] == c['updated'])


def rollout_status(deployment: dict) -> str:
    c = _counts(deployment)
    parts = [f"updated {c['updated']}/{c['wanted']}", f"available {c['available']}/{c['wanted']}",
             f"replicas {c['replicas']} (old ones included)"]
    if c['observed'] < c['generation']:
        parts.append(f"generation {c['generation']} not yet observed (controller at {c['observed']})")
    conditions = (deployment.get('status') or {}).get('conditions') or []
    described = [f"{cond.get('type')}={cond.get('status')} ({cond.get('reason', '')}: {cond.get('message', '')})"
                 for cond in conditions]
    return ', '.join(parts) + '; conditions: ' + ('; '.join(described) if described else 'none reported')


def new_replicaset_hash(replicasets: list, deployment: dict) -> str | None:
    """The pod-template-hash of the Deployment's current ReplicaSet (the one at the Deployment's revision)."""
    meta = deployment.get('metadata') or {}
    revision = (meta.get('annotations') or {}).get(REVISION)
    for replicaset in replicasets or []:
        rs_meta = replicaset.get('metadata') or {}
        owners = [owner for owner in rs_meta.get('ownerReferences') or []
                  if owner.get('kind') == 'Deployment' and owner.get('uid') == meta.get('uid')]
        if owners and (rs_meta.get('annotations') or {}).get(REVISION) == revision:
            return (rs_meta.get('labels') or {}).get('pod-template-hash')
    return None
