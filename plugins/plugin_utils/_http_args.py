# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How vllm_dr_http's keys reach what calls the service's endpoints, in one place: the refresh probe (the
vllm_refresh_probe module, in the diagnosis and the validation) and the health check (ansible.builtin.uri). The roles'
argument specs list the keys and refuse any other; `retries` is the diagnosis probe's own, given by its task.

The health check gets the TLS options only: ansible.builtin.uri does not hide its headers, and vLLM's /health asks for
no API key, so `headers` (an API key of the gateway) goes to the probe alone, which hides them."""

from __future__ import annotations

from collections.abc import Mapping

# vllm_dr_http key -> the option of each caller that takes it
TARGETS = {
    'probe': {'ca_path': 'http_ca_path', 'validate_certs': 'http_validate_certs', 'client_cert': 'http_client_cert',
              'client_key': 'http_client_key', 'headers': 'headers'},
    'uri': {'ca_path': 'ca_path', 'validate_certs': 'validate_certs', 'client_cert': 'client_cert',
            'client_key': 'client_key'},
}


def endpoint_args(options, target: str) -> dict:
    """The arguments `target` ('probe' or 'uri') takes from `options` (vllm_dr_http): the keys it knows, each under
    its own name; a key left empty (None) is not passed, so the module's default holds."""
    if target not in TARGETS:
        raise ValueError(f'unknown target {target!r}: give one of {", ".join(sorted(TARGETS))}')
    if not options:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f'vllm_dr_http must be a dict of {", ".join(sorted(TARGETS["probe"]))} and retries, '
                         f'not {type(options).__name__}')
    headers = options.get('headers')
    if headers is not None and not isinstance(headers, Mapping):
        # a string would reach the probe whole, and only the whole string would be hidden, not each value
        raise ValueError('vllm_dr_http.headers must be a dict of header names and values (YAML mapping), not '
                         f'{type(headers).__name__}')
    names = TARGETS[target]
    return {names[key]: value for key, value in options.items() if key in names and value is not None}
