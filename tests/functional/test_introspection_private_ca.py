"""The runbook asks an identity provider behind a private CA which sessions are revoked: vllm_dr_introspection's
ca_path reaches the session modules (the lab's provider, served a second time over TLS from the same database, with a
certificate of the test's own CA). Without it, the run stops in the diagnosis naming the certificate; a key the
runbook does not know is refused before the run starts."""

from __future__ import annotations

import json
import ssl
import urllib.request

import pytest

from harness.lab_runs import incident_lab, run_with
from harness.reports import report_path
from harness.servers import LOOPBACK, IdpServer, TlsFiles, gunicorn_command
from lab.keycloak import INTROSPECTION_CLIENT


class TlsProvider(IdpServer):
    """The lab's provider app served over https with `tls`'s certificate, on the lab's own database."""

    def __init__(self, workdir: str, db_path: str, tls: TlsFiles):
        super().__init__(workdir)
        self.db_path, self.tls = db_path, tls

    @property
    def url(self) -> str:
        return f'https://{LOOPBACK}:{self.port}'

    def _command(self) -> list:
        return gunicorn_command('lab.idp:create_app()', self.port, self.tls.server_cert, self.tls.server_key)

    def _ready(self) -> bool:
        context = ssl.create_default_context(cafile=self.tls.ca_cert)
        with urllib.request.urlopen(f'{self.url}/healthz', timeout=1, context=context) as response:  # nosec: loopback
            return json.load(response).get('status') == 'ok'


@pytest.fixture
def tls_provider_lab(tmp_path):
    """The lab after the incident, and its provider served over https by a certificate of a CA of the test's own."""
    with incident_lab(tmp_path) as lab:
        tls = TlsFiles(str(tmp_path / 'tls'))
        with TlsProvider(str(tmp_path / 'idp-tls'), lab.path('idp', 'idp.db'), tls) as provider:
            lab.tls_introspection = {'url': f'{provider.url}/oauth/introspect',
                                     'client_id': INTROSPECTION_CLIENT[0], 'client_secret': INTROSPECTION_CLIENT[1]}
            lab.tls = tls
            yield lab


def run(lab, tmp_path, introspection: dict, *extra) -> tuple:
    return run_with(lab, tmp_path, {'vllm_dr_introspection': introspection}, *extra)


def test_the_runbook_asks_a_provider_behind_a_private_ca_through_ca_path_and_recovers(tls_provider_lab, tmp_path):
    lab = tls_provider_lab
    rc, output = run(lab, tmp_path, dict(lab.tls_introspection, ca_path=lab.tls.ca_cert))
    assert rc == 0, output[-4000:]
    result = json.loads(report_path(tmp_path / 'reports', 'lab.json').read_text())
    # every session of the snapshot holds a refresh token the provider rotated since: revoked, by its answer, in the
    # diagnosis and again in the sweep
    sessions = result['diagnosis']['sessions']
    assert sessions['select'] == 'revoked' and sessions['matched'] >= 3, sessions
    assert result['purge']['sessions_deleted'] == sessions['matched'], result['purge']
    assert result['passed'] is True, result['validation']


def test_without_the_ca_the_run_stops_in_the_diagnosis_naming_the_certificate(tls_provider_lab, tmp_path):
    lab = tls_provider_lab
    rc, output = run(lab, tmp_path, lab.tls_introspection, '--check')
    assert rc != 0
    assert 'CERTIFICATE_VERIFY_FAILED' in output or 'certificate verify failed' in output, output[-4000:]
    assert 'Traceback' not in output


def test_a_key_the_runbook_does_not_know_is_refused_before_the_run_starts(tls_provider_lab, tmp_path):
    lab = tls_provider_lab
    rc, output = run(lab, tmp_path, dict(lab.tls_introspection, cacert=lab.tls.ca_cert), '--check')
    assert rc != 0
    assert 'cacert' in output and 'vllm_dr_introspection' in output, output[-4000:]
    assert INTROSPECTION_CLIENT[1] not in output
    # the run stopped at the role's argument check, before the diagnosis read anything
    result = json.loads(report_path(tmp_path / 'reports', 'lab.json').read_text())
    assert result['outcome'] == 'stopped' and result['diagnosis'] == {}, result
    assert 'vllm_dr_introspection.cacert' in result['reason'] and 'ca_path' in result['reason'], result['reason']
