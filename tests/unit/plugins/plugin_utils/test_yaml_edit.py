"""set_key edits vllm.yaml's text: the flag changes, every other line and comment stays."""

from __future__ import annotations

import time

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._yaml_edit import YamlEditError, set_key

KEY = 'session_state_store.refresh_on_startup'

CONFIG = """\
# vLLM gateway -- edited by hand, keep these notes
server:
  port: 8000  # behind the ingress
session_state_store:
  # the Redis service of the namespace
  type: redis
  refresh_on_startup: false  # turned off during the 2024 incident
token_cache:
  path: /var/lib/vllm/token_cache.db
"""


def test_set_key_flips_the_value_and_keeps_comments_and_order():
    result = set_key(CONFIG, KEY, True)
    assert result['changed'] and result['formatting_kept']
    assert result['text'] == CONFIG.replace('refresh_on_startup: false', 'refresh_on_startup: true')


class _Unsafe(str):
    """A str subclass whose str() is itself, as ansible-core before 2.19 hands a filter its input (AnsibleUnsafeText)."""

    def __str__(self):  # pylint: disable=invalid-str-returned  # returns a str subclass, exactly as AnsibleUnsafeText does
        return self


def test_set_key_takes_a_str_subclass_as_older_ansible_cores_pass_it():
    result = set_key(_Unsafe(CONFIG), KEY, True)
    assert result['changed'] and result['formatting_kept'] and result['was'] is False
    assert result['text'] == CONFIG.replace('refresh_on_startup: false', 'refresh_on_startup: true')


def test_set_key_adds_the_key_inside_an_existing_block_at_its_indentation():
    text = 'session_state_store:\n    type: redis\n# a note about the cache\ntoken_cache:\n  path: x\n'
    result = set_key(text, KEY, True)
    assert result['text'] == ('session_state_store:\n    type: redis\n    refresh_on_startup: true\n'
                              '# a note about the cache\ntoken_cache:\n  path: x\n')


def test_set_key_appends_a_missing_block():
    result = set_key('server:\n  port: 8000\n', KEY, True)
    assert result['text'] == 'server:\n  port: 8000\nsession_state_store:\n  refresh_on_startup: true\n'
    assert set_key('', KEY, True)['text'] == 'session_state_store:\n  refresh_on_startup: true\n'


def test_set_key_leaves_a_document_that_already_holds_the_value_byte_for_byte():
    text = CONFIG.replace('refresh_on_startup: false', 'refresh_on_startup: true')
    assert set_key(text, KEY, True) == {'text': text, 'changed': False, 'formatting_kept': True, 'was': True}


def test_set_key_treats_the_string_true_as_different_from_the_boolean():
    result = set_key('session_state_store:\n  refresh_on_startup: "true"\n', KEY, True)
    assert result['changed'] and yaml.safe_load(result['text'])['session_state_store']['refresh_on_startup'] is True


def test_set_key_falls_back_to_a_dump_for_flow_style_and_says_so():
    result = set_key('session_state_store: {type: redis}\nother: 1\n', KEY, True, rewrite=True)
    assert result['changed'] and not result['formatting_kept']
    assert yaml.safe_load(result['text']) == {'session_state_store': {'type': 'redis', 'refresh_on_startup': True},
                                              'other': 1}


@pytest.mark.parametrize('text, message', [
    ('key: [unclosed\n', 'not valid YAML'),
    ('- a\n- b\n', 'is a list, not a mapping'),
])
def test_set_key_refuses_documents_it_cannot_edit(text, message):
    with pytest.raises(YamlEditError, match=message):
        set_key(text, KEY, True)


@pytest.mark.parametrize('newline', ['\r\n', '\r'])
def test_set_key_keeps_every_line_ending_and_says_formatting_kept_only_when_it_is(newline):
    text = CONFIG.replace('\n', newline)
    result = set_key(text, KEY, True)
    assert result['formatting_kept'] is True and result['was'] is False
    assert result['text'] == CONFIG.replace('refresh_on_startup: false', 'refresh_on_startup: true').replace('\n', newline)


def test_set_key_adds_a_missing_key_with_the_documents_line_ending_and_keeps_a_mixed_file_mixed():
    text = 'server:\r\n  port: 8000\nsession_state_store:\r\n  type: redis\r\noauth:\r\n  client_id: a'
    result = set_key(text, KEY, True)
    assert result['formatting_kept'] is True and result['was'] is None
    assert result['text'] == ('server:\r\n  port: 8000\nsession_state_store:\r\n  type: redis\r\n'
                              '  refresh_on_startup: true\r\noauth:\r\n  client_id: a'), 'no break added at the end either'


def test_set_key_reports_a_rewrite_of_a_crlf_document_as_formatting_lost():
    text = 'session_state_store: {type: redis, refresh_on_startup: false}\r\n'
    result = set_key(text, KEY, True, rewrite=True)
    assert result['formatting_kept'] is False and result['was'] is False


def test_set_key_edits_a_document_of_the_largest_size_the_runbook_edits_in_bounded_time():
    """262144 bytes (vllm_dr_config_max_size): edited, parsed twice, in seconds even on a busy machine."""
    models = ''.join(f'  model_{n}:\n    path: /models/m{n}  # note\n    replicas: {n % 7}\n' for n in range(6000))
    text = CONFIG + 'models:\n' + models
    text = text[:text.rindex('\n  model_', 0, 262144)] + '\n'
    assert 250000 < len(text.encode()) <= 262144
    started = time.monotonic()
    result = set_key(text, KEY, True)
    took = time.monotonic() - started
    assert result['changed'] and result['formatting_kept']
    assert took < 5, f'{took:.1f} s for 256 KiB'
