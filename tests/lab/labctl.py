"""Drive the incident lab: up, snapshot, rotate, restore, down (and status, restart, refresh).

    python -m lab.labctl --state DIR up [--sessions N] [--tls] [--redis-password P] [--echo-token] [--idp keycloak]
    python -m lab.labctl --state DIR snapshot     # Redis SAVE + copies of the RDB and token_cache.db (mtime kept)
    python -m lab.labctl --state DIR rotate       # every session refreshed at the provider: the snapshot's tokens are revoked
    python -m lab.labctl --state DIR restore      # stop, put the RDB and the cache back, start
    python -m lab.labctl --state DIR restart      # restart the gateway (the runbook's restart command)
    python -m lab.labctl --state DIR refresh SID  # POST /api/v1/refresh_token with the session's stored token
    python -m lab.labctl --state DIR revoke SID   # the provider revokes the session's refresh token (RFC 7009)
    python -m lab.labctl --state DIR fault race|reject-refresh   # a one-shot fault: the gateway's own refresh
                                                  # races the next request / the provider rejects the next refresh
    python -m lab.labctl --state DIR down

Everything listens on free loopback ports; DIR/lab.json records them, with the
pids, the session ids and, after a restore, ``restored_at``. The services are
real: redis-server, the identity provider and the gateway under gunicorn.

The identity provider is the lab's Authlib server (``--idp authlib``, the default: it starts in a
second), or Keycloak (``--idp keycloak``): a realm with refresh-token rotation in a Keycloak started
for the lab (a minute or two), or in one already running (``--keycloak-url``, its administrator in
VLLM_DR_KEYCLOAK_ADMIN_USER and VLLM_DR_KEYCLOAK_ADMIN_PASSWORD). With Keycloak the gateway
answers a refused refresh with Keycloak's own status and error.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS_DIR)

from harness.servers import TlsFiles, free_port, gunicorn_command, process_alive, require_binary  # noqa: E402  pylint: disable=wrong-import-position
from harness import keycloak as _keycloak  # noqa: E402  pylint: disable=wrong-import-position
from lab import keycloak as _realm  # noqa: E402  pylint: disable=wrong-import-position

LAB_CLIENT = ('svc-vllm', 'svc-vllm-lab-secret')
INTROSPECTION_CLIENT = ('vllm-dr', 'vllm-dr-lab-secret')
START_TIMEOUT = 30.0
IDPS = ('authlib', 'keycloak')


class LabError(RuntimeError):
    pass


class Lab:
    def __init__(self, state_dir: str):
        self.dir = os.path.abspath(state_dir)
        self.state_file = os.path.join(self.dir, 'lab.json')
        self.state = self._load()

    # ---- state -------------------------------------------------------------------------------

    def _load(self) -> dict:
        if os.path.exists(self.state_file):
            with open(self.state_file, encoding='utf-8') as handle:
                return json.load(handle)
        return {}

    def _save(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        with open(self.state_file, 'w', encoding='utf-8') as handle:
            json.dump(self.state, handle, indent=2, sort_keys=True)

    def path(self, *parts) -> str:
        return os.path.join(self.dir, *parts)

    @property
    def gateway_url(self) -> str:
        scheme = 'https' if self.state.get('tls') else 'http'
        return f'{scheme}://127.0.0.1:{self.state["ports"]["gateway"]}'

    @property
    def keycloak(self) -> dict | None:
        """The Keycloak the lab uses (url, realm, admin, own), or None for the Authlib provider."""
        return self.state.get('keycloak')

    @property
    def idp_url(self) -> str:
        if self.keycloak:
            return _realm.realm_url(self.keycloak['url'], self.keycloak['realm'])
        return f'http://127.0.0.1:{self.state["ports"]["idp"]}'

    @property
    def token_url(self) -> str:
        if self.keycloak:
            return _realm.token_url(self.keycloak['url'], self.keycloak['realm'])
        return f'{self.idp_url}/oauth/token'

    @property
    def introspection_url(self) -> str:
        if self.keycloak:
            return _realm.introspection_url(self.keycloak['url'], self.keycloak['realm'])
        return f'{self.idp_url}/oauth/introspect'

    def keycloak_api(self):
        return _keycloak.KeycloakApi(self.keycloak['url'], self.keycloak['admin'])

    @property
    def config_path(self) -> str:
        return self.path('vllm.yaml')

    @property
    def cache_path(self) -> str:
        return self.path('data', 'token_cache.db')

    @property
    def log_path(self) -> str:
        return self.path('logs', 'vllm.log')

    # ---- processes ---------------------------------------------------------------------------

    def _spawn(self, name: str, command: list, env: dict | None = None) -> None:
        os.makedirs(self.path('logs'), exist_ok=True)
        with open(self.path('logs', f'{name}.out'), 'ab') as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,  # pylint: disable=consider-using-with
                                       env=dict(os.environ, PYTHONPATH=TESTS_DIR, **(env or {})), start_new_session=True)
        self.state.setdefault('pids', {})[name] = process.pid
        self._save()

    def _wait(self, name: str, probe, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._alive(name):
                raise LabError(f'{name} exited; see {self.path("logs", name + ".out")}')
            try:
                if probe():
                    return
            except Exception:  # pylint: disable=broad-except  # not up yet
                pass
            time.sleep(0.05)
        raise LabError(f'{name} did not start in {timeout:g}s; see {self.path("logs", name + ".out")}')

    def _alive(self, name: str) -> bool:
        pid = self.state.get('pids', {}).get(name)
        return bool(pid) and process_alive(pid)

    def _stop(self, name: str) -> None:
        pid = self.state.get('pids', {}).pop(name, None)
        self._save()
        if not pid:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not process_alive(pid):
                    return
                time.sleep(0.05)

    def _start_redis(self) -> None:
        os.makedirs(self.path('redis'), exist_ok=True)
        conf = self.path('redis', 'redis.conf')
        lines = [f'port {self.state["ports"]["redis"]}', 'bind 127.0.0.1', f'dir {self.path("redis")}',
                 'dbfilename dump.rdb', 'save ""', 'appendonly no', 'daemonize no', f'logfile {self.path("logs", "redis.log")}']
        if self.state.get('redis_password'):
            lines.append(f'requirepass {self.state["redis_password"]}')
        with open(conf, 'w', encoding='utf-8') as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write('\n'.join(lines) + '\n')
        self._spawn('redis', [require_binary('redis-server'), conf])

    def _wait_redis(self) -> None:
        self._wait('redis', lambda: self._redis().ping())

    def _redis(self):
        import redis  # pylint: disable=import-outside-toplevel
        return redis.Redis(host='127.0.0.1', port=self.state['ports']['redis'], password=self.state.get('redis_password'),
                           socket_timeout=5, decode_responses=True)

    def _gunicorn(self, app: str, port: int, tls: bool = False) -> list:
        files = self.state.get('tls_files', {}) if tls else {}
        return gunicorn_command(app, port, files.get('cert'), files.get('key'))

    def _start_idp(self) -> None:
        self._spawn('idp', self._gunicorn('lab.idp:create_app()', self.state['ports']['idp']),
                    {'VLLM_LAB_IDP_DB': self.path('idp', 'idp.db')})

    def _wait_idp(self) -> None:
        self._wait('idp', lambda: self._get(f'{self.idp_url}/healthz')[0] == 200)

    def _start_keycloak(self) -> None:
        """A Keycloak of the lab's own, its H2 database in DIR/keycloak; configured once it serves."""
        server = _keycloak.KeycloakServer(workdir=self.path('keycloak'))
        server.home = _keycloak.install()
        server.port, server.management_port = self.state['ports']['keycloak'], self.state['ports']['keycloak_management']
        with _keycloak.start_lock(server.home):
            self._spawn('keycloak', server._command(), server._environment())  # pylint: disable=protected-access
            self._wait('keycloak', lambda: _keycloak.ready(server.url), timeout=server.start_timeout)

    def _configure_keycloak(self) -> None:
        _realm.create_realm(self.keycloak_api(), self.keycloak['realm'])

    def start_gateway(self) -> None:
        self._spawn('gateway', self._gunicorn('lab.gateway:create_app()', self.state['ports']['gateway'],
                                              tls=self.state.get('tls', False)),
                    {'VLLM_LAB_CONFIG': self.config_path})
        self._wait('gateway', lambda: self._get(f'{self.gateway_url}/healthz')[0] == 200)

    def stop_gateway(self) -> None:
        self._stop('gateway')

    # ---- HTTP --------------------------------------------------------------------------------

    def _context(self):
        if not self.state.get('tls'):
            return None
        return ssl.create_default_context(cafile=self.state['tls_files']['ca'])

    def _get(self, url: str):
        with urllib.request.urlopen(url, timeout=5, context=self._context()) as response:  # nosec: the lab on loopback
            return response.status, json.load(response)

    def _post(self, url: str, payload: dict, headers: dict | None = None):
        request = urllib.request.Request(url, data=json.dumps(payload).encode(), method='POST',
                                         headers=dict({'Content-Type': 'application/json'}, **(headers or {})))
        try:
            with urllib.request.urlopen(request, timeout=10, context=self._context()) as response:  # nosec: loopback
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b'{}')

    # ---- the commands ------------------------------------------------------------------------

    def up(self, sessions: int = 5, tls: bool = False, redis_password: str | None = None, echo_token: bool = False,
           idp: str = 'authlib', keycloak_url: str | None = None, keycloak_admin=None, realm: str = 'vllm-lab') -> dict:
        """Start the lab; with ``redis_password`` Redis requires it (requirepass) and vllm.yaml and the inventory carry it;
        with ``echo_token`` the gateway repeats a rejected refresh token in its error (lab_echo_token).

        ``idp`` keycloak: the provider is a Keycloak realm ``realm``, in the Keycloak at ``keycloak_url`` (administered
        as ``keycloak_admin``, (user, password)) or, without a URL, in a Keycloak the lab starts and stops itself."""
        if self.state.get('pids'):
            raise LabError(f'the lab in {self.dir} is already up; run down first')
        if idp not in IDPS:
            raise LabError(f'unknown identity provider {idp!r}; give one of {", ".join(IDPS)}')
        for directory in ('data', 'logs', 'idp', 'redis', 'snapshot'):
            os.makedirs(self.path(directory), exist_ok=True)
        self.state = {'ports': {'redis': free_port(), 'idp': free_port(), 'gateway': free_port()},
                      'tls': tls, 'sessions': [f's{i}' for i in range(sessions)] + ['probe'],
                      'service_session': 'svc', 'started_at': time.time(), 'idp': idp}
        if idp == 'keycloak':
            own = keycloak_url is None
            if own:
                self.state['ports'].update(keycloak=free_port(), keycloak_management=free_port())
                keycloak_url = f'http://127.0.0.1:{self.state["ports"]["keycloak"]}'
            self.state['keycloak'] = {'url': keycloak_url, 'realm': realm, 'own': own,
                                      'admin': list(keycloak_admin or _keycloak.ADMIN)}
        if redis_password:
            self.state['redis_password'] = redis_password
        if echo_token:
            self.state['echo_token'] = True
        if tls:
            files = TlsFiles(self.path('tls'))
            self.state['tls_files'] = {'ca': files.ca_cert, 'cert': files.server_cert, 'key': files.server_key}
        self._write_config()
        self._save()
        try:
            if self.keycloak:
                # Keycloak takes minutes, not seconds: up and configured before the gateway signs itself in
                self._start_redis()
                if self.keycloak['own']:
                    self._start_keycloak()
                self._configure_keycloak()
                self.state['realm_created'] = True
                self._save()
                self._wait_redis()
                self.start_gateway()
            else:
                # all three start at once: the gateway waits for the provider when it signs itself in
                self._start_redis()
                self._start_idp()
                self._wait_redis()
                self.start_gateway()
                self._wait_idp()
            for sid in self.state['sessions']:
                status, _body = self._post(f'{self.gateway_url}/api/v1/sessions', {'session_id': sid})
                if status != 201:
                    raise LabError(f'signing in session {sid} failed with HTTP {status}')
        except BaseException:
            # what did start is stopped: the callers' clean-up runs only once the lab is up
            self.down()
            raise
        self.state['up_at'] = time.time()
        self._save()
        return self.status()

    def _write_config(self) -> None:
        config = {
            'session_state_store': {'type': 'redis', 'address': f'127.0.0.1:{self.state["ports"]["redis"]}',
                                    'refresh_on_startup': False},
            'token_cache': {'path': self.cache_path, 'max_size': 1000},
            'oauth': {'token_url': self.token_url, 'client_id': LAB_CLIENT[0], 'client_secret': LAB_CLIENT[1]},
            'service_session_id': self.state['service_session'],
            'log_file': self.log_path,
        }
        if self.state.get('redis_password'):
            config['session_state_store']['password'] = self.state['redis_password']
        if self.state.get('echo_token'):
            config['lab_echo_token'] = True
        config['lab_race_file'] = self.path('faults', 'race_next_refresh')
        if self.keycloak:
            # the provider's own answer to a refused refresh, as a gateway in front of Keycloak gives it
            config['oauth']['relay_errors'] = True
        with open(self.config_path, 'w', encoding='utf-8') as handle:
            yaml.safe_dump(config, handle, sort_keys=False)

    def snapshot(self) -> dict:
        self._redis().save()
        shutil.copy2(self.path('redis', 'dump.rdb'), self.path('snapshot', 'dump.rdb'))
        for name in os.listdir(self.path('snapshot')):
            if name.startswith('token_cache.db'):
                os.unlink(self.path('snapshot', name))
        for suffix in ('', '-wal', '-shm', '-journal'):
            if os.path.exists(self.cache_path + suffix):
                shutil.copy2(self.cache_path + suffix, self.path('snapshot', 'token_cache.db' + suffix))
        self.state['snapshot_at'] = time.time()
        self._save()
        return {'snapshot_at': self.state['snapshot_at']}

    def session(self, sid: str) -> dict:
        return self._redis().hgetall(f'vllm:session:{sid}')

    def refresh(self, sid: str):
        """What a client of the gateway does: refresh with the session's stored refresh token."""
        token = self.session(sid).get('refresh_token', '')
        return self._post(f'{self.gateway_url}/api/v1/refresh_token', {'client_id': LAB_CLIENT[0]},
                          {'Authorization': f'Bearer {token}'})

    def rotate(self, keep=()) -> dict:
        """Every session refreshed at the provider (but those in ``keep``): the snapshot's refresh tokens are revoked."""
        rotated = []
        for sid in self.state['sessions'] + [self.state['service_session']]:
            if sid in keep:
                continue
            status, _body = self.refresh(sid)
            if status != 200:
                raise LabError(f'rotating session {sid} failed with HTTP {status}; is the lab healthy?')
            rotated.append(sid)
        return {'rotated': rotated}

    def restore(self) -> dict:
        if not os.path.exists(self.path('snapshot', 'dump.rdb')):
            raise LabError('no snapshot to restore; run snapshot first')
        self.stop_gateway()
        self._stop('redis')
        shutil.copy2(self.path('snapshot', 'dump.rdb'), self.path('redis', 'dump.rdb'))
        for suffix in ('', '-wal', '-shm', '-journal'):
            target = self.cache_path + suffix
            if os.path.exists(target):
                os.unlink(target)
            if os.path.exists(self.path('snapshot', 'token_cache.db' + suffix)):
                shutil.copy2(self.path('snapshot', 'token_cache.db' + suffix), target)
        self._start_redis()
        self._wait_redis()
        self.start_gateway()
        # restored_at has whole seconds, as an operator writes it; a real restore ends long after its snapshot, the
        # lab's within the same second: wait for the next second so that the snapshot's files are older than it.
        # restored_at is written from the same reading of the clock that ended the wait: time.gmtime() without an
        # argument reads the kernel's coarse clock, a few milliseconds behind time.time(), and then still gave the
        # snapshot's own second now and then (the restored cache looked written after the restore)
        next_second = math.floor(self.state.get('snapshot_at', 0)) + 1
        now = time.time()
        while now < next_second:
            time.sleep(next_second - now)
            now = time.time()
        self.state['restored_at'] = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))
        self._save()
        return {'restored_at': self.state['restored_at']}

    def fault(self, kind: str) -> dict:
        """Arm a one-shot fault: ``race`` (the gateway refreshes the session of the next refresh request itself first)
        or ``reject-refresh`` (the provider answers the next refresh grant 400 invalid_grant, revoking nothing)."""
        path = {'race': self.path('faults', 'race_next_refresh'), 'reject-refresh': self.path('idp', 'reject_next_refresh')}[kind]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8'):
            pass
        return {'armed': kind}

    def revoke(self, sid: str) -> dict:
        """Revoke the session's refresh token at the provider (RFC 7009), as an administrator would."""
        token = self.session(sid).get('refresh_token', '')
        basic = base64.b64encode(f'{LAB_CLIENT[0]}:{LAB_CLIENT[1]}'.encode()).decode()
        request = urllib.request.Request(f'{self.idp_url}/oauth/revoke', method='POST',
                                         data=urllib.parse.urlencode({'token': token, 'token_type_hint': 'refresh_token'}).encode(),
                                         headers={'Authorization': f'Basic {basic}'})
        with urllib.request.urlopen(request, timeout=10) as response:  # nosec: the lab's own provider on loopback
            return {'revoked': sid, 'status': response.status}

    def restart(self) -> dict:
        self.stop_gateway()
        self.start_gateway()
        return {'restarted_at': time.time()}

    def down(self) -> dict:
        # a restart through `labctl restart` (the runbook's restart command) ran in another process: its pids are on disk
        self.state = self._load()
        for name in ('gateway', 'idp', 'redis'):
            self._stop(name)
        if self.keycloak and not self.keycloak['own'] and self.state.pop('realm_created', False):
            # a shared Keycloak keeps serving others: only this lab's realm goes
            try:
                _realm.delete_realm(self.keycloak_api(), self.keycloak['realm'])
            except (OSError, RuntimeError) as exc:
                print(f'labctl down: the realm {self.keycloak["realm"]} stays in {self.keycloak["url"]}: {exc}',
                      file=sys.stderr)
            self._save()
        self._stop('keycloak')
        return {'down': True}

    def inventory(self, report_dir: str | None = None) -> dict:
        """An Ansible inventory that points the runbook at this lab (host platform, restart through labctl)."""
        labctl = f'{sys.executable} {os.path.abspath(__file__)} --state {self.dir}'
        host = {
            'ansible_connection': 'local',
            'ansible_python_interpreter': sys.executable,
            'vllm_dr_platform': 'host',
            'vllm_dr_restored_at': self.state.get('restored_at') or '',
            'vllm_dr_cache_path': self.cache_path,
            'vllm_dr_config_path': self.config_path,
            'vllm_dr_log_path': self.log_path,
            'vllm_dr_store': {'backend': 'redis', 'login_host': '127.0.0.1', 'login_port': self.state['ports']['redis']},
            # tokens were rotated, not expired: ask the provider which sessions are dead
            'vllm_dr_sweep_select': 'revoked',
            'vllm_dr_introspection': {'url': self.introspection_url, 'client_id': INTROSPECTION_CLIENT[0],
                                      'client_secret': INTROSPECTION_CLIENT[1]},
            'vllm_dr_refresh_url': f'{self.gateway_url}/api/v1/refresh_token',
            'vllm_dr_health_url': f'{self.gateway_url}/healthz',
            'vllm_dr_probe_session': self.state['service_session'],
            'vllm_dr_client_id': LAB_CLIENT[0],
            'vllm_dr_restart_command': f'{labctl} restart',
            'vllm_dr_drill_snapshot_command': f'{labctl} snapshot',
            'vllm_dr_drill_rotate_command': f'{labctl} rotate',
            'vllm_dr_drill_restore_command': f'{labctl} restore',
            'vllm_dr_backup_dir': self.path('backups'),
            'vllm_dr_report_dir': report_dir or self.path('reports'),
        }
        if self.state.get('redis_password'):
            host['vllm_dr_store']['login_password'] = self.state['redis_password']
        if self.state.get('tls'):
            host['vllm_dr_http'] = {'ca_path': self.state['tls_files']['ca']}
        return {'all': {'children': {'vllm': {'hosts': {'lab': host}}}}}

    def _processes(self) -> list:
        """The processes this lab runs: a shared Keycloak is not one of them."""
        if not self.keycloak:
            return ['redis', 'idp', 'gateway']
        return ['redis'] + (['keycloak'] if self.keycloak['own'] else []) + ['gateway']

    def status(self) -> dict:
        return {'dir': self.dir, 'gateway': self.gateway_url, 'idp': self.idp_url, 'provider': self.state.get('idp', 'authlib'),
                'redis': f'127.0.0.1:{self.state["ports"]["redis"]}', 'config': self.config_path,
                'cache': self.cache_path, 'log': self.log_path, 'sessions': self.state['sessions'],
                'service_session': self.state['service_session'], 'restored_at': self.state.get('restored_at'),
                'running': {name: self._alive(name) for name in self._processes()},
                'ca': self.state.get('tls_files', {}).get('ca')}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='labctl', description='vllm_dr incident lab')
    parser.add_argument('--state', default=os.environ.get('VLLM_DR_LAB', os.path.join(TESTS_DIR, 'lab', '.state')))
    sub = parser.add_subparsers(dest='command', required=True)
    up = sub.add_parser('up')
    up.add_argument('--sessions', type=int, default=5)
    up.add_argument('--tls', action='store_true')
    up.add_argument('--redis-password', help='make Redis require this password (requirepass)')
    up.add_argument('--echo-token', action='store_true', help='the gateway repeats a rejected token in its error')
    up.add_argument('--idp', choices=IDPS, default=os.environ.get('VLLM_DR_LAB_IDP') or 'authlib',
                    help='the identity provider: the lab\'s Authlib server, or a realm in Keycloak')
    up.add_argument('--keycloak-url', help='a running Keycloak to make the realm in (else the lab starts one)')
    up.add_argument('--realm', default='vllm-lab', help='the Keycloak realm to create')
    for name in ('snapshot', 'rotate', 'restore', 'restart', 'down', 'status'):
        sub.add_parser(name)
    refresh = sub.add_parser('refresh')
    refresh.add_argument('session_id')
    sub.add_parser('revoke').add_argument('session_id')
    sub.add_parser('fault').add_argument('kind', choices=['race', 'reject-refresh'])
    for name in ('inventory', 'vars'):
        sub.add_parser(name).add_argument('--report-dir')
    args = parser.parse_args(argv)
    lab = Lab(args.state)
    try:
        if args.command == 'up':
            admin = (os.environ.get('VLLM_DR_KEYCLOAK_ADMIN_USER', _keycloak.ADMIN[0]),
                     os.environ.get('VLLM_DR_KEYCLOAK_ADMIN_PASSWORD', _keycloak.ADMIN[1]))
            result = lab.up(args.sessions, args.tls, args.redis_password, args.echo_token, idp=args.idp,
                            keycloak_url=args.keycloak_url, keycloak_admin=admin, realm=args.realm)
        elif args.command == 'vars':
            print(yaml.safe_dump(lab.inventory(args.report_dir)['all']['children']['vllm']['hosts']['lab'],
                                 sort_keys=False), end='')
            return 0
        elif args.command == 'inventory':
            print(yaml.safe_dump(lab.inventory(args.report_dir), sort_keys=False), end='')
            return 0
        elif args.command == 'revoke':
            result = lab.revoke(args.session_id)
        elif args.command == 'fault':
            result = lab.fault(args.kind)
        elif args.command == 'refresh':
            status, body = lab.refresh(args.session_id)
            result = {'status': status, 'error': body.get('error'), 'error_description': body.get('error_description')}
        else:
            result = getattr(lab, args.command)()
    except (RuntimeError, OSError) as exc:  # LabError, and a Keycloak that could not be installed or configured
        print(f'labctl {args.command}: {exc}', file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
