"""Runs a command with its stderr on a pseudo-terminal COLUMNS wide and its stdout in a file, and prints
what the terminal received, so tests can see the progress bar as a person would:
    on_terminal.py COLUMNS STDOUT_FILE COMMAND..."""
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

columns, out, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
with open(out, "wb") as f:
    p = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=f, stderr=slave)
os.close(slave)
data = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: the command closed the terminal
        break
    if not chunk:
        break
    data += chunk
sys.stdout.buffer.write(data)
sys.exit(p.wait())
