//! The nginx configuration of the relay benchmark, pure: nginx as a plain
//! streaming reverse proxy (what people put in front of an inference server),
//! everything it writes kept in the benchmark's temporary directory.

use std::net::SocketAddr;
use std::path::Path;

/// nginx.conf for a reverse proxy on `listen` to `upstream`, in the foreground,
/// with its pid file, logs and temp paths under `dir`; `workers` worker
/// processes (`None`: `auto`, nginx's default as Debian ships it).
///
/// Why each setting: `proxy_buffering off` relays each upstream read at once
/// (as tpscope does); `proxy_http_version 1.1` with an empty `Connection` header
/// and `keepalive` keeps upstream connections open between requests (tpscope's
/// forwarder pools them too); `worker_processes auto` runs nginx as Debian ships
/// it, a worker per core (as tpscope's default serving threads; the
/// benchmark's `--workers N` gives both, and LiteLLM, N); `worker_connections`
/// makes room for 1,000 client and 1,000 upstream connections in one worker; the
/// access log stays on (one line per request, as tpscope writes one span per
/// request).
pub fn nginx_conf(
    dir: &Path,
    listen: SocketAddr,
    upstream: SocketAddr,
    workers: Option<u32>,
) -> String {
    let d = dir.display();
    let workers = workers.map_or("auto".to_string(), |n| n.to_string());
    format!(
        "daemon off;
master_process on;
worker_processes {workers};
pid {d}/nginx.pid;
error_log {d}/error.log warn;
worker_rlimit_nofile 16384;
events {{
    worker_connections 8192;
}}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream bench_upstream {{
        server {upstream};
        keepalive 1024;
    }}
    server {{
        listen {listen};
        location / {{
            proxy_pass http://bench_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"
    )
}
