#!/usr/bin/python3
"""The README's lists of config.json families are the family registry's.

    family_list_checks.py MEMSCALE_PLAN README.md           check (ctest cli.readme_families)
    family_list_checks.py MEMSCALE_PLAN README.md --write   rewrite the lists from the registry

Every sentence of the README that lists the `model_type`s `--config` reads (the one after
"Supported `model_type`s" and the one after "`--config` reads") must name exactly the
families `memscale-plan --list-families --json` marks config_json, in the registry's order
(json/hf_config.hpp hf::families). A family added to the registry without the README, or
a README entry the registry lacks, fails with both lists printed. --write generates both
lists from the registry (each keeps its "a, b and c" or "a, b, c" form), so a family added
to the registry reaches the README by running it once; the check then passes.
"""
import json, re, subprocess, sys, textwrap

plan_bin, readme = sys.argv[1:3]
write = sys.argv[3:] == ["--write"]
registry = json.loads(subprocess.run([plan_bin, "--list-families", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
expected = [f["model_type"] for f in registry if f["config_json"]]
anchors = [r"Supported `model_type`s, with exact parameter counts:", r"`--config` reads a Hugging Face `config.json` .*? for"]


def listed_names(text):
    return [w.strip() for w in re.split(r",| and ", " ".join(text.split())) if w.strip()]


def spans(raw):
    """Each anchor's list in the README as written: (anchor, start, end) or (anchor, None, None)."""
    for anchor in anchors:
        m = re.search(anchor.replace(" ", r"\s+") + r"\s+(.*?)\s*\(", raw, re.S)
        yield (anchor, m.start(1), m.end(1)) if m else (anchor, None, None)


raw = open(readme, encoding="utf-8").read()
if write:
    for anchor, start, end in reversed(list(spans(raw))):
        if start is None:
            sys.exit(f"FAIL README: no list after /{anchor}/")
        with_and = " and " in raw[start:end]
        names = ", ".join(expected[:-1]) + (" and " if with_and else ", ") + expected[-1]
        # Wrapped from the list's own column, so the lines around it keep their breaks.
        column = start - (raw.rfind("\n", 0, start) + 1)
        wrapped = textwrap.fill("x" * column + names, width=100, break_on_hyphens=False)[column:]
        raw = raw[:start] + wrapped + raw[end:]
    open(readme, "w", encoding="utf-8").write(raw)

failures = []
for anchor, start, end in spans(raw):
    if start is None:
        failures.append(f"README: no list after /{anchor}/")
        continue
    listed = listed_names(raw[start:end])
    if listed != expected:
        failures.append(f"README list after /{anchor}/:\n  has      {', '.join(listed)}\n  registry {', '.join(expected)}\n"
                        f"  (tests/cli/family_list_checks.py MEMSCALE_PLAN README.md --write generates it)")
for f in failures:
    print("FAIL", f)
print(f"{len(anchors) - len(failures)} of {len(anchors)} README family lists match the registry ({len(expected)} families)")
sys.exit(1 if failures else 0)
