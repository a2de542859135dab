"""`cmake --install` puts a package that imports and runs from the install prefix alone."""
import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = """
import numpy as np, troupe
assert troupe.__file__.startswith({prefix!r}), troupe.__file__
b = troupe.ModelBuilder("m")
x = b.input("x", troupe.Type.f32, [1, 2])
b.output(b.op("Relu", [x]), "y")
print(troupe.Core().compile_model(b.build())({{"x": np.array([[-1.0, 2.0]], np.float32)}})["y"])
"""


def test_installed_package_imports(tmp_path):
    build_dir = os.environ.get("TROUPE_BINARY_DIR")
    if not build_dir:
        pytest.skip("TROUPE_BINARY_DIR (the build tree) is not set; ctest sets it")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build_dir, "--prefix", str(prefix)], check=True,
                   stdout=subprocess.DEVNULL)
    package_dir = prefix / "lib/python3/dist-packages"
    assert (package_dir / "troupe/__init__.pyi").is_file()
    assert (package_dir / "troupe/py.typed").is_file()
    env = dict(os.environ, PYTHONPATH=str(package_dir))
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(prefix=str(prefix))],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "[[0. 2.]]" in result.stdout
