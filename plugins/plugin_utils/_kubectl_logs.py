# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The logs of many replicas from one `kubectl logs -l`, instead of one module run per pod.

kubectl sends the pods' log requests side by side (--max-log-requests) and prefixes each line with its pod. Its
command line carries the connection options: only those that are no secret (a kubeconfig file, a context, the
server, certificate files) are turned into flags. A bearer token, an inline kubeconfig or any other option gives
None: the caller reads the pods one by one through the API instead.
"""

from __future__ import annotations

import re

_FLAGS = {'kubeconfig': '--kubeconfig', 'context': '--context', 'host': '--server',
          'ca_cert': '--certificate-authority', 'client_cert': '--client-certificate', 'client_key': '--client-key'}
_PREFIX = re.compile(r'^\[pod/([^/\]]+)/[^\]]*\] ?(.*)$')


def _template_hashes(pods: list) -> list:
    return sorted({pod['metadata'].get('labels', {}).get('pod-template-hash', '') for pod in pods})


def kubectl_logs_argv(auth: dict, namespace: str, selector: str, pods: list, container: str) -> list | None:
    """argv of one `kubectl logs` for every pod of `pods` (found by selector and their ReplicaSets' template hashes)."""
    auth = auth or {}
    hashes = _template_hashes(pods)
    if not pods or '' in hashes:
        return None
    argv = ['kubectl']
    for key, value in auth.items():
        if key == 'validate_certs':
            argv += [] if value in (True, None) else ['--insecure-skip-tls-verify=true']
        elif key in _FLAGS and isinstance(value, str):
            argv += [f'{_FLAGS[key]}={value}'] if value else []
        elif value not in (None, ''):
            return None  # a token, an inline kubeconfig, a proxy...: not on a command line
    # the Deployment's own ReplicaSets only: another Deployment on the same selector (a canary) is left out
    pod_selector = f"{selector},pod-template-hash in ({','.join(hashes)})" if selector else \
        f"pod-template-hash in ({','.join(hashes)})"
    return argv + ['logs', f'--namespace={namespace}', f'--selector={pod_selector}', f'--container={container}',
                   '--prefix', '--tail=-1', f'--max-log-requests={max(len(pods), 1)}']


def pod_log_lines(lines: list, pod: str | None = None) -> list:
    """The lines of one pod (None: of every pod) in the output of kubectl logs --prefix, without the prefix."""
    kept = []
    for line in lines:
        match = _PREFIX.match(line)
        if match and pod in (None, match.group(1)):
            kept.append(match.group(2))
    return kept
