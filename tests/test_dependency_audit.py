"""The dependency audit's own rules (CTest test dependency_audit_rules, label audit; the .venv's Python): the
commands it reads from shell scripts, and on a made-up source tree, that a module whose pip distribution or
Debian package scripts/setup.sh does not install fails the audit by name, and passes once setup.sh (or a
requirements file it installs) names it."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dependency_audit  # noqa: E402


def test_commands_of_shell_scripts():
    script = r'''#!/usr/bin/env bash
# comment: notacommand
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
targets=(image checkpoint)
CC=clang CXX=clang++ cmake -S . -B build -G Ninja
$sudo apt-get install -y curl
env -u NAME LD_DEBUG=files "$tmp/consumer" x
for c in 1 4; do out=$(VAR=$c wrk -t $(( c < 2 ? 1 : 2 )) url | grep RESULT); done
case "$1" in
  install) install_test ;;
  a|b) sort -u file ;;
esac
trap 'kill "$pid"; rm -f "$log"' EXIT
[[ "$x" =~ ^(lib[^/]*)/vit$ ]] && echo yes
cat <<EOF
heredoc_words are not commands
EOF
if command -v java >/dev/null; then flock lockfile sh -c 'tar -xf x'; fi
install_test() { local a; quiet mkdir x; }
'''
    assert set(dependency_audit.script_programs(script)) == {
        "dirname", "clang", "clang++", "cmake", "ninja", "apt-get", "env", "wrk", "grep", "sort", "rm",
        "cat", "java", "flock", "sh", "tar", "quiet"}


def audit(src, build):
    return subprocess.run([sys.executable, "-I", os.path.join(HERE, "dependency_audit.py"), str(src), str(build)],
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k not in ("VIT_IMPORT_LOG", "CI")})


def source_tree(tmp_path, setup, requirements, module_file):
    """A source tree whose setup.sh and requirements are given, and a run record of a process that imported
    a module from module_file."""
    src, build = tmp_path / "src", tmp_path / "build"
    (src / "scripts").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "scripts" / "setup.sh").write_text(setup)
    if requirements is not None:
        (src / "tests" / "requirements.txt").write_text(requirements)
    (build / "models" / "imports").mkdir(parents=True)
    (build / "models" / "imports" / "1.json").write_text(json.dumps(
        {"argv": ["tests/make_models.py"], "cwd": str(src), "executable": "/usr/bin/python3",
         "stdlib": ["/usr/lib/python3.11"], "modules": {"the_module": module_file}, "commands": []}))
    return src, build


def test_pip_distribution_must_be_named(tmp_path):
    import timm  # from the package index only (tests/requirements.txt)
    kind, name = dependency_audit.Owners(str(tmp_path), str(tmp_path)).of([timm.__file__])[timm.__file__]
    assert (kind, name) == ("pip", "timm"), timm.__file__
    setup = ".venv/bin/python -m pip install -q -r tests/requirements.txt\n"
    src, build = source_tree(tmp_path, setup, "# nothing yet\n", timm.__file__)
    r = audit(src, build)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "timm (pip distribution in" in r.stdout and "used by tests/make_models.py (ran)" in r.stdout, r.stdout
    (src / "tests" / "requirements.txt").write_text("timm==1.0.31\n")
    r = audit(src, build)
    assert r.returncode == 0, r.stdout + r.stderr


def test_debian_package_must_be_installed(tmp_path):
    debian_file = "/usr/lib/python3/dist-packages/pytest/__init__.py"  # python3-pytest, which setup.sh installs
    if not os.path.exists(debian_file):
        pytest.skip("no python3-pytest here")
    src, build = source_tree(tmp_path, "apt-get install -y make\n", None, debian_file)
    r = audit(src, build)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "python3-pytest (Debian package)" in r.stdout, r.stdout
    (src / "scripts" / "setup.sh").write_text("$sudo apt-get install -y -q \\\n  make python3-pytest\n")
    r = audit(src, build)
    assert r.returncode == 0, r.stdout + r.stderr


def fake_distribution(site, name, requires=()):
    """A module `name` and its pip metadata (RECORD, Requires-Dist) in a site-packages folder."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" +
                                   "".join(f"Requires-Dist: {r}\n" for r in requires))
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{name}-1.0.dist-info/METADATA,,\n")


def test_module_of_another_venv(tmp_path):
    """A module that only another venv scripts/setup.sh makes has (as .venv-kserve has KServe's) is found by that
    venv's Python, and its distribution and their requirements are accepted from that venv's metadata once
    setup.sh installs it there; without that pip line it is a failure."""
    src, build = source_tree(tmp_path, "", None, str(tmp_path / "src" / "tests" / "uses_other.py"))
    venv = src / ".venv-other"
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    fake_distribution(site, "fakeowner", ["fakedep>=1"])
    fake_distribution(site, "fakedep")
    (venv / "bin").mkdir()
    os.symlink("/usr/bin/python3", venv / "bin" / "python")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    (src / "tests" / "uses_other.py").write_text("import fakeowner\nimport fakedep\n")
    (src / "tests" / "requirements-other.txt").write_text("fakeowner==1.0\n")
    r = audit(src, build)
    assert r.returncode == 1 and "module fakeowner: no Python of scripts/setup.sh's" in r.stdout, r.stdout + r.stderr
    (src / "scripts" / "setup.sh").write_text(".venv-other/bin/python -m pip install -r tests/requirements-other.txt\n")
    r = audit(src, build)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pip_probes_under_python_c(tmp_path):
    """pip runs rustc and lsb_release, when present, only to write its user agent; ensurepip runs pip under
    `python -c` when `python -m venv` seeds a venv. Those probes are not the suite's: a process that imported
    pip._internal is let off them, and any other process that runs them is not."""
    src, build = source_tree(tmp_path, "", None, "/nonexistent")
    record = {"argv": ["-c"], "cwd": str(src), "executable": "/usr/bin/python3", "stdlib": ["/usr/lib/python3.11"],
              "modules": {}, "commands": [{"argv": ["rustc", "--version"]}, {"argv": ["lsb_release", "-a"]}]}
    (build / "models" / "imports" / "1.json").write_text(json.dumps(record))
    r = audit(src, build)
    assert r.returncode == 1 and "program rustc" in r.stdout and "used by python -c (ran)" in r.stdout, \
        r.stdout + r.stderr
    pip_internal = os.path.join(os.path.dirname(pytest.__file__), "__init__.py")  # any file that exists
    record["modules"] = {"pip._internal": pip_internal}
    (build / "models" / "imports" / "1.json").write_text(json.dumps(record))
    r = audit(src, build)
    assert "program rustc" not in r.stdout and "lsb_release" not in r.stdout, r.stdout + r.stderr
