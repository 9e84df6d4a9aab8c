"""Generate the PrometheusRule manifest from the rules file, the one source of the alerting rules.

    python tools/observability/render_rules.py           # rewrite the manifest
    python tools/observability/render_rules.py --check   # exit 1 when the committed manifest differs
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(ROOT, 'extensions', 'observability', 'prometheus', 'vllm-dr.rules.yml')
MANIFEST = os.path.join(ROOT, 'extensions', 'observability', 'kubernetes', 'vllm-dr-prometheusrule.yml')

HEADER = """\
# Generated from extensions/observability/prometheus/vllm-dr.rules.yml by tools/observability/render_rules.py:
# edit that file and run the script, never this one. For the Prometheus Operator: apply it in the namespace its
# Prometheus watches, with the labels its ruleSelector asks for (kubectl label prometheusrule vllm-dr ...).
"""


class _Dumper(yaml.SafeDumper):
    """Indents a list under its key, as yamllint and ansible-lint want."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def manifest(rules_text: str) -> str:
    groups = yaml.safe_load(rules_text)['groups']
    document = {
        'apiVersion': 'monitoring.coreos.com/v1',
        'kind': 'PrometheusRule',
        'metadata': {'name': 'vllm-dr', 'labels': {'app.kubernetes.io/name': 'vllm-dr',
                                                   'app.kubernetes.io/component': 'alerting-rules'}},
        'spec': {'groups': groups},
    }
    return HEADER + '---\n' + yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=120, default_flow_style=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true', help='exit 1 when the committed manifest is out of date')
    args = parser.parse_args(argv)
    with open(RULES, encoding='utf-8') as handle:
        wanted = manifest(handle.read())
    if args.check:
        try:
            with open(MANIFEST, encoding='utf-8') as handle:
                current = handle.read()
        except FileNotFoundError:
            current = None
        if current != wanted:
            print(f'{os.path.relpath(MANIFEST, ROOT)} is out of date with {os.path.relpath(RULES, ROOT)}: '
                  'run python tools/observability/render_rules.py', file=sys.stderr)
            return 1
        return 0
    with open(MANIFEST, 'w', encoding='utf-8') as handle:
        handle.write(wanted)
    return 0


if __name__ == '__main__':
    sys.exit(main())
