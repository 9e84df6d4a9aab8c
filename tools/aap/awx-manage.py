"""awx-manage for the AWX test: AWX's own management commands, with its receptor configuration read from
$AWX_RECEPTOR_CONF. AWX reads it from a constant (/etc/receptor/receptor.conf in awx/main/tasks/receptor.py), and a
test run keeps every file in its own directory.
    AWX_SETTINGS_FILE=... AWX_RECEPTOR_CONF=... python awx-manage.py run_dispatcher
"""

import os
import sys


def main():
    import awx  # pylint: disable=import-outside-toplevel,import-error

    awx.prepare_env()
    import django  # pylint: disable=import-outside-toplevel,import-error

    django.setup()
    from awx.main.tasks import receptor  # pylint: disable=import-outside-toplevel,import-error

    conf = os.environ['AWX_RECEPTOR_CONF']
    setattr(receptor, '__RECEPTOR_CONF', conf)
    setattr(receptor, '__RECEPTOR_CONF_LOCKFILE', f'{conf}.lock')
    sys.argv[0] = 'awx-manage'
    awx.manage()


if __name__ == '__main__':
    main()
