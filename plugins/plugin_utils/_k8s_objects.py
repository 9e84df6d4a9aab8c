# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Objects as kubernetes.core.k8s_info returns them: who owns them, which pods become inventory hosts, and which of the
permissions a run asked the API server about it was refused, in words."""

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


def describe_permission(permission: dict, namespace: str) -> str:
    """'<verb> <resource>[/<subresource>][.<group>][ <name>] in namespace <namespace>', as an RBAC rule names it."""
    text = f"{permission['verb']} {permission['resource']}"
    if permission.get('subresource'):
        text += f"/{permission['subresource']}"
    if permission.get('group'):
        text += f".{permission['group']}"
    if permission.get('name'):
        text += f" {permission['name']}"
    return f"{text} in namespace {permission.get('namespace') or namespace}"


def missing_permissions(wanted: list, allowed: list, namespace: str) -> list:
    """The permissions of `wanted` the API server did not allow (`allowed`: its answers, in the order asked), in words.
    An answer missing counts as refused."""
    allowed = list(allowed or [])
    return [describe_permission(permission, namespace) for index, permission in enumerate(wanted or [])
            if not (index < len(allowed) and allowed[index] is True)]
