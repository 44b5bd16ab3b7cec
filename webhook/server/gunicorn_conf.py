"""gunicorn configuration, as a Python module: `gunicorn -c python:webhook.server.gunicorn_conf`.

It only wires: gunicorn's settings and the master's hooks come from master.py, which reads the
same Settings the application does (and exits with a message naming the setting that does not
read). gunicorn reads every public name of this module.
"""

from __future__ import annotations

from webhook.server.master import Master, settings_or_exit

_master = Master(settings_or_exit())
globals().update(_master.gunicorn_variables())

on_starting = _master.on_starting
ssl_context = _master.ssl_context
pre_fork = _master.pre_fork
child_exit = _master.child_exit
when_ready = _master.when_ready
on_exit = _master.on_exit
