"""What the end-to-end Python tests share: running padfold's command line."""
import subprocess


def run(cmd):
    """Runs cmd (its parts made strings); its stdout, or RuntimeError with the command's output."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def run_checks(check, names, *args):
    """check(*args, name) for each name: None when it passes, else what failed (a RuntimeError
    from run counts as a failure). Prints each failure; the exit status: 1 if any failed."""
    failures = []
    for name in names:
        try:
            failure = check(*args, name)
        except RuntimeError as e:
            failure = f"{name}: {e}"
        if failure:
            failures.append(failure)
            print("FAIL", failure)
    return 1 if failures else 0
