"""The readiness audit's verdict: each prevention item judged from the facts, the score and the threshold."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.module_utils._dr_audit import (
    REQUIRED_ALERTS, AuditError, verdict)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


CONFIG_ON = 'session_state_store:\n  backend: redis\n  refresh_on_startup: true\n'
with open(os.path.join(ROOT, 'extensions', 'observability', 'prometheus', 'vllm-dr.rules.yml'), encoding='utf-8') as f:
    SHIPPED_RULES = f.read()


def facts(**changes):
    base = {
        'cache': {'path': '/var/lib/vllm/token_cache.db', 'exists': True},
        'store': {'backend': 'redis'},
        'config': {'path': '/etc/vllm/config.yaml', 'text': CONFIG_ON},
        'snapshot': {'includes': ['/'], 'excludes': ['/var/lib/vllm']},
        'rules': [{'path': '/etc/prometheus/rules/vllm-dr.rules.yml', 'text': SHIPPED_RULES}],
        'probe': {'refresh_url': 'https://vllm/api/v1/refresh_token', 'session': 'svc', 'found': True},
    }
    base.update(changes)
    return base


def item(result, key):
    return next(entry for entry in result['items'] if entry['id'] == key)


def test_hardened_target_is_ready_with_the_p1_advice_only():
    result = verdict(facts())
    assert result['verdict'] == 'ready' and result['failed'] == [] and result['score'] == 100
    assert result['advice'] == ['token cache is external (stateless service)']
    advice = item(result, 'cache_external')
    assert 'on disk' in advice['detail'] and 'redis' in advice['detail'] and 'external token cache' in advice['fix']


def test_unhardened_target_names_every_missing_item_and_its_fix():
    result = verdict(facts(config={'path': '/etc/vllm/config.yaml', 'text': 'session_state_store: {backend: redis}'},
                           snapshot={'includes': ['/'], 'excludes': []}, rules=[],
                           probe={'refresh_url': 'u', 'session': 'svc', 'found': False}))
    assert result['verdict'] == 'not ready' and result['score'] == 0
    assert {item['id'] for item in result['items'] if item['status'] == 'fail'} == {
        'refresh_on_startup', 'cache_outside_snapshots', 'alert_rules', 'probe_session'}
    assert 'refresh_on_startup: true' in item(result, 'refresh_on_startup')['fix']
    assert 'under /' in item(result, 'cache_outside_snapshots')['detail']
    assert 'vllm_dr_audit_rules_files' in item(result, 'alert_rules')['detail']
    assert 'not in the store' in item(result, 'probe_session')['detail']


def test_no_cache_on_disk_needs_no_exclusion_and_no_p1_advice():
    result = verdict(facts(cache={'path': '/var/lib/vllm/token_cache.db', 'exists': False},
                           snapshot={'includes': ['/'], 'excludes': []}))
    assert item(result, 'cache_outside_snapshots')['status'] == 'pass'
    assert item(result, 'cache_external')['status'] == 'pass' and result['advice'] == []


@pytest.mark.parametrize('includes, excludes, status', [
    (['/var/lib'], [], 'fail'),
    (['/var/lib/vllm/token_cache.db'], [], 'fail'),
    (['/srv'], [], 'pass'),
    (['/var/lib/vl'], [], 'pass'),          # a sibling prefix is not the parent directory
    (['/'], ['/var/lib/vllm/'], 'pass'),
])
def test_cache_is_snapshotted_when_under_an_included_path_and_no_excluded_one(includes, excludes, status):
    result = verdict(facts(snapshot={'includes': includes, 'excludes': excludes}))
    assert item(result, 'cache_outside_snapshots')['status'] == status


def test_rules_file_missing_one_alert_names_it():
    result = verdict(facts(rules=[{'path': '/r.yml', 'text': 'groups: [{name: g, rules: [{alert: VllmTokenRefreshErrors, expr: up}]}]'}]))
    assert item(result, 'alert_rules')['status'] == 'fail'
    assert item(result, 'alert_rules')['detail'] == 'missing VllmInvalidSessionToken'


def test_required_alerts_are_the_shipped_rules_alerts():
    shipped = {rule['alert'] for group in yaml.safe_load(SHIPPED_RULES)['groups'] for rule in group['rules']}
    assert set(REQUIRED_ALERTS) <= shipped


def test_the_prometheusrule_manifest_counts_as_installed_rules():
    path = os.path.join(ROOT, 'extensions', 'observability', 'kubernetes', 'vllm-dr-prometheusrule.yml')
    with open(path, encoding='utf-8') as f:
        result = verdict(facts(rules=[{'path': path, 'text': f.read()}]))
    assert item(result, 'alert_rules')['status'] == 'pass'


def test_unreadable_rules_file_is_named():
    result = verdict(facts(rules=[{'path': '/etc/prometheus/rules/x.yml', 'text': None}]))
    assert item(result, 'alert_rules')['detail'].endswith('; not readable: /etc/prometheus/rules/x.yml')


def test_store_not_reached_fails_the_probe_item_and_says_why():
    result = verdict(facts(probe={'refresh_url': 'u', 'session': 'svc', 'found': None}))
    assert item(result, 'probe_session')['detail'] == 'session svc not looked up: the store was not reachable'


def test_unreadable_config_is_a_failure_that_names_the_path():
    result = verdict(facts(config={'path': '/etc/vllm/config.yaml', 'text': None}))
    assert item(result, 'refresh_on_startup')['detail'] == 'configuration /etc/vllm/config.yaml not readable'
    result = verdict(facts(config={'path': '/etc/vllm/config.yaml', 'text': '[unclosed'}))
    assert item(result, 'refresh_on_startup')['detail'] == 'configuration /etc/vllm/config.yaml not a YAML mapping'


@pytest.mark.parametrize('fail_below, below', [(0, False), (50, False), (51, True), (100, True)])
def test_threshold_compares_the_score(fail_below, below):
    result = verdict(facts(rules=[], probe={'refresh_url': 'u', 'session': 'svc', 'found': False}), fail_below)
    assert result['score'] == 50 and result['below_threshold'] is below and result['fail_below'] == fail_below


@pytest.mark.parametrize('fail_below', [-1, 101, 'most'])
def test_threshold_outside_0_to_100_is_refused(fail_below):
    with pytest.raises(AuditError, match='percentage from 0 to 100'):
        verdict(facts(), fail_below)


def test_missing_facts_are_refused_with_what_to_pass():
    with pytest.raises(AuditError, match='no dict cache'):
        verdict({})


def test_the_counts_the_junit_report_prints_are_the_items_and_the_failed():
    result = verdict(facts(config={'path': '/etc/vllm/config.yaml', 'text': 'session_state_store: {}\n'}))
    assert result['failed'] and result['counts'] == {'items': len(result['items']), 'failed': len(result['failed']),
                                                     'skipped': 0}
