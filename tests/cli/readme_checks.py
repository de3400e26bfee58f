#!/usr/bin/python3
"""Every memscale-plan command a page shows runs and agrees with itself.

    readme_checks.py MEMSCALE_PLAN SOURCE_DIR WORK_DIR PAGE.md...

The commands are read from the pages' ```sh blocks (a line that starts with memscale-plan,
backslash continuations joined, `# comments` dropped), so a new command on a page is checked
without touching this file. Each page's commands run in order in one empty directory (a
command may read what an earlier one wrote, e.g. `> run.json`), with paths under tests/
taken from the source tree. A placeholder path is replaced by a real file (PLACEHOLDERS); a
Hugging Face Hub id is answered from a fake Hub cache holding tests/data/hf_configs/ORG--NAME.json,
and skipped (said so) when there is no such file.

Each command must exit 0 with nothing on stderr. When it prints a plan, the plan must agree
with itself and with the same command's --json: the verdict, the chosen mode and status, each
mode's verdict, upper end and error band, the largest micro-batch and its mode, the OOM
cliff's mode, and the --svg / --svg-batch pictures' chosen mode and largest micro-batch.
"""
import json, os, re, shlex, shutil, subprocess, sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
MODES = ["none", "conservative", "balanced", "aggressive"]
PLACEHOLDERS = {"path/to/config.json": "tests/data/hf_configs/Qwen--Qwen3-0.6B.json"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

plan_bin, source, work_root = (os.path.abspath(a) for a in sys.argv[1:4])
pages = sys.argv[4:]
failures = []
checked = 0
skipped = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def commands_of(page):
    """The memscale-plan command lines of a page's ```sh blocks."""
    out, block, pending = [], False, ""
    with open(page, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("```"):
                block = line.strip() in ("```sh", "```bash", "```console") and not block
                pending = ""
                continue
            if not block:
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            if line.strip().startswith("memscale-plan") and "..." not in line:
                out.append(line.strip())
    return out


def fake_hub_cache(work, hub_id):
    """HF_HOME holding `hub_id`'s config.json as huggingface_hub lays it out; None without one."""
    org, name = hub_id.split("/")
    config = os.path.join(source, "tests", "data", "hf_configs", f"{org}--{name}.json")
    if not os.path.isfile(config):
        return None
    repo = os.path.join(work, "hf", "hub", f"models--{org}--{name}")
    os.makedirs(os.path.join(repo, "snapshots", "0" * 40), exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    shutil.copy(config, os.path.join(repo, "snapshots", "0" * 40, "config.json"))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write("0" * 40)
    return os.path.join(work, "hf")


def prepare(line, work):
    """argv, stdout file (or None) and environment of one command line; None to skip it."""
    tokens = shlex.split(line, comments=True)[1:]
    stdout_file = None
    if ">" in tokens:
        at = tokens.index(">")
        stdout_file, tokens = os.path.join(work, tokens[at + 1]), tokens[:at]
    env = dict(os.environ)
    env.pop("HF_HUB_CACHE", None)
    env["HF_HOME"] = os.path.join(work, "no-hub-cache")
    args = []
    for i, tok in enumerate(tokens):
        tok = PLACEHOLDERS.get(tok, tok)
        if os.path.exists(os.path.join(source, tok)) and tok.startswith("tests/"):
            tok = os.path.join(source, tok)
        elif i > 0 and tokens[i - 1] == "--config" and HUB_ID.match(tok) and not os.path.exists(tok):
            home = fake_hub_cache(work, tok)
            if home is None:
                skipped.append(f"{line}  (no tests/data/hf_configs file for {tok})")
                return None
            env["HF_HOME"] = home
        args.append(tok)
    return args, stdout_file, env


def run(args, env, work):
    return subprocess.run([plan_bin, *args], capture_output=True, text=True, env=env, cwd=work)


def gib(b):
    return b / 2**30


def check_plan_json(plan, what):
    """A plan's fields agree with each other."""
    check(plan["fits"] == (plan["verdict"] == "fits"), f"{what}: fits {plan['fits']} vs verdict {plan['verdict']}")
    has_mode = plan["status"] not in ("shorter_sequence", "nothing_fits")
    check((plan["mode"] is not None) == has_mode, f"{what}: mode {plan['mode']} with status {plan['status']}")
    if plan["fits"]:
        check(plan["status"] in ("no_technique_needed", "mode_needed"), f"{what}: fits with status {plan['status']}")
        if check(plan["mode"] in MODES, f"{what}: fits with mode {plan['mode']}"):
            chosen = plan["modes"][MODES.index(plan["mode"])]
            check(chosen["verdict"] == "fits", f"{what}: chosen {plan['mode']} has verdict {chosen['verdict']}")
    for m in plan["modes"]:
        check(m["peak_range"]["low"] <= m["peak"] <= m["peak_range"]["high"], f"{what}: {m['mode']} peak outside its range")
        check(m["band"]["low"] < 0 < m["band"]["high"], f"{what}: {m['mode']} band {m['band']['low']}..{m['band']['high']}")
        check(m["fits"] == (m["verdict"] == "fits"), f"{what}: {m['mode']} fits vs verdict")


def check_text_against_json(text, plan, what):
    """The text report's plan says what the JSON's does."""
    rows = dict()
    for m in re.finditer(r"^  (none|conservative|balanced|aggressive)\s+(\d+\.\d+)\s+#*\s*(\d+\.\d+)\s+"
                         r"(fits|borderline|does_not_fit)\s", text, re.M):
        rows[m.group(1)] = (float(m.group(2)), float(m.group(3)), m.group(4))
    bands = dict()
    for m in re.finditer(r"^  (none|conservative|balanced|aggressive)\s+.*; band ([+-]\d+\.\d)% \.\. ([+-]\d+\.\d)% "
                         r"\((\w+)", text, re.M):
        bands[m.group(1)] = (float(m.group(2)), float(m.group(3)), m.group(4))
    if not check(len(rows) == 4 and len(bands) == 4, f"{what}: four mode rows and bands in the text ({rows}, {bands})"):
        return
    for m in plan["modes"]:
        peak, up_to, verdict = rows[m["mode"]]
        check(verdict == m["verdict"], f"{what}: {m['mode']} verdict text {verdict}, json {m['verdict']}")
        check(abs(up_to - gib(m["peak_range"]["high"])) < 0.006, f"{what}: {m['mode']} up to {up_to} GiB in the text")
        check(abs(peak - gib(m["peak"])) < 0.006, f"{what}: {m['mode']} peak {peak} GiB in the text")
        check(up_to >= peak, f"{what}: {m['mode']} up to {up_to} < peak {peak}")
        low, high, cls = bands[m["mode"]]
        check(cls == m["band"]["class"] and abs(low - 100 * m["band"]["low"]) < 0.06 and
              abs(high - 100 * m["band"]["high"]) < 0.06, f"{what}: {m['mode']} band {bands[m['mode']]}")
    v = re.search(r"^Verdict: (\w+)", text, re.M)
    check(v is not None and v.group(1) == plan["verdict"], f"{what}: Verdict line vs json {plan['verdict']}")
    c = re.search(r"^Chosen: (\w+) — .* \[(\w+)\]$", text, re.M)
    if check(c is not None, f"{what}: a Chosen line"):
        check(c.group(1) == (plan["mode"] or "nothing"), f"{what}: Chosen {c.group(1)}, json mode {plan['mode']}")
        check(c.group(2) == plan["status"], f"{what}: status {c.group(2)}, json {plan['status']}")
        if plan["status"] in ("no_technique_needed", "mode_needed"):
            check(rows[c.group(1)][2] == "fits", f"{what}: the chosen mode's row says {rows[c.group(1)][2]}")
    largest = re.search(r"^  largest micro-batch in any mode: (\d+)(?: \((\w+)\))?", text, re.M)
    if check(largest is not None, f"{what}: the largest micro-batch line"):
        check(int(largest.group(1)) == plan["max_micro_batch"], f"{what}: largest micro-batch {largest.group(1)}")
        if plan["max_micro_batch"] > 0:
            check(largest.group(2) == plan["max_micro_batch_mode"], f"{what}: largest micro-batch's mode {largest.group(2)}")
    cliff = re.search(r"^  largest micro-batch that fits \((\w+)\): (\d+)", text, re.M)
    if "OOM cliff:" in text and plan["max_micro_batch"] > 0:
        if check(cliff is not None, f"{what}: the cliff names its largest micro-batch"):
            check((cliff.group(1), int(cliff.group(2))) == (plan["max_micro_batch_mode"], plan["max_micro_batch"]),
                  f"{what}: cliff says {cliff.group(1)} {cliff.group(2)}, plan {plan['max_micro_batch_mode']} "
                  f"{plan['max_micro_batch']}")


def check_pictures(args, work, plan, what):
    def path_after(option):
        return os.path.join(work, args[args.index(option) + 1]) if option in args else None

    bars = path_after("--svg")
    if bars and os.path.isfile(bars):
        root = ET.parse(bars).getroot()
        caption = [t.text for t in root.iter(NS + "text") if t.text and "chosen:" in t.text]
        want = plan["mode"] if plan["mode"] else "nothing"
        check(len(caption) == 1 and caption[0].split("chosen: ")[1].startswith(want),
              f"{what}: --svg caption {caption} vs chosen {want}")
    cliff = path_after("--svg-batch")
    if cliff and os.path.isfile(cliff):
        root = ET.parse(cliff).getroot()
        markers = [g.get("data-label") for g in root.iter(NS + "g") if g.get("class") == "marker"]
        batch = [m for m in markers if m.startswith("max micro-batch ")]
        if plan["max_micro_batch"] > 0:
            want = f"max micro-batch {plan['max_micro_batch']} ({plan['max_micro_batch_mode']})"
            check(batch == [want], f"{what}: --svg-batch marker {batch}, plan {want}")
        else:
            check(not batch, f"{what}: --svg-batch marks a micro-batch where none fits")


def json_plan(stdout):
    try:
        doc = json.loads(stdout)
    except ValueError:
        return None
    return doc.get("plan") if isinstance(doc, dict) else None


for page in pages:
    work = os.path.join(work_root, os.path.basename(page).replace(".md", ""))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    lines = commands_of(os.path.join(source, page))
    check(len(lines) > 0, f"{page}: no memscale-plan commands found")
    for line in lines:
        prepared = prepare(line, work)
        if prepared is None:
            continue
        args, stdout_file, env = prepared
        what = f"{page}: {line}"
        r = run(args, env, work)
        checked += 1
        if not check(r.returncode == 0 and r.stderr == "", f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r}"):
            continue
        if stdout_file:
            with open(stdout_file, "w") as f:
                f.write(r.stdout)
        plan = json_plan(r.stdout) if "--json" in args else None
        if "--json" not in args and "Plan on " in r.stdout:
            j = run(args + ["--json"], env, work)
            plan = json_plan(j.stdout) if j.returncode == 0 else None
            if check(plan is not None, f"{what}: the same command with --json gives a plan ({j.stderr.strip()})"):
                check_text_against_json(r.stdout, plan, what)
        if plan is not None:
            check_plan_json(plan, what)
            check_pictures(args, work, plan, what)

for s in skipped:
    print("skipped:", s)
for f in failures:
    print("FAILED:", f)
print(f"{'ok' if not failures else 'FAILED'}: {checked} commands from {', '.join(pages)}, {len(failures)} failures")
sys.exit(1 if failures else 0)
