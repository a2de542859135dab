"""The KServe v2 REST API of `troupe serve` from a real client (Debian's python3-requests) over
loopback: every endpoint and status code, binary tensors, statistics, metrics, the repository
extension, TLS, hundreds of concurrent connections and SIGTERM under load."""
import concurrent.futures
import json
import pathlib
import re
import shlex
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from serve_fixture import (Server, WIDTH, expected, normalized, write_add_model,
                           write_identity_chain_model, write_text_model)

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_add_model(root / "add" / "1" / "model.onnx")
    write_add_model(root / "add" / "2" / "model.onnx", bias=1.0)
    (root / "add" / "config.json").write_text(json.dumps({"NUM_STREAMS": 2}))
    write_add_model(root / "other" / "1" / "model.onnx", bias=3.0)
    write_text_model(root / "text" / "1" / "model.onnx")
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "model.onnx").write_bytes(b"\x08\x07garbage")
    return root


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve"),
               ["--model-repository", str(repo), "--http-port", "0", "--grpc-port", "-1",
                "--metrics-port", "0", "--max-body-mb", "1"])
    yield s
    assert s.stop() == 0, s.output()


def infer_body(x, **extra):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                        "data": x.ravel().tolist()}]}
    body.update(extra)
    return body


def test_health_and_metadata(server):
    assert requests.get(server.url("/v2/health/live"), timeout=10).status_code == 200
    assert requests.get(server.url("/v2/health/ready"), timeout=10).status_code == 200
    meta = requests.get(server.url("/v2"), timeout=10).json()
    assert meta["name"] == "troupe"
    assert {"binary_tensor_data", "statistics", "model_repository"} <= set(meta["extensions"])
    model = requests.get(server.url("/v2/models/add"), timeout=10).json()
    assert model["versions"] == ["1", "2"]
    assert model["platform"] == "troupe_onnx"
    assert model["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, WIDTH]}]
    assert [o["name"] for o in model["outputs"]] == ["y", "z"]
    assert requests.get(server.url("/v2/models/add/versions/2/ready"), timeout=10).status_code == 200
    r = requests.get(server.url("/v2/models/nope"), timeout=10)
    assert r.status_code == 404 and "nope" in r.json()["error"]
    r = requests.get(server.url("/v2/models/broken/ready"), timeout=10)
    assert r.status_code == 503 and "model.onnx" in r.json()["error"]


def test_infer_json_and_versions(server):
    x = (np.arange(2 * WIDTH, dtype=np.float32) - 7.25).reshape(2, WIDTH)
    r = requests.post(server.url("/v2/models/add/infer"), json=infer_body(x, id="a-1"), timeout=30)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["id"] == "a-1" and doc["model_name"] == "add" and doc["model_version"] == "2"
    y, z = expected(x, bias=1.0)
    out = {o["name"]: o for o in doc["outputs"]}
    assert out["y"]["shape"] == [2, WIDTH] and out["y"]["datatype"] == "FP32"
    assert np.array_equal(np.array(out["y"]["data"], dtype=np.float32).reshape(2, WIDTH), y)
    assert np.array_equal(np.array(out["z"]["data"], dtype=np.float32).reshape(2, WIDTH), z)
    # Version 1, nested data, one output selected.
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, WIDTH], "data": x.tolist()}],
            "outputs": [{"name": "y"}]}
    doc = requests.post(server.url("/v2/models/add/versions/1/infer"), json=body, timeout=30).json()
    assert [o["name"] for o in doc["outputs"]] == ["y"]
    assert np.array_equal(np.array(doc["outputs"][0]["data"], dtype=np.float32).reshape(2, WIDTH),
                          expected(x)[0])


def binary_request(x, outputs=("y", "z")):
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": n, "parameters": {"binary_data": True}}
                                     for n in outputs]}).encode()
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Type": "application/octet-stream"}


def parse_binary(response):
    length = int(response.headers["Inference-Header-Content-Length"])
    header = json.loads(response.content[:length])
    arrays, offset = {}, length
    for out in header["outputs"]:
        size = out["parameters"]["binary_data_size"]
        arrays[out["name"]] = np.frombuffer(response.content[offset:offset + size],
                                            dtype=np.float32).reshape(out["shape"])
        offset += size
    assert offset == len(response.content)
    return arrays


def test_infer_binary(server):
    x = np.random.default_rng(1).standard_normal((4, WIDTH)).astype(np.float32)
    body, headers = binary_request(x)
    r = requests.post(server.url("/v2/models/add/versions/1/infer"), data=body, headers=headers,
                      timeout=30)
    assert r.status_code == 200, r.text
    out = parse_binary(r)
    y, z = expected(x)
    assert np.array_equal(out["y"], y) and np.array_equal(out["z"], z)
    # The binary size disagrees with the shape: 400 naming the input.
    r = requests.post(server.url("/v2/models/add/infer"), data=body[:-4],
                      headers={**headers}, timeout=30)
    assert r.status_code == 400 and "'x'" in r.json()["error"]


def bytes_elements(words):
    """The binary form of BYTES elements: each a 4-byte little-endian length, then its bytes."""
    return b"".join(len(w).to_bytes(4, "little") + w for w in words)


def test_bytes_tensors_as_json_and_binary(server):
    model = requests.get(server.url("/v2/models/text"), timeout=10).json()
    assert model["inputs"] == [{"name": "words", "datatype": "BYTES", "shape": [-1]}]
    assert model["outputs"][0]["datatype"] == "BYTES"
    words = ["The", "quick", "naïve", "fox", "the"]
    r = requests.post(server.url("/v2/models/text/infer"), timeout=30, json={
        "id": "t1", "inputs": [{"name": "words", "datatype": "BYTES", "shape": [5],
                                "data": words}]})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["datatype"] == "BYTES" and out["shape"] == [3]
    assert out["data"] == normalized(words)
    # Binary in and out: length-prefixed elements, an empty one and one of 300 bytes included.
    raw = [w.encode() for w in ["", "the", "x" * 300, "Fox"]]
    binary = bytes_elements(raw)
    header = json.dumps({"inputs": [{"name": "words", "datatype": "BYTES", "shape": [4],
                                     "parameters": {"binary_data_size": len(binary)}}],
                         "outputs": [{"name": "kept", "parameters": {"binary_data": True}}]})
    r = requests.post(server.url("/v2/models/text/infer"), data=header.encode() + binary,
                      headers={"Inference-Header-Content-Length": str(len(header))}, timeout=30)
    assert r.status_code == 200, r.text
    length = int(r.headers["Inference-Header-Content-Length"])
    meta = json.loads(r.content[:length])["outputs"][0]
    assert meta["shape"] == [3]
    assert r.content[length:] == bytes_elements([b"", b"X" * 300, b"FOX"])
    # A length that runs past the data, and a number where text belongs: 400 naming the input.
    bad = binary[:-1]
    header = json.dumps({"inputs": [{"name": "words", "datatype": "BYTES", "shape": [4],
                                     "parameters": {"binary_data_size": len(bad)}}]})
    r = requests.post(server.url("/v2/models/text/infer"), data=header.encode() + bad,
                      headers={"Inference-Header-Content-Length": str(len(header))}, timeout=30)
    assert r.status_code == 400 and "'words'" in r.json()["error"], r.text
    r = requests.post(server.url("/v2/models/text/infer"), timeout=30, json={
        "inputs": [{"name": "words", "datatype": "BYTES", "shape": [2], "data": ["a", 3]}]})
    assert r.status_code == 400 and "is not a string" in r.json()["error"], r.text
    # Text for a number input: the datatype does not match the model's.
    r = requests.post(server.url("/v2/models/add/infer"), timeout=30, json={
        "inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": ["1"]}]})
    assert r.status_code == 400 and "'x'" in r.json()["error"], r.text


@pytest.mark.parametrize("body,fragment", [
    (b"{", "not valid JSON"),
    (json.dumps({"inputs": [{"name": "x", "datatype": "BOOL", "shape": [1, WIDTH],
                             "data": [True] * WIDTH}]}).encode(), "'x'"),
    (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3],
                             "data": [1, 2, 3]}]}).encode(), "'x'"),
    (json.dumps({"inputs": [{"name": "w", "datatype": "FP32", "shape": [1],
                             "data": [1]}]}).encode(), "'w'"),
    (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, WIDTH],
                             "data": [1] * WIDTH}], "outputs": [{"name": "q"}]}).encode(), "'q'"),
    (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, WIDTH],
                             "data": [1] * 3}]}).encode(), "needs 16"),
    (b"[" * 1000, "nests deeper"),
    (b"x" * (2 << 20), "larger than the limit"),
])
def test_bad_requests_get_400_naming_the_field(server, body, fragment):
    r = requests.post(server.url("/v2/models/add/infer"), data=body, timeout=30)
    assert r.status_code == 400, r.text
    assert fragment in r.json()["error"]


def test_routes_and_methods(server):
    assert requests.post(server.url("/v2/models/nope/infer"), json={}, timeout=10).status_code == 404
    assert requests.get(server.url("/v2/models/add/infer"), timeout=10).status_code == 405
    assert requests.get(server.url("/nothing"), timeout=10).status_code == 404
    assert requests.get(server.url("/v2/models/add/versions/7"), timeout=10).status_code == 404


def test_statistics_and_metrics(server):
    before = requests.get(server.url("/v2/models/add/versions/1/stats"), timeout=10).json()
    x = np.ones((3, WIDTH), dtype=np.float32)
    for _ in range(5):
        r = requests.post(server.url("/v2/models/add/versions/1/infer"), json=infer_body(x),
                          timeout=30)
        assert r.status_code == 200
    after = requests.get(server.url("/v2/models/add/versions/1/stats"), timeout=10).json()
    s0, s1 = before["model_stats"][0], after["model_stats"][0]
    assert s1["inference_stats"]["success"]["count"] - s0["inference_stats"]["success"]["count"] == 5
    assert s1["inference_count"] - s0["inference_count"] == 15
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert s1["inference_stats"][key]["count"] >= 5, key
    assert s1["inference_stats"]["compute_infer"]["ns"] > 0
    text = requests.get(f"http://127.0.0.1:{server.ports['metrics_port']}/metrics", timeout=10).text
    m = re.search(r'troupe_inference_request_success\{model="add",version="1"\} (\d+)', text)
    assert m and int(m.group(1)) == s1["inference_stats"]["success"]["count"], text[:2000]
    def metric(name, **labels):
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None
    assert metric("troupe_inference_request_failure", model="add", version="2",
                  reason="bad_request") > 0
    assert metric("troupe_pipeline_stage_busy_us", model="add", version="1", stage="execute") > 0
    assert "troupe_inference_pending_request_count" in text


def test_repository_index_load_unload(server):
    index = requests.post(server.url("/v2/repository/index"), timeout=10).json()
    states = {(r["name"], r.get("version")): r["state"] for r in index}
    assert states[("add", "1")] == "READY" and states[("broken", None)] == "UNAVAILABLE"
    assert requests.post(server.url("/v2/repository/models/other/unload"), timeout=60).status_code == 200
    assert requests.get(server.url("/v2/models/other/ready"), timeout=10).status_code == 503
    assert requests.post(server.url("/v2/repository/models/other/load"), timeout=60).status_code == 200
    assert requests.get(server.url("/v2/models/other/ready"), timeout=10).status_code == 200
    r = requests.post(server.url("/v2/repository/models/broken/load"), timeout=60)
    assert r.status_code == 400 and "failed to load" in r.json()["error"]
    assert requests.post(server.url("/v2/repository/models/zzz/load"), timeout=60).status_code == 404


def test_hundreds_of_connections_get_their_own_outputs_while_a_model_reloads(server):
    connections, per_connection = 200, 3
    stop = threading.Event()
    reloads = []

    def reload_other():
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline and len(reloads) < 50:
            for action in ("unload", "load"):
                r = requests.post(server.url(f"/v2/repository/models/other/{action}"), timeout=60)
                reloads.append(r.status_code)

    def client(k):
        with requests.Session() as session:
            for i in range(per_connection):
                x = np.full((1, WIDTH), k * 10 + i, dtype=np.float32) + np.arange(WIDTH, dtype=np.float32)
                body, headers = binary_request(x)
                r = session.post(server.url("/v2/models/add/versions/1/infer"), data=body,
                                 headers=headers, timeout=60)
                assert r.status_code == 200, r.text
                out = parse_binary(r)
                y, z = expected(x)
                assert np.array_equal(out["y"], y) and np.array_equal(out["z"], z)
        return True

    reloader = threading.Thread(target=reload_other)
    reloader.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=connections) as pool:
            results = list(pool.map(client, range(connections)))
    finally:
        stop.set()
        reloader.join(timeout=120)
    assert all(results) and len(results) == connections
    assert reloads and all(code == 200 for code in reloads)


def test_tls(repo, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    s = Server(tmp_path, ["-m", f"add={repo / 'add' / '1' / 'model.onnx'}", "--http-port", "0",
                          "--grpc-port", "-1", "--metrics-port", "-1", "--tls-cert", str(cert),
                          "--tls-key", str(key)])
    try:
        x = np.ones((1, WIDTH), dtype=np.float32)
        r = requests.post(s.url("/v2/models/add/infer", "https"), json=infer_body(x),
                          verify=str(cert), timeout=30)
        assert r.status_code == 200
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(s.url("/v2/health/live", "https"), verify=True, timeout=10)
    finally:
        assert s.stop() == 0, s.output()


def test_sigterm_under_load_answers_every_accepted_request(repo, tmp_path):
    s = Server(tmp_path, ["-m", f"add={repo / 'add' / '1' / 'model.onnx'}", "--http-port", "0",
                          "--grpc-port", "-1", "--metrics-port", "-1"])
    outcomes, lock = [], threading.Lock()
    deadline = time.monotonic() + 30

    def client(k):
        with requests.Session() as session:
            for i in range(2000):
                if time.monotonic() > deadline:
                    return
                x = np.full((1, WIDTH), k + i, dtype=np.float32)
                try:
                    r = session.post(s.url("/v2/models/add/infer"), json=infer_body(x), timeout=30)
                except requests.exceptions.ConnectionError:
                    with lock:
                        outcomes.append("refused")
                    return  # the server closed its listener: nothing more will be accepted
                if r.status_code == 200:
                    z = np.array(r.json()["outputs"][1]["data"], dtype=np.float32).reshape(1, WIDTH)
                    with lock:
                        outcomes.append("ok" if np.array_equal(z, expected(x)[1]) else "wrong")
                else:
                    with lock:
                        outcomes.append(r.status_code)
                    if r.status_code == 503:
                        return

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    code = s.stop()
    for t in threads:
        t.join(timeout=60)
    assert code == 0, s.output()
    assert outcomes.count("ok") > 0
    assert "wrong" not in outcomes
    assert set(outcomes) <= {"ok", "refused", 503}, outcomes
    assert "draining" in s.output() and "stopped" in s.output()


def test_sigterm_while_the_only_request_runs_still_answers_it(tmp_path):
    """SIGTERM while one long request is the server's only work: the listener closes, and no
    socket operation is pending while the model runs. The answer must still be written (the HTTP
    threads used to run out of work and exit, so it never was, and shutdown waited 60 s), and the
    server exits 0."""
    write_identity_chain_model(tmp_path / "chain.onnx")
    s = Server(tmp_path, ["-m", f"chain={tmp_path / 'chain.onnx'}", "--http-port", "0",
                          "--grpc-port", "-1", "--metrics-port", "-1", "--max-body-mb", "16",
                          "-p", "NUM_STREAMS=1"])
    x = np.random.default_rng(17).uniform(-2, 2, (1, 256, 1024)).astype(np.float32)
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]})
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(
            requests.post, s.url("/v2/models/chain/infer"), data=header.encode() + x.tobytes(),
            headers={"Inference-Header-Content-Length": str(len(header))}, timeout=60)
        time.sleep(0.3)  # the request is read and runs (0.5-2 s on the CPUs CI meets)
        assert not pending.done()
        t0 = time.monotonic()
        code = s.stop()
        r = pending.result()
    assert code == 0, s.output()
    assert time.monotonic() - t0 < 30, "shutdown waited for its timeout"
    assert r.status_code == 200, r.text
    length = int(r.headers["Inference-Header-Content-Length"])
    y = np.frombuffer(r.content[length:], dtype="<f4").reshape(x.shape)
    assert y.tobytes() == x.tobytes()


def test_readme_curl_examples(tmp_path):
    """The README's serving examples run, as written, against a server on the default model."""
    s = Server(tmp_path, ["--http-port", "0", "--grpc-port", "-1", "--metrics-port", "-1"])
    try:
        readme = (ROOT / "README.md").read_text()
        block = readme.split("<!-- serve-examples")[1].split("```sh\n")[1].split("```")[0]
        assert block.count("curl ") >= 5
        script = ("set -euo pipefail\n"
                  'curl() { command curl --fail-with-body -sS --max-time 60 "$@"; echo; }\n'
                  + block.replace("localhost:8000", f"127.0.0.1:{s.ports['http_port']}"))
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert '"model_name":"default"' in out.stdout and '"probabilities"' in out.stdout
    finally:
        assert s.stop() == 0, s.output()


def test_scheduling_config_priorities_queue_full_and_timeouts(tmp_path):
    """A served model's config.json takes the scheduler's settings. With a 2 s batch delay two
    requests wait in the queue, so a third is refused at once with 503 'queue full'; a request
    timeout shorter than the delay fails with 503 before it runs; a priority beyond the model's
    levels is a 400 naming it. The waiting requests are still answered, bit-exact."""
    root = tmp_path / "repo"
    write_add_model(root / "sched" / "1" / "model.onnx")
    (root / "sched" / "config.json").write_text(json.dumps({
        "max_batch_size": 8, "max_queue_delay_microseconds": 2_000_000, "max_queue_size": 2,
        "adaptive_batch_size": False, "priority_levels": 2, "allow_timeout_override": True, "NUM_STREAMS": 1}))
    s = Server(tmp_path, ["--model-repository", str(root), "--http-port", "0",
                          "--grpc-port", "-1", "--metrics-port", "-1"])
    try:
        url = s.url("/v2/models/sched/infer")
        xs = [np.full((1, WIDTH), i, dtype=np.float32) for i in range(3)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            waiting = [pool.submit(requests.post, url, json=infer_body(x, parameters={"priority": 1}),
                                   timeout=30) for x in xs[:2]]
            time.sleep(0.5)  # both reach the scheduler's queue and wait for the 2 s delay
            assert not any(f.done() for f in waiting)
            t0 = time.monotonic()
            # max_queue_size holds per priority level: the third asks for the same level.
            full = requests.post(url, json=infer_body(xs[2], parameters={"priority": 1}),
                                 timeout=30)
            assert full.status_code == 503, full.text
            assert "queue full" in full.json()["error"]
            assert time.monotonic() - t0 < 1.5, "refused only after the batch delay"
            for x, f in zip(xs[:2], waiting):
                r = f.result()
                assert r.status_code == 200, r.text
                y = np.array(r.json()["outputs"][0]["data"], dtype=np.float32).reshape(1, WIDTH)
                np.testing.assert_array_equal(y, expected(x)[0])
        t0 = time.monotonic()
        late = requests.post(url, json=infer_body(xs[0], parameters={"timeout": 100_000}),
                             timeout=30)
        assert late.status_code == 503, late.text
        assert "timed out" in late.json()["error"]
        assert time.monotonic() - t0 < 1.5
        bad = requests.post(url, json=infer_body(xs[0], parameters={"priority": 3}), timeout=10)
        assert bad.status_code == 400 and "priority 3" in bad.json()["error"], bad.text
        bad = requests.post(url, json=infer_body(xs[0], parameters={"priority": -1}), timeout=10)
        assert bad.status_code == 400 and "priority" in bad.json()["error"], bad.text
    finally:
        assert s.stop() == 0, s.output()


def test_scheduling_config_priority_queue_policy_per_level(tmp_path):
    """config.json's priority_queue_policy (a JSON object, Triton's map) gives a level its own
    queue policy: level 2 holds one waiting request and refuses the next with 503, while level 1,
    under the default policy, keeps accepting. Every accepted request is answered, bit-exact."""
    root = tmp_path / "repo"
    write_add_model(root / "levels" / "1" / "model.onnx")
    (root / "levels" / "config.json").write_text(json.dumps({
        "max_batch_size": 8, "max_queue_delay_microseconds": 1_500_000, "priority_levels": 2,
        "adaptive_batch_size": False,
        "priority_queue_policy": {"2": {"max_queue_size": 1}}, "NUM_STREAMS": 1}))
    s = Server(tmp_path, ["--model-repository", str(root), "--http-port", "0",
                          "--grpc-port", "-1", "--metrics-port", "-1"])
    try:
        url = s.url("/v2/models/levels/infer")
        xs = [np.full((1, WIDTH), i, dtype=np.float32) for i in range(4)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            low = pool.submit(requests.post, url,
                              json=infer_body(xs[0], parameters={"priority": 2}), timeout=30)
            high = [pool.submit(requests.post, url,
                                json=infer_body(x, parameters={"priority": 1}), timeout=30)
                    for x in xs[1:3]]
            time.sleep(0.5)  # all three wait in the scheduler's queue for the batch delay
            assert not low.done() and not any(f.done() for f in high)
            full = requests.post(url, json=infer_body(xs[3], parameters={"priority": 2}),
                                 timeout=30)
            assert full.status_code == 503, full.text
            assert "queue full" in full.json()["error"] and "level 2" in full.json()["error"]
            for x, f in zip(xs, [low] + high):
                r = f.result()
                assert r.status_code == 200, r.text
                y = np.array(r.json()["outputs"][0]["data"], dtype=np.float32).reshape(1, WIDTH)
                np.testing.assert_array_equal(y, expected(x)[0])
    finally:
        assert s.stop() == 0, s.output()
