#!/usr/bin/python3
"""Replicas on separate "hosts": three network namespaces joined by veth links (Debian iproute2),
a client in one and a `troupe serve --actor-port` replica in each of the others, on their own
addresses (off loopback, so TLS with certificates from a throwaway CA is required: a replica
without them must refuse to start). The client benchmarks through both replicas; one is killed
with SIGKILL under load and started again; no request may fail.

Needs root (CAP_NET_ADMIN) and `ip`; exits 77 (skipped) without them. Only addresses inside the
namespaces it creates are used; everything it made is removed on exit. Every loop is bounded.

Usage: TROUPE_BIN=build/bin/troupe /usr/bin/python3 tests/remote/netns_replicas.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from remote_nodes import Node, bench_command, bench_report, make_pki, tls_flags, troupe_bin  # noqa

SUFFIX = str(os.getpid())
CLIENT, R1, R2 = "tcl" + SUFFIX, "tr1" + SUFFIX, "tr2" + SUFFIX
# client <-> replica k on 10.231.k.0/24: the client is .1, the replica .2
LINKS = [(R1, 1), (R2, 2)]


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), check=check, capture_output=True, text=True,
                          timeout=30)


def in_ns(ns):
    return ["ip", "netns", "exec", ns]


def set_up():
    for ns in (CLIENT, R1, R2):
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
    for ns, k in LINKS:
        here, there = "vc%d_%s" % (k, SUFFIX), "vr%d_%s" % (k, SUFFIX)
        ip("link", "add", here[:15], "type", "veth", "peer", "name", there[:15])
        ip("link", "set", here[:15], "netns", CLIENT)
        ip("link", "set", there[:15], "netns", ns)
        ip("-n", CLIENT, "addr", "add", "10.231.%d.1/24" % k, "dev", here[:15])
        ip("-n", ns, "addr", "add", "10.231.%d.2/24" % k, "dev", there[:15])
        ip("-n", CLIENT, "link", "set", here[:15], "up")
        ip("-n", ns, "link", "set", there[:15], "up")


def tear_down():
    for ns in (CLIENT, R1, R2):
        ip("netns", "del", ns, check=False)


def main():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("skipped: needs root and iproute2")
        return 77
    try:
        ip("netns", "add", "tprobe" + SUFFIX)
        ip("netns", "del", "tprobe" + SUFFIX)
    except subprocess.CalledProcessError as e:
        print("skipped: cannot create network namespaces: " + e.stderr.strip())
        return 77
    work = tempfile.mkdtemp(prefix="troupe_netns_")
    nodes = []
    try:
        set_up()
        pki = make_pki(os.path.join(work, "pki"), "netns-ca", ["r1", "r2", "client"])
        # Off loopback without certificates: refused before listening.
        plain = subprocess.run(in_ns(R1) + [troupe_bin(), "serve", "--host", "10.231.1.2",
                                            "--actor-port", "7400", "--http-port", "-1",
                                            "--grpc-port", "-1", "--metrics-port", "-1"],
                               capture_output=True, text=True, timeout=60)
        assert plain.returncode == 2, plain.stderr
        assert "refusing --actor-port on 10.231.1.2" in plain.stderr, plain.stderr

        def replica(name, ns, k, port="0"):
            return Node(work, name, ["--host", "10.231.%d.2" % k, "--actor-port", port] +
                        tls_flags(pki[name[:2]]), prefix=in_ns(ns))

        r1 = replica("r1", R1, 1)
        nodes.append(r1)
        r2 = replica("r2", R2, 2)
        nodes.append(r2)
        endpoints = ["10.231.1.2:%d" % r1.port, "10.231.2.2:%d" % r2.port]
        client = tls_flags(pki["client"])

        # Both "hosts" serve; then replica 2 is killed under load and comes back.
        bench = subprocess.Popen(bench_command(endpoints, seconds=15, extra=client,
                                               prefix=in_ns(CLIENT)),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        r2.kill()
        killed_at = time.monotonic()
        time.sleep(2)
        r2b = replica("r2", R2, 2, port=str(r2.port))
        nodes.append(r2b)
        back_after = time.monotonic() - killed_at
        stdout, stderr = bench.communicate(timeout=180)
        assert bench.returncode == 0, stdout + stderr
        report = bench_report(stdout)
        print("netns replicas: %(requests)d requests, %(fps).1f FPS, %(failed)d failed, "
              "%(retried)d retried, %(unavailable)d unanswered, %(lost)d replica lost, "
              "%(reconnects)d found again" % report)
        print("replica 2 restarted %.1f s after SIGKILL" % back_after)
        assert report["failed"] == 0, stdout
        assert report["lost"] == 1 and report["reconnects"] == 1, stdout
        print("ok")
        return 0
    finally:
        for node in nodes:
            node.stop()
        tear_down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
