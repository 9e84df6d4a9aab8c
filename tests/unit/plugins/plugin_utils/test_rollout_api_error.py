"""A failed call to the API server is named by its status and reason, never by the object it carried."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import api_error

BODY = ('Failed to patch object: b\'{"kind":"Status","message":"Deployment.apps \\"vllm\\" is invalid: '
        'spec.template.spec.containers[0].env[0].value: Invalid value: \\"hf_secretvalue\\""}\'')


def test_an_answer_is_named_by_status_and_reason_without_its_body():
    line = api_error({'failed': True, 'status': 422, 'reason': 'Unprocessable Entity', 'msg': BODY})
    assert line == 'the API server answered HTTP 422 (Unprocessable Entity)'
    assert 'hf_secretvalue' not in line


def test_no_answer_gives_the_first_line_of_the_error_at_most_200_characters():
    assert api_error({'failed': True, 'msg': 'connection refused\nretry'}) == 'connection refused'
    long = api_error({'failed': True, 'msg': 'x' * 300})
    assert len(long) == 200 and long.endswith('...')
    assert api_error({}) == 'no answer'
    assert api_error(None) == 'no answer'
