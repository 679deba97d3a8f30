#!/usr/bin/env bash
# Labels images on Spark from this repository: spark/classify.py run by the Python of the virtual
# environment that scripts/setup.sh makes (.venv: PySpark, pandas, pyarrow over Debian's packages), with
# the vit package just built (build/python, or the folder VIT_PYTHONPATH names) ahead of an installed one.
# Master: --master, else local[*]. On a cluster, spark-submit spark/classify.py instead (README). Options: --help.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${VIT_SPARK_PYTHON:-$repo/.venv/bin/python}"
if [ ! -x "$python" ]; then
  echo "spark-classify: error: $python not found: scripts/setup.sh makes it (or set VIT_SPARK_PYTHON)" >&2
  exit 2
fi
module_dir="${VIT_PYTHONPATH:-$repo/build/python}"
if [ -d "$module_dir" ]; then
  export PYTHONPATH="$module_dir${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYSPARK_PYTHON="$python" PYSPARK_DRIVER_PYTHON="$python"
exec "$python" "$repo/spark/classify.py" "$@"
