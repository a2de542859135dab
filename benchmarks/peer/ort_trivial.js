// ONNX Runtime (CPU, Node binding) on the trivial model of benchmarks/bench_pipeline.cpp, measured
// the same way: one request at a time (latency), then 1, 2, 4 and 8 requests in flight
// (requests/s). Usage: node ort_trivial.js MODEL.onnx [SECONDS_PER_CASE] [THREADS]
// Needs onnxruntime-node on NODE_PATH (see run_peer.sh, which installs it into the build tree).
'use strict';
const ort = require('onnxruntime-node');

async function main() {
  const modelPath = process.argv[2];
  const seconds = Number(process.argv[3] || 2);
  const threads = Number(process.argv[4] || 1);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const data = Float32Array.from({length: 16}, (_, i) => i - 8);
  const feeds = {x: new ort.Tensor('float32', data, [1, 16])};
  for (let i = 0; i < 200; ++i) await session.run(feeds);  // warm-up

  const now = () => Number(process.hrtime.bigint()) / 1e3;  // microseconds
  const results = [];

  // Latency: one request at a time, awaited before the next starts.
  {
    const lat = [];
    const end = now() + seconds * 1e6;
    while (now() < end) {
      const t0 = now();
      await session.run(feeds);
      lat.push(now() - t0);
    }
    lat.sort((a, b) => a - b);
    const mean = lat.reduce((a, b) => a + b, 0) / lat.length;
    results.push({name: 'ort_single_request_latency', us_per_request: mean,
                  median_us: lat[Math.floor(lat.length / 2)], requests_per_s: 1e6 / mean});
  }

  // Throughput: N requests kept in flight, each restarted as soon as it completes.
  for (const inFlight of [1, 2, 4, 8]) {
    let done = 0;
    const start = now();
    const end = start + seconds * 1e6;
    async function worker() {
      while (now() < end) {
        await session.run(feeds);
        ++done;
      }
    }
    await Promise.all(Array.from({length: inFlight}, worker));
    const elapsed = now() - start;
    results.push({name: `ort_requests_in_flight/${inFlight}`, us_per_request: elapsed / done,
                  requests_per_s: done / (elapsed / 1e6)});
  }

  console.log(`onnxruntime-node ${require('onnxruntime-node/package.json').version}, ` +
              `intraOpNumThreads=${threads}, ${seconds} s per case`);
  for (const r of results)
    console.log(`${r.name.padEnd(40)} ${r.us_per_request.toFixed(2).padStart(10)} us/request ` +
                `${r.requests_per_s.toFixed(0).padStart(10)} requests/s`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
