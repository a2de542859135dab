"""Helpers of the multi-process remote tests: `troupe serve --actor-port` nodes as processes,
`troupe bench --remote` as the client, throwaway certificates from `openssl`. Every wait is
bounded."""
import glob
import json
import os
import re
import signal
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def troupe_bin():
    path = os.environ.get("TROUPE_BIN")
    if path:
        return path
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "bin", "troupe")), key=os.path.getmtime)
    if not found:
        raise RuntimeError("no troupe binary: set TROUPE_BIN")
    return found[-1]


class Node:
    """A `troupe serve` process publishing its models on an actor port (HTTP, gRPC, metrics off).
    `prefix` runs it elsewhere, e.g. ["ip", "netns", "exec", "ns1"]."""

    def __init__(self, workdir, name, args=(), prefix=(), timeout=120):
        self.ready = os.path.join(workdir, name + ".ready.json")
        if os.path.exists(self.ready):
            os.remove(self.ready)
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "w+")
        command = list(prefix) + [troupe_bin(), "serve", "--http-port", "-1", "--grpc-port", "-1",
                                  "--metrics-port", "-1", "--ready-file", self.ready] + list(args)
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while (not os.path.exists(self.ready) and self.proc.poll() is None and
               time.monotonic() < deadline):
            time.sleep(0.05)
        if not os.path.exists(self.ready):
            self.stop()
            raise RuntimeError("troupe serve did not start:\n" + self.output())
        self.port = json.load(open(self.ready))["actor_port"]

    def output(self):
        self.log.flush()
        return open(self.log_path).read()

    def kill(self):
        """kill -9: no goodbye on the connection, nothing drained."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def bench_command(endpoints, model="default", seconds=3, extra=(), prefix=()):
    command = list(prefix) + [troupe_bin(), "bench", "-m", model, "-t", str(seconds)]
    for endpoint in endpoints:
        command += ["--remote", endpoint]
    return command + list(extra)


def bench_report(stdout):
    """The numbers a remote bench run prints: requests, failed, retried, lost, reconnects."""
    count = re.search(r"count\s+(\d+) requests in [\d.]+ s \((\d+) failed\)", stdout)
    remote = re.search(r"remote requests\s+(\d+) sent, (\d+) retried on another replica, "
                       r"(\d+) failed unanswered", stdout)
    lost = re.search(r"replicas lost\s+(\d+) \((\d+) found again\)", stdout)
    fps = re.search(r"throughput\s+([\d.]+) FPS", stdout)
    p50 = re.search(r"latency median\s+([\d.]+) ms", stdout)
    if not (count and remote and lost):
        raise AssertionError("no remote report in:\n" + stdout)
    return {"requests": int(count.group(1)), "failed": int(count.group(2)),
            "sent": int(remote.group(1)), "retried": int(remote.group(2)),
            "unavailable": int(remote.group(3)), "lost": int(lost.group(1)),
            "reconnects": int(lost.group(2)), "fps": float(fps.group(1)),
            "p50_ms": float(p50.group(1))}


def make_pki(directory, ca_name, members):
    """A CA and a certificate it signs for each member: {member: (cert, key, ca)}."""
    os.makedirs(directory, exist_ok=True)

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60)

    ca_key = os.path.join(directory, ca_name + "-ca.key")
    ca = os.path.join(directory, ca_name + "-ca.pem")
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-days", "1", "-subj", "/CN=" + ca_name, "-keyout", ca_key, "-out", ca)
    issued = {}
    for member in members:
        key = os.path.join(directory, member + ".key")
        csr = os.path.join(directory, member + ".csr")
        cert = os.path.join(directory, member + ".pem")
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=" + member, "-keyout", key, "-out", csr)
        run("x509", "-req", "-days", "1", "-in", csr, "-CA", ca, "-CAkey", ca_key,
            "-CAcreateserial", "-out", cert)
        issued[member] = (cert, key, ca)
    return issued


def tls_flags(issued):
    cert, key, ca = issued
    return ["--tls-cert", cert, "--tls-key", key, "--tls-ca", ca]
