# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Objects as kubernetes.core.k8s_info returns them: who owns them, and which pods become inventory hosts."""

from __future__ import annotations


def owner_names(objects: list, kind: str) -> list:
    """The names of the owners of `kind` of the objects (ownerReferences), each once, in the order first met."""
    names = []
    for obj in objects or []:
        for owner in ((obj or {}).get('metadata') or {}).get('ownerReferences') or []:
            if owner.get('kind') == kind and owner.get('name') and owner['name'] not in names:
                names.append(owner['name'])
    return names


def pod_hosts(pods: list, prefix: str, common: dict | None = None) -> list:
    """One inventory host per pod name: {'name': <prefix><pod>, 'pod': <pod>} and the options common to them all."""
    return [dict(common or {}, name=f'{prefix}{pod}', pod=pod) for pod in pods or []]
