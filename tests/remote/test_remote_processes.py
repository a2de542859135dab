#!/usr/bin/python3
"""Remote models across real processes on loopback: `troupe serve --actor-port` nodes and
`troupe bench --remote` clients; a replica killed with SIGKILL under load and started again;
TLS with certificates from a throwaway CA, and a client from another CA refused; the refusal to
publish off loopback without certificates.

Usage: TROUPE_BIN=build/bin/troupe /usr/bin/python3 -m pytest -q tests/remote/test_remote_processes.py
"""
import os
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from remote_nodes import Node, bench_command, bench_report, make_pki, tls_flags, troupe_bin  # noqa


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


def test_bench_through_a_remote_node(workdir):
    node = Node(workdir, "a", ["--actor-port", "0"])
    try:
        result = subprocess.run(bench_command(["127.0.0.1:%d" % node.port], seconds=2),
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        report = bench_report(result.stdout)
        assert report["requests"] > 100 and report["failed"] == 0
        assert report["sent"] >= report["requests"] and report["lost"] == 0
        assert "remote 127.0.0.1" not in result.stderr
    finally:
        node.stop()


def test_an_unknown_model_is_named(workdir):
    node = Node(workdir, "a", ["--actor-port", "0"])
    try:
        result = subprocess.run(bench_command(["127.0.0.1:%d" % node.port], model="resnet"),
                                capture_output=True, text=True, timeout=60)
        assert result.returncode != 0
        assert "no model named 'resnet'" in result.stderr and "'default'" in result.stderr
    finally:
        node.stop()


def test_publishing_off_loopback_without_certificates_is_refused(workdir):
    ready = os.path.join(workdir, "never.json")
    result = subprocess.run([troupe_bin(), "serve", "--host", "0.0.0.0", "--actor-port", "0",
                             "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
                             "--ready-file", ready], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "refusing --actor-port on 0.0.0.0 without --tls-cert, --tls-key and --tls-ca" in \
        result.stderr
    assert not os.path.exists(ready)
    assert "listening" not in result.stderr  # nothing was bound


def test_a_replica_killed_under_load_loses_no_request_and_comes_back(workdir):
    a = Node(workdir, "a", ["--actor-port", "0"])
    b = Node(workdir, "b", ["--actor-port", "0"])
    port_b = b.port
    try:
        bench = subprocess.Popen(bench_command(["127.0.0.1:%d" % a.port, "127.0.0.1:%d" % port_b],
                                               seconds=12),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        b.kill()  # SIGKILL with requests in flight
        time.sleep(1.5)
        b = Node(workdir, "b2", ["--actor-port", str(port_b)])  # back on the same port
        stdout, stderr = bench.communicate(timeout=120)
        assert bench.returncode == 0, stdout + stderr
        report = bench_report(stdout)
        assert report["failed"] == 0 and report["unavailable"] == 0
        assert report["lost"] == 1
        assert report["reconnects"] == 1, stdout
    finally:
        a.stop()
        b.stop()


def test_tls_nodes_verify_each_other(workdir):
    trusted = make_pki(os.path.join(workdir, "pki"), "trusted", ["server", "client"])
    rogue = make_pki(os.path.join(workdir, "rogue"), "rogue", ["intruder"])
    node = Node(workdir, "tls", ["--actor-port", "0", "--host", "127.0.0.1"] +
                tls_flags(trusted["server"]))
    try:
        endpoint = ["127.0.0.1:%d" % node.port]
        ok = subprocess.run(bench_command(endpoint, seconds=1, extra=tls_flags(trusted["client"])),
                            capture_output=True, text=True, timeout=120)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert bench_report(ok.stdout)["failed"] == 0
        # A certificate from another CA: refused (the server verifies the client).
        cert, key, _ = rogue["intruder"]
        refused = subprocess.run(bench_command(endpoint, seconds=1, extra=[
            "--tls-cert", cert, "--tls-key", key, "--tls-ca", trusted["client"][2]]),
            capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0
        assert "cannot reach a troupe node" in refused.stderr
        # No TLS at all: refused too, and without hanging.
        plain = subprocess.run(bench_command(endpoint, seconds=1), capture_output=True,
                               text=True, timeout=120)
        assert plain.returncode != 0
    finally:
        node.stop()
