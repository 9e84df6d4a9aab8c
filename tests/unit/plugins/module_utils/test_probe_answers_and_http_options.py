"""What a refresh answer lets the probe store, and which HTTP options are refused before anything is called."""

from __future__ import annotations

import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._http_options import (
    HttpOptionError, check_file, check_headers, check_http_url, check_timeout)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._refresh_probe import (
    MAX_EXPIRES_IN, answer_secrets, read_rotation)


def test_rotation_keeps_the_new_token_whatever_else_is_wrong():
    fields, problem = read_rotation({'refresh_token': 'new', 'access_token': 7, 'expires_in': 'soon'}, b'old')
    assert fields == {b'refresh_token': b'new'}
    assert problem == ("the refresh answer's access_token is a int, not a string; "
                       f"the refresh answer's expires_in is not a number of seconds from 1 to {MAX_EXPIRES_IN}")


def test_rotation_with_a_usable_answer_has_every_field_and_no_problem():
    fields, problem = read_rotation({'refresh_token': 'new', 'access_token': 'acc', 'expires_in': 60}, b'old')
    assert problem is None and fields[b'access_token'] == b'acc'
    stamp = time.strftime('%Y-%m-%dT%H:%M', time.gmtime(time.time() + 60))
    assert fields[b'expires_at'].decode().startswith(stamp[:13])


@pytest.mark.parametrize('body', [{'refresh_token': 'old'}, {'access_token': 'acc'}, {'refresh_token': ''}])
def test_no_new_refresh_token_is_no_rotation(body):
    assert read_rotation(body, b'old') == ({}, None)


def test_answer_secrets_are_the_token_strings():
    assert answer_secrets({'refresh_token': 'r', 'access_token': 'a', 'id_token': 'i', 'expires_in': 'x',
                           'other_token': 5}) == {'r', 'a', 'i'}
    assert answer_secrets(['r']) == set()


@pytest.mark.parametrize('url, message', [
    ('file:///etc/passwd', 'url must be an http:// or https:// URL, not file://'),
    ('https://user:hunter2@/x', 'url has no host'),
    ('/api/v1/refresh_token', 'url has no scheme; give the endpoint\'s full URL'),
])
def test_non_http_urls_are_refused_without_repeating_them(url, message):
    with pytest.raises(HttpOptionError) as error:
        check_http_url(url, 'url')
    assert str(error.value).startswith(message) and 'hunter2' not in str(error.value)


def test_a_missing_file_is_named(tmp_path):
    missing = str(tmp_path / 'ca.pem')
    with pytest.raises(HttpOptionError, match=f'^ca_path {missing} does not exist or is not a file; give'):
        check_file(missing, 'ca_path', 'the CA bundle')
    assert check_file(None, 'ca_path', 'the CA bundle') is None


@pytest.mark.parametrize('seconds', [0, -1, float('inf'), float('nan'), 1e300])
def test_unusable_timeouts_are_refused(seconds):
    with pytest.raises(HttpOptionError, match='is out of range; give seconds more than 0'):
        check_timeout(seconds)


def test_header_values_become_strings_and_line_breaks_are_refused_by_name():
    assert check_headers({'X-Retries': 3}) == {'X-Retries': '3'}
    with pytest.raises(HttpOptionError) as error:
        check_headers({'X-Api-Key': 'k3y\r\nX: y'})
    assert 'k3y' not in str(error.value) and "'X-Api-Key' holds a line break" in str(error.value)
