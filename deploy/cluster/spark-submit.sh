#!/usr/bin/env bash
# Submit the quorum health streaming job to a Spark cluster.
#
# Usage: deploy/cluster/spark-submit.sh --master MASTER --config JOB_YAML [--dry-run] [-- SPARK_ARGS...]
#
# The config is checked with the job's own loader before anything is submitted (when it is a file
# here). The events topic is read with Spark's Kafka connector, added with --packages (fetched
# from the local Maven cache, Maven Central or the mirror in spark.jars.repositories).
#
#   YARN        deploy/cluster/spark-submit.sh --master yarn --config job.yaml
#               (HADOOP_CONF_DIR or YARN_CONF_DIR set; cluster deploy mode; the config is shipped
#               with --files; set PYSPARK_ENV_ARCHIVE to ship the Python dependencies)
#   Kubernetes  IMAGE=registry/quorum-health:0.1.0 deploy/cluster/spark-submit.sh \
#                   --master k8s://https://API_SERVER:6443 --config /etc/quorum-health/job.yaml
#               (cluster deploy mode; the image has the project in /opt/quorum-health (see
#               deploy/cluster/Dockerfile) and --config is a path inside the driver's pod; the
#               spark-operator manifest k8s/streaming-job.yaml is the declarative alternative)
#   Standalone  deploy/cluster/spark-submit.sh --master spark://MASTER_HOST:7077 --config job.yaml
#               (client deploy mode: Spark's standalone master cannot run Python drivers in
#               cluster mode, so the driver runs here and pushes to the Pushgateway from here)
#
# Environment:
#   SPARK_SUBMIT         spark-submit to run (default: spark-submit on PATH)
#   SPARK_VERSION        the cluster's Spark version, for the connector's coordinates
#                        (default: the installed pyspark's version; they must match the cluster)
#   SCALA_BINARY         Scala binary version of the cluster's Spark (default 2.13, Spark 4's only one)
#   DEPLOY_MODE          override the deploy mode chosen from the master
#   IMAGE                container image on Kubernetes (required there)
#   NAMESPACE            Kubernetes namespace (default quorum-health)
#   DIST_DIR             where the zip of the Python packages is built (default: dist/ in the repository)
#   PYSPARK_ENV_ARCHIVE  a packed Python environment (venv-pack or conda-pack .tar.gz) with the
#                        project's dependencies, unpacked on YARN/standalone executors as ./environment
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "spark-submit.sh: $*" >&2; exit 2; }

master="" config="" dry_run=0 extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --master) [[ $# -ge 2 ]] || die "--master needs a value"; master="$2"; shift 2 ;;
    --config) [[ $# -ge 2 ]] || die "--config needs a value"; config="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n "$master" ]] || die "--master is required: yarn, k8s://https://HOST:PORT or spark://HOST:PORT (see --help)"
[[ -n "$config" ]] || die "--config is required: the streaming job's YAML (see --help)"
case "$master" in
  yarn|k8s://*|spark://*) ;;
  *) die "unsupported master '$master': use yarn, k8s://https://HOST:PORT or spark://HOST:PORT" ;;
esac

python="${PYTHON:-python3}"
spark_version="${SPARK_VERSION:-$("$python" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || true)}"
[[ -n "$spark_version" ]] || die "set SPARK_VERSION to the cluster's Spark version (pyspark is not importable here)"
connector="org.apache.spark:spark-sql-kafka-0-10_${SCALA_BINARY:-2.13}:${spark_version}"

# the config as the job will read it: a bad config stops here, not in the cluster
if [[ -f "$config" ]]; then
  (cd "$repo" && "$python" - "$config" <<'PY'
import sys
from streaming.config import ConfigError, load_config
try:
    load_config(sys.argv[1])
except ConfigError as e:
    sys.exit(f"spark-submit.sh: bad job configuration: {e}")
PY
  ) || exit 2
fi

cmd=("${SPARK_SUBMIT:-spark-submit}" --master "$master" --name quorum-health
     # on SIGTERM (a rolling restart) finish the running micro-batch; the next run resumes from the checkpoint
     --conf spark.sql.streaming.stopGracefullyOnShutdown=true
     --packages "$connector")

case "$master" in
  yarn)
    [[ -f "$config" ]] || die "--config $config: no such file (on YARN it is shipped from here)"
    mode="${DEPLOY_MODE:-cluster}"
    code_zip="${DIST_DIR:-$repo/dist}/quorum_health_py.zip"
    cmd+=(--deploy-mode "$mode" --files "$config" --py-files "$code_zip"
          # always-on: retry the application, forgetting failures older than an hour
          --conf spark.yarn.maxAppAttempts=4 --conf spark.yarn.am.attemptFailuresValidityInterval=1h)
    main="$repo/streaming/cli.py"
    job_config="$([[ "$mode" == cluster ]] && basename "$config" || echo "$config")"
    ;;
  k8s://*)
    [[ -n "${IMAGE:-}" ]] || die "set IMAGE to the container image with the project (deploy/cluster/Dockerfile)"
    mode="${DEPLOY_MODE:-cluster}"
    cmd+=(--deploy-mode "$mode"
          --conf "spark.kubernetes.container.image=$IMAGE"
          --conf "spark.kubernetes.namespace=${NAMESPACE:-quorum-health}"
          --conf spark.kubernetes.authenticate.driver.serviceAccountName=quorum-health-spark)
    # Ivy's cache must be writable inside the driver's container for --packages
    cmd+=(--conf spark.jars.ivy=/tmp/.ivy2)
    main="local:///opt/quorum-health/streaming/cli.py"
    job_config="$config"
    ;;
  spark://*)
    [[ -f "$config" ]] || die "--config $config: no such file"
    mode="${DEPLOY_MODE:-client}"
    [[ "$mode" == client ]] || die "standalone masters run Python drivers in client deploy mode only"
    code_zip="${DIST_DIR:-$repo/dist}/quorum_health_py.zip"
    cmd+=(--deploy-mode client --py-files "$code_zip")
    main="$repo/streaming/cli.py"
    job_config="$config"
    ;;
esac

if [[ -n "${PYSPARK_ENV_ARCHIVE:-}" && "$master" != k8s://* ]]; then
  cmd+=(--archives "${PYSPARK_ENV_ARCHIVE}#environment" --conf spark.pyspark.python=./environment/bin/python)
fi
cmd+=("${extra[@]}" "$main" run --config "$job_config")

if [[ -n "${code_zip:-}" && $dry_run -eq 0 ]]; then
  # the packages as importable modules for the executors (and the driver in cluster mode)
  mkdir -p "$(dirname "$code_zip")"
  (cd "$repo" && "$python" - "$code_zip" <<'PY'
import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for package in ("quorum", "streaming"):
        for path in sorted(pathlib.Path(package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path)
PY
  )
fi

if [[ $dry_run -eq 1 ]]; then
  printf '%q ' "${cmd[@]}"; echo
else
  exec "${cmd[@]}"
fi
