"""Run the commands of a CI recipe (extensions/ci/) on this machine, in order, with the environment it sets.

Only what the recipes use is understood; anything else raises RecipeError, so a recipe that grows a construct the
runner does not know fails its test instead of being half run.

- GitHub Actions: one job. Environment from the workflow's and the job's ``env`` (``${{ ... }}`` expressions of the
  form ``ctx.name`` or ``ctx.name || 'default'`` over the contexts given: ``github``, ``vars``, ``secrets``), the
  ``run:`` steps (but those the caller skips) through ``bash --noprofile --norc -eo pipefail`` (the ``shell: bash`` of GitHub), a step without
  ``if:`` skipped after a failure, ``if: always()`` run anyway; ``uses:`` steps (actions) are not run here.
  ``GITHUB_STEP_SUMMARY`` is a file of the workspace.
- GitLab CI: one job. ``variables`` expanded as GitLab does (``$NAME`` / ``${NAME}`` from the ones before and the
  predefined ones given); ``before_script`` and ``script`` in one shell that stops at the first failing command; the
  job fails when it does; ``after_script`` always, in its own shell, without changing the job's result.

The job's exit code is 0 when it succeeded and 1 when it failed, as the CI reports it; each command's own exit
code is kept in the steps.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess

import yaml

EXPRESSION = re.compile(r'\$\{\{\s*(.*?)\s*\}\}')
VARIABLE = re.compile(r'\$(?:\{(\w+)\}|(\w+))')


class RecipeError(Exception):
    """The recipe uses something this runner does not understand."""


@dataclasses.dataclass
class Step:
    name: str
    status: str  # 'passed', 'failed', 'skipped' (not run after a failure) or 'not run here' (an action, a skipped section)
    exit_code: int | None = None
    output: str = ''


@dataclasses.dataclass
class JobRun:
    exit_code: int
    steps: list
    env: dict

    def step(self, name: str) -> Step:
        return next(step for step in self.steps if step.name == name)

    @property
    def output(self) -> str:
        return '\n'.join(step.output for step in self.steps)


def load(path: str) -> dict:
    with open(path, encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def _shell(script: str, env: dict, cwd: str, timeout: int) -> tuple:
    out = subprocess.run(['bash', '--noprofile', '--norc', '-eo', 'pipefail', '-c', script], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=timeout, check=False)
    return out.returncode, out.stdout + out.stderr


def github_expression(text: str, contexts: dict) -> str:
    """A value with ``${{ ctx.name }}`` or ``${{ ctx.name || 'default' }}`` replaced from the contexts."""
    def evaluate(match):
        for term in (part.strip() for part in match.group(1).split('||')):
            if re.fullmatch(r"'[^']*'", term):
                value = term[1:-1]
            elif re.fullmatch(r'\w+\.\w+', term):
                context, name = term.split('.')
                if context not in contexts:
                    raise RecipeError(f'context {context} is not known to this runner: {match.group(0)}')
                value = contexts[context].get(name, '')
            else:
                raise RecipeError(f'expression not understood by this runner: {match.group(0)}')
            if value:
                return str(value)
        return ''
    return EXPRESSION.sub(evaluate, str(text))


def run_github_job(path: str, job: str, *, workspace: str, base_env: dict, variables: dict | None = None,
                   secrets: dict | None = None, skip: tuple = (), timeout: int = 900) -> JobRun:
    """``skip``: names of run steps the caller has done its own way (the installation, on a test machine)."""
    workflow = load(path)
    definition = workflow['jobs'][job]
    if (definition.get('defaults') or workflow.get('defaults') or {}).get('run', {}).get('shell', 'bash') != 'bash':
        raise RecipeError('only shell: bash is run here')
    contexts = {'github': {'workspace': workspace}, 'vars': variables or {}, 'secrets': secrets or {}}
    summary = os.path.join(workspace, 'step-summary.md')
    env = dict(base_env, GITHUB_WORKSPACE=workspace, GITHUB_STEP_SUMMARY=summary, CI='true', GITHUB_ACTIONS='true')
    for scope in (workflow.get('env') or {}, definition.get('env') or {}):
        env.update({name: github_expression(value, contexts) for name, value in scope.items()})
    steps, failed = [], False
    for number, step in enumerate(definition['steps']):
        name = step.get('name') or f'step {number + 1}'
        condition = str(step.get('if', 'success()')).strip()
        if condition not in ('success()', 'always()'):
            raise RecipeError(f'if: {condition} is not understood by this runner (step {name})')
        if 'uses' in step or name in skip:
            steps.append(Step(name, 'not run here'))
            continue
        if failed and condition == 'success()':
            steps.append(Step(name, 'skipped'))
            continue
        step_env = dict(env, **{key: github_expression(value, contexts) for key, value in (step.get('env') or {}).items()})
        code, output = _shell(github_expression(step['run'], contexts), step_env, workspace, timeout)
        steps.append(Step(name, 'passed' if code == 0 else 'failed', code, output))
        failed = failed or (code != 0 and not step.get('continue-on-error'))
    return JobRun(1 if failed else 0, steps, env)


def gitlab_expand(value: str, known: dict) -> str:
    return VARIABLE.sub(lambda match: str(known.get(match.group(1) or match.group(2), '')), str(value))


def _gitlab_lines(definition: dict, section: str) -> list:
    lines = definition.get(section) or []
    lines = [lines] if isinstance(lines, str) else lines
    for line in lines:
        if not isinstance(line, str):
            raise RecipeError(f'{section}: {line!r} is not understood by this runner')
    return lines


def run_gitlab_job(path: str, job: str, *, project_dir: str, base_env: dict, variables: dict | None = None,
                   skip: tuple = (), timeout: int = 900) -> JobRun:
    """``variables`` are the project's CI/CD variables (secrets among them): they override the job's defaults."""
    definition = load(path)[job]
    env = dict(base_env, CI='true', GITLAB_CI='true', CI_PROJECT_DIR=project_dir)
    for name, value in (definition.get('variables') or {}).items():
        if isinstance(value, dict):
            value = value['value']
        env[name] = gitlab_expand(value, env)
    env.update(variables or {})
    steps, failed = [], False
    for section in ('before_script', 'script'):
        lines = _gitlab_lines(definition, section)
        if section in skip:
            steps.append(Step(section, 'not run here'))
            continue
        if failed:
            steps.append(Step(section, 'skipped'))
            continue
        code, output = _shell('\n'.join(lines), env, project_dir, timeout)
        steps.append(Step(section, 'passed' if code == 0 else 'failed', code, output))
        failed = code != 0
    # after_script runs whatever happened before; its result does not change the job's
    code, output = _shell('\n'.join(_gitlab_lines(definition, 'after_script')), env, project_dir, timeout)
    steps.append(Step('after_script', 'passed' if code == 0 else 'failed', code, output))
    return JobRun(1 if failed else 0, steps, env)
