#!/usr/bin/python3
"""The nginx configuration that `ulsbench apps` (apps/ulsbench_apps.py) and the interop
tests (tests/interop/test_nginx.py and the tests that import it) run nginx with: one
place for what they share, each caller giving only what its measurement or check needs.

Importing this module runs nothing.
"""


def nginx_conf(d, workers, log_format, servers, error_level="warn", access_log_opts="",
               http_extra=""):
    """nginx.conf text for a master and `workers` worker processes, with Debian's stock
    `sendfile on; tcp_nopush on;`. `daemon off; master_process on;` keeps the master in
    the foreground, so the PID the caller records is nginx's own; everything nginx writes
    (pid file, logs, temp directories) is in directory d (d/tmp must exist).

    log_format: the access log's fields, as nginx's log_format takes them;
    servers: the server blocks, text of the http block as it is;
    error_level: the error log's level; access_log_opts: after `access_log FILE FORMAT`
    (e.g. " buffer=64k"); http_extra: more lines of the http block, each indented and
    ending in a newline."""
    return f"""\
worker_processes {workers};
daemon off;
master_process on;
pid {d}/nginx.pid;
error_log {d}/error.log {error_level};
events {{
    worker_connections 1024;
}}
http {{
    log_format uls '{log_format}';
    access_log {d}/access.log uls{access_log_opts};
    client_body_temp_path {d}/tmp/client_body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
{http_extra}{servers}}}
"""
