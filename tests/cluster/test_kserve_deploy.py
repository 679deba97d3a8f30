"""deploy/kserve and deploy/Containerfile, checked as far as a machine without Kubernetes or a container engine
can: the manifests against the models of the projects that own them (deploy/kserve/validate.py, run by the
.venv-kserve that scripts/setup.sh makes: KServe's V1beta1InferenceService, the Kubernetes client's
HorizontalPodAutoscaler and ConfigMap) and against a real `vit serve` started with the predictor's own arguments
(every probe path answers 200); deliberately broken manifests fail, each naming its problem. The Containerfile's
steps run as written (deploy/container.sh: apt-get simulated, the build and install real), every library the
installed binary links is in its runtime packages, and its entry point serves. CTest label cluster."""
import json
import os
import pathlib
import re
import subprocess

import pytest
import requests

from cluster_util import DEIT, REPO, VIT_BINARY, Group, free_ports, listening, require, require_shared_data

KSERVE_PYTHON = REPO / ".venv-kserve" / "bin" / "python"
MANIFESTS = sorted((REPO / "deploy" / "kserve").glob("*.yaml"))


def validate(*files, serve=True):
    require(KSERVE_PYTHON.exists(), f"no {KSERVE_PYTHON} (scripts/setup.sh makes it, with KServe's SDK)")
    require_shared_data()
    args = ["--serve", VIT_BINARY, str(DEIT)] if serve else []
    return subprocess.run([str(KSERVE_PYTHON), str(REPO / "deploy" / "kserve" / "validate.py"), *args, *map(str, files)],
                          capture_output=True, text=True, timeout=300)


def test_shipped_manifests_are_valid():
    r = validate(*MANIFESTS)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": valid") == 3 and "InferenceService vit" in r.stdout


# Each case: the shipped manifest `file` with `replace` replaced by `with`, and the `message` validate.py must give.
BROKEN = {c["case"]: c for c in json.loads((pathlib.Path(__file__).parent / "broken_manifests.json").read_text())}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_manifest_fails(case, tmp_path):
    c = BROKEN[case]
    name, old, new, message = c["file"], c["replace"], c["with"], c["message"]
    files = []
    for f in MANIFESTS:
        text = f.read_text()
        if f.name == name:
            assert old in text, (case, old)
            text = text.replace(old, new, 1)
        (tmp_path / f.name).write_text(text)
        files.append(tmp_path / f.name)
    r = validate(*files)
    assert r.returncode == 1 and message in r.stdout, r.stdout + r.stderr


# ---- deploy/Containerfile


def stages(path):
    """[(stage name, [RUN command, ...], [(COPY source, destination), ...])] of a Containerfile."""
    out = []
    for line in re.sub(r"\\\n", " ", path.read_text()).splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            out.append((rest.split(" AS ")[-1] if " AS " in rest else "final", [], []))
        elif word == "RUN":
            out[-1][1].append(rest)
        elif word == "COPY":
            parts = [p for p in rest.split() if not p.startswith("--")]
            out[-1][2].append((parts[0], parts[-1]))
    return out


def apt_closure(packages):
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests",
                          "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                         capture_output=True, text=True, check=True).stdout
    names = set(packages)
    for line in out.splitlines():
        name = line.split(":", 1)[1] if re.match(r"\s*\|?(Pre)?Depends:", line) else line
        names.add(name.strip().strip("<>").split(":")[0])
    base = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\n"], capture_output=True,
                          text=True, check=True).stdout
    names |= {p for p, e, pr in (l.split() for l in base.splitlines() if len(l.split()) == 3) if e == "yes" or pr == "required"}
    return names


def test_containerfile_steps():
    require_shared_data()
    container = REPO / "deploy" / "Containerfile"
    # Beside the build tree (build-container/ next to build/): compiled from the same relative paths, the build
    # takes the release build's objects from ccache (CCACHE_BASEDIR, scripts/test.sh), and reruns are quick.
    tree = pathlib.Path(VIT_BINARY).parent
    build = tree.parent / (tree.name + "-container")
    prefix = build / "opt-vit"  # the image's /opt/vit, in the project's folder: the project's own
    env = dict(os.environ, PREFIX=str(prefix), VIT_APT="simulate", VIT_BUILD_DIR=str(build))
    copied = {}
    for name, runs, copies in stages(container):
        for src, dst in copies:
            copied[os.path.basename(dst)] = REPO / src.replace("/src/", "") if src.startswith("/src/") else REPO
        for cmd in runs:
            for alias, real in copied.items():  # a file the recipe copied under another name
                cmd = re.sub(rf"(^|\s){re.escape(alias)}(\s|$)", rf"\g<1>{real}\g<2>", cmd)
            r = subprocess.run(["sh", "-c", cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=3000)
            assert r.returncode == 0, f"{name}: RUN {cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    listed = subprocess.run([str(REPO / "deploy" / "container.sh"), "build-package-list"], capture_output=True,
                            text=True, check=True).stdout.split()
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert [p for p in listed if not re.search(rf"(\s){re.escape(p)}(\s|\\|$)", setup)] == [], \
        "build packages that scripts/setup.sh does not install"
    # Every library the installed binary and plugins link is in the runtime stage's packages.
    runtime = subprocess.run([str(REPO / "deploy" / "container.sh"), "runtime-package-list"], capture_output=True,
                             text=True, check=True).stdout.split()
    closure = apt_closure(runtime)
    libs = set()
    for f in ("vit", "libvit_opencv_image.so", "libvit_opencv_video.so"):
        out = subprocess.run(["ldd", str(prefix / f)], capture_output=True, text=True, check=True).stdout
        libs |= {m.group(1) for m in re.finditer(r"=> (/\S+)", out)}
    owners = {}
    for lib in sorted(libs):
        # Debian 12 merged /usr: a package lists its file under /usr/lib or /lib, ldd shows either
        names = {lib, os.path.realpath(lib), "/usr" + lib if not lib.startswith("/usr/") else lib[4:]}
        found = "".join(subprocess.run(["dpkg", "-S", n], capture_output=True, text=True).stdout for n in sorted(names))
        owners[lib] = found.split(":")[0].strip()
    missing = {lib: pkg for lib, pkg in owners.items() if pkg not in closure}
    assert not missing, f"libraries whose packages the runtime stage does not install: {missing}"
    # The image's entry point, as KServe starts it, serves from the installed folder.
    entry = re.search(r'ENTRYPOINT \[(.*)\]', container.read_text()).group(1)
    cmd = re.search(r'CMD \[(.*)\]', container.read_text()).group(1)
    argv = [a.strip().strip('"') for a in (entry + "," + cmd).split(",")]
    http, grpc = free_ports(2)
    swap = {"/opt/vit/vit": str(prefix / "vit"), "/mnt/models": str(DEIT), "0.0.0.0": "127.0.0.1", "8080": str(http),
            "8081": str(grpc)}
    g = Group([swap.get(a, a) for a in argv])
    try:
        g.wait_for("vit serve: ready", 120)
        assert requests.get(f"http://127.0.0.1:{http}/v2/health/ready", timeout=10).status_code == 200
        assert listening([g.proc.pid]) == {("127.0.0.1", http), ("127.0.0.1", grpc)}
        assert "libvit_opencv" not in g.text()  # the plugins are found beside the binary, no complaint
    finally:
        g.stop(grace=30)
