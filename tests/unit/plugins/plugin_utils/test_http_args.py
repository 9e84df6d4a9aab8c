from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._http_args import endpoint_args

ALL = {'ca_path': '/etc/pki/ca.pem', 'validate_certs': False, 'client_cert': '/etc/pki/c.pem',
       'client_key': '/etc/pki/c.key', 'headers': {'Authorization': 'Bearer k'}, 'retries': 3}


def test_the_probe_takes_every_tls_option_and_the_headers_under_its_own_names():
    assert endpoint_args(ALL, 'probe') == {
        'http_ca_path': '/etc/pki/ca.pem', 'http_validate_certs': False, 'http_client_cert': '/etc/pki/c.pem',
        'http_client_key': '/etc/pki/c.key', 'headers': {'Authorization': 'Bearer k'}}


def test_the_health_check_takes_the_tls_options_and_never_the_headers():
    assert endpoint_args(ALL, 'uri') == {'ca_path': '/etc/pki/ca.pem', 'validate_certs': False,
                                         'client_cert': '/etc/pki/c.pem', 'client_key': '/etc/pki/c.key'}


@pytest.mark.parametrize('options', [None, {}, {'retries': 2}, {'ca_path': None}])
def test_nothing_given_passes_nothing_so_the_defaults_hold(options):
    assert endpoint_args(options, 'probe') == {} and endpoint_args(options, 'uri') == {}


def test_a_value_that_is_not_a_dict_and_an_unknown_target_are_named():
    with pytest.raises(ValueError, match='vllm_dr_http must be a dict of ca_path, .* and retries, not str'):
        endpoint_args('/etc/pki/ca.pem', 'probe')
    with pytest.raises(ValueError, match="unknown target 'curl'"):
        endpoint_args(ALL, 'curl')


def test_headers_given_as_text_are_refused_without_their_value():
    with pytest.raises(ValueError) as raised:
        endpoint_args({'headers': '{"X-Api-Key": "k-123"}'}, 'probe')
    assert str(raised.value) == ('vllm_dr_http.headers must be a dict of header names and values (YAML mapping), '
                                 'not str')
