// ONNX Runtime (CPU, Node binding) on an ONNX model, measured like `troupe bench`: one JSON object
// on stdout with FPS and latency figures (ms). Used by compare_models.sh; see its header.
//
// Usage: node ort_bench.js --model M.onnx --config NAME [--seconds S] [--shapes JSON]
//                         [--spinning 0|1]
//        node ort_bench.js --model M.onnx --check DIR   (run DIR/inputs/*.npy once and compare
//                                                        with DIR/expected/*.npy)
// Configurations (2 cores, 2 compute threads in total):
//   intra2       one session, intraOpNumThreads=2, one request at a time (each run awaited)
//   intra2_x2    one session, intraOpNumThreads=2, two runs kept in flight. The Node binding
//                calls the synchronous Run on the JS thread, so this is serial: kept to show it.
//   sessions2x1  two sessions of intraOpNumThreads=1, each in its own worker thread, each running
//                one request at a time: two requests really in flight
//   baseline     no session: the process's own memory (Node and the binding loaded), which
//                compare_memory.sh subtracts
// Every result carries the process's peak RSS (peak_rss_bytes).
// Inputs are troupe bench's: the same deterministic values (request k of troupe = seed k here),
// with the shapes from --shapes (name -> dims), else the model's with dynamic dimensions set to 1.
// Needs onnxruntime-node on NODE_PATH (compare_models.sh installs it into the build tree).
'use strict';
const fs = require('fs');
const path = require('path');
const {Worker, isMainThread, parentPort, workerData} = require('worker_threads');
const ort = require('onnxruntime-node');

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function parseArgs(argv) {
  const args = {seconds: 5, shapes: '{}'};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (i + 1 >= argv.length) throw new Error(`option --${key} needs a value`);
    args[key] = argv[i + 1];
  }
  if (!args.model) throw new Error('--model is required');
  args.seconds = Number(args.seconds);
  args.shapes = JSON.parse(args.shapes);
  return args;
}

function sessionOptions(args, threads) {
  const options = {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  // ORT's intra-op pool spins between ops by default; --spinning 0 makes its threads block.
  if (args.spinning !== undefined)
    options.extra = {session: {intra_op: {allow_spinning: String(args.spinning)}}};
  return options;
}

// troupe bench's make_input (apps/bench_command.cpp): an LCG over uint32, values in [0, 1) for
// floating inputs, floor(10 u) (computed in float, as there) for integer ones.
function troupeValues(count, seed, integral) {
  const out = new Float64Array(count);
  let state = (Math.imul(seed, 2654435761) + 1) >>> 0;
  for (let i = 0; i < count; ++i) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    const u = (state >>> 8) / 16777216;
    out[i] = integral ? Math.floor(Math.fround(u * 10)) : u;
  }
  return out;
}

function makeTensor(type, dims, seed) {
  const count = dims.reduce((a, b) => a * b, 1);
  switch (type) {
    case 'float32':
      return new ort.Tensor(type, Float32Array.from(troupeValues(count, seed, false)), dims);
    case 'float64':
      return new ort.Tensor(type, Float64Array.from(troupeValues(count, seed, false)), dims);
    case 'int64':
      return new ort.Tensor(
          type, BigInt64Array.from(troupeValues(count, seed, true), (v) => BigInt(v)), dims);
    case 'int32':
      return new ort.Tensor(type, Int32Array.from(troupeValues(count, seed, true)), dims);
    case 'bool':  // troupe bench: the small integers, != 0
      return new ort.Tensor(
          type, Uint8Array.from(troupeValues(count, seed, true), (v) => (v !== 0 ? 1 : 0)), dims);
    default:
      throw new Error(`input type ${type} is not supported by ort_bench.js`);
  }
}

function makeFeeds(session, shapes, seed) {
  const feeds = {};
  for (const meta of session.inputMetadata) {
    const dims = shapes[meta.name] ||
        meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : 1));
    feeds[meta.name] = makeTensor(meta.type, dims, seed);
  }
  return feeds;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank), hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

function summarize(latencies, count, elapsedMs) {
  const sorted = Float64Array.from(latencies).sort();
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(sorted.length, 1);
  return {
    count,
    duration_s: elapsedMs / 1e3,
    throughput_fps: count / (elapsedMs / 1e3),
    latency_ms: {
      median: percentile(sorted, 50),
      average: mean,
      min: sorted[0] || 0,
      max: sorted[sorted.length - 1] || 0,
      p90: percentile(sorted, 90),
    },
  };
}

const WARMUP_RUNS = 3;

// `inFlight` runs kept going on one session until the deadline; latency = await time of each.
async function runLoop(session, feedsList, endMs) {
  const latencies = [];
  await Promise.all(feedsList.map(async (feeds) => {
    while (nowMs() < endMs) {
      const t0 = nowMs();
      await session.run(feeds);
      latencies.push(nowMs() - t0);
    }
  }));
  return latencies;
}

async function singleSession(args, inFlight) {
  const session = await ort.InferenceSession.create(args.model, sessionOptions(args, 2));
  const feedsList = Array.from({length: inFlight}, (_, k) => makeFeeds(session, args.shapes, k));
  for (let i = 0; i < WARMUP_RUNS; ++i) await session.run(feedsList[0]);
  const start = nowMs();
  const latencies = await runLoop(session, feedsList, start + args.seconds * 1e3);
  return summarize(latencies, latencies.length, nowMs() - start);
}

// Two workers, each with its own single-threaded session; both start on the main thread's signal.
async function twoSessions(args) {
  const workers = [0, 1].map((k) => new Worker(__filename, {workerData: {args, seed: k}}));
  const message = (w) => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await Promise.all(workers.map(message));  // sessions created and warmed up
  const start = nowMs();
  const results = workers.map(message);
  for (const w of workers) w.postMessage({endMs: start + args.seconds * 1e3});
  const done = await Promise.all(results);
  const elapsed = nowMs() - start;
  for (const w of workers) await w.terminate();
  const latencies = [].concat(...done.map((d) => d.latencies));
  return summarize(latencies, latencies.length, elapsed);
}

async function workerMain() {
  const {args, seed} = workerData;
  const session = await ort.InferenceSession.create(args.model, sessionOptions(args, 1));
  const feeds = makeFeeds(session, args.shapes, seed);
  for (let i = 0; i < WARMUP_RUNS; ++i) await session.run(feeds);
  parentPort.postMessage('ready');
  const {endMs} = await new Promise((resolve) => parentPort.once('message', resolve));
  // hrtime is per process, so the main thread's deadline holds here too.
  parentPort.postMessage({latencies: await runLoop(session, [feeds], endMs)});
}

// Minimal .npy reader (little-endian; C order, or Fortran order rearranged into it): enough for the
// exported inputs and outputs.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not an .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const dataStart = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, dataStart);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim())
                   .map(Number);
  const bytes = buf.buffer.slice(buf.byteOffset + dataStart, buf.byteOffset + buf.length);
  const kinds = {'<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
                 '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
                 '|b1': ['bool', Uint8Array]};
  if (!kinds[descr]) throw new Error(`${file}: dtype ${descr} is not supported`);
  const [type, Array_] = kinds[descr];
  const data = new Array_(bytes);
  if (!fortran || dims.length < 2) return new ort.Tensor(type, data, dims);
  // Element (i0, ..., ik) sits at i0 + d0 (i1 + d1 (...)) in Fortran order.
  const ordered = new Array_(data.length);
  const index = new Array(dims.length).fill(0);
  for (let c = 0; c < data.length; ++c) {
    let f = 0;
    for (let k = dims.length - 1; k >= 0; --k) f = f * dims[k] + index[k];
    ordered[c] = data[f];
    for (let k = dims.length - 1; k >= 0; --k) {
      if (++index[k] < dims[k]) break;
      index[k] = 0;
    }
  }
  return new ort.Tensor(type, ordered, dims);
}

async function check(args) {
  const session = await ort.InferenceSession.create(args.model, sessionOptions(args, 2));
  const feeds = {};
  for (const name of session.inputNames)
    feeds[name] = readNpy(path.join(args.check, 'inputs', `${name}.npy`));
  const outputs = await session.run(feeds);
  const report = {};
  for (const name of session.outputNames) {
    const file = path.join(args.check, 'expected', `${name}.npy`);
    if (!fs.existsSync(file)) continue;
    const want = readNpy(file).data, got = outputs[name].data;
    let maxAbs = 0, maxRef = 0;
    for (let i = 0; i < want.length; ++i) {
      maxAbs = Math.max(maxAbs, Math.abs(Number(got[i]) - Number(want[i])));
      maxRef = Math.max(maxRef, Math.abs(Number(want[i])));
    }
    report[name] = {elements: want.length, size_matches: want.length === got.length,
                    max_abs_diff: maxAbs, max_abs_expected: maxRef};
  }
  return report;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const version = require('onnxruntime-node/package.json').version;
  if (args.check) {
    console.log(JSON.stringify({engine: 'onnxruntime-node', version, check: await check(args)}));
    return;
  }
  const runners = {
    intra2: () => singleSession(args, 1),
    intra2_x2: () => singleSession(args, 2),
    sessions2x1: () => twoSessions(args),
    // Node with onnxruntime-node loaded and no session: what the process costs before any model.
    baseline: async () => ({}),
  };
  if (!runners[args.config]) throw new Error(`unknown --config ${args.config}`);
  const results = await runners[args.config]();
  // The whole process's peak resident set (worker threads included), as troupe bench reports it.
  results.peak_rss_bytes = process.resourceUsage().maxRSS * 1024;
  console.log(JSON.stringify({engine: 'onnxruntime-node', version, config: args.config,
                              seconds: args.seconds, results}));
}

if (isMainThread) {
  main().catch((e) => {
    console.error(`ort_bench.js: ${e.stack || e}`);
    process.exit(1);
  });
} else {
  workerMain().catch((e) => {
    console.error(`ort_bench.js worker: ${e.stack || e}`);
    process.exit(1);
  });
}
