"""A real Keycloak for the tests and the lab: installed once, started on free loopback ports, configured over its
admin REST API.

Keycloak's Quarkus distribution comes from Maven Central (tools/keycloak/install.sh, cached in
~/.cache/inferops-vllm-dr/keycloak-<version>) and runs on Temurin 25 with ``kc.sh start-dev``: H2 in the
server's own directory, nothing shared with another Keycloak but the installation. It takes a minute or
two to start on a loaded machine, so a test session starts one and gives every test a realm of its own.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request

from harness.servers import LOOPBACK, ServerError, _Process, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, 'tools', 'keycloak')
ADMIN = ('admin', 'keycloak-admin-lab-secret')


def _versions() -> dict:
    values = {}
    with open(os.path.join(TOOLS, 'versions.env'), encoding='utf-8') as handle:
        for line in handle:
            name, sep, value = line.strip().partition('=')
            if sep and not name.startswith('#'):
                values[name] = value
    return values


VERSIONS = _versions()
KEYCLOAK_VERSION = VERSIONS['KEYCLOAK_VERSION']


def install() -> str:
    """Keycloak's home directory, installed from Maven Central on first use (tools/keycloak/install.sh)."""
    out = subprocess.run(['bash', os.path.join(TOOLS, 'install.sh')], capture_output=True, text=True, timeout=1800,
                         check=False)
    if out.returncode != 0:
        raise ServerError(f'installing Keycloak {KEYCLOAK_VERSION} failed: {out.stderr.strip().splitlines()[-1:]}')
    return out.stdout.strip().splitlines()[-1]


@contextlib.contextmanager
def start_lock(home: str):
    """Held while a Keycloak of the installation ``home`` starts: a first start rewrites the installation's build
    (kc.sh's augmentation), which a second start beside it must not read half written."""
    with open(os.path.join(os.path.dirname(home), f'.{os.path.basename(home)}.start.lock'), 'w', encoding='ascii') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ready(url: str) -> bool:
    """Whether the Keycloak at ``url`` serves its master realm."""
    with urllib.request.urlopen(f'{url}/realms/master', timeout=2) as response:  # nosec: loopback only
        return response.status == 200


class KeycloakServer(_Process):
    """``kc.sh start-dev`` on free loopback ports (HTTP and management), its H2 database and logs in its directory.

    ``admin`` (user, password) is the bootstrap administrator of the master realm.
    """

    name = 'keycloak'
    start_timeout = 420.0
    start_attempts = 1

    def __init__(self, workdir: str | None = None, admin=ADMIN):
        super().__init__(workdir)
        self.admin = admin
        self.port = None
        self.management_port = None
        self.home = None
        self._api = None

    def _choose_ports(self) -> None:
        self.port, self.management_port = free_port(), free_port()

    @property
    def url(self) -> str:
        return f'http://{LOOPBACK}:{self.port}'

    def start(self):
        self.home = install()
        with start_lock(self.home):
            return super().start()

    def _command(self) -> list:
        return [os.path.join(self.home, 'bin', 'kc.sh'), 'start-dev', f'--http-host={LOOPBACK}',
                f'--http-port={self.port}', f'--http-management-port={self.management_port}',
                f'--db-url-path={os.path.join(self.dir, "h2")}', '--log-level=warn']

    def _environment(self) -> dict:
        java_home = os.environ.get('VLLM_DR_KEYCLOAK_JAVA_HOME', VERSIONS['KEYCLOAK_JAVA_HOME'])
        if not os.access(os.path.join(java_home, 'bin', 'java'), os.X_OK):
            raise ServerError(f'no Java at {java_home}; install Temurin 25 there or set VLLM_DR_KEYCLOAK_JAVA_HOME to a '
                              'JDK 21 or newer')
        # Java 24+ refuses Keycloak's access to java.lang unless it is opened; the transaction log stays in this
        # server's directory, not in the shared installation
        options = ['--add-opens=java.base/java.lang=ALL-UNNAMED',
                   f'-Dquarkus.transaction-manager.object-store.directory={os.path.join(self.dir, "transaction-logs")}']
        return dict(os.environ, JAVA_HOME=java_home, JAVA_OPTS_APPEND=' '.join(options),
                    KC_BOOTSTRAP_ADMIN_USERNAME=self.admin[0], KC_BOOTSTRAP_ADMIN_PASSWORD=self.admin[1])

    def _ready(self) -> bool:
        return ready(self.url)

    @property
    def api(self) -> 'KeycloakApi':
        if self._api is None:
            self._api = KeycloakApi(self.url, self.admin)
        return self._api


class KeycloakApi:
    """Calls to a running Keycloak at ``url``: its OAuth endpoints, and its admin REST API as ``admin`` (user, password)."""

    def __init__(self, url: str, admin=ADMIN):
        self.url = url
        self.admin = tuple(admin)
        self._admin_token = None

    # ---- the admin REST API ------------------------------------------------------------------

    def request(self, method: str, path: str, body=None, form=None, token=None, basic=None):
        """(status, decoded JSON or None) of one call to this Keycloak; an HTTP error is an answer, not an exception."""
        headers, data = {}, None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers['Content-Type'] = 'application/x-www-form-urlencoded'
        elif body is not None:
            data = json.dumps(body).encode()
            headers['Content-Type'] = 'application/json'
        if token:
            headers['Authorization'] = f'Bearer {token}'
        if basic:
            headers['Authorization'] = 'Basic ' + base64.b64encode(f'{basic[0]}:{basic[1]}'.encode()).decode()
        request = urllib.request.Request(f'{self.url}{path}', data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # nosec: loopback only
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw) if raw else None
            except ValueError:
                return exc.code, None

    def admin_call(self, method: str, path: str, body=None):
        """A call to /admin/realms... as the bootstrap administrator; a refused call raises ServerError."""
        for _attempt in range(2):
            if self._admin_token is None:
                status, reply = self.request('POST', '/realms/master/protocol/openid-connect/token', form={
                    'grant_type': 'password', 'client_id': 'admin-cli', 'username': self.admin[0],
                    'password': self.admin[1]})
                if status != 200:
                    raise ServerError(f'Keycloak refused its administrator (HTTP {status})')
                self._admin_token = reply['access_token']
            status, reply = self.request(method, f'/admin{path}', body=body, token=self._admin_token)
            if status == 401:  # the admin token expired
                self._admin_token = None
                continue
            if status >= 300:
                raise ServerError(f'Keycloak admin {method} {path} answered HTTP {status}: {reply}')
            return reply
        raise ServerError(f'Keycloak admin {method} {path}: the administrator is refused')
