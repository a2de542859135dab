"""torchvision models end to end against torch (exported at test time with seeded random weights,
nothing downloaded), and the README's Python quickstart."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import troupe

from conftest import SOURCE_DIR


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_torchvision_model_matches_torch(core, torch_models, name):
    compiled = core.compile_model(torch_models / f"{name}.onnx", "CPU")
    x = np.load(torch_models / name / "inputs" / "input.npy")
    expected = np.load(torch_models / name / "expected" / "output.npy")
    y = compiled({"input": x})["output"]
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
    # 4 images through an AsyncInferQueue, fed as u8 NHWC with mean/scale in the preprocess
    # stage, against the f32 model on the same normalization done in NumPy.
    model = core.read_model(torch_models / f"{name}.onnx")
    ppp = troupe.PrePostProcessor(model)
    ppp.input("input").tensor().set_element_type(troupe.Type.u8).set_layout("NHWC")
    ppp.input("input").preprocess().convert_element_type(troupe.Type.f32).mean(
        [123.675, 116.28, 103.53]).scale([58.395, 57.12, 57.375])
    images = np.random.default_rng(0).integers(0, 256, (4, 1, 64, 64, 3), dtype=np.uint8)
    queue = troupe.AsyncInferQueue(core.compile_model(ppp.build()), 2)
    got = {}
    queue.set_callback(lambda request, i: got.__setitem__(i, request.results["output"]))
    for i, image in enumerate(images):
        queue.start_async({"input": image}, i)
    queue.wait_all()
    normalized = ((images.astype(np.float32) - np.array([123.675, 116.28, 103.53], np.float32))
                 / np.array([58.395, 57.12, 57.375], np.float32)).transpose(0, 1, 4, 2, 3)
    for i in range(4):
        reference = compiled({"input": np.ascontiguousarray(normalized[i])})["output"]
        np.testing.assert_allclose(got[i], reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max())


def readme_quickstart():
    text = (SOURCE_DIR / "README.md").read_text()
    match = re.search(r"<!-- python-quickstart -->\s*```python\n(.*?)```", text, re.S)
    assert match, "README.md has no python-quickstart block"
    return match.group(1)


def env_with_troupe():
    """The environment with this troupe package first on PYTHONPATH (absolute: cwd changes)."""
    env = dict(os.environ)
    package_root = str(pathlib.Path(troupe.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def test_readme_quickstart_runs(tmp_path):
    script = tmp_path / "quickstart.py"
    script.write_text(readme_quickstart())
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env=env_with_troupe())
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"class \d+", result.stdout), result.stdout
