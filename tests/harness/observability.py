"""The log-to-alert path's servers: the OpenTelemetry Collector and Prometheus, each built from the Go module proxy
once (tools/observability/otelcol.sh, prometheus.sh) and started on a free loopback port."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request

import yaml

from harness.servers import LOOPBACK, _Process, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OTELCOL = os.path.join(ROOT, 'tools', 'observability', 'otelcol.sh')
PROMETHEUS = os.path.join(ROOT, 'tools', 'observability', 'prometheus.sh')
OTELCOL_CONFIG = os.path.join(ROOT, 'extensions', 'observability', 'otelcol', 'vllm-dr.yaml')
RULES = os.path.join(ROOT, 'extensions', 'observability', 'prometheus', 'vllm-dr.rules.yml')
BUILD_TIMEOUT = 1800  # a cold build on two cores


def build(script: str, *args: str) -> str:
    """Build the tool once (a no-op when cached) so that starting it later stays within a server's start timeout."""
    done = subprocess.run(['bash', script, *args], capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert done.returncode == 0, f'{os.path.basename(script)} {" ".join(args)}: {done.stderr[-3000:]}'
    return done.stdout


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:  # nosec: loopback only
        return json.load(response)


class _HttpServer(_Process):
    """A server with one HTTP port on loopback, chosen free at each start."""

    port = None

    def _choose_ports(self) -> None:
        self.port = free_port()

    @property
    def address(self) -> str:
        return f'{LOOPBACK}:{self.port}'

    def _answers(self, path: str) -> bool:
        with urllib.request.urlopen(f'http://{self.address}{path}', timeout=1) as response:  # nosec: loopback only
            return response.status == 200


class OtelCollector(_HttpServer):
    """The shipped collector configuration (extensions/observability/otelcol/vllm-dr.yaml) tailing ``log_path``."""

    name = 'otelcol'

    def __init__(self, log_path: str, service: str, instance: str, config: str = OTELCOL_CONFIG,
                 workdir: str | None = None):
        super().__init__(workdir)
        self.watched = log_path
        self.service = service
        self.instance = instance
        self.config = config

    def _command(self) -> list:
        return ['bash', OTELCOL, '--config', self.config]

    def _environment(self) -> dict:
        return dict(os.environ, VLLM_DR_LOG_PATH=self.watched, VLLM_DR_SERVICE_NAME=self.service,
                    VLLM_DR_SERVICE_INSTANCE=self.instance, VLLM_DR_OTELCOL_LISTEN=self.address)

    def _ready(self) -> bool:
        return self._answers('/metrics')

    def metrics(self) -> str:
        with urllib.request.urlopen(f'http://{self.address}/metrics', timeout=5) as response:  # nosec: loopback
            return response.read().decode()


def quick_rules(rules_text: str, window: str, hold: str) -> str:
    """The shipped rules with the log alerts' range window and ``for:`` shortened, for a test that cannot wait 5
    minutes; expressions, labels and annotations stay as shipped."""
    document = yaml.safe_load(rules_text)
    for group in document['groups']:
        for rule in group['rules']:
            if '[5m]' in rule['expr']:
                rule['expr'] = rule['expr'].replace('[5m]', f'[{window}]')
                rule['for'] = hold
    return yaml.safe_dump(document, sort_keys=False)


class PrometheusServer(_HttpServer):
    """Prometheus scraping ``targets`` (host:port, honor_labels as the collector's configuration asks) every
    ``interval`` and evaluating ``rules_file`` as often."""

    name = 'prometheus'

    def __init__(self, targets: list, rules_file: str, interval: str = '1s', workdir: str | None = None):
        super().__init__(workdir)
        self.targets = targets
        self.rules_file = rules_file
        self.interval = interval

    @property
    def url(self) -> str:
        return f'http://{self.address}'

    def _command(self) -> list:
        config = os.path.join(self.dir, 'prometheus.yml')
        with open(config, 'w', encoding='utf-8') as handle:
            yaml.safe_dump({
                'global': {'scrape_interval': self.interval, 'evaluation_interval': self.interval},
                'rule_files': [self.rules_file],
                'scrape_configs': [{'job_name': 'otelcol', 'honor_labels': True,
                                    'static_configs': [{'targets': self.targets}]}],
            }, handle, sort_keys=False)
        return ['bash', PROMETHEUS, f'--config.file={config}', f'--storage.tsdb.path={os.path.join(self.dir, "data")}',
                f'--web.listen-address={self.address}']

    def _ready(self) -> bool:
        return self._answers('/-/ready')

    def alerts(self) -> list:
        """/api/v1/alerts: the pending and firing alerts (a resolved one is gone from it)."""
        return _get_json(f'{self.url}/api/v1/alerts')['data']['alerts']

    def query(self, expr: str) -> list:
        return _get_json(f'{self.url}/api/v1/query?' + urllib.parse.urlencode({'query': expr}))['data']['result']
