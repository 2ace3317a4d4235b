"""A podman network left behind by an interrupted container test (its
`finally` never ran) holds the test's subnet, so the next run's
`podman network create` would fail. create_network (pod_runner.py), which
every container test uses, removes such networks first.

This test leaves a network the way an interrupted run does (labelled with
a process that has exited), checks that it blocks a plain
`network create` on the same subnet, that create_network then succeeds
and the stale network is gone, and that a network whose maker still runs
(a concurrent run) is left alone. It uses a prefix and subnet of its own,
so it never touches a running test's network.

Exit 0: passed; 1: failed; 77: skipped (podman cannot manage networks here).
"""
from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pod_runner import OWNER_LABEL, PodmanError, create_network, podman  # noqa: E402

PREFIX, SUBNET_PREFIX = "kvfleet-nettest-", "10.89.223"


def networks() -> list[str]:
    return podman("network", "ls", "--format", "{{.Name}}").stdout.split()


def main() -> int:
    try:
        podman("network", "ls")
    except (OSError, PodmanError) as e:
        print(f"network_test: SKIP: podman cannot list networks here: {e}")
        return 77
    stale = PREFIX + "left0"
    fresh = ""
    try:
        # Made by a process that has exited, as an interrupted run's is.
        gone = subprocess.Popen(["true"])
        gone.wait()
        podman("network", "create", "--label", f"{OWNER_LABEL}={gone.pid}", "--subnet", f"{SUBNET_PREFIX}.0/24",
               stale)
        blocked = podman("network", "create", "--subnet", f"{SUBNET_PREFIX}.0/24", PREFIX + "plain", check=False)
        if blocked.returncode == 0:
            print("network_test: FAIL: podman let two networks share a subnet; the stale network blocks nothing")
            return 1
        fresh = create_network(PREFIX, SUBNET_PREFIX)
        left = [n for n in networks() if n.startswith(PREFIX)]
        if left != [fresh]:
            print(f"network_test: FAIL: networks with the prefix after create_network: {left}, want [{fresh}]")
            return 1
        # A network whose maker still runs (a concurrent run) is left alone.
        again = podman("network", "create", "--label", f"{OWNER_LABEL}={os.getpid()}", "--subnet",
                       f"{SUBNET_PREFIX}.0/24", PREFIX + "plain", check=False)
        if again.returncode == 0:
            print("network_test: FAIL: the subnet was free again although the fresh network holds it")
            return 1
        try:
            create_network(PREFIX, SUBNET_PREFIX)
            print("network_test: FAIL: create_network removed a live run's network")
            return 1
        except PodmanError:
            pass
        if fresh not in networks():
            print(f"network_test: FAIL: {fresh}, whose maker runs, was removed")
            return 1
    except PodmanError as e:
        print(f"network_test: FAIL: {e}")
        return 1
    finally:
        for name in (stale, PREFIX + "plain", fresh):
            if name:
                podman("network", "rm", "--force", name, check=False)
    print(f"network_test: the stale network {stale} was removed and {fresh} created on its subnet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
