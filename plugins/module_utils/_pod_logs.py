# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The logs of many pods, read side by side and counted for the incident's evidence as each arrives.

A pod's log text stays inside this module: each one is scanned (``_log_evidence.scan``) as soon as it is read and
only its counts are kept, so the text (which may hold secrets) never reaches a task result.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from ._log_evidence import INCIDENT_PATTERNS, merge, scan

try:
    from kubernetes.client.exceptions import ApiException
except ImportError:  # the module shell reports the missing library before anything here runs
    class ApiException(Exception):  # type: ignore[no-redef]
        status = None

try:
    from urllib3.exceptions import HTTPError as TransportError
except ImportError:
    class TransportError(Exception):  # type: ignore[no-redef]
        pass

READ = 'read'
GONE = 'gone'
MAX_WORKERS = 64


class PodGone(Exception):
    """The pod no longer exists (deleted between listing and reading)."""


class PodLogError(Exception):
    """A pod's log could not be read for another reason than the pod being gone; the message names the pod."""


def pod_result(name: str, text: str | None, since=None, patterns=INCIDENT_PATTERNS) -> tuple:
    """(what was read from pod ``name``, its evidence); ``text`` None: the pod was gone."""
    if text is None:
        evidence = scan('', since, patterns)
        return {'name': name, 'state': GONE, 'lines': 0, 'lines_scanned': 0, 'error_lines': 0}, evidence
    evidence = scan(text, since, patterns)
    return ({'name': name, 'state': READ, 'lines': len(text.splitlines()),
             'lines_scanned': evidence['lines_scanned'], 'error_lines': evidence['error_lines']}, evidence)


def unique(names) -> list:
    """The names in their order, each once."""
    return list(dict.fromkeys(names))


def read_logs(read, pods, since=None, patterns=INCIDENT_PATTERNS, workers: int = 10) -> dict:
    """Read the log of every pod in ``pods`` with ``read(name) -> text`` (which raises PodGone for a pod that no
    longer exists), at most ``workers`` at a time, and count the evidence per pod and over all of them.

    The first PodLogError (in the order of ``pods``) is raised once every read has ended.
    """
    names = unique(pods)

    def one(name):
        try:
            text = read(name)
        except PodGone:
            text = None
        return pod_result(name, text, since, patterns)

    if not names:
        results = []
    else:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
            futures = [pool.submit(one, name) for name in names]
        results = [future.result() for future in futures]
    per_pod = [result[0] for result in results]
    return {'evidence': merge((result[1] for result in results), since, patterns), 'pods': per_pod,
            'gone': [pod['name'] for pod in per_pod if pod['state'] == GONE]}


def _api_message(exc) -> str:
    """The API server's own message from a Status body, else the HTTP reason."""
    body = getattr(exc, 'body', None)
    try:
        message = json.loads(body).get('message') if body else None
    except (ValueError, TypeError, AttributeError):
        message = None
    return message or exc.reason or 'no reason given'


def api_error(exc, namespace: str, name: str) -> Exception:
    """PodGone for a 404, else a PodLogError whose one line names the pod, the answer and what to check."""
    if exc.status == 404:
        return PodGone(name)
    advice = {
        401: 'check the credentials in the connection options',
        403: 'grant get on pods/log in the namespace (roles/restore/files/rbac.yml)',
        400: 'check the container name and that the container has started',
    }.get(exc.status, 'check the API server')
    return PodLogError(f'reading the log of pod {name} in namespace {namespace} failed: {exc.status} '
                       f'{_api_message(exc)}; {advice}')


def api_reader(core_v1, namespace: str, container: str | None = None, timeout: float | None = None):
    """read(name) -> the log text of pod ``name`` through ``core_v1.read_namespaced_pod_log``.

    The body is taken raw and decoded here: the client's own deserialization would parse a log that happens to be
    valid JSON. Bytes that are not UTF-8 are replaced, never an error.
    """
    def read(name):
        kwargs = {'_preload_content': False}
        if container:
            kwargs['container'] = container
        if timeout:
            kwargs['_request_timeout'] = timeout
        try:
            response = core_v1.read_namespaced_pod_log(name, namespace, **kwargs)
            return response.data.decode('utf-8', errors='replace')
        except ApiException as exc:
            raise api_error(exc, namespace, name) from None
        except TransportError as exc:
            raise PodLogError(f'reading the log of pod {name} in namespace {namespace} failed: the API server did '
                              f'not answer ({type(exc).__name__}); check the host and the network') from None
    return read
