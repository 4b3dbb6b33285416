#!/usr/bin/env bash
# Makes sure NATS (JetStream, 127.0.0.1:4222) and Redis (127.0.0.1:6379) are up, starting
# them as this kind of machine does when they are not (installing them if missing), and
# that the tools of the steps' networks are here.
set -euo pipefail
# apt-get one at a time on this machine: .ci/run runs these scripts side by side.
apt() { as_root flock /tmp/ephemera-apt.lock apt-get -o DPkg::Lock::Timeout=600 "$@"; }
# The process driver's step networks need ip and nft (without them steps get loopback only).
bash "$(dirname "$0")/ensure-step-network.sh" || echo "could not install iproute2 and nftables: steps will have loopback only" >&2
nats_up() { (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; }
# A Redis that asks for credentials (-NOAUTH) is up all the same: the services bring theirs.
redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && read -r -t 2 reply <&3 && [[ $reply == +PONG* || $reply == -NOAUTH* ]]) 2>/dev/null; }
if nats_up && redis_up; then exit 0; fi
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v nats-server >/dev/null || ! command -v redis-server >/dev/null; then
  echo "installing nats-server and redis-server" >&2
  apt update -qq && apt install -y -qq nats-server redis-server >/dev/null
fi
if ! nats_up; then
  echo "starting nats-server (JetStream) on 127.0.0.1:4222" >&2
  as_root mkdir -p /var/lib/nats-server
  as_root start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
fi
if ! redis_up; then
  echo "starting redis-server on 127.0.0.1:6379" >&2
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
for _ in $(seq 1 100); do nats_up && redis_up && exit 0; sleep 0.1; done
nats_up || echo "NATS is not reachable on 127.0.0.1:4222" >&2
redis_up || echo "Redis is not reachable on 127.0.0.1:6379" >&2
exit 1
