#!/usr/bin/env python3
"""`pert sweep`: a full sweep, the same in two shards merged, a shard missing (the merge refused, --partial,
--status), resuming, a model retrained in place, settings that do not match the --out file, the CSV, a cell that
cannot run, the table alone without --out, a grid none of whose cells could run (exit 1, sweep and attention), cells refused as a scheme change
run again with --allow-scheme-change into the same file, a config that fits no model of the grid refused before
the first cell, layouts' labels, and bad --shard values.

    sweep_test.py PERT

Cells: models/rope and models/learned at 64, 128 and 192 (past learned's 128-row table: an
error cell) on the first held-out stories, 3 windows each.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from train import train_data  # noqa: E402

SKIP = 77  # CTest SKIP_RETURN_CODE
MODELS = [os.path.join(ROOT, "models", "rope"), os.path.join(ROOT, "models", "learned")]
LENGTHS = [64, 128, 192]
TIMING = ("seconds", "tokens_per_second")
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from checklist import check, failures  # noqa: E402


def cells_of(path):
    with open(path) as f:
        return json.load(f)["cells"]


def untimed(cells):
    return [{k: v for k, v in c.items() if k not in TIMING} for c in cells]


def one_error_line(r):
    lines = r.stderr.strip().split("\n")
    return len(lines) == 1 and lines[0].startswith("pert: error: ")


def main():
    binary = os.path.abspath(sys.argv[1])
    cfg = train_data.load_run_config(os.path.join(ROOT, "configs", "train", "family.json"))
    if not os.path.exists(train_data.data_path(cfg, "tinystories")):
        print(f"SKIP: {train_data.data_path(cfg, 'tinystories')} not found")
        return SKIP
    _, val_stories = train_data.split(cfg)

    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "heldout.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n\n".join(val_stories[:12]) + "\n")

        def sweep(*args, out=None, models=MODELS, mode="chunks", lengths=LENGTHS):
            cmd = [binary, "sweep"] + [a for m in models for a in ("-m", m)] + [
                "-f", text, "--split-docs", "--lengths", ",".join(map(str, lengths)), "--chunks", "3",
                "--mode", mode, "-t", "1"] + (["--out", out] if out else []) + list(args)
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)

        full = os.path.join(tmp, "full.json")
        r = sweep(out=full)
        check("full sweep exits 0", r.returncode == 0, (r.returncode, r.stderr))
        table = r.stdout
        print(table)
        cells = cells_of(full)
        check("full sweep: 6 cells in order", [(c["index"], os.path.basename(c["model"]), c["length"]) for c in cells]
              == [(i, os.path.basename(m), n) for i, (m, n) in enumerate((m, n) for m in MODELS for n in LENGTHS)])
        check("full sweep: stderr says 6 to run", "6 cells, 6 in shard 1/1, 6 to run" in r.stderr, r.stderr)

        # A cell that cannot run is a result: an "error" key, "—" in the table.
        bad = [c for c in cells if "error" in c]
        check("learned @192 is the one error cell", [(os.path.basename(c["model"]), c["length"]) for c in bad]
              == [("learned", 192)] and "ppl" not in bad[0] and "past the learned position table" in bad[0]["error"])
        check("every other cell has ppl, 3 windows", all("ppl" in c and c["windows"] == 3 for c in cells if c not in bad))

        # Without --out: the same table, nothing written (no file, no lock, no CSV).
        before = sorted(os.listdir(tmp))
        r = sweep()
        check("no --out: the same table, exit 0", r.returncode == 0 and r.stdout == table, (r.returncode, r.stderr))
        check("no --out: nothing written", sorted(os.listdir(tmp)) == before, sorted(os.listdir(tmp)))
        r = sweep("--shard", "1/2")
        check("no --out: --shard refused in one line", r.returncode != 0 and one_error_line(r) and "--out" in r.stderr, r.stderr)
        rows = {line.split("|")[1].strip(): [v.strip() for v in line.split("|")[4:-1]]
                for line in table.splitlines() if line.startswith("| ") and "---" not in line}
        check("table: each row names the positions that ran",
              [line.split("|")[3].strip() for line in table.splitlines()[2:4]] == ["rope", "learned"], table)
        with open(full) as f:
            whole = json.load(f)
        check("file: pert's version, the dtype (f32 too) and the text's hash recorded",
              whole.get("pert_version") and whole["settings"].get("dtype") == "f32"
              and len(whole["settings"].get("text_hash", "")) == 16, whole["settings"])
        check("file: each cell keeps its label, version and the whole positional block that ran",
              all(c["label"] == "plain" and c["pert_version"] == whole["pert_version"] and
                  c["position_config"]["position"]["type"] in ("rope", "learned") for c in cells))
        check("table: header marks the trained length", rows.get("model") == ["64", "128 (L)", "192"], rows)
        check("table: learned @192 is —", rows.get("learned", [None])[-1] == "—", rows)
        check("table: rope cells are the ppl to 2 decimals",
              rows.get("rope") == [f"{c['ppl']:.2f}" for c in cells[:3]], rows)

        # CSV next to --out: a header and one line per cell.
        with open(os.path.join(tmp, "full.csv")) as f:
            csv = f.read().splitlines()
        check("csv: header", csv[0] == "model,config,label,positions,length,trained_length,mode,split_docs,dtype,"
              "cache_type,ppl,ppl_stderr,nll,tokens,windows,seconds,tokens_per_second,pert_version,error", csv[0])
        check("csv: one line per cell", len(csv) == 1 + len(cells), len(csv))
        check("csv: the error cell's line", csv[-1].startswith(
            f"{MODELS[1]},plain,plain,learned,192,128,chunks,true,f32,f32,,,,,,,,{whole['pert_version']},\"position 128"),
              csv[-1])
        check("csv: ppl as in the JSON", all(float(line.split(",")[10]) == c["ppl"] for line, c in zip(csv[1:4], cells)))

        # Two shards merged: the same cells and table.
        parts = [os.path.join(tmp, f"shard{k}.json") for k in (1, 2)]
        for k, part in enumerate(parts, 1):
            r = sweep("--shard", f"{k}/2", out=part)
            check(f"shard {k}/2 exits 0", r.returncode == 0, r.stderr)
            check(f"shard {k}/2 runs 3 cells", f"6 cells, 3 in shard {k}/2, 3 to run" in r.stderr, r.stderr)
            check(f"shard {k}/2 holds cells {k - 1}, {k + 1}, {k + 3}",
                  [c["index"] for c in cells_of(part)] == [k - 1, k + 1, k + 3])
        merged = os.path.join(tmp, "merged.json")
        r = subprocess.run([binary, "sweep", "--merge", parts[1], parts[0], "--out", merged, "--csv",
                            os.path.join(tmp, "merged-cells.csv")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        check("merge exits 0", r.returncode == 0, r.stderr)
        check("merge: the same table on stdout", r.stdout == table, r.stdout)
        mcells = cells_of(merged)
        check("merge: the same cells in the same order", untimed(mcells) == untimed(cells))
        check("merge: the same ppl, exactly", [c.get("ppl") for c in mcells] == [c.get("ppl") for c in cells])
        with open(os.path.join(tmp, "merged-cells.csv")) as f:
            check("merge: --csv written, one line per cell", len(f.read().splitlines()) == 7)
        with open(merged) as f:
            m = json.load(f)
        check("merge: the grid of all 6 cells and both shards recorded",
              len(m["grid"]) == 6 and sorted(m["shards"]) == ["1/2", "2/2"], (len(m.get("grid", [])), m.get("shards")))

        # A shard missing: --merge refuses, naming the cells; --partial merges with a warning; --status counts.
        alone = os.path.join(tmp, "alone.json")
        r = subprocess.run([binary, "sweep", "--merge", parts[0], "--out", alone], capture_output=True, text=True)
        check("merge of one shard of two: refused, one line naming the 3 missing cells, nothing written",
              r.returncode != 0 and one_error_line(r) and "3 cells missing: rope plain @128, learned plain @64, "
              "learned plain @192" in r.stderr and not os.path.exists(alone), r.stderr)
        r = subprocess.run([binary, "sweep", "--merge", parts[0], "--out", alone, "--partial"], capture_output=True,
                           text=True)
        check("merge --partial: exits 0 with the 3 cells it has and a warning naming the others",
              r.returncode == 0 and len(cells_of(alone)) == 3 and "3 cells missing" in r.stderr, r.stderr)
        cells_of_part = cells_of(parts[1])
        with open(parts[1]) as f:
            interrupted = json.load(f)
        interrupted["cells"] = cells_of_part[:1]  # shard 2/2 stopped after its first cell
        with open(parts[1], "w") as f:
            json.dump(interrupted, f)
        r = subprocess.run([binary, "sweep", "--status", parts[0], parts[1], "--json"], capture_output=True, text=True)
        status = json.loads(r.stdout) if r.returncode == 0 else {}
        check("status --json: per file its share, done, failed and missing; the grid's missing named",
              [(f["shards"], f["share"], f["done"], f["failed"], f["missing"]) for f in status.get("files", [])]
              == [(["1/2"], 3, 3, 0, 0), (["2/2"], 3, 1, 0, 2)] and status["grid"] == 6 and status["missing"] == 2
              and status["missing_cells"] == ["learned plain @64", "learned plain @192"], r.stdout + r.stderr)
        r = subprocess.run([binary, "sweep", "--status", parts[0], parts[1]], capture_output=True, text=True)
        check("status: a table a file, then the grid's line", r.returncode == 0 and "| " + parts[1] + " | 2/2 | 3 | 1 | 0 | 2 |"
              in r.stdout and "grid: 6 cells, 4 done (0 failed), 2 cells missing" in r.stdout, r.stdout + r.stderr)
        r = sweep("--shard", "2/2", out=parts[1])
        check("the shard run again resumes: 2 to run, then the merge is whole",
              "3 in shard 2/2, 2 to run" in r.stderr and subprocess.run(
                  [binary, "sweep", "--merge", parts[0], parts[1], "--out", os.path.join(tmp, "whole.json")],
                  capture_output=True).returncode == 0, r.stderr)
        check("the resumed shard kept its first cell as it was", cells_of(parts[1])[0] == cells_of_part[0])

        # Resume: nothing to run on a complete file; one cell on a file that lacks it.
        before = open(full).read()
        r = sweep(out=full)
        check("resume: exits 0", r.returncode == 0, r.stderr)
        check("resume: stderr says 0 to run", "0 to run" in r.stderr, r.stderr)
        check("resume: cells unchanged", cells_of(full) == json.loads(before)["cells"])
        check("resume: the same table", r.stdout == table, r.stdout)
        partial = os.path.join(tmp, "partial.json")
        j = json.loads(before)
        j["cells"] = [c for c in j["cells"] if c["index"] != 1]
        with open(partial, "w") as f:
            json.dump(j, f)
        r = sweep(out=partial)
        check("resume: a missing cell is run", r.returncode == 0 and "1 to run" in r.stderr, r.stderr)
        check("resume: then the same ppl", sorted((c["index"], c.get("ppl")) for c in cells_of(partial)) ==
              [(c["index"], c.get("ppl")) for c in cells])

        # Other settings on an existing file: one-line error naming the file, file untouched.
        r = sweep("--stride", "32", out=full, mode="sliding")
        check("other settings: exit 1", r.returncode == 1, (r.returncode, r.stderr))
        check("other settings: one line 'pert: error: ...' naming the file",
              one_error_line(r) and full in r.stderr and "mode" in r.stderr, r.stderr)
        check("other settings: file untouched", open(full).read() == before)

        # Buckets: log-spaced by default; a file made with --buckets N resumes with N when
        # --buckets is not given (and files from before log buckets, with 16), not with another.
        check("buckets: log by default", whole["settings"].get("buckets") == "log"
              and [(b["first"], b["last"]) for b in cells[1]["nll_by_position"]][:3] == [(0, 1), (2, 2), (3, 3)],
              whole["settings"])
        equal = os.path.join(tmp, "equal.json")
        r = sweep("--buckets", "16", out=equal, lengths=[64])
        r = sweep(out=equal, lengths=[64, 128])
        ecells = cells_of(equal)
        check("buckets: resumed without --buckets keeps the file's 16", r.returncode == 0 and "2 to run" in r.stderr
              and json.load(open(equal))["settings"]["buckets"] == 16
              and all(len(c["nll_by_position"]) == 16 for c in ecells if "ppl" in c), r.stderr)
        r = sweep("--buckets", "log", out=equal, lengths=[64])
        check("buckets: --buckets log on that file is a one-line error naming it", r.returncode == 1 and
              one_error_line(r) and equal in r.stderr and 'buckets = 16, not "log"' in r.stderr, r.stderr)
        j = json.load(open(equal))
        j["settings"]["buckets"] = "lin"
        with open(equal, "w") as f:
            json.dump(j, f)
        r = sweep(out=equal, lengths=[64])
        check("buckets: a file's bad value is a one-line error naming the file", r.returncode == 1 and
              one_error_line(r) and equal + ": settings.buckets" in r.stderr, r.stderr)

        # One model however its directory is written, and each length once: no new cell to run.
        r = sweep("--lengths", "64,64,128,192", out=full, models=[MODELS[0] + "/", MODELS[0] + "/.", MODELS[1]])
        check("same model dir written twice, a length twice: 0 to run", r.returncode == 0 and "6 cells" in r.stderr
              and "0 to run" in r.stderr, r.stderr)

        # The same model and text spelled another way (relative to another directory): 0 to run.
        sub = os.path.join(tmp, "sub")
        os.mkdir(sub)
        r = subprocess.run([binary, "sweep"] + [a for m in MODELS for a in ("-m", os.path.relpath(m, sub))] + [
            "-f", "../heldout.txt", "--split-docs", "--lengths", "64,128,192", "--chunks", "3", "-t", "1",
            "--out", full], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sub)
        check("resume by content: relative spellings from another directory, 0 to run",
              r.returncode == 0 and "0 to run" in r.stderr, r.stderr)

        # A model retrained in place (same directory, other weights): its old cells are not resumed
        # as if they were its own, nor merged with new ones; the file stays as it was.
        copy = os.path.join(tmp, "rope-copy")
        shutil.copytree(MODELS[0], copy)
        out = os.path.join(tmp, "retrained.json")
        r = sweep(lengths=[64], out=out, models=[copy])
        old_cells = open(out).read()
        shutil.copy(os.path.join(ROOT, "models", "alibi", "model.safetensors"), copy)  # same shapes, other weights
        r = sweep(lengths=[64, 128], out=out, models=[copy])
        check("retrained model: resuming its old cells is a one-line error naming the file and the model",
              r.returncode == 1 and one_error_line(r) and out in r.stderr and "rope-copy" in r.stderr
              and "other weights" in r.stderr, r.stderr)
        check("retrained model: the file untouched", open(out).read() == old_cells)
        fresh = os.path.join(tmp, "retrained-new.json")
        r = sweep(lengths=[64], out=fresh, models=[copy])
        check("retrained model: a fresh file runs it, its cell another model_hash", r.returncode == 0 and
              cells_of(fresh)[0]["model_hash"] != json.loads(old_cells)["cells"][0]["model_hash"], r.stderr)
        r = subprocess.run([binary, "sweep", "--merge", out, fresh, "--out", os.path.join(tmp, "m.json")],
                           capture_output=True, text=True)
        check("retrained model: merging old and new cells is a one-line error", r.returncode == 1 and
              one_error_line(r) and "other weights" in r.stderr, r.stderr)

        # Labels: a config's file name, its path where two share a name, or --label; never two configs.
        plain_file = os.path.join(ROOT, "configs", "rope", "plain.json")
        out = os.path.join(tmp, "labels.json")
        r = sweep("--config", "plain", "--config", plain_file, lengths=[64], out=out, models=MODELS[:1])
        check("labels: 'plain' and configs/rope/plain.json get distinct labels",
              r.returncode == 0 and [c["label"] for c in cells_of(out)] == ["plain", plain_file], r.stderr)
        r = sweep("--config", os.path.join(ROOT, "configs", "rope", "ntk-x2.json"), "--label", "plain",
                  lengths=[64], out=out, models=MODELS[:1])
        check("labels: a label naming another config already in --out is an error",
              r.returncode == 1 and one_error_line(r) and "'plain'" in r.stderr, r.stderr)
        for args in (["--config", "plain", "--label", "a", "--label", "b"],
                     ["--config", "plain", "--config", plain_file, "--label", "x", "--label", "x"]):
            r = sweep(*args, out=os.path.join(tmp, "nolabel.json"), models=MODELS[:1])
            check(f"labels: {args[-4:]}: error naming --label", r.returncode != 0 and one_error_line(r)
                  and "--label" in r.stderr, r.stderr)

        # An inline --config is a row as a file is: labelled by its JSON, the same cells as the file
        # with that content, resumed by its value (spaces and key order aside), a bad one refused.
        out = os.path.join(tmp, "inline.json")
        yarn_file = os.path.join(ROOT, "configs", "rope", "yarn-x4.json")
        inline = '{"rope_scaling": {"rope_type": "yarn", "factor": 4}, "position": null}'
        r = sweep("--config", yarn_file, "--config", inline, lengths=[64, 128], out=out, models=MODELS[:1])
        c = cells_of(out)
        check("inline --config: a row labelled by its compact JSON, equal to the file of that content",
              r.returncode == 0 and [x["label"] for x in c[2:]] == ['{"position":null,"rope_scaling":{"factor":4,'
                                                                    '"rope_type":"yarn"}}'] * 2
              and [x["ppl"] for x in c[:2]] == [x["ppl"] for x in c[2:]] and c[2]["position_label"] == "rope yarn x4",
              (r.stderr, c))
        r = sweep("--config", yarn_file, "--config", '{"position":null,"rope_scaling":{"factor":4,"rope_type":"yarn"}}',
                  lengths=[64, 128], out=out, models=MODELS[:1])
        check("inline --config: the same JSON written otherwise resumes its cells", r.returncode == 0
              and "0 to run" in r.stderr, r.stderr)
        r = sweep("--config", '{"rope_scaling":', lengths=[64], out=os.path.join(tmp, "bad_inline.json"),
                  models=MODELS[:1])
        check("inline --config that is not JSON: one line naming it", r.returncode != 0 and one_error_line(r)
              and "inline config {" in r.stderr and "invalid JSON" in r.stderr, r.stderr)

        # A config that would replace the trained scheme: a row of error cells, not a silent rope model.
        out = os.path.join(tmp, "scheme.json")
        r = sweep("--config", os.path.join(ROOT, "configs", "rope", "ntk-x2.json"), lengths=[64], out=out,
                  models=MODELS[1:])
        c = cells_of(out)
        check("scheme change: an error cell naming both schemes; as no cell ran, exit 1 naming --out",
              r.returncode == 1 and len(c) == 1 and "trained with learned positions" in c[0].get("error", "")
              and "rope ntk x2" in c[0]["error"] and r.stderr.strip().split("\n")[-1] ==
              f"pert: error: sweep: none of the 1 cell could run; each cell's \"error\" in {out} says why", (r.stderr, c))
        r = sweep("--set", "position.type=alibi", "--allow-scheme-change", lengths=[64],
                  out=os.path.join(tmp, "scheme2.json"), models=MODELS[:1])
        c = cells_of(os.path.join(tmp, "scheme2.json"))
        check("scheme change allowed: runs, labelled with what ran and what was trained",
              r.returncode == 0 and "ppl" in c[0] and c[0]["position_label"] == "alibi"
              and c[0]["trained_position"] == "rope" and "trained with rope" in r.stderr, (r.stderr, c))

        # Layouts layer by layer A/B as schemes do: a row each, labelled by its layout, guarded alike.
        layouts = [os.path.join(ROOT, "configs", "layers", n) for n in ("rnope-swa.json", "nope-every-4th.json")]
        out = os.path.join(tmp, "layouts.json")
        r = sweep("--config", layouts[0], lengths=[64], out=out, models=MODELS[:1])
        c = cells_of(out)
        check("layouts: a layer's scheme replaced is a scheme change, an error cell naming the layer",
              r.returncode == 1 and len(c) == 1 and "in layer 3" in c[0].get("error", ""), c)
        r = sweep("--config", layouts[0], "--allow-scheme-change", lengths=[64, 128], out=out, models=MODELS[:1])
        c = cells_of(out)
        check("layouts: re-run into the same file with --allow-scheme-change, the refused cell runs, the new one too",
              r.returncode == 0 and "2 cells, 2 in shard 1/1, 2 to run" in r.stderr and len(c) == 2
              and all("ppl" in x and "error" not in x for x in c) and json.load(open(out))["settings"]["allow_scheme_change"],
              (r.stderr, c))
        r = sweep("--config", layouts[0], lengths=[64, 128], out=out, models=MODELS[:1])
        check("layouts: resumed without it, nothing to run and nothing lost", r.returncode == 0 and "0 to run" in r.stderr
              and cells_of(out) == c, r.stderr)
        out = os.path.join(tmp, "layouts2.json")
        r = sweep("--config", "plain", "--config", layouts[0], "--config", layouts[1], "--allow-scheme-change",
                  lengths=[64], out=out, models=MODELS[:1])
        c = cells_of(out)
        check("layouts: each runs, labelled by its groups of layers (windows where they differ)",
              r.returncode == 0 and [x.get("position_label") for x in c] ==
              ["rope", "rope w64 x4 + none x1", "rope x4 + none x1"] and all("ppl" in x for x in c), (r.stderr, c))

        # A layout of windows alone (one scheme) is labelled with its windows, not as plain RoPE.
        out = os.path.join(tmp, "windows.json")
        r = sweep("--config", '{"layers": {"global": {"every": 5}, "local": {"others": true, "window": 32}}}',
                  lengths=[64], out=out, models=MODELS[:1])
        check("layouts: windows alone labelled 'rope w32 x4 + rope x1'", r.returncode == 0 and
              [x.get("position_label") for x in cells_of(out)] == ["rope w32 x4 + rope x1"], (r.stderr, cells_of(out)))

        # A config that does not fit a model stops the grid before its first cell, naming both;
        # gemma3-5to1.json's every 6th layer needs six layers, the family has five.
        out = os.path.join(tmp, "nofit.json")
        gemma = os.path.join(ROOT, "configs", "layers", "gemma3-5to1.json")
        r = sweep("--config", "plain", "--config", gemma, out=out)
        last = r.stderr.strip().split("\n")[-1]
        check("a layout that fits no model of the grid: exit 1 before any cell ran, naming the config, model and key",
              r.returncode == 1 and "[1/" not in r.stderr and not os.path.exists(out) and last.startswith(
                  f"pert: error: sweep: --config {gemma} on {MODELS[0]}: ") and
              "layers.global.every must be at most 5, got 6" in last, r.stderr)
        # --set layers.NAME... on a model without a layers block: refused, not a silent no-op.
        r = sweep("--set", "layers.global.every=4", lengths=[64], out=out, models=MODELS[:1])
        last = r.stderr.strip().split("\n")[-1]
        check("--set layers.global.every=4 on a model without layers: exit 1 naming the rule",
              r.returncode == 1 and "[1/" not in r.stderr and "layers.global sets none of" in last
              and "it would change nothing" in last, r.stderr)
        # A shard is not its grid: one whose cells all failed exits 0 (a Slurm array's merge waits
        # for every task's success); the merge of a grid none of whose cells could run exits 1.
        parts = [os.path.join(tmp, f"failed{k}.json") for k in (1, 2)]
        codes = [sweep("--shard", f"{k}/2", lengths=[192, 256], out=part, models=MODELS[1:]).returncode
                 for k, part in enumerate(parts, 1)]
        r = subprocess.run([binary, "sweep", "--merge"] + parts + ["--out", os.path.join(tmp, "failed.json")],
                           capture_output=True, text=True)
        check("shards whose cells all failed exit 0, their merge exits 1", codes == [0, 0] and r.returncode == 1 and
              r.stderr.strip().split("\n")[-1].startswith("pert: error: sweep: none of the 2 cells could run")
              and len(cells_of(os.path.join(tmp, "failed.json"))) == 2, (codes, r.stderr))
        # pert attention's grid: every cell refused is exit 1 too.
        out = os.path.join(tmp, "attention.json")
        r = subprocess.run([binary, "attention", "-m", MODELS[0], "-f", text, "--lengths", "64", "--config", layouts[0],
                            "-t", "1", "--out", out], capture_output=True, text=True)
        check("attention: a grid whose every cell failed exits 1", r.returncode == 1 and len(cells_of(out)) == 1 and
              r.stderr.strip().split("\n")[-1].startswith("pert: error: attention: none of the 1 cell could run"),
              r.stderr)

        # --set applies to every cell and is part of the settings; appended sweeps keep rows grouped.
        out = os.path.join(tmp, "set.json")
        r = sweep("--set", "position.beyond=clamp", lengths=[192], out=out, models=MODELS[1:])
        c = cells_of(out)
        check("--set position.beyond=clamp: learned runs at 192",
              r.returncode == 0 and "ppl" in c[0] and c[0]["position_label"] == "learned clamp", (r.stderr, c))
        r = sweep(lengths=[192], out=out, models=MODELS[1:])
        check("--set is a setting: resuming without it is an error", r.returncode == 1 and one_error_line(r)
              and "set" in r.stderr, r.stderr)
        out = os.path.join(tmp, "append.json")
        sweep(lengths=[64, 192], out=out, models=MODELS[:1])
        sweep(lengths=[64, 128], out=out, models=MODELS)
        with open(out[:-5] + ".csv") as f:
            order = [tuple(line.split(",")[i] for i in (0, 4)) for line in f.read().splitlines()[1:]]
        check("append: CSV rows grouped by model, lengths ascending", order ==
              [(MODELS[0], "64"), (MODELS[0], "128"), (MODELS[0], "192"), (MODELS[1], "64"), (MODELS[1], "128")], order)

        # A model that does not load stops the sweep with one line (not an error cell per length).
        out = os.path.join(tmp, "missing.json")
        r = sweep(out=out, models=[os.path.join(tmp, "no-such-model")])
        last = r.stderr.strip().split("\n")[-1]
        check("missing model dir: exit 1, an error line naming it", r.returncode == 1 and
              last.startswith("pert: error: ") and "no-such-model" in last, (r.returncode, r.stderr))

        # Bad --shard values.
        for shard in ("0/2", "3/2", "x", "1/0", "1/2x", "-1/2"):
            out = os.path.join(tmp, "bad.json")
            r = sweep("--shard", shard, out=out)
            check(f"--shard {shard}: non-zero exit, one line", r.returncode != 0 and one_error_line(r)
                  and "--shard" in r.stderr and not os.path.exists(out), (r.returncode, r.stderr))

    if failures:
        print(f"sweep_test: {len(failures)} FAILED")
        return 1
    print("sweep_test: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
