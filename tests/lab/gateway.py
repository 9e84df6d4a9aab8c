"""The lab's reference token gateway: a vLLM token service that behaves as the incident describes.

- Reads the write-up's config file (vllm.yaml): ``session_state_store`` (``type``
  redis or etcd, ``address``, ``refresh_on_startup``, ``password`` for Redis) and ``token_cache`` (``path``,
  ``max_size``), plus an ``oauth`` section naming the identity provider.
- Sessions live in the store as Redis hashes ``vllm:session:<id>`` (``access_token``,
  ``refresh_token``, ``expires_at``) or etcd JSON values under ``vllm/session/``.
- ``token_cache.db`` is trusted first: a refresh uses the cached refresh token of the
  session when there is one, exactly why a restored cache keeps failing.
- ``POST /api/v1/refresh_token`` (Bearer refresh token, JSON ``{"client_id": ...}``)
  refreshes at the provider; a rejected refresh answers 401 ``invalid_grant`` and logs
  the write-up's lines. ``GET /healthz`` answers 200 while the store and cache work.
- With ``refresh_on_startup: true`` it removes sessions whose ``expires_at`` has passed
  when it starts; its own service session is created with client_credentials when missing.
- ``POST /api/v1/sessions`` (lab only) signs a client in: a new session from the provider.
- A file ``faults/race_next_refresh`` beside vllm.yaml (lab only, ``labctl fault race``): the next refresh request
  finds the service refreshing that session itself first, as its own refresher does now and then; the request then
  presents a token just rotated away (the race a probe of the service's own session can lose). Consumed once.
- ``oauth.relay_errors: true`` answers a refresh the provider refused with the provider's own status and
  body (Keycloak's HTTP 400 ``invalid_grant``, 401 ``unauthorized_client``, 404 for a realm it does not
  have), as a gateway in front of Keycloak does; without it a refused refresh is the write-up's 401.
- ``lab_echo_token: true`` (lab only) puts the presented token into the ``error_description``
  of a rejected refresh and into its log, as careless gateways do: what the runbook must never print.

Served by gunicorn (see labctl); ``create_app()`` reads the config path from VLLM_LAB_CONFIG.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml
from flask import Flask, jsonify, request

SESSION_PREFIX = 'vllm:session:'
ETCD_PREFIX = 'vllm/session/'
LOG_FORMAT = '%(asctime)s %(levelname)s %(message)s'
REVOKED = {'error': 'invalid_grant', 'error_description': 'Refresh token has been revoked'}


def iso(epoch: float) -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))


def parse_expiry(value) -> float | None:
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return time.mktime(time.strptime(text.replace('Z', ''), '%Y-%m-%dT%H:%M:%S')) - time.timezone
    except ValueError:
        return None


class RedisSessions:
    def __init__(self, address: str, password: str | None = None):
        import redis  # pylint: disable=import-outside-toplevel
        host, _sep, port = address.rpartition(':')
        self.client = redis.Redis(host=host or '127.0.0.1', port=int(port), password=password, socket_timeout=5,
                                  decode_responses=True)

    def get(self, sid: str) -> dict | None:
        return self.client.hgetall(SESSION_PREFIX + sid) or None

    def put(self, sid: str, fields: dict) -> None:
        self.client.hset(SESSION_PREFIX + sid, mapping=fields)

    def delete(self, sid: str) -> None:
        self.client.delete(SESSION_PREFIX + sid)

    def all(self):
        for key in self.client.scan_iter(match=SESSION_PREFIX + '*', count=1000):
            kind = self.client.type(key)
            fields = self.client.hgetall(key) if kind == 'hash' else None
            yield key[len(SESSION_PREFIX):], fields

    def ping(self) -> bool:
        return bool(self.client.ping())


class EtcdSessions:
    def __init__(self, address: str):
        import etcd3gw  # pylint: disable=import-outside-toplevel
        host, _sep, port = address.rpartition(':')
        self.client = etcd3gw.Etcd3Client(host=host or '127.0.0.1', port=int(port), timeout=5)

    def get(self, sid: str) -> dict | None:
        values = self.client.get(ETCD_PREFIX + sid)
        return json.loads(values[0]) if values else None

    def put(self, sid: str, fields: dict) -> None:
        current = self.get(sid) or {}
        current.update(fields)
        self.client.put(ETCD_PREFIX + sid, json.dumps(current))

    def delete(self, sid: str) -> None:
        self.client.delete(ETCD_PREFIX + sid)

    def all(self):
        for value, meta in self.client.get_prefix(ETCD_PREFIX):
            try:
                fields = json.loads(value)
            except ValueError:
                fields = None
            yield meta['key'].decode()[len(ETCD_PREFIX):], fields if isinstance(fields, dict) else None

    def ping(self) -> bool:
        self.client.status()
        return True


class TokenCache:
    """token_cache.db: the gateway's fast lookup, trusted before the store."""

    def __init__(self, path: str, max_size: int, log: logging.Logger):
        self.path = path
        self.max_size = max_size
        self.log = log
        self.lock = threading.Lock()
        self._connect().close()

    def _connect(self):
        """A connection to the cache at its path, rebuilt when it is gone: the gateway opens the file for each request,
        so a cache moved aside while it runs (a purge, a rollback putting a backup in place, before the restart) would
        otherwise be opened as a new empty file with no table, and the request answered 500 'no such table'."""
        missing = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        conn = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        if missing:
            self.log.warning('Token cache not found or corrupted (path=%s); rebuilding it from fresh credentials',
                             self.path)
            conn.execute('CREATE TABLE IF NOT EXISTS tokens (session_id TEXT PRIMARY KEY, access_token TEXT, '
                         'refresh_token TEXT, expires_at REAL)')
        return conn

    def get(self, sid: str) -> dict | None:
        with self.lock:
            conn = self._connect()
            try:
                row = conn.execute('SELECT access_token, refresh_token, expires_at FROM tokens WHERE session_id = ?',
                                   (sid,)).fetchone()
            finally:
                conn.close()
        return None if row is None else {'access_token': row[0], 'refresh_token': row[1], 'expires_at': row[2]}

    def session_for(self, refresh_token: str) -> str | None:
        with self.lock:
            conn = self._connect()
            try:
                row = conn.execute('SELECT session_id FROM tokens WHERE refresh_token = ?', (refresh_token,)).fetchone()
            finally:
                conn.close()
        return row[0] if row else None

    def put(self, sid: str, access_token: str, refresh_token: str, expires_at: float) -> None:
        with self.lock:
            conn = self._connect()
            try:
                conn.execute('INSERT OR REPLACE INTO tokens VALUES (?, ?, ?, ?)', (sid, access_token, refresh_token, expires_at))
                conn.execute('DELETE FROM tokens WHERE session_id NOT IN '
                             '(SELECT session_id FROM tokens ORDER BY expires_at DESC LIMIT ?)', (self.max_size,))
            finally:
                conn.close()

    def usable(self) -> bool:
        conn = self._connect()
        try:
            return conn.execute('PRAGMA quick_check').fetchone()[0] == 'ok'
        finally:
            conn.close()


class ProviderRejected(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(f'{status} {body.get("error")}')
        self.status = status
        self.body = body


class Gateway:
    def __init__(self, config: dict):
        self.config = config
        self.log = _logger(config.get('log_file'))
        store = config['session_state_store']
        self.sessions = (EtcdSessions(store['address']) if store.get('type') == 'etcd'
                         else RedisSessions(store['address'], store.get('password')))
        cache = config['token_cache']
        self.cache = TokenCache(cache['path'], int(cache.get('max_size', 1000)), self.log)
        self.oauth = config['oauth']
        self.service_session = config.get('service_session_id', 'svc')
        self.echo_token = bool(config.get('lab_echo_token'))
        self.race_file = config.get('lab_race_file')
        self.relay_errors = bool(self.oauth.get('relay_errors'))
        if store.get('refresh_on_startup'):
            self.sweep_expired()
        self.ensure_service_session()
        self.log.info('vLLM token gateway started (store=%s %s, cache=%s)', store.get('type', 'redis'),
                      store['address'], cache['path'])

    # ---- the provider ----------------------------------------------------------------------

    def _token_request(self, form: dict) -> dict:
        basic = base64.b64encode(f'{self.oauth["client_id"]}:{self.oauth["client_secret"]}'.encode()).decode()
        req = urllib.request.Request(self.oauth['token_url'], data=urllib.parse.urlencode(form).encode(),
                                     headers={'Authorization': f'Basic {basic}'})
        try:
            with urllib.request.urlopen(req, timeout=10) as response:  # nosec: the lab's own provider
                return json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read() or b'{}')
            except ValueError:
                body = {}
            raise ProviderRejected(exc.code, body) from None

    def sign_in(self, sid: str) -> dict:
        token = self._token_request({'grant_type': 'client_credentials'})
        self._store(sid, token)
        return token

    def _store(self, sid: str, token: dict) -> None:
        expires_at = time.time() + int(token.get('expires_in', 3600))
        self.sessions.put(sid, {'access_token': token['access_token'], 'refresh_token': token['refresh_token'],
                                'expires_at': iso(expires_at)})
        self.cache.put(sid, token['access_token'], token['refresh_token'], expires_at)

    # ---- start-up -----------------------------------------------------------------------------

    def sweep_expired(self) -> None:
        now, swept = time.time(), 0
        for sid, fields in list(self.sessions.all()):
            expiry = parse_expiry((fields or {}).get('expires_at'))
            if fields is not None and expiry is not None and expiry < now:
                self.sessions.delete(sid)
                swept += 1
        self.log.info('refresh_on_startup: swept %d expired sessions', swept)

    def ensure_service_session(self, wait: float = 15.0) -> None:
        """Sign the service itself in when its session is missing; the provider may still be starting."""
        if self.sessions.get(self.service_session) is not None:
            return
        deadline = time.monotonic() + wait
        while True:
            try:
                self.sign_in(self.service_session)
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.log.info('Service session %s regenerated with client_credentials', self.service_session)

    # ---- requests -----------------------------------------------------------------------------

    def find_session(self, presented: str) -> str | None:
        sid = self.cache.session_for(presented)
        if sid is not None:
            return sid
        for candidate, fields in self.sessions.all():
            if fields and fields.get('refresh_token') == presented:
                return candidate
        return None

    def rejected(self, presented: str) -> dict:
        if self.echo_token:
            self.log.info('Refresh rejected for token %s', presented)
            return dict(REVOKED, error_description=f'Refresh token {presented} has been revoked')
        return REVOKED

    def own_refresh_first(self, presented: str) -> None:
        """Lab fault: the service refreshes the session of ``presented`` itself before the request is served."""
        if not self.race_file:
            return
        try:
            os.unlink(self.race_file)
        except FileNotFoundError:
            return
        sid = self.find_session(presented)
        if sid is not None:
            self._store(sid, self._token_request({'grant_type': 'refresh_token', 'refresh_token': presented}))
            self.log.info('Token refreshed for session %s', sid)

    def refresh(self, presented: str, client_id: str):
        self.own_refresh_first(presented)
        sid = self.find_session(presented)
        if sid is None:
            self.log.warning('Invalid token in session state (session_id=unknown)')
            self.log.error('Failed to refresh token: authentication failed (client_id=%s)', client_id)
            return 401, self.rejected(presented)
        cached = self.cache.get(sid)
        stored = self.sessions.get(sid) or {}
        # trusted first: the cache's refresh token wins over the store's and the caller's
        refresh_token = (cached or {}).get('refresh_token') or stored.get('refresh_token') or presented
        try:
            token = self._token_request({'grant_type': 'refresh_token', 'refresh_token': refresh_token})
        except ProviderRejected as exc:
            if exc.body.get('error') == 'invalid_grant':
                self.log.error('TokenRefreshError: token expired for session %s', sid)
                self.log.warning('Invalid token in session state (session_id=%s)', sid)
                self.log.error('Failed to refresh token: authentication failed (client_id=%s)', client_id)
                return (exc.status, exc.body) if self.relay_errors else (401, self.rejected(presented))
            self.log.error('Failed to refresh token: provider answered %s (client_id=%s)', exc.status, client_id)
            return (exc.status, exc.body) if self.relay_errors else (502, {'error': 'provider_error'})
        except (urllib.error.URLError, OSError) as exc:
            self.log.error('Failed to refresh token: provider unreachable (%s)', getattr(exc, 'reason', exc))
            return 503, {'error': 'provider_unreachable'}
        self._store(sid, token)
        self.log.info('Token refreshed for session %s', sid)
        return 200, {'access_token': token['access_token'], 'refresh_token': token['refresh_token'],
                     'expires_in': token.get('expires_in', 3600), 'token_type': token.get('token_type', 'Bearer')}

    def healthy(self) -> bool:
        try:
            return self.sessions.ping() and self.cache.usable()
        except Exception:  # pylint: disable=broad-except  # any failure is unhealthy
            return False


def _logger(path: str | None) -> logging.Logger:
    log = logging.getLogger('vllm')
    log.setLevel(logging.INFO)
    log.handlers.clear()
    handler = logging.FileHandler(path) if path else logging.StreamHandler()
    formatter = logging.Formatter(LOG_FORMAT, datefmt='%Y-%m-%dT%H:%M:%SZ')
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    log.addHandler(handler)
    logging.addLevelName(logging.WARNING, 'WARN')
    return log


def create_app(config_path: str | None = None) -> Flask:
    with open(config_path or os.environ['VLLM_LAB_CONFIG'], encoding='utf-8') as handle:
        gateway = Gateway(yaml.safe_load(handle))
    app = Flask('vllm_dr_lab_gateway')

    @app.post('/api/v1/refresh_token')
    def refresh_token():
        auth = request.headers.get('Authorization', '')
        if not auth.startswith('Bearer ') or not auth[7:].strip():
            return jsonify(error='invalid_request', error_description='Bearer refresh token required'), 400
        body = request.get_json(silent=True) or {}
        status, payload = gateway.refresh(auth[7:].strip(), body.get('client_id', 'unknown'))
        return jsonify(payload), status

    @app.post('/api/v1/sessions')
    def sign_in():
        sid = (request.get_json(silent=True) or {}).get('session_id')
        if not sid:
            return jsonify(error='invalid_request'), 400
        gateway.sign_in(sid)
        return jsonify(session_id=sid), 201

    @app.get('/healthz')
    def healthz():
        ok = gateway.healthy()
        return jsonify(status='ok' if ok else 'unhealthy'), 200 if ok else 503

    return app
