"""What README.md and docs/PYTHON.md say of the Python module is what the module does: every call written as a
signature there (its positional arguments are names, not values) gives each keyword the default the module has and
names only keywords it takes, and one written out whole (with `*`) names every keyword it takes, where
`**model_options` stands for the model-wide options' keywords (vit.model_options()). And the README's
promise of timm's preprocessing names its one exception, NaFlex towers."""
import ast
import pathlib
import re

import vit
from test_stubs import runtime_signature, split_top_level
from test_vit import REPO

DOCS = [REPO / "README.md", REPO / "docs" / "PYTHON.md"]
# How the docs name what they call: c. is a Classifier, b. a Batcher.
RECEIVERS = {"c.": vit.Classifier, "Classifier.": vit.Classifier, "b.": vit.Batcher, "vit.Batcher.": vit.Batcher}
CONSTRUCTORS = {"vit.Classifier": vit.Classifier.__init__, "vit.Batcher": vit.Batcher.__init__,
                "vit.find_images": vit.find_images}


def calls(text):
    """(callee, the text inside its parentheses) for each call of the module's names in text, across lines."""
    for m in re.finditer(r"(?<![\w.])((?:c|b|Classifier|vit\.Batcher)\.\w+|vit\.Classifier|vit\.Batcher|vit\.find_images)\(",
                         text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield m.group(1), " ".join(text[m.end() : i - 1].split())


def runtime_of(callee):
    if callee in CONSTRUCTORS:
        return CONSTRUCTORS[callee]
    for prefix, cls in RECEIVERS.items():
        if callee.startswith(prefix):
            return getattr(cls, callee[len(prefix) :], None)
    return None


def documented_signatures():
    """(file, callee, [(keyword, default text or None)], written whole, with **model_options) for each call
    written as a signature."""
    for doc in DOCS:
        for callee, inner in calls(doc.read_text()):
            parts = split_top_level(inner)
            model_options = "**model_options" in parts
            parts = [p for p in parts if p != "**model_options"]
            positional = [p for p in parts if "=" not in p]
            if not parts or not all(p == "*" or p.isidentifier() for p in positional):
                continue  # an example: its arguments are values
            keywords = [p.split("=", 1) for p in parts if "=" in p]
            if not keywords and "*" not in parts:
                continue
            yield doc.name, callee, [(k.strip(), v.strip() or None) for k, v in keywords], "*" in parts, model_options


def literal(text):
    """Whether a default is written as a value (fps=None), not a placeholder (max_patches=N)."""
    try:
        ast.literal_eval(text)
        return True
    except (ValueError, SyntaxError):
        return False


def test_documented_signatures_are_the_modules():
    checked = 0
    table = [o["name"] for o in vit.model_options()]
    for doc, callee, keywords, whole, model_options in documented_signatures():
        f = runtime_of(callee)
        assert f is not None, f"{doc}: {callee} is not in the module"
        runtime = {name: default for name, _, default in runtime_signature(f)}
        for name, default in keywords:
            assert name in runtime, f"{doc}: {callee} takes no keyword {name}"
            if default is not None and literal(default):
                assert ast.literal_eval(default) == ast.literal_eval(runtime[name]), \
                    f"{doc}: {callee}'s {name} is {runtime[name]}, not {default}"
        if whole:
            keyword_only = [name for name, kw, _ in runtime_signature(f) if kw]
            if model_options:
                assert set(table) <= set(keyword_only), f"{doc}: {callee} takes no **model_options"
                keyword_only = [name for name in keyword_only if name not in table]
            assert [name for name, _ in keywords] == keyword_only, f"{doc}: {callee} takes {keyword_only}"
        checked += 1
    assert checked >= 10, checked


def test_the_readmes_timm_preprocessing_names_its_exception():
    opening = (REPO / "README.md").read_text().split("\n\n")[1]
    promise = opening[opening.index("exactly as timm does") :]
    assert "NaFlex" in promise[: promise.index("matching timm's logits")], opening
