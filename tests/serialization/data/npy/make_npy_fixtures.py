#!/usr/bin/python3
"""Writes the .npy files tests/serialization/test_npy_format.cpp reads, with numpy's own writer
(np.save / np.lib.format.write_array), so the reader is checked against headers numpy wrote.

Usage: /usr/bin/python3 tests/serialization/data/npy/make_npy_fixtures.py  (writes beside itself)
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def write(name, array, version=None):
    with open(os.path.join(here, name), "wb") as f:
        if version is None:
            np.save(f, array)
        else:
            np.lib.format.write_array(f, array, version=version)


write("f4_2x3.npy", (np.arange(6, dtype="<f4") * 0.5 - 1).reshape(2, 3))
write("i8_3.npy", np.array([-1, 0, 2**40], dtype="<i8"))
write("b1_4.npy", np.array([True, False, False, True]))
write("f2_3.npy", np.array([1.0, -2.5, 65504.0], dtype="<f2"))
write("u1_2x2_v2.npy", np.array([[1, 2], [3, 254]], dtype="u1"), version=(2, 0))
write("i4_scalar_v3.npy", np.array(-7, dtype="<i4"), version=(3, 0))
write("f8_0x3.npy", np.zeros((0, 3), dtype="<f8"))
write("f4_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
write("f4_big_endian.npy", np.arange(3, dtype=">f4"))
write("u2_3.npy", np.arange(3, dtype="<u2"))
write("c8_unsupported.npy", np.arange(3, dtype="<c8"))
