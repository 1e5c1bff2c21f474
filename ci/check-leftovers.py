#!/usr/bin/env python3
"""Fails when a test run left anything behind in its temporary directory.

ci/test.sh runs the tests with TMPDIR set to a fresh directory and calls this afterwards
with that directory. Leftovers are files or directories in it, mounts below it, and
processes whose command line names it. Components that stop by themselves once the test
runner exits (the shared cluster watches nextest's pid) get up to 60 s to do so. What is
found is listed, then removed (processes killed, mounts unmounted, files deleted) so the
machine stays clean; the exit status says whether anything was found. Docker containers
and networks of the harness's containers backend whose run directory (their label) is in
the directory count too.
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time


def processes(d):
    found = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if d in cmdline and state != "Z":
            found[int(entry)] = cmdline.strip()[:300]
    return found


def mounts(d):
    with open("/proc/self/mountinfo") as f:
        points = [line.split(" ")[4] for line in f]
    return [m for m in points if m == d or m.startswith(d + "/")]


LABEL = "openstack-csi-conformance.run-dir"


def docker_objects(d):
    """(kind, name) of containers and networks labelled with a run directory below d."""
    found = []
    for kind, command, name_field in (("container", ["ps", "-a"], "Names"),
                                      ("network", ["network", "ls"], "Name")):
        try:
            out = subprocess.run(
                ["docker", *command, "--filter", f"label={LABEL}",
                 "--format", '{{.%s}}\t{{.Label "%s"}}' % (name_field, LABEL)],
                capture_output=True, text=True, check=False, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return []  # no docker here: nothing of the backend either
        for line in out.splitlines():
            name, _, run_dir = line.partition("\t")
            if run_dir == d or run_dir.startswith(d + "/"):
                found.append((kind, name))
    return found


def kind_cgroups():
    """The kind backend's node cgroup roots (/sys/fs/cgroup/<hierarchy>/ock-*): named after
    the node containers, not the run directory, so any of them is a leftover once the run
    is over."""
    return sorted(glob.glob("/sys/fs/cgroup/*/ock-*"))


def remove_cgroup_tree(path):
    for root, dirs, _ in os.walk(path, topdown=False):
        for name in dirs:
            try:
                os.rmdir(os.path.join(root, name))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def describe(path):
    """What a leftover holds and when it was last changed, to find the test that left it."""
    try:
        changed = time.strftime("%H:%M:%S", time.localtime(os.lstat(path).st_mtime))
    except OSError:
        return ""
    if not os.path.isdir(path) or os.path.islink(path):
        return f" (file, changed {changed})"
    inside = []
    for root, dirs, files in os.walk(path):
        inside.extend(os.path.relpath(os.path.join(root, n), path) for n in dirs + files)
        if len(inside) >= 8:
            break
    shown = ", ".join(sorted(inside)[:8]) or "empty"
    return f" (directory, changed {changed}: {shown})"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ci/check-leftovers.py DIR")
    if not os.path.isdir(sys.argv[1]):
        return 0
    d = os.path.realpath(sys.argv[1])
    deadline = time.monotonic() + 60
    while processes(d) and time.monotonic() < deadline:
        time.sleep(0.5)

    found = False
    left = processes(d)
    if left:
        found = True
        print(f"==> leftover processes of the test run (naming {d}):", file=sys.stderr)
        for pid, cmdline in sorted(left.items()):
            print(f"  {pid}: {cmdline}", file=sys.stderr)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    left = docker_objects(d)
    if left:
        found = True
        print("==> leftover docker objects of the test run:", file=sys.stderr)
        for kind, name in left:
            print(f"  {kind} {name}", file=sys.stderr)
        for kind, name in sorted(left):  # containers before networks
            rm = ["rm", "-f", "-v", name] if kind == "container" else ["network", "rm", name]
            subprocess.run(["docker", *rm], capture_output=True, check=False)
    left = kind_cgroups()
    if left:
        found = True
        print("==> leftover cgroups of kind nodes:", file=sys.stderr)
        for path in left:
            print(f"  {path}", file=sys.stderr)
            remove_cgroup_tree(path)
    left = mounts(d)
    if left:
        found = True
        print("==> leftover mounts of the test run:", file=sys.stderr)
        for m in left:
            print(f"  {m}", file=sys.stderr)
        for m in sorted(left, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], stderr=subprocess.DEVNULL, check=False)
    # The harness's base directory for run directories ($TMPDIR/occ) stays once made; empty,
    # it is not a leftover.
    base = os.path.join(d, "occ")
    if os.path.isdir(base) and not os.path.islink(base) and not os.listdir(base):
        os.rmdir(base)
    left = sorted(os.path.join(d, e) for e in os.listdir(d))
    if left:
        found = True
        print("==> leftover files and directories of the test run:", file=sys.stderr)
        for path in left[:50]:
            print(f"  {path}{describe(path)}", file=sys.stderr)
    shutil.rmtree(d, ignore_errors=True)

    if found:
        print("error: the test run left the above behind (removed now); "
              "every test must clean up after itself", file=sys.stderr)
        return 1
    print("==> no leftover files, mounts, processes, docker objects or cgroups of the test run",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
