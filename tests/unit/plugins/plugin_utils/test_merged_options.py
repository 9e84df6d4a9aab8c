"""vllm_dr_store and vllm_dr_store_<option>: what an inventory writes and what an AWX credential injects, merged."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._merged_options import MergedOptionsError, flat_names, merge_flat


def test_flat_names_are_the_prefixed_ones_with_a_key():
    names = ['vllm_dr_store', 'vllm_dr_store_', 'vllm_dr_store_login_port', 'vllm_dr_store_backend',
             'vllm_dr_storex', 'vllm_dr_introspection_url']
    assert flat_names('vllm_dr_store', names) == ['vllm_dr_store_backend', 'vllm_dr_store_login_port']


def test_a_flat_variable_wins_over_the_dicts_key():
    merged = merge_flat('vllm_dr_store', {'backend': 'redis', 'login_password': 'from-inventory'},
                        {'vllm_dr_store_login_password': 'from-credential', 'vllm_dr_store_login_port': 6380})
    assert merged == {'backend': 'redis', 'login_password': 'from-credential', 'login_port': 6380}


def test_an_empty_string_is_not_given_on_either_side():
    merged = merge_flat('vllm_dr_store', {'backend': 'redis', 'login_user': '', 'login_password': 'kept'},
                        {'vllm_dr_store_login_password': '', 'vllm_dr_store_ca_path': ''})
    assert merged == {'backend': 'redis', 'login_password': 'kept'}


def test_other_falsy_values_are_given():
    merged = merge_flat('x', {}, {'x_tls': False, 'x_db': 0, 'x_endpoints': []})
    assert merged == {'tls': False, 'db': 0, 'endpoints': []}


def test_an_undefined_dict_is_empty_and_the_input_is_not_changed():
    base = {'backend': 'etcd'}
    assert merge_flat('vllm_dr_store', None, {'vllm_dr_store_backend': 'redis'}) == {'backend': 'redis'}
    assert merge_flat('vllm_dr_store', base, {'vllm_dr_store_backend': 'redis'}) == {'backend': 'redis'}
    assert base == {'backend': 'etcd'}


@pytest.mark.parametrize('base, kind', [
    ('redis://x', 'a string'), (['a'], 'a list'), (3, 'a number'), (True, 'a boolean')])
def test_a_dict_variable_that_is_not_a_dict_is_named(base, kind):
    with pytest.raises(MergedOptionsError, match=rf'^vllm_dr_store must be a dict of options .* got {kind}$'):
        merge_flat('vllm_dr_store', base, {})
