#!/usr/bin/env bash
# The first README command: installs the Debian packages, PySpark, the reference libraries, pybind11,
# tritonclient and Ray into .venv (KServe's SDK into .venv-kserve), makes a release build in build/, installs
# the Python package for Debian's python3, obtains the default model and classifies a sample photo with it.
# Everything the suite and scripts/ import or run comes from here: the dependency audit
# (tests/dependency_audit.py, run last by scripts/test.sh) fails on anything else.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends \
  g++ cmake ninja-build make pkg-config curl ca-certificates git \
  libdnnl-dev ocl-icd-opencl-dev libjpeg-dev libstb-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libgtest-dev \
  clang libclang-rt-14-dev libomp-14-dev python3-torch python3-torchvision \
  libopencv-dev libavutil-dev libwebp-dev libcsv-dev zlib1g-dev python3-pil python3-dev python3-numpy python3-pybind11 python3-pytest python3-venv python3-build \
  libboost-dev python3-requests python3-prometheus-client wrk openjdk-17-jre-headless ccache \
  chromium chromium-driver python3-selenium python3-pygments \
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc haproxy iproute2 \
  libicu-dev libsentencepiece-dev
# (python3-build makes the source distribution the wheel tests build from: python/packaging/build_wheels.sh;
# chromium, its driver and Selenium show vit serve's page in the tests; gRPC and protobuf build vit serve's
# KServe v2 over gRPC; HAProxy balances the replicas of deploy/haproxy; iproute2 brings up loopback in the
# network namespace the Ray test runs in; httpx, under the openai client, imports Pygments once Ray's click is
# there; ICU and SentencePiece are the text towers' tokenizers': Unicode classes and normal forms, and
# SigLIP's SentencePiece models.)
# The Spark job (scripts/spark-classify.sh): PySpark and what its pandas functions need, from the Python
# package index into .venv, which sees Debian's packages (pytest, numpy, PIL) too.
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r spark/requirements.txt
# timm, transformers and open_clip over Debian's torch (with sentencepiece and protobuf, SigLIP's tokenizer), for
# the references of the model-family and layout tests (tests/make_timm_models.py, tests/make_layout_models.py) and
# scripts/export_text_embeddings.py; pybind11 for the build tree's Python package (python/CMakeLists.txt).
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
# KServe v2's Python client, for the `vit serve` tests that call the server through it (HTTP and gRPC).
.venv/bin/python -m pip install -q --disable-pip-version-check "tritonclient[http,grpc]"
# Ray Data and Ray Serve (deploy/ray, README's Ray example), into .venv beside the Python package's tests.
.venv/bin/python -m pip install -q --disable-pip-version-check -r deploy/ray/requirements.txt
# The KServe and Kubernetes Python packages, whose models validate deploy/kserve's manifests
# (deploy/kserve/validate.py), in a venv of their own: KServe pins grpcio and protobuf apart from .venv's.
[ -x .venv-kserve/bin/python ] || /usr/bin/python3 -m venv .venv-kserve
.venv-kserve/bin/python -m pip install -q --disable-pip-version-check -r deploy/kserve/requirements.txt
# After .venv, whose Python (Debian's python3 underneath) and pybind11 the build tree's package is built for.
# ccache (installed above) compiles only what changed, with paths relative to the project's folder, so that
# another clone or build tree (build-asan/, the wheels', the container's) shares its objects.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
# `import vit` for Debian's /usr/bin/python3 too: the package folder of the build tree goes into
# /usr/local/lib/python3.11/dist-packages/vit, on its path (PEP 668 keeps pip out of the system interpreter).
# In a virtual environment of any Python, `pip install .` builds and installs it instead (docs/PYTHON.md).
$sudo cmake --install build --component python
/usr/bin/python3 -c 'import vit; print("python3: import vit gives", vit.__file__)'
weights/get_default_model.sh
sample=../shared/data/images/imagenet-samples/n01440764_tench.JPEG
if [ ! -f "$sample" ]; then
  sample=/usr/share/doc/opencv-doc/examples/data/butterfly.jpg
  [ -f "$sample" ] || $sudo apt-get install -y -q opencv-doc
fi
build/vit classify "$sample"
