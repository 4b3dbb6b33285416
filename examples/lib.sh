# What the demos share; sourced, not run.

# wait_for FILE LINE PID [SECONDS]: waits (60 s unless said) for LINE in FILE while process PID
# lives; if it dies or the time passes, shows FILE and exits 1.
wait_for() {
  local file=$1 line=$2 pid=$3 seconds=${4:-60}
  for _ in $(seq 1 $((seconds * 10))); do
    grep -q "$line" "$file" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$file"; exit 1; }
    sleep 0.1
  done
  echo "no \"$line\" within $seconds s"; cat "$file"; exit 1
}
