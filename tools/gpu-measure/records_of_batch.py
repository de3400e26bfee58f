#!/usr/bin/env python3
"""Ground-truth records (measure_gpu.records_of) of a batch's results.jsonl, for the jobs named.

  python3 records_of_batch.py RESULTS.jsonl --jobs ID[,ID...] > records.json
"""
import argparse
import json

import measure_gpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--jobs", required=True, help="comma-separated job ids, in the order wanted")
    a = ap.parse_args()
    by_id = {}
    with open(a.results) as f:
        for line in f:
            d = json.loads(line)
            if isinstance(d.get("result"), dict) and "marks" in d["result"]:
                by_id[d["job"]["id"]] = d
    cases = {c["name"]: c for c in measure_gpu.CASES}
    out = []
    for job in a.jobs.split(","):
        d = by_id[job]
        out += measure_gpu.records_of(cases[d["job"]["case"]], d["result"])
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
