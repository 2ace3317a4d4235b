"""What the training and checking scripts share: running the kvfleet CLI."""
import subprocess
import sys


def run(cmd):
    """cmd's stdout; exits naming the command and its stderr's tail when it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    return out.stdout
