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
# replica (and the replicas' worker processes) before it exits.
#
# A replica that dies while serving is restarted on its port after a back-off (1 s, then 2, 4, 8 s while it keeps
# dying); meanwhile nginx sends its students to the other replicas and nginx and the other replicas keep running.
# A replica that dies RESTART_GIVE_UP times within RESTART_WINDOW_S s, a replica that does not start at first, or
# nginx dying, stops everything (exit 1, naming it, with the last lines of its log).
#
# Environment: PYTHON (default .venv/bin/python, else python3), NGINX (default /usr/sbin/nginx),
# SCHEDLAB_PREFETCH_WORKERS (passed on to every replica; see README "Development").
# Exit codes: 0 stopped by a signal (Ctrl-C, SIGTERM), 1 nginx refused its config or died, a replica did not start,
# or a replica died RESTART_GIVE_UP times within RESTART_WINDOW_S s; 2 bad arguments or a missing program (bash 5.1
# or newer included).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MAX_REPLICAS=32
START_TIMEOUT_S=90
STOP_TIMEOUT_S=10
LOG_TAIL_LINES=30
RESTART_GIVE_UP=5     # a replica's deaths within RESTART_WINDOW_S s that make serve.sh give up
RESTART_WINDOW_S=60
FAIL_TIMEOUT_S=5      # nginx: how long a replica that refused a connection gets no requests (then one is tried)

if (( BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1) )); then
    echo "serve.sh: needs bash 5.1 or newer (wait -n -p), this is $BASH_VERSION" >&2
    exit 2
fi

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

# Replica i (0-based; "replica i+1" to the reader, "r<i+1>" in the cookie) on port replica_ports[i]. Each replica and
# nginx leads its own process group (setsid), so stopping one stops its worker processes too.
nginx_pid=""
replica_pid=()    # the running replica's pid, "" while it waits for its restart
backoff_pid=()    # a `sleep` that ends when the replica's restart is due, "" when none is pending
health_pid=()     # a check that ends when a restarted replica answers its health check (exit 0) or gives up (1)
deaths=()         # when the replica died ($SECONDS, space-separated), those within RESTART_WINDOW_S s
died_at=()        # $SECONDS of its last death
restarts=()
for i in "${!replica_ports[@]}"; do
    replica_pid+=("") backoff_pid+=("") health_pid+=("") deaths+=("") died_at+=(0) restarts+=(0)
done

name_of() { echo "replica $(($1 + 1)) (127.0.0.1:${replica_ports[$1]})"; }
log_of() { echo "$run_dir/replica-$(($1 + 1)).log"; }

stop_all() {
    # Every process we started: `jobs -p` lists them all, nginx, each replica, a pending restart's sleep, a health
    # check, even one started a moment before the signal whose pid no variable holds yet.
    trap - INT TERM EXIT
    local pid deadline started
    started=$(jobs -p)
    for pid in $started; do
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    done
    deadline=$((SECONDS + STOP_TIMEOUT_S))
    for pid in $started; do
        while { kill -0 -- "-$pid" || kill -0 "$pid"; } 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
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

replica_process() {  # (in the background: becomes replica $1, leader of its own process group)
    export SCHEDLAB_REPLICA=$(($1 + 1))  # names the replica to benchmarks/class_load.py
    exec setsid "$python" -m streamlit run app.py \
        --server.headless true --server.address 127.0.0.1 --server.port "${replica_ports[$1]}" \
        --browser.gatherUsageStats false --server.fileWatcherType none
}

start_replica() {  # replica $1 on its port, its output appended to its log
    replica_process "$1" < /dev/null >> "$(log_of "$1")" 2>&1 &
    replica_pid[$1]=$!
}

is_healthy() {  # does 127.0.0.1:$1 answer /_stcore/health with 200? (Ctrl-C: no traceback)
    "$python" -c "import signal, sys, urllib.request as u
signal.signal(signal.SIGINT, signal.SIG_DFL)
try: sys.exit(u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=2).status != 200)
except OSError: sys.exit(1)" "http://127.0.0.1:$1/_stcore/health"
}

for i in "${!replica_ports[@]}"; do
    start_replica "$i"
done

# Sticky sessions by a cookie that names the replica serving the browser: schedlab_replica=r<k>. A browser without
# it (or with a value that names no replica) is placed at random (split_clients on the request's id); every
# response whose replica differs from the cookie sets it anew, so a browser that nginx moved to another replica (its
# own is down) stays there, uploads and downloads included, also after its old replica is back.
# Each replica has an upstream of its own: that replica first, the others as backups. A replica that refuses a
# connection gets no requests for FAIL_TIMEOUT_S s (max_fails=1), and the request goes on to a backup (the backups
# take turns), the websocket's too: its students reconnect to the other replicas.
n=${#replica_ports[@]}
share=$(( 10000 / n ))  # each replica's share in hundredths of a percent (split_clients takes two decimals)
split="" served_map="" upstreams=""
for i in "${!replica_ports[@]}"; do
    if (( i < n - 1 )); then
        split+="        $((share / 100)).$(printf %02d $((share % 100)))% r$((i + 1));"$'\n'
    else
        split+="        * r$((i + 1));"$'\n'
    fi
    served_map+="        \"~127\\.0\\.0\\.1:${replica_ports[$i]}\$\" r$((i + 1));"$'\n'
    upstreams+="    upstream r$((i + 1)) {"$'\n'
    for j in "${!replica_ports[@]}"; do
        upstreams+="        server 127.0.0.1:${replica_ports[$j]} max_fails=1 fail_timeout=${FAIL_TIMEOUT_S}s"
        (( i == j )) || upstreams+=" backup"
        upstreams+=";"$'\n'
    done
    upstreams+="    }"$'\n'
done
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
    # would send the whole class to one replica. The cookie names the replica that served the browser.
    split_clients "\$request_id" \$new_replica {
$split    }
    map \$cookie_schedlab_replica \$replica {
$(for i in "${!replica_ports[@]}"; do echo "        r$((i + 1)) r$((i + 1));"; done)
        default \$new_replica;
    }
    # The replica that answered: the last address nginx tried (after a failed one it lists both).
    map \$upstream_addr \$served_replica {
$served_map        default "";
    }
    map "\$cookie_schedlab_replica:\$served_replica" \$replica_cookie {
        "~^(r[0-9]+):\\1\$" "";  # the cookie names it already
        "~:\$"               "";  # no replica answered (nginx's own error page)
        default "schedlab_replica=\$served_replica; Path=/; HttpOnly; SameSite=Lax";
    }
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        ""      close;
    }
$upstreams
    server {
        listen $listen:$port;
        add_header Set-Cookie \$replica_cookie always;  # (the websocket's 101 response too)
        proxy_http_version 1.1;
        proxy_set_header Host \$http_host;  # with the port: Streamlit compares the websocket's Origin with it
        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto \$scheme;
        # A replica that refuses the connection (dead, or restarting) or answers 502/503: on to the next one.
        proxy_next_upstream error timeout http_502 http_503;
        location / {
            proxy_pass http://\$replica;
        }
        location /_stcore/stream {
            proxy_pass http://\$replica;
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

# Wait until every replica answers its health check: one that does not start is a broken set-up, not bad luck.
deadline=$((SECONDS + START_TIMEOUT_S))
for i in "${!replica_ports[@]}"; do
    until is_healthy "${replica_ports[$i]}"; do
        if ! kill -0 "${replica_pid[$i]}" 2>/dev/null; then
            echo "serve.sh: $(name_of "$i") exited before it answered its health check" >&2
            log_tail "$(log_of "$i")"
            exit 1
        fi
        if (( SECONDS >= deadline )); then
            echo "serve.sh: $(name_of "$i") did not start within ${START_TIMEOUT_S} s" >&2
            log_tail "$(log_of "$i")"
            exit 1
        fi
        sleep 0.5
    done
done

setsid "$nginx" -p "$run_dir" -c "$run_dir/nginx.conf" -e "$run_dir/nginx-error.log" \
    < /dev/null > "$run_dir/nginx.log" 2>&1 &
nginx_pid=$!

shown=$listen
[[ $listen == 0.0.0.0 ]] && shown=${HOSTNAME:-THIS-MACHINE}
echo "serve.sh: Scheduler Lab on http://$shown:$port/ (nginx, $replicas replica(s) on 127.0.0.1 ports" \
     "${replica_ports[*]}); run directory $run_dir; Ctrl-C stops everything"

replica_died() {  # replica $1 exited with wait's status $2: restart it after a back-off, or give up
    local i=$1 status=$2 how recent=() t delay
    # Its worker processes may outlive it (SIGKILL reaches only the replica): they go with its process group.
    kill -KILL -- "-${replica_pid[$i]}" 2>/dev/null || true
    replica_pid[i]=""
    if [[ -n ${health_pid[$i]} ]]; then
        kill "${health_pid[$i]}" 2>/dev/null || true
        wait "${health_pid[$i]}" 2>/dev/null || true
        health_pid[i]=""
    fi
    if (( status > 128 )); then how="killed by signal $((status - 128))"; else how="exit code $status"; fi
    for t in ${deaths[$i]}; do
        (( SECONDS - t < RESTART_WINDOW_S )) && recent+=("$t")
    done
    recent+=("$SECONDS")
    deaths[i]="${recent[*]}"
    died_at[i]=$SECONDS
    if (( ${#recent[@]} >= RESTART_GIVE_UP )); then
        echo "serve.sh: $(name_of "$i") died ${#recent[@]} times within $RESTART_WINDOW_S s (the last: $how);" \
             "giving up: stopping nginx and the other replicas" >&2
        log_tail "$(log_of "$i")"
        exit 1
    fi
    delay=$(( 1 << (${#recent[@]} - 1) ))
    if (( ${#replica_ports[@]} > 1 )); then
        echo "serve.sh: $(name_of "$i") died ($how); nginx sends its students to the other replicas;" \
             "restarting it in $delay s (death ${#recent[@]} of $RESTART_GIVE_UP allowed within $RESTART_WINDOW_S s)" >&2
    else
        echo "serve.sh: $(name_of "$i") died ($how); restarting it in $delay s" \
             "(death ${#recent[@]} of $RESTART_GIVE_UP allowed within $RESTART_WINDOW_S s)" >&2
    fi
    setsid sleep "$delay" &  # (setsid: out of the terminal's process group, as the replicas; Ctrl-C is ours)
    backoff_pid[i]=$!
}

restart_replica() {  # replica $1's back-off is over: start it, and a check that says when it serves again
    local i=$1
    backoff_pid[i]=""
    restarts[i]=$((restarts[i] + 1))
    echo "--- serve.sh: restart ${restarts[$i]} of replica $((i + 1))" >> "$(log_of "$i")"
    start_replica "$i"
    echo "serve.sh: $(name_of "$i") restarted (pid ${replica_pid[$i]})" >&2
    setsid "$python" -c "import sys, time, urllib.request as u
opener, deadline = u.build_opener(u.ProxyHandler({})), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    try:
        if opener.open(sys.argv[1], timeout=2).status == 200: sys.exit(0)
    except OSError: pass
    time.sleep(0.25)
sys.exit(1)" "http://127.0.0.1:${replica_ports[$i]}/_stcore/health" "$START_TIMEOUT_S" < /dev/null &
    health_pid[i]=$!
}

health_done() {  # replica $1's health check after a restart ended with status $2
    local i=$1 status=$2
    health_pid[i]=""
    if (( status == 0 )); then
        echo "serve.sh: $(name_of "$i") serves again, $((SECONDS - died_at[i])) s after it died" >&2
    elif [[ -n ${replica_pid[$i]} ]]; then  # (its death, reported next, counts toward giving up)
        echo "serve.sh: $(name_of "$i") did not answer its health check within $START_TIMEOUT_S s of its restart;" \
             "stopping it" >&2
        kill -KILL -- "-${replica_pid[$i]}" 2>/dev/null || true
    fi
}

# In the foreground until a signal (on_signal exits) or until nginx dies or a replica gives up. `wait -n -p` reports
# one ended process at a time with its status; the others' ends wait in bash's table for the next round.
while true; do
    running=("$nginx_pid")
    for i in "${!replica_ports[@]}"; do
        for pid in "${replica_pid[$i]}" "${backoff_pid[$i]}" "${health_pid[$i]}"; do
            [[ -n $pid ]] && running+=("$pid")
        done
    done
    ended="" status=0
    wait -n -p ended "${running[@]}" || status=$?
    [[ -n $ended ]] || continue  # (a signal interrupted the wait; its trap has run)
    if [[ $ended == "$nginx_pid" ]]; then
        echo "serve.sh: nginx ($listen:$port) exited (status $status); stopping the replicas" >&2
        log_tail "$run_dir/nginx-error.log"
        exit 1
    fi
    for i in "${!replica_ports[@]}"; do
        case $ended in
            "${replica_pid[$i]}") replica_died "$i" "$status"; break ;;
            "${backoff_pid[$i]}") restart_replica "$i"; break ;;
            "${health_pid[$i]}") health_done "$i" "$status"; break ;;
        esac
    done
done
