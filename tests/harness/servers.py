"""Real Redis and etcd servers for the tests, on free loopback ports, in temporary directories.

Each server is a context manager: it starts the Debian binary, waits until the
server answers, and on exit stops it and removes its directory. Nothing here
talks to a server that the test did not start itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

LOOPBACK = '127.0.0.1'
START_TIMEOUT = 20.0
_START_ATTEMPTS = 3  # a free port can be taken by someone else before the server binds it


class ServerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ServerError(f'{name} is not installed; run tools/bootstrap.sh (make deps) to install the test packages')
    return path


class _Process:
    """A server process with its own directory and log file."""

    name = 'server'

    def __init__(self, workdir: str | None = None):
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix=f'vllm-dr-{self.name}-')
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, f'{self.name}.log')
        self.process = None

    def _command(self) -> list:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def _choose_ports(self) -> None:
        raise NotImplementedError

    def start(self):
        for _attempt in range(_START_ATTEMPTS):
            self._choose_ports()
            with open(self.log_path, 'ab') as log:
                self.process = subprocess.Popen(  # pylint: disable=consider-using-with
                    self._command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)
            if self._wait_ready():
                return self
            self._terminate()
        raise ServerError(f'{self.name} did not start; its log: {self.log_tail()}')

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if self._ready():
                    return True
            except (OSError, ValueError):
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()


class RedisServer(_Process):
    """redis-server on a free loopback port; ``config`` lines are added to its config file."""

    name = 'redis'

    def __init__(self, workdir: str | None = None, config: list | None = None, password: str | None = None):
        super().__init__(workdir)
        self.port = None
        self.password = password
        self.extra_config = list(config or [])

    def _choose_ports(self) -> None:
        self.port = free_port()

    def _command(self) -> list:
        conf = os.path.join(self.dir, 'redis.conf')
        lines = [
            f'port {self.port}', f'bind {LOOPBACK}', f'dir {self.dir}', 'dbfilename dump.rdb',
            'save ""', 'appendonly no', 'daemonize no', 'protected-mode yes', f'logfile {self.log_path}',
        ]
        if self.password:
            lines.append(f'requirepass {self.password}')
        with open(conf, 'w', encoding='utf-8') as handle:
            handle.write('\n'.join(lines + self.extra_config) + '\n')
        return [require_binary('redis-server'), conf]

    def _ready(self) -> bool:
        return self.client().ping()

    def client(self, **kwargs):
        import redis  # pylint: disable=import-outside-toplevel

        kwargs.setdefault('password', self.password)
        return redis.Redis(host=LOOPBACK, port=self.port, socket_timeout=5, **kwargs)

    @property
    def rdb_path(self) -> str:
        return os.path.join(self.dir, 'dump.rdb')


class EtcdServer(_Process):
    """A one-member etcd (v3 API) on free loopback ports."""

    name = 'etcd'

    def __init__(self, workdir: str | None = None):
        super().__init__(workdir)
        self.port = None
        self.peer_port = None

    def _choose_ports(self) -> None:
        self.port, self.peer_port = free_port(), free_port()

    @property
    def url(self) -> str:
        return f'http://{LOOPBACK}:{self.port}'

    def _command(self) -> list:
        peer = f'http://{LOOPBACK}:{self.peer_port}'
        return [
            require_binary('etcd'), '--name', 'test', '--data-dir', os.path.join(self.dir, 'data'),
            '--listen-client-urls', self.url, '--advertise-client-urls', self.url,
            '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
            '--initial-cluster', f'test={peer}', '--initial-cluster-state', 'new',
            '--log-outputs', 'stderr', '--logger', 'zap',
        ]

    def _ready(self) -> bool:
        with urllib.request.urlopen(f'{self.url}/health', timeout=1) as response:  # nosec: loopback only
            return json.load(response).get('health') == 'true'
