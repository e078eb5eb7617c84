#!/bin/sh
# Run by the admin-tools image once the server is up: the namespace tablefate uses, and tablefate's search
# attributes in it. Idempotent: it only adds what is missing.
#
# The worker adds missing search attributes itself on start; doing it here first means that a fresh server has
# had them for a while before the first operation carries them: a server sees a new attribute once its caches
# refresh (the dev server refreshes on every read, a setting not meant for production).
# The `temporal` CLI reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE from the environment.
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must name the frontend}"
namespace=${TEMPORAL_NAMESPACE:-default}
attempts=${SETUP_ATTEMPTS:-60}
pause=${SETUP_PAUSE_SECONDS:-2}

# retry <what> <command...>: the server may still be starting, or may not see a new namespace yet.
retry() {
  what=$1
  shift
  n=1
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      echo "setup-namespace: gave up on: $what (after $attempts attempts)" >&2
      exit 1
    fi
    n=$((n + 1))
    sleep "$pause"
  done
}

quiet() { "$@" >/dev/null 2>&1; }

retry "cluster health at $TEMPORAL_ADDRESS" quiet temporal operator cluster health

# ensure_namespace: look again before each try, so that a try that did create it counts.
ensure_namespace() {
  quiet temporal operator namespace describe --namespace "$namespace" ||
    quiet temporal operator namespace create --namespace "$namespace"
}

# Retention (how long closed runs stay listed) is the CLI's default; an operator changes it with
# `temporal operator namespace update --retention ...`.
retry "namespace $namespace" ensure_namespace
echo "setup-namespace: namespace $namespace present"

has_attribute() {
  temporal operator search-attribute list --namespace "$namespace" | grep -qw "$1"
}

# ensure_attribute <name> <type>: likewise.
ensure_attribute() {
  has_attribute "$1" ||
    quiet temporal operator search-attribute create --namespace "$namespace" --name "$1" --type "$2"
}

# The names and types tablefate's workflows carry (domain/search-attributes.ts).
for pair in TableId:Int TableNamespace:Keyword TableName:Keyword TableOp:Keyword; do
  name=${pair%%:*}
  type=${pair#*:}
  retry "search attribute $name ($type)" ensure_attribute "$name" "$type"
  echo "setup-namespace: search attribute $name ($type) present"
done
