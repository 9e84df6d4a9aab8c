# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What one phase of a run asks the Kubernetes API in one call: its permissions first (one SelfSubjectAccessReview
each; every authenticated identity may ask), then, only when every one is granted, the objects it relies on (each
read as kubernetes.core.k8s_info reads it, without its metadata.managedFields). The API calls are passed in
(`review`, `find`), so the rules here are tested without a cluster and the module shell gives them kubernetes.core's
client."""

from __future__ import annotations

from collections.abc import Callable

PERMISSION_FIELDS = ('verb', 'resource', 'group', 'subresource', 'namespace', 'name')
READ_FIELDS = ('key', 'kind', 'api_version', 'name', 'namespace', 'label_selectors')


class K8sReadError(Exception):
    """A request that cannot be asked as given, or a read the API server refused: one line."""


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
    An answer missing counts as refused, and only True is a yes."""
    allowed = list(allowed or [])
    return [describe_permission(permission, namespace) for index, permission in enumerate(wanted or [])
            if not (index < len(allowed) and allowed[index] is True)]


def access_review(permission: dict, namespace: str) -> dict:
    """The SelfSubjectAccessReview that asks for `permission` (its namespace defaults to `namespace`). With a name, a
    Role that grants the verb only for that object (resourceNames) answers yes too."""
    unknown = sorted(set(permission) - set(PERMISSION_FIELDS))
    if unknown or not permission.get('verb') or not permission.get('resource'):
        raise K8sReadError(f"permission {permission!r} is not one a review can ask: it needs verb and resource "
                           f"and may have only {', '.join(PERMISSION_FIELDS)}")
    attributes = {'namespace': permission.get('namespace') or namespace, 'verb': permission['verb'],
                  'group': permission.get('group') or '', 'resource': permission['resource'],
                  'subresource': permission.get('subresource') or '', 'name': permission.get('name') or ''}
    return {'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SelfSubjectAccessReview',
            'spec': {'resourceAttributes': attributes}}


def read_requests(reads: list, namespace: str) -> list:
    """The reads as find() takes them, checked before anything is asked: each names a key (unique) and a kind."""
    requests, keys = [], set()
    for read in reads or []:
        unknown = sorted(set(read) - set(READ_FIELDS))
        if unknown or not read.get('key') or not read.get('kind'):
            raise K8sReadError(f"read {read!r} is not one this module makes: it needs key and kind and may have only "
                               f"{', '.join(READ_FIELDS)}")
        if read['key'] in keys:
            raise K8sReadError(f"read key {read['key']} is given twice; give each read its own key")
        keys.add(read['key'])
        requests.append({'key': read['key'], 'kind': read['kind'], 'api_version': read.get('api_version') or 'v1',
                         'name': read.get('name') or None, 'namespace': read.get('namespace') or namespace,
                         'label_selectors': list(read.get('label_selectors') or [])})
    return requests


def without_managed_fields(item):
    """`item` without metadata.managedFields: the API server's record of which client last set which field. No reader
    of the objects uses it, and it is a large part of a pod (each controller and kubelet that wrote to it has an
    entry), which every read object carries through the task's result and each filter the run applies."""
    metadata = item.get('metadata') if isinstance(item, dict) else None
    if not isinstance(metadata, dict) or 'managedFields' not in metadata:
        return item
    return dict(item, metadata={field: value for field, value in metadata.items() if field != 'managedFields'})


def ask(permissions: list, reads: list, namespace: str, review: Callable, find: Callable) -> dict:
    """Ask every permission (review(body) -> the API's allowed, True or not), then, when none is missing, make every
    read (find(kind, api_version, name, namespace, label_selectors) -> {'resources': [...], 'api_found': bool}).

    Returns {'allowed': [...], 'missing': [words...], 'resources': {key: [...]}, 'api_found': {key: bool}}, each object
    without its managedFields; with a permission missing, nothing is read (resources and api_found stay empty).
    Raises K8sReadError for a request that cannot be asked, before any is."""
    reviews = [access_review(permission, namespace) for permission in permissions or []]
    requests = read_requests(reads, namespace)
    allowed = [review(body) is True for body in reviews]
    result = {'allowed': allowed, 'missing': missing_permissions(permissions, allowed, namespace),
              'resources': {}, 'api_found': {}}
    if result['missing']:
        return result
    for request in requests:
        key = request.pop('key')
        found = find(**request)
        result['resources'][key] = [without_managed_fields(item) for item in found.get('resources') or []]
        result['api_found'][key] = bool(found.get('api_found', True))
    return result
