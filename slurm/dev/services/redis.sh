# shellcheck shell=bash
# Redis on 127.0.0.1:$REDIS_PORT, daemonized, no persistence.

REDIS_PIDFILE=$RUN/redis.pid

redis_ping() { [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping) == PONG ]]; }

redis_up() {
  mkdir -p "$STATE/redis"
  RENDER_CHANGED=0
  render "$DEV_DIR/conf/redis.conf.in" "$STATE/redis/redis.conf" 644
  if ((RENDER_CHANGED)) && running "$REDIS_PIDFILE" redis-server; then
    log "redis: config changed, restarting"
    redis_down
  fi
  if ! running "$REDIS_PIDFILE" redis-server; then
    log "redis: starting redis-server on 127.0.0.1:$REDIS_PORT"
    redis-server "$STATE/redis/redis.conf" </dev/null >>"$LOG/redis.log" 2>&1
  fi
  wait_for "redis on 127.0.0.1:$REDIS_PORT" 20 redis_ping
}

redis_down() {
  stop_pidfile redis-server "$REDIS_PIDFILE" redis-server
}
