#!/usr/bin/python3
"""`troupe perf` against a real `troupe serve`: HTTP with JSON and with binary tensors and gRPC at
concurrency 1, 2, 4 for a short time each, the table, CSV and SVG it writes, and its errors
(unknown model, no server, bad options) with exit code 1.

Usage: TROUPE_BIN=build/bin/troupe /usr/bin/python3 -m pytest -q tests/server/test_perf_cli.py
(without TROUPE_BIN, the first build*/bin/troupe of the repository). The server serves its
embedded default CNN as 'default' (input f32 [-1,3,32,32]: troupe perf sends batch 1).
"""
import csv
import glob
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS = ["concurrency", "inferences_per_s", "p50_us", "p90_us", "p95_us", "p99_us", "errors",
           "server_queue_us", "server_input_us", "server_infer_us", "server_output_us"]


def troupe_bin():
    path = os.environ.get("TROUPE_BIN")
    if path:
        return path
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "bin", "troupe")), key=os.path.getmtime)
    if not found:
        pytest.fail("no troupe binary: set TROUPE_BIN")
    return found[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("serve")
    ready = work / "ready.json"
    log = open(work / "serve.log", "w+")
    proc = subprocess.Popen([troupe_bin(), "serve", "--http-port", "0", "--grpc-port", "0",
                             "--metrics-port", "-1", "--ready-file", str(ready)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if not ready.exists():
        proc.kill()
        proc.wait()
        log.seek(0)
        pytest.fail("troupe serve did not start:\n" + log.read())
    ports = json.loads(ready.read_text())
    yield ports
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def perf(*args, timeout=180):
    return subprocess.run([troupe_bin(), "perf", *args], capture_output=True, text=True,
                          timeout=timeout)


def table_rows(stdout):
    """The rows of the printed table: the lines after its header, split on blanks."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["Concurrency"])
    return [line.split() for line in lines[start + 1:] if line.strip()]


def check_outputs(result, csv_path, svg_path, levels, server_columns):
    assert result.returncode == 0, result.stdout + result.stderr
    rows = table_rows(result.stdout)
    assert [int(r[0]) for r in rows] == levels, result.stdout
    for r in rows:
        assert float(r[1]) > 0, result.stdout  # throughput
        assert int(r[6]) == 0, result.stdout  # errors
        p50, p90, p95, p99 = (float(v) for v in r[2:6])
        assert 0 < p50 <= p90 <= p95 <= p99, result.stdout

    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        records = list(reader)
    assert [int(r["concurrency"]) for r in records] == levels
    for r in records:
        assert float(r["inferences_per_s"]) > 0
        if server_columns:
            # The statistics extension: the server's own time per request, as numbers.
            assert float(r["server_infer_us"]) > 0, r
            float(r["server_queue_us"]), float(r["server_input_us"]), float(r["server_output_us"])
        else:
            assert r["server_infer_us"] == ""

    svg = ET.parse(svg_path).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    for c in levels:
        assert f"c={c}" in labels
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}circle"))) == len(levels)


@pytest.mark.parametrize("mode", ["http", "http-binary", "grpc", "grpc-no-stats"])
def test_load_at_three_levels(server, tmp_path, mode):
    csv_path, svg_path = tmp_path / "perf.csv", tmp_path / "perf.svg"
    args = ["-m", "default", "--concurrency-range", "1:4:2x", "-t", "1", "--csv", str(csv_path),
            "--svg", str(svg_path)]
    if mode.startswith("http"):
        args += ["-u", f"127.0.0.1:{server['http_port']}"]
    else:
        args += ["-u", f"127.0.0.1:{server['grpc_port']}", "--protocol", "grpc"]
    if mode == "http-binary":
        args.append("--binary")
    if mode == "grpc":
        args += ["--http-url", f"127.0.0.1:{server['http_port']}"]
    result = perf(*args)
    check_outputs(result, csv_path, svg_path, [1, 2, 4], server_columns=mode != "grpc-no-stats")
    if mode == "grpc-no-stats":
        assert "server statistics: not available" in result.stdout


def test_npy_input_and_request_bound(server, tmp_path):
    url = f"http://127.0.0.1:{server['http_port']}/v2/models/default"
    with urllib.request.urlopen(url, timeout=30) as reply:
        spec = json.load(reply)["inputs"][0]
    shape = [1 if d < 0 else d for d in spec["shape"]]
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).random(shape, dtype=np.float32))
    # --max-requests ends each level long before its time limit.
    started = time.monotonic()
    result = perf("-u", f"127.0.0.1:{server['http_port']}", "-m", "default", "-t", "60",
                  "--max-requests", "20", "--input", f"{spec['name']}={path}", "--binary")
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 50
    assert f"from {path}" in result.stdout
    assert len(table_rows(result.stdout)) == 1


def test_unknown_model_is_a_404(server):
    result = perf("-u", f"127.0.0.1:{server['http_port']}", "-m", "no_such_model", "-t", "1")
    assert result.returncode == 1
    assert "no_such_model" in result.stderr and "404" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "terminate" not in result.stderr


def test_unknown_model_over_grpc(server):
    result = perf("-u", f"127.0.0.1:{server['grpc_port']}", "-i", "grpc", "-m", "no_such_model",
                  "-t", "1")
    assert result.returncode == 1
    assert "not found" in result.stderr and "NOT_FOUND" in result.stderr, result.stderr


def test_no_server():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for protocol in ("http", "grpc"):
        result = perf("-u", f"127.0.0.1:{port}", "-i", protocol, "-m", "default", "-t", "1",
                      "--timeout", "5", timeout=60)
        assert result.returncode == 1, (protocol, result.stdout, result.stderr)
        assert "cannot connect" in result.stderr, (protocol, result.stderr)


@pytest.mark.parametrize("args, message", [
    (["--concurrency-range", "4:1"], "END is below START"),
    (["--concurrency-range", "1:8:1x"], "at least 2x"),
    (["--input", "nope=x.npy"], "no input 'nope'"),
    (["-u", "127.0.0.1:99999"], "bad port"),
    (["-i", "grpc", "--binary"], "--binary is for HTTP"),
])
def test_bad_options(server, args, message):
    base = ["-m", "default", "-t", "1"]
    if not any(a == "-u" for a in args):
        base += ["-u", f"127.0.0.1:{server['http_port']}"]
    result = perf(*base, *args)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr
