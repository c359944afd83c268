"""What the end-to-end Python tests share: running padfold's command line."""
import subprocess


def run(cmd):
    """Runs cmd (its parts made strings); its stdout, or RuntimeError with the command's output."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout
