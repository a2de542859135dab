#!/usr/bin/python3
"""Compiled blobs across instruction sets, with oneDNN's ONEDNN_MAX_CPU_ISA standing in for a
smaller CPU (troupe follows the same cap: kernels/cpu_isa.hpp).

For every model NAME in MODELS_DIR (export_models.py's layout):
  1. compiled with the ISA capped at avx2, the blob runs on this machine uncapped and matches
     torch's output (a blob made for a smaller CPU runs on a larger one);
  2. compiled uncapped, the blob is refused under a lower cap with an error naming the missing
     capability: under avx2 naming AVX512 on an AVX-512 machine, under sse41 naming AVX2 on an
     AVX2 one.

Usage: check_blob_isa.py TROUPE_BINARY MODELS_DIR WORK_DIR [--only NAME ...]
Prints "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import os
import subprocess
import sys

import numpy as np


def run(troupe, args, cap=None):
    env = dict(os.environ)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    env.pop("DNNL_MAX_CPU_ISA", None)
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    return subprocess.run([troupe] + args, capture_output=True, text=True, env=env)


def capabilities(troupe, cap=None):
    info = run(troupe, ["info"], cap).stdout
    return next((line.split()[1:] for line in info.splitlines()
                 if line.startswith("OPTIMIZATION_CAPABILITIES")), [])


def run_blob(troupe, blob, name, models_dir, out_dir, cap=None):
    inputs_dir = os.path.join(models_dir, name, "inputs")
    command = ["run", "-m", blob, "--output-dir", out_dir]
    for f in sorted(os.listdir(inputs_dir)):
        command += ["--input", f"{f[:-4]}={os.path.join(inputs_dir, f)}"]
    return run(troupe, command, cap)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("troupe")
    parser.add_argument("models_dir")
    parser.add_argument("work_dir")
    parser.add_argument("--only", nargs="+", metavar="NAME")
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    names = args.only or sorted(f[:-5] for f in os.listdir(args.models_dir) if f.endswith(".onnx"))
    caps = capabilities(args.troupe)
    # The capability the uncapped blob needs and a cap below it.
    needed, lower_cap = ("AVX512", "avx2") if "AVX512" in caps else ("AVX2", "sse41")
    passed = failed = 0

    def report(ok, what):
        nonlocal passed, failed
        print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
        passed, failed = passed + ok, failed + (not ok)

    for name in names:
        model = os.path.join(args.models_dir, name + ".onnx")
        capped_blob = os.path.join(args.work_dir, name + ".avx2.blob")
        r = run(args.troupe, ["compile", "-m", model, "-o", capped_blob], cap="avx2")
        if r.returncode != 0:
            report(False, f"{name}: compile under the avx2 cap failed: {r.stderr.strip()}")
            continue
        out = os.path.join(args.work_dir, name + ".avx2.out")
        r = run_blob(args.troupe, capped_blob, name, args.models_dir, out)
        if r.returncode != 0:
            report(False, f"{name}: the avx2 blob did not run uncapped: {r.stderr.strip()}")
        else:
            expected = np.load(os.path.join(args.models_dir, name, "expected", "output.npy"))
            got = np.load(os.path.join(out, "output.npy"))
            err = float(np.max(np.abs(got - expected)))
            bound = 1e-4 * float(np.max(np.abs(expected))) + 1e-6
            report(err <= bound, f"{name}: avx2 blob run uncapped, max abs err {err:.3e} "
                                 f"(bound {bound:.3e})")

        blob = os.path.join(args.work_dir, name + ".blob")
        r = run(args.troupe, ["compile", "-m", model, "-o", blob])
        needs = next((l for l in r.stdout.splitlines() if l.startswith("needs")), "")
        if r.returncode != 0 or needed not in needs:
            report(False, f"{name}: uncapped compile should need {needed}, printed '{needs}' "
                          f"{r.stderr.strip()}")
            continue
        r = run_blob(args.troupe, blob, name, args.models_dir,
                     os.path.join(args.work_dir, name + ".refused"), cap=lower_cap)
        report(r.returncode != 0 and needed in r.stderr,
               f"{name}: the uncapped blob under the {lower_cap} cap is refused naming {needed}: "
               f"{r.stderr.strip()[:240]}")

    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
