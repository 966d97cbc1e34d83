"""The layer rule, checked: every #include "LAYER/..." in a layer's own sources names a layer that
the layer's CMake library links (directly or through the layers it links), so an upward or
sideways include fails here even when it would compile (all of src/ is on the include path) and
no binary happens to link it. Unit tests (*_test.cc) and test-support sources link more and are
left to their test targets. ARCHITECTURE.md states the rule."""

import os
import re
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

LINK = re.compile(r"target_link_libraries\(\s*gpuhost_(\w+)\s+(?:PUBLIC|PRIVATE|INTERFACE)\s+([^)]*)\)", re.S)
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([a-z_]+)/[^"]+"', re.M)


def layer_links(src):
    """{layer: set of layers it links directly}, from src/*/CMakeLists.txt."""
    links = {}
    for layer in sorted(os.listdir(src)):
        cmake = os.path.join(src, layer, "CMakeLists.txt")
        if not os.path.isfile(cmake):
            continue
        links.setdefault(layer, set())
        with open(cmake) as f:
            text = f.read()
        for target, deps in LINK.findall(text):
            if target != layer:
                continue  # a test-support library of the layer
            links[layer].update(d[len("gpuhost_"):] for d in deps.split() if d.startswith("gpuhost_"))
    return links


def closure(links):
    out = {}
    for layer in links:
        seen, todo = set(), [layer]
        while todo:
            for dep in links.get(todo.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        out[layer] = seen | {layer}
    return out


def is_layer_source(name):
    return (name.endswith((".h", ".cc")) and not name.endswith("_test.cc") and "test_support" not in name
            and not name.startswith("fake_"))


def violations(src):
    """'src/LAYER/FILE:LINE includes X/... but gpuhost_LAYER does not link gpuhost_X' for each."""
    links = layer_links(src)
    allowed = closure(links)
    found = []
    for layer, may in sorted(allowed.items()):
        folder = os.path.join(src, layer)
        for dirpath, _, files in os.walk(folder):
            for name in sorted(files):
                if not is_layer_source(name):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for match in INCLUDE.finditer(text):
                    target = match.group(1)
                    if target in links and target not in may:
                        line = text.count("\n", 0, match.start()) + 1
                        found.append("%s:%d includes %s/... but gpuhost_%s does not link gpuhost_%s" % (
                            os.path.relpath(path, os.path.dirname(src)), line, target, layer, target))
    return found


class Layers(unittest.TestCase):
    def test_every_include_names_a_linked_layer(self):
        found = violations(os.path.join(ROOT, "src"))
        self.assertEqual(found, [], "includes across the layer rule:\n" + "\n".join(found))

    def test_the_check_finds_an_upward_include(self):
        # A tree with base <- gpu: gpu may include base, base may not include gpu.
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "src")
            for layer, deps in (("base", ""), ("gpu", "gpuhost_base")):
                os.makedirs(os.path.join(src, layer))
                with open(os.path.join(src, layer, "CMakeLists.txt"), "w") as f:
                    f.write("add_library(gpuhost_%s STATIC x.cc)\n" % layer)
                    if deps:
                        f.write("target_link_libraries(gpuhost_%s PUBLIC %s)\n" % (layer, deps))
            with open(os.path.join(src, "gpu", "x.cc"), "w") as f:
                f.write('#include "base/error.h"\n')
            with open(os.path.join(src, "base", "x.cc"), "w") as f:
                f.write('#include <vector>\n\n#include "gpu/snapshot.h"\n')
            with open(os.path.join(src, "base", "x_test.cc"), "w") as f:
                f.write('#include "gpu/snapshot.h"\n')  # tests link more: not checked here
            self.assertEqual(violations(src),
                             ["src/base/x.cc:3 includes gpu/... but gpuhost_base does not link gpuhost_gpu"])


if __name__ == "__main__":
    unittest.main()
