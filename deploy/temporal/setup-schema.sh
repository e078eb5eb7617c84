#!/bin/sh
# Temporal's databases on PostgreSQL, run by the admin-tools image before the server starts, on every
# `docker compose up`. Every step is idempotent: `create` ignores a database that exists, `setup-schema -v 0.0`
# leaves a schema that is already past 0.0 alone, and `update-schema` applies only the versions the database does
# not have yet. So after the server and admin-tools images move to a new version (always together), the next
# `up` brings both schemas to it before the new server starts.
# The password comes from SQL_PASSWORD (temporal-sql-tool reads it), never from the command line.
# `tablefate cluster up` runs this same script with the tool and the schema files of the server's Go module
# (TEMPORAL_SQL_TOOL, TEMPORAL_SCHEMA_DIR); the admin-tools image has both at the defaults below.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host}"
: "${POSTGRES_USER:?POSTGRES_USER must name the login}"
: "${SQL_PASSWORD?SQL_PASSWORD must hold the login password (empty for a login that needs none)}"
port=${DB_PORT:-5432}
schemas=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}
tool=${TEMPORAL_SQL_TOOL:-temporal-sql-tool}

sql_tool() {
  "$tool" --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$port" -u "$POSTGRES_USER" "$@"
}

# The history store and the visibility store: same steps, each with its own schema directory. Their names are
# temporal and temporal_visibility unless TEMPORAL_DB_NAME and TEMPORAL_VISIBILITY_DB_NAME say otherwise (as for
# the server: deploy/temporal/cluster.yaml).
for pair in "${TEMPORAL_DB_NAME:-temporal}:temporal" "${TEMPORAL_VISIBILITY_DB_NAME:-temporal_visibility}:visibility"; do
  db=${pair%%:*}
  dir=${pair#*:}
  echo "setup-schema: database $db"
  sql_tool --db "$db" create
  sql_tool --db "$db" setup-schema -v 0.0
  sql_tool --db "$db" update-schema -d "$schemas/$dir/versioned"
done
echo "setup-schema: done"
