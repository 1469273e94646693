#!/bin/sh
# Print the Secret "podlife" as a manifest, with fresh random keys and passwords:
#   deploy/secret.sh all-in-one | kubectl apply -f -
#   DATABASE_URL=postgres://... REDIS_URL=redis://... deploy/secret.sh external | kubectl apply -f -
# Nothing is written to disk. Re-running it makes new keys: apply it once, then keep the Secret
# (changing POSTGRES_PASSWORD later does not change the password of an initialized database).
set -eu
usage() { echo "usage: $0 all-in-one|external  (external reads DATABASE_URL and REDIS_URL from the environment)" >&2; exit 2; }
[ $# -eq 1 ] || usage
NAMESPACE=${NAMESPACE:-podlife}

random_hex() {  # random_hex BYTES
  if command -v openssl >/dev/null 2>&1; then openssl rand -hex "$1"
  else python3 -c "import secrets, sys; print(secrets.token_hex(int(sys.argv[1])))" "$1"; fi
}

quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"; }  # a YAML single-quoted scalar

SECRET_KEY=$(random_hex 32)
METRICS_TOKEN=${PODLIFE_METRICS_TOKEN:-$(random_hex 24)}
case $1 in
  all-in-one)
    PG=$(random_hex 24); RD=$(random_hex 24)
    DB="postgres://podlife:$PG@podlife-postgres:5432/podlife"
    RURL="redis://:$RD@podlife-redis:6379/0"
    EXTRA="  POSTGRES_PASSWORD: $(quote "$PG")
  REDIS_PASSWORD: $(quote "$RD")
"
    ;;
  external)
    DB=${DATABASE_URL:?set DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/NAME}
    RURL=${REDIS_URL:?set REDIS_URL=redis://[:PASSWORD@]HOST:6379/0}
    EXTRA=""
    ;;
  *) usage ;;
esac

cat <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $NAMESPACE
---
apiVersion: v1
kind: Secret
metadata:
  name: podlife
  namespace: $NAMESPACE
type: Opaque
stringData:
  SECRET_KEY: $(quote "$SECRET_KEY")
  DATABASE_URL: $(quote "$DB")
  REDIS_URL: $(quote "$RURL")
  PODLIFE_METRICS_TOKEN: $(quote "$METRICS_TOKEN")
$EXTRA
YAML
