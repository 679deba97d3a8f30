"""The dependency audit (CTest test dependency_audit, label audit): would the suite and scripts/ find everything
they import and run on a fresh Debian 12 machine after scripts/setup.sh? Every module and program they use is
mapped to its owner, and each owner must be one scripts/setup.sh installs.

What is used:
- Python modules as the code ran: tests/record_imports.py, loaded into every Python process the suite starts
  under scripts/test.sh (and into the reference generators, tests/make_*.py, wherever tests/reference_models.cpp
  runs them), writes the file of every module in sys.modules and each program started through subprocess,
  os.exec*, os.posix_spawn or os.system. That sees lazy imports (transformers imports protobuf only inside
  SiglipTokenizer), import-time plugins and the scripts the generators call. The generators' records live in
  their output folders beside the vit binary and are made again with them; those of the other processes are
  in build/python-imports/log, which scripts/test.sh empties before each run and names by VIT_IMPORT_LOG.
- Python modules as written: every `import` in every tracked .py file (scripts/, weights/, spark/, python/tests,
  tests/ and whatever is added), also code the suite does not run, found by Debian's python3, by the .venv's and
  by that of any other venv whose pip scripts/setup.sh runs (.venv-kserve: packages kept apart from .venv's).
- Programs as written: the command words of every tracked shell script (scripts/*.sh, .ci/run, tests/*.sh,
  weights/*.sh), including `$(...)`, `sh -c`, `trap` and `eval` strings, `command -v X`, CC=/CXX= and the build
  tool of `cmake -G`; programs in Python subprocess calls written as literals; and IMPLIED_COMMANDS, programs
  that a module starts outside Python (PySpark starts java).
Owners: `dpkg -S` for files of Debian packages, the RECORD of the pip distribution for files in a
site-packages folder (or the zip archive a module came from), the project for its own files (its folders and
build trees, install manifests) and the interpreter for the standard library of a Python not from Debian. Installed by scripts/setup.sh: the packages
its `apt-get install` commands name and their dependencies (`apt-cache depends --recurse --installed
--no-recommends`), Debian's Essential and required packages (on every Debian machine), the distributions its
`pip install` commands name (requirements files included, extras honoured) and their Requires-Dist,
recursively, as the venv they went into records them (the venv's own pip and setuptools when it makes the venv
with `-m venv`); a Debian package is
also accepted when a Python distribution it ships is in that pip closure (pip would install it on a fresh
machine).
What it cannot see: imports inside code that neither runs in the suite nor is written as an `import` (e.g.
importlib.import_module of a computed name, lazy imports of code the suite does not run), programs started by
C++ tests (std::system) or by shell scripts that are not tracked here (pyspark's spark-submit), processes that
end by os._exit or a signal (PySpark's forked workers), and versions: an owner is checked by name only.
Without its records (a plain `ctest` run, or before the generators ran) it checks what is written and says
which generators it has no record of; with CI=true a missing generator record fails.

  dependency_audit.py SOURCE_DIR BUILD_DIR   (run by the .venv's Python: it reads the venv's metadata)
"""
import argparse
import ast
import glob
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's for root
IMPLIED_COMMANDS = {"pyspark": ["java"]}  # module -> programs it starts outside Python
# Programs pip runs only to describe the machine in its user agent, when they are on PATH (rustc --version,
# lsb_release -a through distro), also when ensurepip runs it under `python -c`: a fresh machine without them builds and installs the same.
PIP_PROBES = {"rustc", "lsb_release"}
CMAKE_GENERATORS = {"Ninja": "ninja", "Unix Makefiles": "make"}
PROJECT_MODULES = {"vit"}  # the Python module python/ builds (installed by setup.sh's cmake --install)
SHELLS = {"sh", "bash", "dash"}
SHELL_WORDS = set(subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True, text=True,
                                 check=True).stdout.split())
# Commands that run the next word as a command: how many of their own operands come first, and their options
# that take a value.
PREFIXES = {"sudo": (0, {"-u", "-g"}), "exec": (0, set()), "env": (0, {"-u", "-C"}), "nice": (0, {"-n"}),
            "nohup": (0, set()), "time": (0, set()), "xargs": (0, {"-n", "-P", "-I", "-d", "-L"}),
            "setsid": (0, set()), "stdbuf": (0, set()), "timeout": (1, {"-s", "-k"}), "flock": (1, {"-w", "-E"})}
PYTHON_RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "system", "which", "execv", "execvp",
                  "execl", "execlp", "spawnv", "spawnvp", "spawnl", "spawnlp"}


# ---------------------------------------------------------------------------------------------------------------
# Shell scripts: simple commands, each a list of words (text, literal: no expansion in it, raw).
class Word:
    def __init__(self):
        self.text, self.raw, self.literal = "", "", True


def _matching(text, i, open_, close):
    """The index just past the `close` that balances the `open_` before text[i], skipping quoted text."""
    depth = 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            i = text.find("'", i + 1) + 1 or len(text)
            continue
        if c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if text.startswith(open_, i):
            depth += 1
            i += len(open_)
            continue
        if text.startswith(close, i):
            depth -= 1
            i += len(close)
            if depth == 0:
                return i
            continue
        i += 1
    return len(text)


def shell_tokens(text, nested):
    """Words and operators of a shell script; command substitutions parsed into `nested` (lists of commands)."""
    tokens, i, heredocs = [], 0, []
    while i < len(text):
        c = text[i]
        if c in " \t":
            i += 1
        elif c == "\\" and text.startswith("\n", i + 1):
            i += 2
        elif c == "#":
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
        elif c == "\n":
            tokens.append(("op", "\n"))
            i += 1
            for delim, strip in heredocs:  # skip each here-document's body
                while i < len(text):
                    end = text.find("\n", i)
                    end = len(text) if end < 0 else end
                    line = text[i:end]
                    i = end + 1
                    if (line.lstrip("\t") if strip else line) == delim:
                        break
            heredocs = []
        elif text.startswith("((", i):
            i = _matching(text, i + 2, "((", "))")
            tokens.append(("word", "(( ))", False))
        else:
            m = re.match(r"\d*(<<<|<<-|<<|>>|>&|<&|&>>|&>|>\||<>|<|>)|&&|\|\||;;|[;&|()]", text[i:])
            if m:
                op = m.group(0)
                i += len(op)
                if m.group(1):
                    target = re.match(r"[ \t]*(-|\d+)(?=[\s;&|)])", text[i:]) if op.endswith("&") else None
                    if target:
                        i += target.end()
                        continue
                    tokens.append(("redirect", op.lstrip("0123456789")))
                else:
                    tokens.append(("op", op))
                continue
            word, i = _shell_word(text, i, nested)
            if word.raw == "[[":  # a test: its operands are not commands
                end = text.find("]]", i)
                i = len(text) if end < 0 else end + 2
                word.literal = False
            if tokens and tokens[-1] == ("redirect", "<<") or tokens and tokens[-1] == ("redirect", "<<-"):
                heredocs.append((word.text, tokens[-1][1] == "<<-"))
            tokens.append(("word", word))
    return tokens


def _shell_word(text, i, nested):
    w = Word()
    start = i
    while i < len(text) and text[i] not in " \t\n;&|()<>":
        c = text[i]
        if text.startswith("=(", i) and re.fullmatch(r"[A-Za-z_]\w*\+?", w.text):  # an array assignment
            w.text += "=(...)"
            i = _matching(text, i + 2, "(", ")")
            w.literal = False
            continue
        if c == "\\":
            w.text += text[i + 1:i + 2]
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            end = len(text) if end < 0 else end
            w.text += text[i + 1:end]
            i = end + 1
        elif c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\":
                    w.text += text[i + 1:i + 2]
                    i += 2
                elif text[i] in "$`":
                    i = _expansion(text, i, nested)
                    w.literal = False
                else:
                    w.text += text[i]
                    i += 1
            i += 1
        elif c in "$`":
            i = _expansion(text, i, nested)
            w.literal = False
        else:
            w.text += c
            i += 1
    w.raw = text[start:i]
    return w, i


def _expansion(text, i, nested):
    """Skips the expansion at text[i] ($name, ${...}, $((...)), $(...), `...`), parsing command substitutions."""
    if text.startswith("$((", i):
        return _matching(text, i + 3, "((", "))")
    if text.startswith("$(", i):
        end = _matching(text, i + 2, "(", ")")
        nested.extend(shell_commands(text[i + 2:end - 1]))
        return end
    if text.startswith("${", i):
        return _matching(text, i + 2, "{", "}")
    if text[i] == "`":
        end = text.find("`", i + 1)
        end = len(text) if end < 0 else end
        nested.extend(shell_commands(text[i + 1:end]))
        return end + 1
    m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9#?$!@*-])?", text[i:])
    return i + max(1, m.end())


def shell_commands(text):
    """The simple commands of a shell script, each a list of Words (assignments and redirections removed,
    reserved words before the command dropped), with those of command substitutions and `sh -c` strings."""
    nested = []
    tokens = shell_tokens(text, nested)
    segments, current = [], []
    for kind, *value in tokens:
        if kind == "op":
            segments.append((current, value[0]))
            current = []
        elif kind == "redirect":
            current.append(None)  # the next word is its target
        else:
            current.append(value[0])
    segments.append((current, "\n"))
    commands, case_patterns = [], False
    for words, end in segments:
        kept, skip_next = [], False
        for w in words:
            if w is None:
                skip_next = True
            elif skip_next:
                skip_next = False
            else:
                kept.append(w)
        if not kept:
            case_patterns |= end == ";;"
            continue
        if case_patterns and kept[0].raw != "esac":  # a case pattern: a|b)
            case_patterns = end == "|"
            if end in ("|", ")"):
                continue
        case_patterns |= end == ";;"
        while kept and kept[0].literal and kept[0].raw in ("if", "then", "else", "elif", "fi", "do", "done",
                                                             "while", "until", "!", "{", "}", "time"):
            kept.pop(0)
        if not kept:
            continue
        first = kept[0].raw
        if first in ("for", "select", "function"):
            continue
        if first == "case":
            case_patterns = True
            continue
        if first == "esac":
            case_patterns = False
            continue
        while kept and re.match(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", kept[0].raw):
            commands.append(["=", kept.pop(0)])  # an assignment: CC=clang names a program
        if kept:
            commands.append(kept)
    return commands + nested


def command_words(commands, functions):
    """(program name or path, the command's words) for each command that runs a program."""
    found = []
    for words in commands:
        if words[0] == "=":
            name, _, value = words[1].text.partition("=")
            if name in ("CC", "CXX") and words[1].literal and value:
                found.append((value.split()[0], None))
            continue
        i = 0
        while i < len(words):
            w = words[i]
            prefix = w.text if w.literal else ("sudo" if w.raw in ("$sudo", "${sudo}", '"$sudo"') else None)
            if prefix not in PREFIXES:
                break
            operands, valued = PREFIXES[prefix]
            if w.literal and w.text not in SHELL_WORDS:
                found.append((w.text, words))
            i += 1
            while i < len(words) and (words[i].text.startswith("-") or
                                      (prefix == "env" and re.match(r"[A-Za-z_]\w*=", words[i].text))):
                i += 2 if words[i].text in valued else 1
            i += operands
        if i >= len(words) or not words[i].literal:
            continue
        name, args = words[i].text, words[i + 1:]
        if name in ("command", "which", "type", "hash"):
            names = [a.text for a in args if a.literal and not a.text.startswith("-")]
            found.extend((n, None) for n in names[:1])
            continue
        if name in ("eval", "trap") or (name in SHELLS and any(a.text == "-c" for a in args)):
            if name in SHELLS:
                args = args[[a.text for a in args].index("-c") + 1:]
            if args and args[0].literal:
                found.extend(command_words(shell_commands(args[0].text), functions))
            if name not in SHELLS:
                continue
        if name in SHELL_WORDS or name in functions:
            continue
        found.append((name, words[i:]))
        if name == "cmake":
            texts = [a.text for a in args]
            for j, t in enumerate(texts):
                gen = texts[j + 1] if t == "-G" and j + 1 < len(texts) else t[2:] if t.startswith("-G") else None
                if gen in CMAKE_GENERATORS:
                    found.append((CMAKE_GENERATORS[gen], None))
    return found


def script_programs(text):
    functions = set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\s*\)", text, re.M))
    return [name for name, _ in command_words(shell_commands(text), functions)]


# ---------------------------------------------------------------------------------------------------------------
# Python files: imports and the programs of literal subprocess calls.
def python_uses(path):
    tree = ast.parse(open(path, "rb").read(), path)
    modules, programs = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name not in PYTHON_RUNNERS:
                continue
            a = node.args[0]
            if isinstance(a, (ast.List, ast.Tuple)) and a.elts:
                a = a.elts[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.strip():
                shell = name == "system" or any(k.arg == "shell" for k in node.keywords)
                programs.update(script_programs(a.value) if shell else [a.value])
    return modules, programs


RESOLVE = r"""
import importlib.util, json, sys
out = {}
for name in json.load(sys.stdin):
    parts, found = name.split("."), None
    for i in range(1, len(parts) + 1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            break
        if spec.origin not in (None, "namespace"):
            found = [spec.origin]
            break
        found = list(spec.submodule_search_locations or [])  # a namespace package: look one level deeper
    out[name] = found
json.dump(out, sys.stdout)
"""


def resolve_modules(python, names):
    """name -> the files an interpreter would import for it (None: not found), without running its code."""
    r = subprocess.run([python, "-I", "-c", RESOLVE], input=json.dumps(sorted(names)), capture_output=True,
                       text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if r.returncode:
        sys.exit(f"dependency audit: {python} could not look modules up: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


# ---------------------------------------------------------------------------------------------------------------
# What scripts/setup.sh installs.
def requirements_from(path, out, files):
    files.append(path)
    with open(path) as f:
        for line in f:
            line = re.sub(r"(^|\s)#.*", "", line).strip()
            if line.startswith(("-r ", "--requirement ")):
                requirements_from(os.path.join(os.path.dirname(path), line.split(None, 1)[1]), out, files)
            elif line and not line.startswith("-"):
                out.append((Requirement(line), os.path.relpath(path)))


def setup_installs(src):
    """(Debian packages, pip requirements, requirements files, the other venvs) that scripts/setup.sh installs;
    the other venvs: the folders of venvs besides .venv whose Python its pip commands run (`X/bin/python -m pip`)."""
    text = open(os.path.join(src, "scripts", "setup.sh")).read()
    functions = set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\s*\)", text, re.M))
    apt, pip, files, venvs = set(), [], [], set()
    for name, words in command_words(shell_commands(text), functions):
        if not words:
            continue
        texts = [w.text for w in words[1:]]
        if name in ("apt-get", "apt") and "install" in texts:
            apt.update(t for t in texts[texts.index("install") + 1:] if not t.startswith("-"))
        if "install" in texts and (name in ("pip", "pip3") or texts[:2] == ["-m", "pip"]):
            venv = re.fullmatch(r"(.+)/bin/python3?", name)
            if venv and os.path.normpath(venv.group(1)) != ".venv":
                venvs.add(os.path.join(src, venv.group(1)))
            args = iter(texts[texts.index("install") + 1:])
            for t in args:
                if t in ("-r", "--requirement"):
                    requirements_from(os.path.join(src, next(args)), pip, files)
                elif t in ("-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "-t", "--target"):
                    next(args)
                elif not t.startswith("-"):
                    pip.append((Requirement(t), "scripts/setup.sh"))
        if texts[:2] == ["-m", "venv"]:  # the venv's own pip and setuptools
            pip += [(Requirement("pip"), "python3 -m venv"), (Requirement("setuptools"), "python3 -m venv")]
    return apt, pip, files, sorted(venvs)


def apt_closure(roots):
    out = "" if not roots else subprocess.run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests",
                          "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *sorted(roots)],
                         capture_output=True, text=True, check=True).stdout
    names = set(roots)
    for line in out.splitlines():
        name = line.split(":", 1)[1] if re.match(r"\s*\|?(Pre)?Depends:", line) else line
        name = name.strip().strip("<>").split(":")[0]
        if name:
            names.add(name)
    base = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\n"], capture_output=True,
                          text=True, check=True).stdout
    names.update(p for p, essential, priority in (l.split() for l in base.splitlines() if len(l.split()) == 3)
                 if essential == "yes" or priority == "required")
    return names


def venv_site(venv):
    found = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
    return found[0] if found else None


def pip_closure(roots, venvs=()):
    """canonical distribution name -> where it comes from, following Requires-Dist (extras honoured) as the .venv's
    metadata says, else as the other venvs' say."""
    sites = [s for s in map(venv_site, venvs) if s]
    seen, extras_of, queue = {}, {}, [(req, why) for req, why in roots]
    while queue:
        req, why = queue.pop()
        name = canonicalize_name(req.name)
        if name in seen and set(req.extras) <= extras_of[name]:
            continue
        seen.setdefault(name, why)
        extras_of.setdefault(name, set()).update(req.extras)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            dist = next(iter(importlib.metadata.distributions(name=req.name, path=sites)), None)
            if dist is None:
                continue
        for line in dist.requires or []:
            try:
                r = Requirement(line)
            except InvalidRequirement:
                continue
            if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in {""} | extras_of[name]):
                queue.append((r, f"{dist.metadata['Name']} (from {seen[name]})"))
    return seen


# ---------------------------------------------------------------------------------------------------------------
# Owners of files.
class Owners:
    def __init__(self, src, build):
        self.project = [os.path.realpath(p) for p in (src, build)]
        self.venv = os.path.realpath(os.path.join(src, ".venv"))
        self.installed = set()
        for manifest in glob.glob(os.path.join(src, "build*", "install_manifest*.txt")):
            self.installed.update(os.path.realpath(l.strip()) for l in open(manifest) if l.strip())
        self.records = {}  # site folder -> {file: distribution}
        self.interpreter_stdlib = set()  # stdlib folders of non-Debian interpreters

    def _site_index(self, site):
        if site not in self.records:
            index = {}
            for info in glob.glob(os.path.join(site, "*.dist-info")) + glob.glob(os.path.join(site, "*.egg-info")):
                try:
                    dist = importlib.metadata.PathDistribution.at(info)
                    name, files = dist.metadata["Name"], dist.files or []
                except Exception:
                    continue
                for f in files:
                    index[os.path.realpath(os.path.join(site, str(f)))] = name
            self.records[site] = index
        return self.records[site]

    def of(self, paths):
        """path -> ("project" | "debian" | "pip" | "interpreter" | None, name)."""
        owners, rest = {}, []
        for p in paths:
            real = os.path.realpath(p)
            packages_dir = re.search(r"/(site|dist)-packages/", real) or real.startswith(self.venv + "/")
            if real in self.installed or (not packages_dir and any(real == d or real.startswith(d + "/")
                                                                  for d in self.project)):
                owners[p] = ("project", "")
            else:
                rest.append(p)
        candidates = {}  # a name dpkg may know the file by -> the paths asked about
        for p in rest:
            real = os.path.realpath(p)
            for c in (p, real):
                candidates.setdefault(c, set()).add(p)
                m = re.match(r"/usr(/(bin|sbin|lib|lib32|lib64|libx32)/.*)", c)
                if m:  # Debian 12 merged /usr: a package may list the file under /bin, /lib ...
                    candidates.setdefault(m.group(1), set()).add(p)
        names = sorted(candidates)
        for start in range(0, len(names), 1000):  # within the command line's length limit
            out = subprocess.run(["dpkg", "-S", *names[start:start + 1000]], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.startswith("diversion "):
                    continue
                packages, _, path = line.partition(": ")
                for p in candidates.get(path, ()):
                    owners.setdefault(p, ("debian", packages.split(",")[0].split(":")[0].strip()))
        for p in rest:
            if p in owners:
                continue
            real = os.path.realpath(p)
            m = re.match(r"(.*/(site|dist)-packages)/", real)
            site = m.group(1) if m else None
            if site is None and real.startswith(self.venv + "/"):
                site = glob.glob(os.path.join(self.venv, "lib", "python*", "site-packages"))[0]
            dist = self._site_index(site).get(real) if site else None
            if dist:
                owners[p] = ("pip", dist)
            elif any(real.startswith(d + "/") for d in self.interpreter_stdlib):
                owners[p] = ("interpreter", "")
            else:
                owners[p] = (None, "")
        return owners


def debian_distributions(package):
    """The Python distributions a Debian package ships (their .dist-info and .egg-info folders)."""
    out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
    return {canonicalize_name(m.group(1)) for m in re.finditer(r"/([^/\n]+?)-[^/\n-]+\.(dist|egg)-info$", out, re.M)}


# ---------------------------------------------------------------------------------------------------------------
def tracked_files(src):
    r = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True)
    if r.returncode == 0:
        return [f for f in r.stdout.decode().split("\0") if f and os.path.isfile(os.path.join(src, f))]
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith((".git", ".venv", "build"))]
        files += [os.path.relpath(os.path.join(root, n), src) for n in names]
    return files


def is_shell_script(path, rel):
    if rel.endswith(".sh"):
        return True
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return bool(re.match(rb"#!\s*/\S*/(env\s+)?(ba|da)?sh\b", first))


def in_archive(path):
    """The zip archive a module was imported from (pyspark.zip/pyspark/util.py), if it was."""
    while path not in ("/", "") and not os.path.exists(path):
        path = os.path.dirname(path)
    return path if os.path.isfile(path) and zipfile.is_zipfile(path) else None


def shown(arg, cwd, src):
    """A path in a process's argv: relative to the source tree when in it, else its last two parts."""
    path = os.path.realpath(os.path.join(cwd, arg))
    if path.startswith(src + "/"):
        return os.path.relpath(path, src)
    return "/".join(path.split("/")[-2:]) if os.path.isabs(arg) else arg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source")
    p.add_argument("build")
    args = p.parse_args()
    src, build = os.path.realpath(args.source), os.path.realpath(args.build)
    os.chdir(src)
    ci = os.environ.get("CI") == "true"
    uses = {}  # file of a module or program -> {(module or program, who uses it)}
    programs = {}  # program name or path -> {who}
    failures = []  # (what is not installed, [details])

    def use(path, what, who):
        uses.setdefault(path, set()).add((what, who))

    # What is written.
    files = tracked_files(src)
    python_files = [f for f in files if f.endswith(".py")]
    shell_scripts = [f for f in files if not f.endswith(".py") and is_shell_script(os.path.join(src, f), f)]
    local = {os.path.splitext(os.path.basename(f))[0] for f in python_files}
    local |= {f.split("/")[-2] for f in files if f.endswith("/__init__.py")} | PROJECT_MODULES
    written = {}  # module -> {file}
    for f in python_files:
        modules, progs = python_uses(os.path.join(src, f))
        for m in modules:
            if m.split(".")[0] not in local:
                written.setdefault(m, set()).add(f)
        for prog in progs:
            programs.setdefault(prog, set()).add(f)
    for f in shell_scripts:
        for prog in script_programs(open(os.path.join(src, f), errors="replace").read()):
            programs.setdefault(prog, set()).add(f)
    apt_roots, pip_roots, req_files, venvs = setup_installs(src)
    unresolved = set(written)
    # the .venv's Python, Debian's, and those of the other venvs setup.sh makes
    pythons = [sys.executable, "/usr/bin/python3"] + [p for p in (os.path.join(v, "bin", "python") for v in venvs)
                                                       if os.path.exists(p)]
    for python in pythons:
        for name, found in resolve_modules(python, written).items():
            if found is not None:
                unresolved.discard(name)
                for path in found:
                    for f in written[name]:
                        use(path, name, f)
    for name in sorted(unresolved):
        failures.append((f"module {name}: no Python of scripts/setup.sh's (Debian's python3, .venv's, "
                         f"{', '.join(os.path.relpath(v, src) for v in venvs) or 'no other venv'}) finds it",
                         [f"imported by {', '.join(sorted(written[name]))}"]))
    for name, progs in IMPLIED_COMMANDS.items():
        for prog in progs:
            for f in written.get(name, ()):
                programs.setdefault(prog, set()).add(f"{f} (imports {name})")

    # What ran.
    record_dirs = glob.glob(os.path.join(build, "*", "imports"))
    if os.environ.get("VIT_IMPORT_LOG"):
        record_dirs.append(os.path.abspath(os.environ["VIT_IMPORT_LOG"]))
    records, ran, vanished = 0, set(), 0
    owners = Owners(src, build)
    for path in sorted(p for d in record_dirs for p in glob.glob(os.path.join(d, "*.json"))):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        records += 1
        argv, cwd = r.get("argv") or [""], r.get("cwd") or src
        script = "python " + (argv[0] or "-") if argv[0] in ("-c", "-m", "") else shown(argv[0], cwd, src)
        ran.add(script)
        tested = [shown(a, cwd, src) for a in argv[1:] if os.path.exists(os.path.join(cwd, a)) and
                  os.path.realpath(os.path.join(cwd, a)).startswith(src + "/")]
        who = f"{' '.join([script] + tested[:1])} (ran)"
        if not os.path.realpath(r.get("executable", "")).startswith("/usr/"):
            owners.interpreter_stdlib.update(os.path.realpath(s) for s in r.get("stdlib", []))
        for name, file in r.get("modules", {}).items():
            file = in_archive(file) or file
            if not os.path.exists(file):  # made at run time and removed since (torch's generated modules)
                vanished += 1
                continue
            use(file, name, who)
            for prog in IMPLIED_COMMANDS.get(name, []):
                programs.setdefault(prog, set()).add(f"{who} (imports {name})")
        # pip as a script, or as a module under `python -c` (ensurepip runs it so when `python -m venv` seeds a venv)
        runs_pip = "pip" in script.split("/") or "pip._internal" in r.get("modules", {})
        for c in r.get("commands", []):
            argv_c = c.get("argv") or []
            if "shell" in c:
                progs = script_programs(c["shell"])
            elif len(argv_c) > 2 and os.path.basename(argv_c[0]) in SHELLS and argv_c[1] == "-c":
                progs = script_programs(argv_c[2])
            else:
                progs = [c.get("executable") or (argv_c or [""])[0]]
            for prog in filter(None, progs):
                if runs_pip and os.path.basename(prog) in PIP_PROBES:
                    continue
                if "/" in prog and not prog.startswith("/"):
                    prog = os.path.normpath(os.path.join(cwd, prog))
                programs.setdefault(prog, set()).add(who)
    generators = sorted(f for f in files if re.fullmatch(r"tests/make_[^/]*\.py", f))
    unrecorded = [g for g in generators if g not in ran]

    # Programs -> files.
    for prog, who in sorted(programs.items()):
        if "/" in prog:
            if not prog.startswith("/") or prog.startswith(build + "/"):
                continue  # the project's own: build/vit, scripts/..., the environments tests make in the build tree
            if not os.path.exists(prog):  # made at run time and removed since (python -m build's isolated env)
                vanished += 1
                continue
            path = prog
        else:
            path = shutil.which(prog, path=FRESH_PATH)
        if path is None:
            failures.append((f"program {prog}: not on a fresh machine's PATH ({FRESH_PATH})",
                             [f"used by {', '.join(sorted(who))}"]))
        else:
            for w in who:
                use(path, prog, w)

    # Owners, and whether scripts/setup.sh installs them.
    apt_ok, pip_ok = apt_closure(apt_roots), pip_closure(pip_roots, venvs)
    for f in files:
        if re.search(r"(^|/)requirements[^/]*\.txt$", f) and os.path.join(src, f) not in map(os.path.realpath, req_files):
            failures.append((f"{f}: a requirements file scripts/setup.sh does not install", []))
    by_owner = {}
    for path, owner in owners.of(sorted(uses)).items():
        by_owner.setdefault(owner, []).append(path)
    checked = {"debian": 0, "pip": 0}
    for (kind, name), paths in sorted(by_owner.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if kind in ("project", "interpreter"):
            continue
        if kind == "debian":
            checked[kind] += 1
            if name in apt_ok or debian_distributions(name) & set(pip_ok):
                continue
            what = f"{name} (Debian package)"
        elif kind == "pip":
            checked[kind] += 1
            if canonicalize_name(name) in pip_ok:
                continue
            site = re.match(r"(.*/(site|dist)-packages)/", paths[0])
            what = f"{name} (pip distribution in {site.group(1) if site else os.path.dirname(paths[0])})"
        else:
            what = f"{paths[0]}: neither a Debian package's file nor a pip distribution's"
        file_of = {n: p for p in paths for n, _ in uses[p]}
        names = sorted(file_of, key=lambda n: (len(n), n))
        whos = sorted({w for p in paths for _, w in uses[p]})
        failures.append((what, [f"{', '.join(names[:3])}{f' and {len(names) - 3} more' if len(names) > 3 else ''} "
                                f"({file_of[names[0]]})", f"used by {', '.join(whos)}"]))

    print(f"dependency audit: read {len(python_files)} Python files and {len(shell_scripts)} shell scripts; "
          f"{records} run records ({', '.join(sorted(ran)[:8]) or 'none'}{' ...' if len(ran) > 8 else ''}); {len(uses)} files of modules and programs, "
          f"owned by {checked['debian']} Debian packages, {checked['pip']} pip distributions and the project"
          f"{f'; {vanished} modules and programs made at run time and gone since' if vanished else ''}. scripts/setup.sh installs "
          f"{len(apt_roots)} Debian packages ({len(apt_ok)} with their dependencies and the base system) and "
          f"{len(pip_roots)} pip requirements ({len(pip_ok)} with their dependencies)")
    if unrecorded:
        message = (f"no run record of {', '.join(unrecorded)}: only what they import as written was checked "
                   "(tests/reference_models.cpp and scripts/test.sh record their runs)")
        if ci:
            failures.append(("CI=true: " + message, []))
        else:
            print("note: " + message)
    if failures:
        print(f"\nFAIL: {len(failures)} {'findings' if len(failures) > 1 else 'finding'}: what the suite and scripts/ "
              "use that scripts/setup.sh does not install (name each in scripts/setup.sh or in a requirements file "
              "it installs), or what could not be checked:")
        for what, details in failures:
            print("  " + what)
            for d in details:
                print("      " + d)
        return 1
    print("every owner is installed by scripts/setup.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
