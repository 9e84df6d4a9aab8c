"""The session store code stays split by concern: small classes, the Redis protocol written in one file, no private
name imported across files, an import graph without cycles, and redis-py's internals reached from one file."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLUGINS = os.path.join(ROOT, 'plugins')
SESSIONS = os.path.join(PLUGINS, 'module_utils', '_sessions')
PACKAGE = 'ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions'
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')

MAX_CLASS_LINES = 150
INTERNALS_FILE = 'redis_py_internals.py'
# what redis-py does not document: reached only through redis_py_internals.py
REDIS_PY_INTERNALS = {
    'a connection\'s socket (_sock)': re.compile(r'\b_sock\b'),
    'Sentinel.sentinels': re.compile(r'\.sentinels\b'),
    'pool.connection_kwargs': re.compile(r'\.connection_kwargs\b'),
    'RedisCluster.nodes_manager': re.compile(r'\bnodes_manager\b'),
    'ConnectionPool.get_connection': re.compile(r'\bget_connection\('),
}


def session_modules() -> list:
    return sorted(name[:-3] for name in os.listdir(SESSIONS) if name.endswith('.py') and name != '__init__.py')


def python_files(top: str):
    for folder, _dirs, files in os.walk(top):
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(folder, name)


def parsed(path: str) -> ast.Module:
    with open(path, encoding='utf-8') as handle:
        return ast.parse(handle.read(), path)


def source(path: str) -> str:
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def session_imports(tree: ast.Module):
    """(imported session module, imported names) of every import of a session module in ``tree``, lazy ones too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                for alias in node.names:
                    yield alias.name, ()
            elif node.module.startswith(PACKAGE + '.'):
                yield node.module[len(PACKAGE) + 1:], [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + '.'):
                    yield alias.name[len(PACKAGE) + 1:], ()


@pytest.mark.parametrize('module', session_modules())
def test_no_session_class_is_over_150_lines(module):
    tree = parsed(os.path.join(SESSIONS, module + '.py'))
    sizes = {node.name: node.end_lineno - node.lineno for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    assert {name: size for name, size in sizes.items() if size > MAX_CLASS_LINES} == {}


def test_the_redis_protocol_is_written_only_in_redis_wire():
    writing = [name for name in os.listdir(SESSIONS)
               if name.endswith('.py') and name != 'redis_wire.py' and '\\r\\n' in source(os.path.join(SESSIONS, name))]
    assert writing == []
    assert '\\r\\n' in source(os.path.join(SESSIONS, 'redis_wire.py'))


def test_no_private_session_name_is_imported_across_files():
    private = []
    for path in list(python_files(PLUGINS)) + list(python_files(os.path.join(ROOT, 'tests'))):
        for module, names in session_imports(parsed(path)):
            private.extend(f'{os.path.relpath(path, ROOT)}: {module}.{name}' for name in names if name.startswith('_'))
    assert private == []


def test_the_session_modules_import_one_another_without_a_cycle():
    graph = {module: {imported.split('.')[0] for imported, _names in session_imports(parsed(os.path.join(SESSIONS, module + '.py')))}
             for module in session_modules()}
    assert all(imported in graph for imports in graph.values() for imported in imports), graph
    done, path = set(), []

    def visit(module):
        if module in path:
            raise AssertionError(f'import cycle: {" -> ".join(path[path.index(module):] + [module])}')
        if module in done:
            return
        path.append(module)
        for imported in sorted(graph[module]):
            visit(imported)
        path.pop()
        done.add(module)

    for module in graph:
        visit(module)


def test_each_session_module_imports_on_its_own():
    """Each module imported first, in a fresh interpreter: none needs another to be imported before it."""
    script = (
        'import importlib, sys\n'
        f'sys.path.insert(0, {COLLECTIONS!r})\n'
        'failed = []\n'
        'for name in sys.argv[1:]:\n'
        '    for loaded in [m for m in sys.modules if m.startswith("ansible_collections.inferops")]:\n'
        '        del sys.modules[loaded]\n'
        '    try:\n'
        f'        importlib.import_module({PACKAGE!r} + "." + name)\n'
        '    except Exception as exc:\n'
        '        failed.append(f"{name}: {exc!r}")\n'
        'print("\\n".join(failed))\n'
    )
    result = subprocess.run([sys.executable, '-c', script, *session_modules()], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ''


@pytest.mark.parametrize('internal', sorted(REDIS_PY_INTERNALS))
def test_redis_py_internals_are_reached_from_one_file(internal):
    pattern = REDIS_PY_INTERNALS[internal]
    users = sorted(os.path.relpath(path, PLUGINS) for path in python_files(PLUGINS) if pattern.search(source(path)))
    # the file that uses it, or none where the public API took its place (a client's connection options)
    assert users in ([], [os.path.join('module_utils', '_sessions', INTERNALS_FILE)])


def test_every_redis_py_internal_is_named_with_the_versions_it_is_tested_on():
    tree = parsed(os.path.join(SESSIONS, INTERNALS_FILE))
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith('_')]
    assert functions
    for function in functions:
        doc = ast.get_docstring(function) or ''
        assert '5.0.0' in doc and '8.1.0' in doc, function.name
