"""vllm_k8s_read's rules: every permission asked first, in words when refused, nothing read then; every read made
with what k8s_info takes; a request it cannot make refused before anything is asked. The API calls are recorded
here; the Kubernetes suite makes them against a real API server."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._k8s_read import (
    K8sReadError,
    access_review,
    ask,
    missing_permissions,
)


class Api:
    def __init__(self, answers=(), found=None):
        self.answers = list(answers)
        self.found = found or {}
        self.calls = []

    def review(self, body):
        self.calls.append(('review', body['spec']['resourceAttributes']))
        return self.answers.pop(0)

    def find(self, kind, api_version, name, namespace, label_selectors):
        self.calls.append(('find', kind, api_version, name, namespace, label_selectors))
        return self.found.get(kind, {'resources': [], 'api_found': True})


def test_missing_permissions_name_only_the_refused_ones_as_an_rbac_rule_does():
    wanted = [{'verb': 'list', 'resource': 'pods'},
              {'verb': 'get', 'resource': 'pods', 'subresource': 'log'},
              {'verb': 'patch', 'resource': 'deployments', 'group': 'apps', 'name': 'vllm'},
              {'verb': 'list', 'resource': 'restores', 'group': 'velero.io', 'namespace': 'velero'},
              {'verb': 'create', 'resource': 'pods', 'subresource': 'exec', 'group': ''}]
    assert missing_permissions(wanted, [True, False, False, False], 'ns') == [
        'get pods/log in namespace ns',
        'patch deployments.apps vllm in namespace ns',
        'list restores.velero.io in namespace velero',
        # no answer is no permission
        'create pods/exec in namespace ns',
    ]
    assert missing_permissions(wanted[:1], [True], 'ns') == []
    # only a yes is a yes
    assert missing_permissions(wanted[:1], ['yes'], 'ns') == ['list pods in namespace ns']


def test_a_review_asks_every_attribute_with_the_namespace_and_core_group_filled_in():
    assert access_review({'verb': 'get', 'resource': 'deployments', 'group': 'apps', 'name': 'vllm'}, 'ns') == {
        'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SelfSubjectAccessReview',
        'spec': {'resourceAttributes': {'namespace': 'ns', 'verb': 'get', 'group': 'apps', 'resource': 'deployments',
                                        'subresource': '', 'name': 'vllm'}}}
    review = access_review({'verb': 'list', 'resource': 'restores', 'namespace': 'velero'}, 'ns')
    assert review['spec']['resourceAttributes']['namespace'] == 'velero'


def test_everything_granted_reads_each_object_as_k8s_info_takes_it_in_order():
    pods = {'resources': [{'metadata': {'name': 'vllm-0'}}], 'api_found': True}
    api = Api([True, True], {'Pod': pods, 'Restore': {'resources': [], 'api_found': False}})
    result = ask([{'verb': 'list', 'resource': 'pods'}, {'verb': 'get', 'resource': 'configmaps', 'name': 'c'}],
                 [{'key': 'pods', 'kind': 'Pod', 'label_selectors': ['app=vllm']},
                  {'key': 'config', 'kind': 'ConfigMap', 'name': 'c'},
                  {'key': 'restores', 'kind': 'Restore', 'api_version': 'velero.io/v1', 'namespace': 'velero',
                   'name': ''}],
                 'ns', api.review, api.find)
    assert result == {'allowed': [True, True], 'missing': [],
                      'resources': {'pods': pods['resources'], 'config': [], 'restores': []},
                      'api_found': {'pods': True, 'config': True, 'restores': False}}
    assert [call for call in api.calls if call[0] == 'find'] == [
        ('find', 'Pod', 'v1', None, 'ns', ['app=vllm']),
        ('find', 'ConfigMap', 'v1', 'c', 'ns', []),
        # an empty name reads every object of the kind
        ('find', 'Restore', 'velero.io/v1', None, 'velero', []),
    ]
    # every permission is asked before the first read
    assert [call[0] for call in api.calls] == ['review', 'review', 'find', 'find', 'find']


def test_each_object_read_comes_without_its_managed_fields_and_nothing_else_is_dropped():
    pod = {'kind': 'Pod', 'metadata': {'name': 'vllm-0', 'labels': {'app': 'vllm'},
                                       'managedFields': [{'manager': 'kubelet', 'operation': 'Update'}]},
           'spec': {'containers': [{'name': 'vllm'}]}, 'status': {'phase': 'Running'}}
    bare = {'kind': 'ConfigMap', 'metadata': {'name': 'c'}, 'data': {'vllm.yaml': 'a: 1'}}
    # no metadata, metadata that is not a mapping, an item that is not one: each comes back as it was
    odd = [{'kind': 'odd'}, {'kind': 'odd', 'metadata': ['managedFields']}, 'text']
    api = Api([], {'Pod': {'resources': [pod]}, 'ConfigMap': {'resources': [bare] + odd}})
    result = ask([], [{'key': 'pods', 'kind': 'Pod'}, {'key': 'config', 'kind': 'ConfigMap'}], 'ns', api.review,
                 api.find)
    assert result['resources']['pods'] == [{'kind': 'Pod', 'metadata': {'name': 'vllm-0', 'labels': {'app': 'vllm'}},
                                            'spec': {'containers': [{'name': 'vllm'}]},
                                            'status': {'phase': 'Running'}}]
    assert result['resources']['config'] == [bare] + odd
    # what the client returned is left as it was
    assert pod['metadata']['managedFields'] == [{'manager': 'kubelet', 'operation': 'Update'}]


def test_a_permission_refused_is_named_and_nothing_is_read():
    api = Api([True, False])
    result = ask([{'verb': 'list', 'resource': 'pods'}, {'verb': 'get', 'resource': 'pods', 'subresource': 'log'}],
                 [{'key': 'pods', 'kind': 'Pod'}], 'ns', api.review, api.find)
    assert result == {'allowed': [True, False], 'missing': ['get pods/log in namespace ns'], 'resources': {},
                      'api_found': {}}
    assert [call[0] for call in api.calls] == ['review', 'review']


@pytest.mark.parametrize('permissions, reads, words', [
    ([{'verb': 'list'}], [], 'needs verb and resource'),
    ([{'verb': 'list', 'resource': 'pods', 'resourceNames': ['a']}], [], 'may have only'),
    ([], [{'key': 'pods'}], 'needs key and kind'),
    ([], [{'key': 'a', 'kind': 'Pod'}, {'key': 'a', 'kind': 'Pod'}], 'read key a is given twice'),
    ([], [{'key': 'a', 'kind': 'Pod', 'labels': ['x']}], 'may have only'),
])
def test_a_request_it_cannot_make_is_refused_in_one_line_before_anything_is_asked(permissions, reads, words):
    api = Api([True] * len(permissions))
    with pytest.raises(K8sReadError, match=words):
        ask(permissions, reads, 'ns', api.review, api.find)
    assert not api.calls
