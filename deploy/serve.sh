#!/usr/bin/env bash
# Serve Scheduler Lab from N app replicas behind Debian's nginx, for a class bigger than one server process.
#
#   bash deploy/serve.sh --replicas N --port P [--listen ADDR]
#
# Starts N `streamlit run app.py` replicas on free loopback ports and nginx on ADDR:P (default 0.0.0.0, every
# interface: the students' machines must reach it) in front of them, with the websocket upgrade for
# /_stcore/stream and sticky sessions by a cookie (deploy/README.md says why not ip_hash). The nginx config, its
# logs and the replicas' logs live in a fresh run directory under $TMPDIR (printed at start, removed at the end);
# nothing under /etc is read or written. Runs in the foreground until Ctrl-C or SIGTERM, then stops nginx and every
# replica (and the replicas' worker processes) before it exits; if one of them dies, it stops the rest and exits 1.
#
# Environment: PYTHON (default .venv/bin/python, else python3), NGINX (default /usr/sbin/nginx),
# SCHEDLAB_PREFETCH_WORKERS (passed on to every replica; see README "Development").
# Exit codes: 0 stopped by a signal, 1 a replica or nginx failed, 2 bad arguments or a missing program.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MAX_REPLICAS=32
START_TIMEOUT_S=90
STOP_TIMEOUT_S=10
LOG_TAIL_LINES=30

usage() {
    echo "usage: bash deploy/serve.sh --replicas N --port P [--listen ADDR]"
    echo "  --replicas N   app processes behind nginx, 1 to $MAX_REPLICAS (about one per core)"
    echo "  --port P       the port nginx listens on, 1 to 65535 (the students open http://HOST:P)"
    echo "  --listen ADDR  the IPv4 address nginx listens on (default 0.0.0.0: every interface;"
    echo "                 127.0.0.1 for this machine only)"
}

fail_usage() {  # a bad argument: what is wrong, what is allowed, exit 2
    echo "serve.sh: $1" >&2
    usage >&2
    exit 2
}

is_whole() { [[ $1 =~ ^[0-9]+$ ]] && (( 10#$1 >= $2 && 10#$1 <= $3 )); }

replicas="" port="" listen="0.0.0.0"
while (( $# > 0 )); do
    case $1 in
        --replicas|--port|--listen)
            (( $# >= 2 )) || fail_usage "$1 needs a value"
            case $1 in
                --replicas) replicas=$2 ;;
                --port) port=$2 ;;
                --listen) listen=$2 ;;
            esac
            shift 2 ;;
        --replicas=*) replicas=${1#*=}; shift ;;
        --port=*) port=${1#*=}; shift ;;
        --listen=*) listen=${1#*=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) fail_usage "unknown argument '$1'" ;;
    esac
done
[[ -n $replicas ]] || fail_usage "--replicas is required"
[[ -n $port ]] || fail_usage "--port is required"
is_whole "$replicas" 1 "$MAX_REPLICAS" \
    || fail_usage "--replicas: must be a whole number from 1 to $MAX_REPLICAS, got '$replicas'"
is_whole "$port" 1 65535 || fail_usage "--port: must be a whole number from 1 to 65535, got '$port'"
replicas=$((10#$replicas)) port=$((10#$port))
octet='(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])'
[[ $listen =~ ^$octet\.$octet\.$octet\.$octet$ ]] \
    || fail_usage "--listen: must be an IPv4 address such as 0.0.0.0 or 127.0.0.1, got '$listen'"

python=${PYTHON:-}
if [[ -z $python ]]; then
    if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi
if ! "$python" -c "import streamlit" 2>/dev/null; then
    echo "serve.sh: $python cannot import streamlit: create the environment first (README \"Quick start\") or" \
         "set PYTHON to a Python that has requirements.txt installed" >&2
    exit 2
fi
nginx=${NGINX:-/usr/sbin/nginx}
if [[ ! -x $nginx ]]; then
    echo "serve.sh: nginx not found at $nginx: install Debian's package with" \
         "\`apt-get install -y --no-install-recommends nginx\` (as root), or set NGINX to its path" >&2
    exit 2
fi

# Ports: nginx's must be free; each replica gets a free loopback port from the kernel.
ports=$("$python" - "$listen" "$port" "$replicas" <<'EOF'
import socket, sys
listen, port, replicas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    with socket.socket() as s:
        s.bind((listen, port))
except OSError as exc:
    sys.exit(f"serve.sh: --port: cannot listen on {listen}:{port} ({exc.strerror}): pick a free port"
             + (" (ports below 1024 need root)" if port < 1024 else ""))
held = []
for _ in range(replicas):  # held open together, so the kernel hands out different ones
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held))
EOF
) || exit 2
read -r -a replica_ports <<< "$ports"

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/schedlab-serve.XXXXXX")
chmod 755 "$run_dir"
mkdir -m 1777 "$run_dir/temp"  # nginx's workers may run as another user (nobody/www-data) when started as root
pids=()       # every process we started: nginx, then each replica (each leads its own process group)
names=()

stop_all() {
    trap - INT TERM EXIT
    local i pid deadline
    for i in "${!pids[@]}"; do
        kill -TERM -- "-${pids[$i]}" 2>/dev/null || kill -TERM "${pids[$i]}" 2>/dev/null || true
    done
    deadline=$((SECONDS + STOP_TIMEOUT_S))
    for pid in "${pids[@]}"; do
        while kill -0 -- "-$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
        kill -KILL -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$run_dir"
}

log_tail() {  # the last lines of a log, for a failure message
    echo "--- last lines of $1:" >&2
    tail -n "$LOG_TAIL_LINES" "$1" >&2 || true
}

on_signal() {
    echo "serve.sh: stopping nginx and ${#replica_ports[@]} replica(s)"
    stop_all
    exit 0
}
trap on_signal INT TERM
trap stop_all EXIT

# One cookie secret for every replica: a session that moves to another replica (its own died) still has valid
# cookies. Passed in the environment, not on the command line, where `ps` would show it.
STREAMLIT_SERVER_COOKIE_SECRET=$("$python" -c "import secrets; print(secrets.token_hex(32))")
export STREAMLIT_SERVER_COOKIE_SECRET

for i in "${!replica_ports[@]}"; do
    # setsid: each replica leads its own process group, so stopping it stops its worker processes too.
    setsid "$python" -m streamlit run app.py \
        --server.headless true --server.address 127.0.0.1 --server.port "${replica_ports[$i]}" \
        --browser.gatherUsageStats false --server.fileWatcherType none \
        < /dev/null > "$run_dir/replica-$((i + 1)).log" 2>&1 &
    pids+=("$!")
    names+=("replica $((i + 1)) (127.0.0.1:${replica_ports[$i]})")
done

servers=""
for p in "${replica_ports[@]}"; do servers+="        server 127.0.0.1:$p max_fails=0;"$'\n'; done
cat > "$run_dir/nginx.conf" <<EOF
# Generated by deploy/serve.sh; removed when it stops.
daemon off;
pid $run_dir/nginx.pid;
error_log $run_dir/nginx-error.log warn;
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log $run_dir/nginx-access.log;
    client_body_temp_path $run_dir/temp/client_body;
    proxy_temp_path $run_dir/temp/proxy;
    fastcgi_temp_path $run_dir/temp/fastcgi;
    uwsgi_temp_path $run_dir/temp/uwsgi;
    scgi_temp_path $run_dir/temp/scgi;
    client_max_body_size 200m;  # Streamlit's own upload limit (server.maxUploadSize)

    # Sticky sessions by cookie, not by client address: a classroom behind one NAT is one address, and ip_hash
    # would send the whole class to one replica. A browser without the cookie gets a random key (the request's
    # id) and keeps it; every later request (the page's files, the websocket, uploads, downloads) carries it and
    # reaches the replica that holds its Streamlit session.
    map \$cookie_schedlab_replica \$replica_key {
        ""      \$request_id;
        default \$cookie_schedlab_replica;
    }
    map \$cookie_schedlab_replica \$replica_cookie {
        ""      "schedlab_replica=\$request_id; Path=/; HttpOnly; SameSite=Lax";
        default "";
    }
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        ""      close;
    }
    upstream schedlab {
        hash \$replica_key consistent;
$servers    }
    server {
        listen $listen:$port;
        add_header Set-Cookie \$replica_cookie always;
        proxy_http_version 1.1;
        proxy_set_header Host \$http_host;  # with the port: Streamlit compares the websocket's Origin with it
        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto \$scheme;
        location / {
            proxy_pass http://schedlab;
        }
        location /_stcore/stream {
            proxy_pass http://schedlab;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_buffering off;
            proxy_read_timeout 1d;  # an open lesson is a websocket that may stay quiet for a long time
            proxy_send_timeout 1d;
        }
    }
}
EOF
if ! "$nginx" -t -q -p "$run_dir" -c "$run_dir/nginx.conf" -e "$run_dir/nginx-error.log" 2>"$run_dir/nginx-test.log"; then
    echo "serve.sh: nginx refused the generated config:" >&2
    cat "$run_dir/nginx-test.log" >&2
    exit 1
fi

# Wait until every replica answers its health check.
deadline=$((SECONDS + START_TIMEOUT_S))
for i in "${!replica_ports[@]}"; do
    until "$python" -c "import sys, urllib.request as u
try: sys.exit(u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=2).status != 200)
except OSError: sys.exit(1)" "http://127.0.0.1:${replica_ports[$i]}/_stcore/health"; do
        if ! kill -0 "${pids[$i]}" 2>/dev/null || (( SECONDS >= deadline )); then
            echo "serve.sh: ${names[$i]} did not start within ${START_TIMEOUT_S} s" >&2
            log_tail "$run_dir/replica-$((i + 1)).log"
            exit 1
        fi
        sleep 0.5
    done
done

setsid "$nginx" -p "$run_dir" -c "$run_dir/nginx.conf" -e "$run_dir/nginx-error.log" \
    < /dev/null > "$run_dir/nginx.log" 2>&1 &
pids=("$!" "${pids[@]}")
names=("nginx ($listen:$port)" "${names[@]}")

shown=$listen
[[ $listen == 0.0.0.0 ]] && shown=${HOSTNAME:-THIS-MACHINE}
echo "serve.sh: Scheduler Lab on http://$shown:$port/ (nginx, $replicas replica(s) on 127.0.0.1 ports" \
     "${replica_ports[*]}); run directory $run_dir; Ctrl-C stops everything"

# In the foreground until a signal (on_signal) or until one of our processes exits by itself.
while true; do
    wait -n "${pids[@]}" || true
    for i in "${!pids[@]}"; do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            echo "serve.sh: ${names[$i]} exited; stopping the rest" >&2
            if (( i == 0 )); then log_tail "$run_dir/nginx-error.log"; else log_tail "$run_dir/replica-$i.log"; fi
            exit 1
        fi
    done
done
