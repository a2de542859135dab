#!/usr/bin/python3
"""Checks that every #include of troupe's sources points along the layers (docs/architecture.md).

Each source file belongs to the layer of the longest folder prefix below. A file may include its
own layer's files and those of the layers its layer builds on, and no others; the kernel
backends' folders (kernels/dnnl/, kernels/reference/) are private to kernels/. Public headers
(engine/include/troupe/) are the IR's, except the runtime API's and the actor protocol (the
pipeline's). Tests are not checked; examples
may include public headers only.

Usage: check_layers.py [SOURCE_ROOT]   Prints each violation; exits 1 when there is one.
       check_layers.py --self-test      Checks a planted tree (the checker can fail).
"""
import pathlib
import re
import sys

RUNTIME_API = {"core.hpp", "compiled_model.hpp", "infer_request.hpp", "actor_interface.hpp"}
PIPELINE_API = {"actor_protocol.hpp"}  # the messages the model actors take and reply

# layer -> (folders, the layers it builds on)
LAYERS = {
    "ir": (["engine/ir/", "engine/ops/"], []),
    "kernels": (["kernels/"], ["ir"]),
    "graph": (["engine/graph/"], ["ir", "kernels"]),
    # The ONNX reader folds PyTorch's shape subgraphs (Shape -> Gather -> Concat -> Reshape) with
    # the graph compiler's constant folding before it validates the model.
    "formats": (["serialization/"], ["ir", "kernels", "graph"]),
    "blob": (["serialization/blob/"], ["ir", "kernels", "graph", "formats"]),
    "pipeline": (["actors/"], ["ir", "kernels", "graph"]),
    "runtime": (["engine/runtime/"], ["ir", "kernels", "formats", "graph", "blob", "pipeline"]),
    # The server speaks to models through the public API and the model actors' messages only.
    "server": (["server/"], ["ir", "pipeline", "runtime"]),
    "apps": (["apps/", "benchmarks/"],
             ["ir", "kernels", "formats", "graph", "blob", "pipeline", "runtime", "server"]),
    "examples": (["examples/"], ["ir", "pipeline", "runtime"]),
    # The Python module binds the public API only (IR and runtime headers), like an application.
    "python": (["python/"], ["ir", "runtime"]),
}
PRIVATE = {"kernels/dnnl/": "kernels/", "kernels/reference/": "kernels/"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    if path.startswith("engine/include/troupe/"):
        name = pathlib.PurePath(path).name
        return "runtime" if name in RUNTIME_API else "pipeline" if name in PIPELINE_API else "ir"
    best = None
    for layer, (folders, _) in LAYERS.items():
        for folder in folders:
            if path.startswith(folder) and (best is None or len(folder) > len(best[1])):
                best = (layer, folder)
    return best[0] if best else None


def resolve(root, source, include):
    """The repository path an include names, or None (a system or generated header)."""
    for candidate in (include, "engine/include/" + include,
                      str(pathlib.PurePath(source).parent / include)):
        if (root / candidate).is_file():
            return str(pathlib.PurePath(candidate))
    return None


def violations(root):
    sources = [p for p in root.rglob("*") if p.suffix in (".cpp", ".hpp") and p.is_file()]
    for path in sorted(sources):
        source = str(path.relative_to(root))
        layer = layer_of(source)
        if layer is None or source.startswith(("build", "tests/")):
            continue
        allowed = {layer, *LAYERS[layer][1]}
        for line_no, include in ((path.read_text().count("\n", 0, m.start()) + 1, m.group(1))
                                 for m in INCLUDE.finditer(path.read_text())):
            target = resolve(root, source, include)
            if target is None:
                continue
            target_layer = layer_of(target)
            if target_layer not in allowed:
                yield (f"{source}:{line_no}: includes {target} ({target_layer} layer); the "
                       f"{layer} layer builds on {', '.join(LAYERS[layer][1]) or 'nothing'}")
            if layer in ("examples", "python") and not target.startswith("engine/include/troupe/") \
                    and not target.startswith(layer + "/"):
                yield (f"{source}:{line_no}: includes {target}; {layer} uses the public headers "
                       "only")
            for private, owner in PRIVATE.items():
                if target.startswith(private) and not source.startswith(owner):
                    yield f"{source}:{line_no}: includes {target}, private to {owner}"


def self_test():
    """The checker on a planted tree: each upward or private include must be reported."""
    import tempfile
    planted = {
        "engine/runtime/core.cpp": '#include "kernels/kernel.hpp"\n',  # down: fine
        "engine/runtime/core.hpp": "",
        "kernels/kernel.hpp": '#include "engine/runtime/core.hpp"\n',  # up: reported
        "kernels/dnnl/conv.hpp": "",
        "engine/graph/plan.cpp": '#include "kernels/dnnl/conv.hpp"\n',  # private: reported
        "examples/demo.cpp": '#include "kernels/kernel.hpp"\n',  # not public: reported
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for name, text in planted.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        found = list(violations(root))
    expected = {"kernels/kernel.hpp:1", "engine/graph/plan.cpp:1", "examples/demo.cpp:1"}
    reported = {v.split(": ", 1)[0] for v in found}
    print(f"self-test: planted violations in {sorted(expected)}, reported in {sorted(reported)}")
    return 0 if reported == expected else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = list(violations(root))
    for v in found:
        print(v)
    print(f"{len(found)} include(s) against the layers" if found else
          "every include points along the layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
