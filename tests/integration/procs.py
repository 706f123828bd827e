"""Process helpers shared by the Python integration tests (imported by path: the tests add
tests/integration/ to sys.path)."""
import os


def processes_holding(folder):
    """Pids (other than ours) with an open file under `folder`: what a test that started
    children in `folder` checks to prove none was left behind."""
    holders = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                try:
                    if os.readlink(f"{fd_dir}/{fd}").startswith(folder):
                        holders.append(int(pid))
                        break
                except OSError:
                    pass
        except OSError:
            pass
    return holders
