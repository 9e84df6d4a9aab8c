"""The real AWX 24.6.1 for the AAP tests: its API, dispatcher (and task manager) and callback receiver from the source
tools/aap/awx-build.sh builds into the cache, PostgreSQL 15 and Redis on free loopback ports, and a receptor node
whose work-command is tools/aap/ee-worker.py (ansible-runner worker, in the environment the EE definition installs).

    with AwxServer(build_dir, receptor, ee_python) as awx:
        awx.api('GET', '/api/v2/ping/')

Everything lives in one temporary directory (the database copied from the migrated one of the build) and is stopped
and removed on exit. `python tests/harness/awx.py migrate --awx DIR ...` makes that migrated database (the build).
"""

from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

if __package__ in (None, ''):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.servers import LOOPBACK, RedisServer, ServerError, _Stoppable, free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANAGE = os.path.join(ROOT, 'tools', 'aap', 'awx-manage.py')
WORKER = os.path.join(ROOT, 'tools', 'aap', 'ee-worker.py')
HOSTNAME = 'awx-test'  # the instance and its receptor node
PG_USER = 'postgres'  # PostgreSQL refuses to run as root
START_TIMEOUT = 600.0


def _as_postgres():
    entry = pwd.getpwnam(PG_USER)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


def _chown_tree(path: str, user: str) -> None:
    entry = pwd.getpwnam(user)
    for directory, dirs, files in os.walk(path):
        for name in [directory] + [os.path.join(directory, n) for n in dirs + files]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


class AwxError(ServerError):
    pass


class AwxServer(_Stoppable):
    """AWX on a copy of the build's migrated database; `admin` (user, password) is a superuser made for this run."""

    def __init__(self, build: str, receptor: str, ee_python: str, pg_bin: str = '/usr/lib/postgresql/15/bin',
                 keep: bool = False):
        self.build = build
        self.python = os.path.join(build, 'venv', 'bin', 'python')
        self.receptor = receptor
        self.ee_python = ee_python
        self.pg_bin = pg_bin
        self.keep = keep
        self.dir = None
        self.ports = {}
        self.processes = {}
        self.redis = None
        self.admin = ('admin', secrets.token_urlsafe(18))
        self.url = None

    # -- the parts -----------------------------------------------------------------------------------------------
    def path(self, *parts) -> str:
        return os.path.join(self.dir, *parts)

    def _make_dir(self) -> None:
        # outside /root (not traversable by the postgres user), reachable by it
        self.dir = tempfile.mkdtemp(prefix='vllm-dr-awx-')
        os.chmod(self.dir, 0o711)
        for sub in ('logs', 'projects', 'job_status', 'static', 'jobs', 'receptor', 'pgsock'):
            os.makedirs(self.path(sub))
        _chown_tree(self.path('pgsock'), PG_USER)

    def _start_postgres(self) -> None:
        self.ports['postgres'] = free_port()
        self._spawn('postgres', [os.path.join(self.pg_bin, 'postgres'), '-D', self.path('pgdata'),
                                 '-p', str(self.ports['postgres']), '-k', self.path('pgsock'),
                                 '-c', f'listen_addresses={LOOPBACK}', '-c', 'fsync=off',
                                 '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
                    preexec_fn=_as_postgres, new_session=True)
        self._wait('postgres', lambda: subprocess.run(
            [os.path.join(self.pg_bin, 'pg_isready'), '-h', LOOPBACK, '-p', str(self.ports['postgres']), '-U', 'awx'],
            capture_output=True, check=False).returncode == 0, 60)

    def _start_redis(self) -> None:
        self.redis = RedisServer(workdir=self.path('redis')).start()
        self.ports['redis'] = self.redis.port

    def _write_settings(self) -> None:
        with open(os.path.join(self.build, 'SECRET_KEY'), encoding='ascii') as handle:
            secret_key = handle.read().strip()
        redis_url = f'redis://{LOOPBACK}:{self.ports["redis"]}'
        settings = {
            'SECRET_KEY': secret_key,
            'DATABASES': {'default': {'ATOMIC_REQUESTS': True, 'ENGINE': 'awx.main.db.profiled_pg', 'NAME': 'awx',
                                      'USER': 'awx', 'PASSWORD': '', 'HOST': LOOPBACK,
                                      'PORT': str(self.ports['postgres'])}},
            'BROKER_URL': f'{redis_url}/0',
            'CACHES': {'default': {'BACKEND': 'awx.main.cache.AWXRedisCache', 'LOCATION': f'{redis_url}/1'}},
            'CHANNEL_LAYERS': {'default': {'BACKEND': 'channels_redis.core.RedisChannelLayer',
                                           'CONFIG': {'hosts': [f'{redis_url}/0'], 'capacity': 10000,
                                                      'group_expiry': 157784760}}},
            'CLUSTER_HOST_ID': HOSTNAME,
            'SYSTEM_UUID': '00000000-0000-0000-0000-000000000000',
            'ALLOWED_HOSTS': ['*'],
            'PROJECTS_ROOT': self.path('projects'),
            'JOBOUTPUT_ROOT': self.path('job_status'),
            'STATIC_ROOT': self.path('static'),
            'LOG_ROOT': self.path('logs'),
            'AWX_ISOLATION_BASE_PATH': self.path('jobs'),
            'BROADCAST_WEBSOCKET_SECRET': secrets.token_urlsafe(24),
            'BROADCAST_WEBSOCKET_PORT': free_port(),
            'BROADCAST_WEBSOCKET_PROTOCOL': 'http',
        }
        with open(self.path('settings.py'), 'w', encoding='utf-8') as handle:
            for name, value in settings.items():
                handle.write(f'{name} = {value!r}\n')
        os.chmod(self.path('settings.py'), 0o600)

    def _environment(self) -> dict:
        return dict(os.environ, AWX_SETTINGS_FILE=self.path('settings.py'), AWX_SETTINGS_DIR=self.path('conf.d'),
                    AWX_LOGGING_MODE='stdout', AWX_RECEPTOR_CONF=self.path('receptor', 'receptor.conf'),
                    PYTHONUNBUFFERED='1', SKIP_PG_VERSION_CHECK='')

    def _write_receptor_config(self) -> None:
        self.ports['receptor'] = free_port()
        config = [
            {'node': {'id': HOSTNAME, 'datadir': self.path('receptor', 'data')}},
            {'log-level': 'info'},
            # receptor exits without a backend; nothing connects to it
            {'tcp-listener': {'port': self.ports['receptor'], 'bindaddr': LOOPBACK}},
            {'control-service': {'service': 'control', 'filename': self.path('receptor', 'receptor.sock'),
                                 'permissions': '0600'}},
            {'work-command': {'worktype': 'local', 'command': self.ee_python, 'params': f'{WORKER} worker',
                              'allowruntimeparams': True}},
        ]
        with open(self.path('receptor', 'receptor.conf'), 'w', encoding='utf-8') as handle:
            json.dump(config, handle, indent=1)  # JSON is YAML

    def manage(self, *args, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
        out = subprocess.run([self.python, MANAGE, *args], capture_output=True, text=True, check=False,
                             env=dict(self._environment(), **(env or {})), cwd=self.dir, timeout=1800)
        if check and out.returncode != 0:
            raise AwxError(f'awx-manage {args[0]} failed: {out.stderr[-3000:]}')
        return out

    def _spawn(self, name: str, command: list, preexec_fn=None, env: dict | None = None,
               new_session: bool = True) -> None:
        with open(self.path('logs', f'{name}.log'), 'ab') as log:
            self.processes[name] = subprocess.Popen(  # pylint: disable=consider-using-with
                command, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, env=env or self._environment(),
                preexec_fn=preexec_fn, start_new_session=new_session)

    def _wait(self, name: str, ready, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise AwxError(f'{name} exited ({self.processes[name].returncode}); its log: {self.log_tail(name)}')
            try:
                if ready():
                    return
            except Exception:  # pylint: disable=broad-except  # not up yet
                pass
            time.sleep(0.5)
        raise AwxError(f'{name} did not come up in {timeout:.0f} s; its log: {self.log_tail(name)}')

    def log_tail(self, name: str, lines: int = 40) -> str:
        try:
            with open(self.path('logs', f'{name}.log'), encoding='utf-8', errors='replace') as log:
                return ''.join(log.readlines()[-lines:])
        except OSError:
            return '(no log)'

    def logs(self) -> dict:
        """Every log of this run: name -> text."""
        found = {}
        for directory, _dirs, files in os.walk(self.path('logs')):
            for name in files:
                with open(os.path.join(directory, name), encoding='utf-8', errors='replace') as handle:
                    found[os.path.join(directory, name)] = handle.read()
        return found

    # -- the API ---------------------------------------------------------------------------------------------------
    def api(self, method: str, path: str, payload=None, expect=(200, 201, 202, 204)):
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        token = base64.b64encode(f'{self.admin[0]}:{self.admin[1]}'.encode()).decode()
        request.add_header('Authorization', f'Basic {token}')
        if data is not None:
            request.add_header('Content-Type', 'application/json')
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, body = error.code, error.read()
        if status not in expect:
            raise AwxError(f'{method} {path}: HTTP {status}: {body[:2000]!r}')
        return json.loads(body) if body else None

    def wait_for(self, what: str, probe, timeout: float = 600.0, interval: float = 2.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise AwxError(f'{name} exited while waiting for {what}; its log: {self.log_tail(name)}')
            last = probe()
            if last:
                return last
            time.sleep(interval)
        raise AwxError(f'{what}: not within {timeout:.0f} s (last: {last!r}); dispatcher log: '
                       f'{self.log_tail("dispatcher")}')

    # -- start and stop ----------------------------------------------------------------------------------------------
    def start(self):
        try:
            self._make_dir()
            subprocess.run(['cp', '-a', os.path.join(self.build, 'pgdata'), self.path('pgdata')], check=True)
            _chown_tree(self.path('pgdata'), PG_USER)
            self._start_postgres()
            self._start_redis()
            self._write_settings()
            self._write_receptor_config()
            self._spawn('receptor', [self.receptor, '--config', self.path('receptor', 'receptor.conf')])
            self._wait('receptor', lambda: os.path.exists(self.path('receptor', 'receptor.sock')), 60)
            self.manage('createsuperuser', '--noinput', '--username', self.admin[0], '--email', 'admin@localhost',
                        env={'DJANGO_SUPERUSER_PASSWORD': self.admin[1]})
            self.ports['api'] = free_port()
            self.url = f'http://{LOOPBACK}:{self.ports["api"]}'
            self._spawn('api', [self.python, MANAGE, 'runserver', '--noreload', f'{LOOPBACK}:{self.ports["api"]}'])
            self._spawn('dispatcher', [self.python, MANAGE, 'run_dispatcher'])
            self._spawn('callback_receiver', [self.python, MANAGE, 'run_callback_receiver'])
            self._wait('api', lambda: self.api('GET', '/api/v2/ping/')['instances'], START_TIMEOUT)
            # what an installation makes (awx-manage create_preload_data, less its demo objects)
            if not self.api('GET', '/api/v2/organizations/?name=Default')['count']:
                self.api('POST', '/api/v2/organizations/', {'name': 'Default'})
            # the heartbeat gives the instance its capacity; the task manager runs nothing before that
            self.wait_for('instance capacity', lambda: [i for i in self.api('GET', '/api/v2/instances/')['results']
                                                        if i['hostname'] == HOSTNAME and i['capacity'] > 0],
                          START_TIMEOUT, 5)
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for name in ('callback_receiver', 'dispatcher', 'api', 'receptor'):
            process = self.processes.pop(name, None)
            if process is not None and process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(process.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    process.wait(timeout=10)
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
        postgres = self.processes.pop('postgres', None)
        if postgres is not None and postgres.poll() is None:
            postgres.send_signal(signal.SIGINT)  # fast shutdown
            try:
                postgres.wait(timeout=60)
            except subprocess.TimeoutExpired:
                postgres.kill()
                postgres.wait(timeout=10)
        if self.dir and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- the build's migrated database ---------------------------------------------------------------------------------
    def migrate(self, out_dir: str) -> None:
        """A new database cluster, AWX's migrations applied and this instance registered, left in out_dir/pgdata."""
        self._make_dir()
        try:
            os.makedirs(self.path('pgdata'), mode=0o700)
            _chown_tree(self.path('pgdata'), PG_USER)
            init = subprocess.run([os.path.join(self.pg_bin, 'initdb'), '-D', self.path('pgdata'), '-U', 'awx',
                                   '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'],
                                  preexec_fn=_as_postgres, capture_output=True, text=True, check=False)
            if init.returncode != 0:
                raise AwxError(f'initdb failed: {init.stderr}')
            self._start_postgres()
            subprocess.run([os.path.join(self.pg_bin, 'createdb'), '-h', LOOPBACK, '-p', str(self.ports['postgres']),
                            '-U', 'awx', 'awx'], check=True)
            self._start_redis()
            self._write_settings()
            self._write_receptor_config()
            self.manage('migrate', '--noinput')
            self.manage('provision_instance', f'--hostname={HOSTNAME}', '--node_type=hybrid')
            self.manage('register_queue', '--queuename=controlplane', '--instance_percent=100')
            self.manage('register_queue', '--queuename=default', '--instance_percent=100')
            # the control plane's EE (project updates) and the default one: the wrapper runs whichever is named
            self.manage('register_default_execution_environments')
        except BaseException:
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.stop()  # keep=True: the directory stays, PostgreSQL shut down cleanly
        subprocess.run(['mv', self.path('pgdata'), os.path.join(out_dir, 'pgdata')], check=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('command', choices=['migrate'])
    parser.add_argument('--awx', required=True, help='the build directory (tools/aap/awx-build.sh)')
    parser.add_argument('--receptor', required=True)
    parser.add_argument('--dir', required=True, help='where pgdata goes')
    parser.add_argument('--pg-bin', default='/usr/lib/postgresql/15/bin')
    args = parser.parse_args(argv)
    server = AwxServer(args.awx, args.receptor, sys.executable, pg_bin=args.pg_bin, keep=True)
    server.migrate(args.dir)
    return 0


if __name__ == '__main__':
    sys.exit(main())


# -- the job's environment: what the EE definition installs ---------------------------------------------------------
EE_DEFINITION = os.path.join(ROOT, 'extensions', 'ee', 'execution-environment.yml')


def _base_image_pins() -> list:
    """What the EE's base image brings: the oldest ansible-core of the matrix (the stock AAP EEs' core) and the
    ansible-runner of tests/aap/requirements.txt."""
    pins = []
    with open(os.path.join(ROOT, 'tests', 'cores', 'matrix.txt'), encoding='utf-8') as handle:
        pins.append(next(line.split()[1] for line in handle if line[:1].isdigit()))
    with open(os.path.join(ROOT, 'tests', 'aap', 'requirements.txt'), encoding='utf-8') as handle:
        pins += [line.strip() for line in handle if line.startswith('ansible-runner')]
    return pins


def find_python(name: str) -> str | None:
    """The interpreter `name` (python3.12): on PATH, then pyenv's versions (its shims answer only for a selected
    version), then /usr/local/bin and /usr/bin; each tried, and skipped unless it runs."""
    version = name[len('python'):]
    candidates = [shutil.which(name)]
    pyenv_root = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    candidates += sorted(glob.glob(os.path.join(pyenv_root, 'versions', f'{version}.*', 'bin', name)), reverse=True)
    candidates += [f'/usr/local/bin/{name}', f'/usr/bin/{name}']
    for candidate in filter(None, candidates):
        out = subprocess.run([candidate, '-c', 'import sys, venv; print(sys.executable)'], capture_output=True,
                             text=True, check=False)
        if out.returncode == 0:
            return out.stdout.strip()
    return None


def ee_environment(tarball: str, out_dir: str) -> str:
    """A virtualenv with what extensions/ee/execution-environment.yml installs: its Python interpreter, its Python
    requirements, the base image's ansible-core and ansible-runner, and its collections (this one from `tarball`; the
    others copied from the `ansible` package of the project's virtualenv: no Galaxy here). Made again when any of
    them changes; the collection is installed afresh each time. Returns its python."""
    import yaml  # pylint: disable=import-outside-toplevel

    with open(EE_DEFINITION, encoding='utf-8') as handle:
        definition = yaml.safe_load(handle)
    here = os.path.dirname(EE_DEFINITION)
    deps = definition['dependencies']
    python = find_python(os.path.basename(deps.get('python_interpreter', {}).get('python_path', 'python3')))
    if python is None:
        raise AwxError(f'the EE definition\'s Python ({deps["python_interpreter"]["python_path"]}) is not installed here')
    requirements = os.path.normpath(os.path.join(here, deps['python']))
    pins = _base_image_pins()
    venv = os.path.abspath(os.path.join(out_dir, 'ee-venv'))
    with open(requirements, encoding='utf-8') as handle:
        want = json.dumps([python, pins, handle.read()])
    stamp = os.path.join(venv, '.inputs')
    if not os.path.isfile(stamp) or open(stamp, encoding='utf-8').read() != want:  # pylint: disable=consider-using-with
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python, '-m', 'venv', '--without-pip', venv], check=True)
        subprocess.run([sys.executable, '-m', 'pip', '--python', os.path.join(venv, 'bin', 'python'), 'install', '-q',
                        '--no-compile', '--disable-pip-version-check', '-r', requirements, *pins], check=True)
        with open(stamp, 'w', encoding='utf-8') as handle:
            handle.write(want)
    site = subprocess.run([os.path.join(venv, 'bin', 'python'), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                          capture_output=True, text=True, check=True).stdout.strip()
    collections = os.path.join(site, 'ansible_collections')
    shutil.rmtree(collections, ignore_errors=True)
    galaxy = os.path.join(venv, 'bin', 'ansible-galaxy')
    subprocess.run([galaxy, 'collection', 'install', '--offline', '--no-deps', '--force', '-p', site, tarball],
                   check=True, capture_output=True)
    with open(os.path.join(here, deps['galaxy']), encoding='utf-8') as handle:
        wanted = yaml.safe_load(handle)['collections']
    bundle = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(yaml.__file__))), 'ansible_collections')
    for entry in wanted:
        if entry.get('type') == 'file':
            continue
        namespace, name = entry['name'].split('.')
        source = os.path.join(bundle, namespace, name)
        if not os.path.isdir(source):
            raise AwxError(f'{entry["name"]} (the EE\'s galaxy requirements) is not in the ansible package at {bundle}')
        shutil.copytree(source, os.path.join(collections, namespace, name))
    return os.path.join(venv, 'bin', 'python')
