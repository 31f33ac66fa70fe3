#!/usr/bin/env python3
"""scripts/check-layers.py on small trees of its own: each rule refuses what it
should, and lets pass what it should (the kinds' own files, words that only look
like a field, folders outside the checked ones). Run by ctest (layers_test)."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check-layers.py"


def check(files):
    """Runs the script on a tree of `files` ({path: text}); (exit code, output)."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in {"base/clock.h": "#pragma once\n", **files}.items():
            p = pathlib.Path(root, path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        run = subprocess.run([sys.executable, str(SCRIPT), root], capture_output=True, text=True)
        return run.returncode, run.stdout + run.stderr


class CheckLayersTest(unittest.TestCase):
    def test_a_clean_tree_passes(self):
        code, out = check({"store/store.cc": '#include "base/clock.h"\n// Stores objects.\n'})
        self.assertEqual(code, 0, out)
        self.assertIn("0 violations", out)

    def test_an_upward_include_fails(self):
        code, out = check({"store/store.cc": '#include "handlers/router.h"\n'})
        self.assertEqual(code, 1)
        self.assertIn("store/store.cc:1: store/ includes handlers/", out)

    def test_a_generic_file_naming_a_kind_fails_in_code_and_comments(self):
        for text in ('if (info.resource == "delegatedleases") return;\n',
                     "// Copies the PoolLease's status.\n",
                     "Kind k = Kind::kDelegatedLease;\n"):
            code, out = check({"handlers/patch.cc": "int x;\n" + text})
            self.assertEqual(code, 1, text)
            self.assertIn("handlers/patch.cc:2: a generic file names", out)

    def test_a_generic_file_naming_a_field_fails(self):
        for text in ("next->status.observed_time_us = 0;\n",
                     'if (key == "proof") return;\n',
                     "d.challenges.clear();\n",
                     "// e.g. spec.renewTime\n"):
            code, out = check({"store/object_codec.cc": text})
            self.assertEqual(code, 1, text)
            self.assertIn("store/object_codec.cc:1:", out)

    def test_the_kinds_own_files_may_name_them(self):
        code, out = check({
            "handlers/registry/delegated_lease.cc": "// DelegatedLease: spec.poolName, spec.proof\n",
            "handlers/registry/lease_strategy.cc": "o.status.observed_time_us = old.status.observed_time_us;\n",
            "handlers/registry/registry.cc": "KIND(PoolLeases)\n",
            "election/forwarder.cc": "// renews the node Lease from its DelegatedLease\n"})
        self.assertEqual(code, 0, out)

    def test_words_that_only_look_like_a_field_pass(self):
        code, out = check({"store/watch.cc": "if (w.expired()) return;\nbool proofread = true;\n"})
        self.assertEqual(code, 0, out)

    def test_the_repository_itself_is_in_order(self):
        run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout)


if __name__ == "__main__":
    unittest.main()
