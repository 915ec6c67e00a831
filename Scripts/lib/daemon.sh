# Shared by the benchmark scripts (bench.sh, sync-ab.sh): source it, with WORK set to a scratch
# folder. Loopback only.

# Starts `$1 --home $2 serve` on a free loopback port; sets DAEMON_PID and PORT. Waits at most
# 20 s for the port in its log.
start_daemon_of() {
    local log=$WORK/daemon.log
    : > "$log"
    "$1" --home "$2" serve --listen 127.0.0.1:0 2> "$log" &
    DAEMON_PID=$!
    for _ in $(seq 1 400); do
        PORT=$(sed -n 's/.* on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log" | head -n 1)
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    echo "the daemon did not start:" >&2; cat "$log" >&2; exit 1
}
