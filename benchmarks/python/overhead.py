#!/usr/bin/python3
"""What the Python module costs over the C++ API, on a tiny MLP (export_models.py's reduced `mlp`,
256 -> 512 -> 512 -> 10, batch 1).

  latency:    Python InferRequest.infer p50 (a loop of synchronous runs, hint LATENCY) minus the
              p50 of C++ InferRequest::infer() on the same request, timed in C++ with no Python
              in between (InferRequest._time_cpp_infer); blocks of 200 runs alternate between
              the two so that load from elsewhere hits both alike. Goal <= 10 us. The p50 of
              `troupe bench --hint latency --nireq 1` (start_async + callback) is shown too.
  throughput: AsyncInferQueue(compiled, jobs=0) requests/s (hint THROUGHPUT) over
              `troupe bench --hint throughput` on the same model. Goal >= 0.9.

Rounds alternate Python and C++ so that load from elsewhere hits both alike; the medians over the
rounds of each round's difference and ratio are reported. Not a test: run it by hand.

Usage: PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/overhead.py \
         [--troupe build/bin/troupe] [--seconds 5] [--rounds 3] [--json FILE]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import troupe

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cpp_bench(binary, model, hint, seconds, workdir):
    report = pathlib.Path(workdir) / f"bench_{hint}.json"
    cmd = [binary, "bench", "-m", str(model), "--hint", hint, "-t", str(seconds), "--report",
           "json", str(report)]
    if hint == "latency":
        cmd += ["--nireq", "1"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    results = json.loads(report.read_text())["results"]
    return results["latency_ms"]["median"] * 1000.0, results["throughput_fps"]


def infer_latency(core, model, seconds):
    """(Python p50, C++ p50) in microseconds of infer() on one request, interleaved in blocks."""
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    inputs = {"input": x}
    for _ in range(200):
        request.infer(inputs)
    python_ns, cpp_ns = [], []
    clock = time.perf_counter_ns
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(200):
            t0 = clock()
            request.infer(inputs)
            python_ns.append(clock() - t0)
        cpp_ns += request._time_cpp_infer(200)
    return statistics.median(python_ns) / 1000.0, statistics.median(cpp_ns) / 1000.0


def python_throughput(core, model, seconds):
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    queue = troupe.AsyncInferQueue(compiled)
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    inputs = {"input": x}
    for _ in range(len(queue) * 4):
        queue.start_async(inputs)
    queue.wait_all()
    count = 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        for _ in range(100):
            queue.start_async(inputs)
        count += 100
    queue.wait_all()
    return count / (time.monotonic() - start), len(queue)


def cpu_name():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--troupe", default=str(ROOT / "build/bin/troupe"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()
    # One wait policy for the CLI and the binding compared with it (both inherit this).
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")

    with tempfile.TemporaryDirectory() as workdir:
        subprocess.run([sys.executable, str(ROOT / "benchmarks/models/export_models.py"), workdir,
                        "--only", "mlp", "--reduced"], check=True, stdout=subprocess.DEVNULL)
        model = pathlib.Path(workdir) / "mlp.onnx"
        core = troupe.Core()
        rows = []
        for r in range(args.rounds):
            py_p50, cpp_p50 = infer_latency(core, str(model), args.seconds)
            bench_p50, _ = cpp_bench(args.troupe, model, "latency", args.seconds, workdir)
            py_fps, jobs = python_throughput(core, str(model), args.seconds)
            _, cpp_fps = cpp_bench(args.troupe, model, "throughput", args.seconds, workdir)
            rows.append((py_p50, cpp_p50, py_fps, cpp_fps, bench_p50))
            print(f"round {r + 1}: infer p50 Python {py_p50:.1f} us, C++ {cpp_p50:.1f} us "
                  f"(+{py_p50 - cpp_p50:.1f} us; troupe bench latency p50 {bench_p50:.1f} us); "
                  f"throughput AsyncInferQueue({jobs} jobs) {py_fps:.0f}/s, troupe bench "
                  f"{cpp_fps:.0f}/s ({py_fps / cpp_fps:.2f})", flush=True)

    # Medians over the rounds of each round's difference and ratio (Python and C++ of one round
    # ran under the same load), and of the raw numbers for context.
    med = [statistics.median(col) for col in zip(*rows)]
    overhead = statistics.median(py - cpp for py, cpp, *_ in rows)
    ratio = statistics.median(py_fps / cpp_fps for _, _, py_fps, cpp_fps, _ in rows)
    summary = {
        "cpu": cpu_name(),
        "overhead_p50_us": overhead, "throughput_ratio": ratio,
        "python_infer_p50_us": med[0], "cpp_infer_p50_us": med[1],
        "troupe_bench_latency_p50_us": med[4],
        "async_queue_fps": med[2], "troupe_bench_fps": med[3],
        "rounds": args.rounds, "seconds": args.seconds,
    }
    print(f"\nCPU: {summary['cpu']}")
    print(f"per-request overhead, Python infer p50 - C++ infer p50 (median of rounds): "
          f"{overhead:.1f} us (goal <= 10 us; medians: Python {med[0]:.1f} us, C++ {med[1]:.1f} "
          f"us, troupe bench latency p50 {med[4]:.1f} us)")
    print(f"AsyncInferQueue / troupe bench (median of rounds): {ratio:.2f} (goal >= 0.9; "
          f"medians: {med[2]:.0f} vs {med[3]:.0f} requests/s)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
