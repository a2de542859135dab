"""Concurrency: the GIL is released around infer and wait, callbacks take it back, a raising
callback breaks nothing, many Python threads x async requests equal the C++ path bit for bit,
and destruction in any order (also at interpreter exit) neither hangs nor crashes."""
import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import troupe

from conftest import mlp_model


def big_mlp():
    # Large enough (~2 ms a run) that overlapping runs show whether the GIL was released.
    return mlp_model(inputs=512, hidden=1024, outputs=16, batch=32)


def test_gil_released_during_infer(core):
    compiled = core.compile_model(big_mlp())
    request = compiled.create_infer_request()
    x = np.ones((32, 512), np.float32)
    stop = threading.Event()
    ticks = [0]

    def spin():  # counts while the main thread is inside infer()
        while not stop.is_set():
            ticks[0] += 1

    thread = threading.Thread(target=spin)
    thread.start()
    start = time.monotonic()
    runs = 0
    # At least 6 runs however slow a loaded machine makes them (the suite's first seconds
    # export models beside this test): a time bound alone once allowed only 5.
    while time.monotonic() - start < 0.5 or runs <= 5:
        request.infer({"x": x})
        runs += 1
    stop.set()
    thread.join()
    # With the GIL held across infer the spinner would only run between calls (switch interval
    # 5 ms > a run): it would count far less.
    assert ticks[0] > 1000 and runs > 5


def test_raising_callback_is_reported_and_others_complete(mlp, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: reported.append(info))
    requests = [mlp.create_infer_request() for _ in range(8)]
    done = []
    for i, r in enumerate(requests):
        if i % 2:
            r.set_callback(lambda data: (_ for _ in ()).throw(ValueError(f"bad {data}")), i)
        else:
            r.set_callback(lambda data: done.append(data), i)
    x = np.ones((1, 16), np.float32)
    for r in requests:
        r.start_async({"x": x})
    for r in requests:
        r.wait()  # the request itself succeeded
        np.testing.assert_array_equal(r.results["y"], mlp(x)["y"])
    assert sorted(done) == [0, 2, 4, 6]
    assert len(reported) == 4
    assert all(isinstance(info.exc_value, ValueError) for info in reported)
    assert {str(info.exc_value) for info in reported} == {"bad 1", "bad 3", "bad 5", "bad 7"}
    assert "callback" in str(reported[0].err_msg or reported[0].object)


def test_infer_does_not_call_the_callback_start_async_does(mlp):
    # As in OpenVINO: the callback is for runs started by start_async.
    request = mlp.create_infer_request()
    calls = []
    request.set_callback(lambda data: calls.append(data), "tag")
    x = np.ones((1, 16), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(request.infer({"x": x})["y"], mlp(x)["y"])
    assert calls == []
    request.start_async({"x": x})
    request.wait()
    assert calls == ["tag"]


def test_async_infer_queue(core):
    compiled = core.compile_model(mlp_model(batch=1))
    queue = troupe.AsyncInferQueue(compiled)  # jobs=0: the optimal number of requests
    assert len(queue) == compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    assert len(troupe.AsyncInferQueue(compiled, 3)) == 3
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((1, 16)).astype(np.float32) for _ in range(64)]
    results = {}

    def on_done(request, userdata):
        results[userdata] = request.results["y"]

    queue.set_callback(on_done)
    for i, x in enumerate(xs):
        queue.start_async({"x": x}, userdata=i)
    queue.wait_all()
    assert queue.is_ready()
    assert sorted(results) == list(range(64))
    for i, x in enumerate(xs):
        np.testing.assert_array_equal(results[i], compiled({"x": x})["y"])
    assert all(isinstance(r, troupe.InferRequest) for r in queue)
    assert queue[0] is list(queue)[0]
    assert 0 <= queue.get_idle_request_id() < len(queue)
    assert len(queue.userdata) == len(queue)


def test_async_infer_queue_raising_callback_and_errors(core, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: reported.append(info))
    compiled = core.compile_model(mlp_model())
    queue = troupe.AsyncInferQueue(compiled, 4)
    seen = []

    def on_done(request, userdata):
        seen.append(userdata)
        if userdata % 3 == 0:
            raise RuntimeError(f"callback {userdata} failed")

    queue.set_callback(on_done)
    for i in range(30):
        queue.start_async({"x": np.ones((1, 16), np.float32)}, userdata=i)
    queue.wait_all()
    assert sorted(seen) == list(range(30))
    assert len(reported) == 10
    # A bad input fails when it is bound, naming the input; the queue stays usable.
    with pytest.raises(troupe.TensorMismatch, match="'x'"):
        queue.start_async({"x": np.ones((2, 16), np.float32)})
    queue.set_callback(None)
    for i in range(8):
        queue.start_async({"x": np.ones((1, 16), np.float32)})
    queue.wait_all()


def test_async_infer_queue_producers_waiting_on_a_full_buffer(core):
    """Three Python threads keep one queue's buffer full, so each waits (GIL released) for it to
    drain to half, again and again; every job runs once, its output equal to a direct call,
    and no producer is left waiting for a wake-up that never comes."""
    compiled = core.compile_model(mlp_model(batch=1), "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    queue = troupe.AsyncInferQueue(compiled, 2)  # a buffer of 16 jobs
    rng = np.random.default_rng(13)
    xs = [rng.standard_normal((1, 16)).astype(np.float32) for _ in range(8)]
    expected = [compiled({"x": x})["y"] for x in xs]
    seen = {}
    lock = threading.Lock()

    def on_done(request, userdata):
        with lock:
            seen[userdata] = np.array_equal(request.results["y"], expected[userdata[1] % 8])

    queue.set_callback(on_done)
    errors = []

    def producer(p):
        try:
            for i in range(300):
                queue.start_async({"x": xs[i % 8]}, userdata=(p, i))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a producer waits for ever"
    assert not errors, errors[:3]
    queue.wait_all()
    assert sorted(seen) == [(p, i) for p in range(3) for i in range(300)]
    assert all(seen.values()), "an output differs from a direct call"


def test_threads_times_async_requests_bit_exact_with_cpp(core, troupe_bin, tmp_path):
    """8 Python threads, each with 2 requests in flight, against `troupe run` (the C++ path)."""
    model = mlp_model(inputs=64, hidden=128, outputs=8, batch=4, seed=3)
    model_path = tmp_path / "mlp.troupe"
    troupe.save_model(model, model_path)
    rng = np.random.default_rng(12)
    inputs = [rng.standard_normal((4, 64)).astype(np.float32) for _ in range(4)]
    expected = []
    for i, x in enumerate(inputs):
        np.save(tmp_path / f"x{i}.npy", x)
        subprocess.run([troupe_bin, "run", "-m", str(model_path), "--input",
                        f"x={tmp_path / f'x{i}.npy'}", "-o", str(tmp_path / f"out{i}")],
                       check=True, stdout=subprocess.DEVNULL)
        expected.append(np.load(tmp_path / f"out{i}" / "y.npy"))

    compiled = core.compile_model(str(model_path), "CPU",
                                  {"PERFORMANCE_HINT": "THROUGHPUT"})
    errors = []

    def worker(seed):
        try:
            requests = [compiled.create_infer_request() for _ in range(2)]
            for step in range(60):
                picks = [(seed + step + k) % len(inputs) for k in range(2)]
                for r, p in zip(requests, picks):
                    r.start_async({"x": inputs[p]})
                for r, p in zip(requests, picks):
                    r.wait()
                    if not np.array_equal(r.results["y"], expected[p]):
                        errors.append(f"thread {seed} step {step}: output differs from C++")
                out = requests[0].infer({"x": inputs[seed % 4]}, share_outputs=True)["y"]
                if not np.array_equal(out, expected[seed % 4]):
                    errors.append(f"thread {seed} step {step}: infer differs from C++")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors[:5]


def test_destroyed_while_callbacks_may_fire():
    """Request, model and core dropped while runs are in flight with Python callbacks."""
    fired = []
    for _ in range(5):
        core = troupe.Core()
        compiled = core.compile_model(big_mlp())
        requests = [compiled.create_infer_request() for _ in range(4)]
        for r in requests:
            r.set_callback(lambda data: fired.append(data), "late")
            r.start_async({"x": np.ones((32, 512), np.float32)})
        queue = troupe.AsyncInferQueue(compiled, 2)
        queue.set_callback(lambda request, data: fired.append(data))
        queue.start_async({"x": np.ones((32, 512), np.float32)}, "queued")
        del requests, compiled, core, queue
        gc.collect()
    # Every run completed (or was cancelled) and its callback ran.
    deadline = time.monotonic() + 30
    while len(fired) < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(fired) == 25


SHUTDOWN_SCRIPT = r"""
import numpy as np, troupe, sys
sys.path.insert(0, {tests!r})
from conftest import mlp_model
core = troupe.Core()
compiled = core.compile_model(mlp_model(inputs=512, hidden=1024, outputs=16, batch=32))
keep = []
for i in range(6):
    r = compiled.create_infer_request()
    r.set_callback(lambda data: keep.append(np.ones(3)), i)
    r.start_async({{"x": np.ones((32, 512), np.float32)}})
    keep.append(r)
queue = troupe.AsyncInferQueue(compiled, 3)
queue.set_callback(lambda request, data: keep.append(request.results))
for i in range(3):
    queue.start_async({{"x": np.ones((32, 512), np.float32)}}, i)
print("exiting with requests in flight", flush=True)
"""


@pytest.mark.parametrize("round_", range(3))
def test_interpreter_exit_with_requests_in_flight(tmp_path, round_):
    script = SHUTDOWN_SCRIPT.format(tests=os.path.dirname(__file__))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "exiting" in result.stdout


def test_dropped_inside_own_callback(core):
    """The last reference to a queue or a compiled model dropped by their own callback."""
    compiled = core.compile_model(mlp_model())
    holder = {"queue": troupe.AsyncInferQueue(compiled, 2)}
    done = threading.Event()

    def on_done(request, userdata):
        holder.clear()
        done.set()

    holder["queue"].set_callback(on_done)
    holder["queue"].start_async({"x": np.ones((1, 16), np.float32)})
    assert done.wait(30), "the queue's destructor waited for its own callback"

    models = {"compiled": core.compile_model(mlp_model())}
    request = models["compiled"].create_infer_request()
    dropped = threading.Event()
    request.set_callback(lambda data: (models.clear(), dropped.set()))
    request.start_async({"x": np.ones((1, 16), np.float32)})
    assert dropped.wait(30)
    request.wait()
    np.testing.assert_array_equal(request.results["y"], compiled({"x": np.ones((1, 16),
                                                                         np.float32)})["y"])
