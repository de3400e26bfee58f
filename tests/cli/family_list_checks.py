#!/usr/bin/python3
"""The README's lists of config.json families are the family registry's.

    family_list_checks.py MEMSCALE_PLAN README.md

Every sentence of the README that lists the `model_type`s `--config` reads (the one after
"Supported `model_type`s" and the one after "`--config` reads") must name exactly the
families `memscale-plan --list-families --json` marks config_json, in the registry's order
(json/hf_config.hpp hf::families). A family added to the registry without the README, or
a README entry the registry lacks, fails with both lists printed.
"""
import json, re, subprocess, sys

plan_bin, readme = sys.argv[1:3]
registry = json.loads(subprocess.run([plan_bin, "--list-families", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
expected = [f["model_type"] for f in registry if f["config_json"]]
text = " ".join(open(readme, encoding="utf-8").read().split())
failures = []
anchors = [r"Supported `model_type`s, with exact parameter counts:", r"`--config` reads a Hugging Face `config.json` .*? for"]
for anchor in anchors:
    m = re.search(anchor + r" (.*?)\(", text)
    if not m:
        failures.append(f"README: no list after /{anchor}/")
        continue
    listed = [w.strip() for w in re.split(r",| and ", m.group(1)) if w.strip()]
    if listed != expected:
        failures.append(f"README list after /{anchor}/:\n  has      {', '.join(listed)}\n  registry {', '.join(expected)}")
for f in failures:
    print("FAIL", f)
print(f"{len(anchors) - len(failures)} of {len(anchors)} README family lists match the registry ({len(expected)} families)")
sys.exit(1 if failures else 0)
