# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How the keys of an endpoint's settings reach what calls the endpoint, in one place:
- vllm_dr_http, the service's endpoints: the refresh probe (the vllm_refresh_probe module, in the diagnosis and the
  validation) and the health check (ansible.builtin.uri). `retries` is the diagnosis probe's own, given by its task.
  The health check gets the TLS options only: ansible.builtin.uri does not hide its headers, and vLLM's /health asks
  for no API key, so `headers` (an API key of the gateway) goes to the probe alone, which hides them.
- vllm_dr_introspection, the identity provider's RFC 7662 introspection endpoint: the session modules that judge a
  session by it (vllm_session_info in the diagnosis, vllm_session_sweep in the purge), as introspection_<key>.
The roles' argument specs list the keys and refuse any other."""

from __future__ import annotations

from collections.abc import Mapping

# the settings' key -> the option of each caller that takes it
TARGETS = {
    'probe': {'ca_path': 'http_ca_path', 'validate_certs': 'http_validate_certs', 'client_cert': 'http_client_cert',
              'client_key': 'http_client_key', 'headers': 'headers'},
    'uri': {'ca_path': 'ca_path', 'validate_certs': 'validate_certs', 'client_cert': 'client_cert',
            'client_key': 'client_key'},
    'introspection': {key: f'introspection_{key}'
                      for key in ('url', 'client_id', 'client_secret', 'validate_certs', 'ca_path')},
}
# each target's settings: (the variable, every key it takes)
SETTINGS = {
    'probe': ('vllm_dr_http', sorted(TARGETS['probe']) + ['retries']),
    'uri': ('vllm_dr_http', sorted(TARGETS['probe']) + ['retries']),
    'introspection': ('vllm_dr_introspection', sorted(TARGETS['introspection'])),
}


def endpoint_args(options, target: str) -> dict:
    """The arguments `target` ('probe', 'uri' or 'introspection') takes from `options` (vllm_dr_http, or
    vllm_dr_introspection): the keys it knows, each under its own name; a key left empty (None) is not passed, so
    the module's default holds."""
    if target not in TARGETS:
        raise ValueError(f'unknown target {target!r}: give one of {", ".join(sorted(TARGETS))}')
    if not options:
        return {}
    if not isinstance(options, Mapping):
        variable, keys = SETTINGS[target]
        raise ValueError(f'{variable} must be a dict of {", ".join(keys[:-1])} and {keys[-1]}, '
                         f'not {type(options).__name__}')
    headers = options.get('headers')
    if headers is not None and not isinstance(headers, Mapping):
        # a string would reach the probe whole, and only the whole string would be hidden, not each value
        raise ValueError('vllm_dr_http.headers must be a dict of header names and values (YAML mapping), not '
                         f'{type(headers).__name__}')
    names = TARGETS[target]
    return {names[key]: value for key, value in options.items() if key in names and value is not None}
