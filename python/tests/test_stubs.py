"""The type stubs describe the module: every class, function and member they declare exists."""
import ast
import pathlib

import troupe

PACKAGE = pathlib.Path(troupe.__file__).parent


def declared(stub):
    """(class name or None, member name) for each declaration of a .pyi file."""
    tree = ast.parse(stub.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            yield node.name, None
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.name, item.name
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    yield node.name, item.target.id
        elif isinstance(node, ast.FunctionDef):
            yield None, node.name


def test_stub_declarations_exist():
    missing = []
    for cls, member in declared(PACKAGE / "__init__.pyi"):
        if cls is None:
            if not hasattr(troupe, member):
                missing.append(member)
            continue
        target = getattr(troupe, cls, None)
        if target is None:
            missing.append(cls)
        elif member is not None and member != "__init__" and not hasattr(target, member):
            missing.append(f"{cls}.{member}")
    assert not missing, f"declared in __init__.pyi but not in the module: {missing}"


def test_public_classes_are_in_the_stub():
    stubbed = {cls for cls, member in declared(PACKAGE / "__init__.pyi") if member is None}
    stubbed |= {member for cls, member in declared(PACKAGE / "__init__.pyi") if cls is None}
    public = {name for name in troupe.__all__ if not name.startswith("_")}
    public -= {"properties"}  # a submodule with its own stub
    assert public <= stubbed, f"not in __init__.pyi: {sorted(public - stubbed)}"


def test_every_public_method_has_a_docstring_or_signature():
    for name in ("Core", "CompiledModel", "InferRequest", "AsyncInferQueue", "PrePostProcessor",
                 "ModelBuilder", "Tensor"):
        cls = getattr(troupe, name)
        assert cls.__doc__, name
        for attr, value in vars(cls).items():
            if not attr.startswith("_") and callable(value):
                assert value.__doc__, f"{name}.{attr}"
