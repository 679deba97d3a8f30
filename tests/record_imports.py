"""Records what a Python process of the test suite imported and which programs it started, for
tests/dependency_audit.py. Python loads this file as `usercustomize` from the user site of PYTHONUSERBASE
(tests/CMakeLists.txt links it into build/python-imports/userbase; scripts/test.sh and the reference-model
harness, tests/reference_models.cpp, point PYTHONUSERBASE there). With VIT_IMPORT_LOG naming a folder, the
process writes one JSON file there at exit: its argv and interpreter, the file of every module in
sys.modules, and the programs it started (the subprocess.Popen, os.exec, os.posix_spawn and os.system audit
events). Processes that end by os._exit or a signal write nothing."""
import os
import sys

_LOG = os.environ.get("VIT_IMPORT_LOG")
if _LOG:
    import atexit
    import json
    import sysconfig
    import time

    _LOG = os.path.abspath(_LOG)
    _ARGV = list(sys.argv)  # sys.argv is set after usercustomize runs: read again at exit
    _commands = []

    def _program(argv):
        if isinstance(argv, (bytes, str, os.PathLike)):
            return {"shell": os.fsdecode(argv)}
        try:
            return {"argv": [os.fsdecode(a) for a in list(argv)[:8]]}
        except TypeError:
            return None

    def _audit(event, args):
        if event == "subprocess.Popen":
            executable, argv = args[0], args[1]
            entry = _program(argv)
            if entry is not None:
                if executable is not None:
                    entry["executable"] = os.fsdecode(executable)
                _commands.append(entry)
        elif event in ("os.exec", "os.posix_spawn"):
            entry = _program(args[1])
            if entry is not None:
                entry["executable"] = os.fsdecode(args[0])
                _commands.append(entry)
        elif event == "os.system":
            _commands.append(_program(args[0]))

    def _write():
        modules = {}
        for name, module in list(sys.modules.items()):
            try:
                path = getattr(module, "__file__", None)
            except Exception:  # a lazy module whose attributes import on access
                continue
            if isinstance(path, str):
                modules[name] = path
        try:
            cwd = os.getcwd()
        except OSError:  # its folder was removed
            cwd = None
        record = {"argv": sys.argv if isinstance(sys.argv, list) and sys.argv else _ARGV,
                  "cwd": cwd, "executable": sys.executable,
                  "stdlib": sorted({sysconfig.get_path("stdlib"), os.path.dirname(os.__file__)}),
                  "modules": modules, "commands": [c for c in _commands if c]}
        try:
            os.makedirs(_LOG, exist_ok=True)
            path = os.path.join(_LOG, f"{os.getpid()}-{time.monotonic_ns()}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(record, f)
            os.replace(path + ".tmp", path)
        except OSError as e:
            print(f"record_imports: cannot write {_LOG}: {e}", file=sys.stderr)

    sys.addaudithook(_audit)
    atexit.register(_write)
