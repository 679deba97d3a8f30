"""The type stubs (python/vit/_vit.pyi) say what the module takes: every function, method and property of
vit._vit is in them, with the same parameters in the same order, the same keyword-only ones and the same
defaults as the signatures pybind11 gives the module; and the stubs parse as Python."""
import ast
import pathlib

import vit
import vit._vit

STUBS = pathlib.Path(vit.__file__).parent / "_vit.pyi"


def split_top_level(text):
    """Splits at commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def runtime_signature(f):
    """[(name, keyword_only, default repr or None)] from pybind11's first docstring line, self left out."""
    line = f.__doc__.splitlines()[0]
    inner = line[line.index("(") + 1 : line.rindex(")")]
    out, kw_only = [], False
    for p in split_top_level(inner):
        if p == "*":
            kw_only = True
            continue
        name = p.split(":")[0].strip()
        default = p.split(" = ", 1)[1].strip() if " = " in p else None
        if name != "self":
            out.append((name, kw_only, default))
    return out


def stub_signature(node):
    args = node.args
    positional = [a for a in args.posonlyargs + args.args if a.arg != "self"]
    pos_defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [(a.arg, False, None if d is None else repr(ast.literal_eval(d))) for a, d in zip(positional, pos_defaults)]
    out += [(a.arg, True, None if d is None else repr(ast.literal_eval(d))) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return out


def stub_tree():
    tree = ast.parse(STUBS.read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: {m.name: m for m in n.body if isinstance(m, ast.FunctionDef)} for n in tree.body
               if isinstance(n, ast.ClassDef)}
    return functions, classes


def test_stubs_match_the_module():
    functions, classes = stub_tree()
    assert stub_signature(functions["find_images"]) == runtime_signature(vit._vit.find_images)
    assert stub_signature(functions["model_options"]) == runtime_signature(vit._vit.model_options)
    checked = 0
    for cls in (vit.Classifier, vit.Batcher):
        stub = classes[cls.__name__]
        for name, member in vars(cls).items():
            if name.startswith("_") and name != "__init__":
                continue
            assert name in stub, f"{cls.__name__}.{name} is not in {STUBS.name}"
            if isinstance(member, property):
                decorators = [d.id for d in stub[name].decorator_list if isinstance(d, ast.Name)]
                assert decorators == ["property"], f"{cls.__name__}.{name} is a property"
            else:
                assert stub_signature(stub[name]) == runtime_signature(member), f"{cls.__name__}.{name}"
            checked += 1
        assert set(stub) - {"__init__"} <= set(vars(cls)), f"{cls.__name__}: stubs of methods it lacks"
    assert checked >= 16
    assert "Error" in classes and "__version__" in STUBS.read_text()
    assert (STUBS.parent / "py.typed").is_file()


def test_classifier_takes_every_model_option_with_its_type():
    """The build writes Classifier()'s model-wide keywords from the option table: each with the type of its
    kind and its default, in the table's order, before the Classifier's own."""
    _, classes = stub_tree()
    init = classes["Classifier"]["__init__"]
    stub = {a.arg: (ast.unparse(a.annotation), ast.unparse(d)) for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults)}
    types = {"int": "int", "path": "Optional[Path]", "name": "Optional[str]",
             "precision": "Literal['f32', 'bf16', 'int8']", "pool": "Optional[Literal['cls', 'token', 'mean', 'avg', 'map']]"}
    options = vit.model_options()
    assert [a.arg for a in init.args.kwonlyargs][: len(options)] == [o["name"] for o in options]
    for o in options:
        assert stub[o["name"]] == (types[o["type"]], repr(o["default"])), o["name"]
