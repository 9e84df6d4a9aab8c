"""yaml_set never loses the operator's comments silently: it refuses, or rewrites only when asked and says so."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.filter.yaml_set import FilterModule
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target, purge_preconditions
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._yaml_edit import YamlEditError, YamlLayoutError, set_key

KEY = 'session_state_store.refresh_on_startup'
FLOW = '# keep this note\nsession_state_store: {type: redis}\nother: 1\n'
yaml_set = FilterModule().filters()['yaml_set']


def test_set_key_refuses_a_flow_style_block_instead_of_dropping_the_comments():
    with pytest.raises(YamlLayoutError, match=r'cannot be set by a line edit .* losing its comments and layout .*'
                                              r'set session_state_store\.refresh_on_startup: true by hand'):
        set_key(FLOW, KEY, True)


def test_the_refusal_is_a_yaml_edit_error_so_every_caller_already_reports_it():
    assert issubclass(YamlLayoutError, YamlEditError)


def test_a_rewrite_is_done_only_when_asked_and_reports_the_lost_formatting():
    result = set_key(FLOW, KEY, True, rewrite=True)
    assert result['formatting_kept'] is False and '# keep this note' not in result['text']
    assert yaml.safe_load(result['text']) == {'session_state_store': {'type': 'redis', 'refresh_on_startup': True},
                                              'other': 1}


def test_a_block_style_edit_keeps_the_formatting_with_or_without_rewrite():
    text = '# keep this note\nsession_state_store:\n  type: redis  # the namespace service\n'
    for rewrite in (False, True):
        result = set_key(text, KEY, True, rewrite=rewrite)
        assert result['formatting_kept'] is True
        assert result['text'] == text + '  refresh_on_startup: true\n'


def test_the_filter_refuses_with_one_line_and_rewrites_on_request():
    with pytest.raises(AnsibleFilterError, match='without losing its comments and layout') as info:
        yaml_set(FLOW, KEY, True)
    assert '\n' not in str(info.value)
    assert yaml_set(FLOW, KEY, True, rewrite=True)['formatting_kept'] is False


def test_the_kubernetes_preconditions_name_the_layout_before_anything_changes():
    config_maps = [{'data': {'vllm.yaml': FLOW}}]
    target = k8s_target({'resources': [{'metadata': {'name': 'vllm'}}]}, [], [], namespace='vllm')
    problems = purge_preconditions(target, config_maps, namespace='vllm', config_map='vllm-config',
                                   config_key='vllm.yaml', edit_path=KEY, edit_value=True)
    assert any(problem.startswith('vllm.yaml in ConfigMap vllm-config in namespace vllm: '
                                  'session_state_store.refresh_on_startup cannot be set by a line edit')
               for problem in problems)
