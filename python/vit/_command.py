"""The `vit` command of the pip-installed package (the environment's bin/vit runs main): it becomes the
engine's own program, installed beside this file, where that program also finds OpenCV's plugins."""
import os
import signal
import sys


def main():
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vit")
    if not os.access(program, os.X_OK):
        sys.exit(f"vit: error: the engine's program {program} is missing: reinstall the vit package")
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: give the program
    # the defaults a shell would (`vit classify ... | head` ends quietly).
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execv(program, ["vit"] + sys.argv[1:])
