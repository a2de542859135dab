#!/usr/bin/python3
"""Independent reference for tests/apps/test_default_model.cpp.

Re-implements the default model's seeded weights (splitmix64, apps/default_model.cpp) and runs the
same CNN in float64 with plain numpy, printing the expected input values and output
probabilities. Run with Debian's /usr/bin/python3 (it has numpy).
"""
import numpy as np

MASK = (1 << 64) - 1


class Generator:
    def __init__(self, seed):
        self.state = seed

    def uniform01(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        return np.float32(z >> 40) / np.float32(1 << 24)

    def fill(self, shape, lo, hi):
        lo, hi = np.float32(lo), np.float32(hi)
        n = int(np.prod(shape))
        v = [lo + (hi - lo) * self.uniform01() for _ in range(n)]
        return np.array(v, dtype=np.float32).reshape(shape)


def he(gen, shape, fan_in):
    bound = np.sqrt(np.float32(6.0) / np.float32(fan_in)).astype(np.float32)
    return gen.fill(shape, -bound, bound)


def conv3x3_pad1(x, w, b):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for ky in range(3):
        for kx in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + h, kx:kx + wd], w[:, :, ky, kx])
    return out + b.reshape(1, -1, 1, 1)


def main():
    gen = Generator(2024)
    w1 = he(gen, (16, 3, 3, 3), 27)
    b1 = gen.fill((16,), -0.1, 0.1)
    w2 = he(gen, (32, 16, 3, 3), 144)
    b2 = gen.fill((32,), -0.1, 0.1)
    scale = gen.fill((32,), 0.8, 1.2)
    shift = gen.fill((32,), -0.1, 0.1)
    mean = gen.fill((32,), -0.2, 0.2)
    var = gen.fill((32,), 0.5, 1.5)
    wf = he(gen, (10, 32), 32)
    bf = gen.fill((10,), -0.1, 0.1)
    x = Generator(2025).fill((1, 3, 32, 32), 0.0, 1.0)

    c = lambda a: a.astype(np.float64).reshape(1, -1, 1, 1)
    y = np.maximum(conv3x3_pad1(x.astype(np.float64), w1.astype(np.float64), b1), 0)
    y = y.reshape(1, 16, 16, 2, 16, 2).max(axis=(3, 5))
    y = conv3x3_pad1(y, w2.astype(np.float64), b2)
    y = (y - c(mean)) / np.sqrt(c(var) + 1e-5) * c(scale) + c(shift)
    y = np.maximum(y, 0).mean(axis=(2, 3))
    y = y @ wf.astype(np.float64).T + bf
    e = np.exp(y - y.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)

    print("input[0..2]:", ", ".join(f"{v:.9g}f" for v in x.flatten()[:3]))
    print("conv1.weight[0..2]:", ", ".join(f"{v:.9g}f" for v in w1.flatten()[:3]))
    print("fc.bias[9]:", f"{bf[9]:.9g}f")
    print("probabilities:", ", ".join(f"{v:.7f}" for v in p.flatten().tolist()))


if __name__ == "__main__":
    main()
