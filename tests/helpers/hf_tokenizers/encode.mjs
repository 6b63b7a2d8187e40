#!/usr/bin/env node
// The reference side of tests/reference/hf_tokenizer_test.py and tools/measure/tokenizer_throughput.py: HF's own
// JS tokenizers (@huggingface/tokenizers, pinned in package.json) encoding a text file with a
// real tokenizer.json (+ tokenizer_config.json).
//
//   node encode.mjs --dir DIR --input FILE [--whole] [--add-special] [--roundtrip] [--tokens]
//                   [--time] [--out OUT.json] [--input FILE2 ... --out OUT2.json ...]
//
// DIR holds tokenizer.json and, optionally, tokenizer_config.json. The input is read as UTF-8
// and, unless --whole, split into lines as `pert tokenize --lines` splits it: on "\n" only (a
// "\r" stays in its line), a final "\n" ending the last line rather than starting an empty one.
// Special-token strings in the text are parsed as special tokens (HF's behaviour); special
// tokens are added around each line only with --add-special (the post-processor's template).
//
// Several jobs share one load of the tokenizer: each --out ends a job (input and flags as given
// so far; flags stay on for the jobs after it); arguments after the last --out (or none) make
// one more job written to stdout.
//
// OUT.json (stdout when --out is "-"):
//   {"ids": [[...], ...]}            one array per line (--whole: one flat array, the file's)
//   "tokens": [[...], ...]           --tokens: the pieces, as the vocabulary spells them
//   "roundtrip": [true, ...]         --roundtrip: decode(encode(line)) === line, decoding with
//                                    skip_special_tokens and clean_up_tokenization_spaces off;
//   "roundtrip_skip_special": [...]  the same with skip_special_tokens on (pert's decode)
//   "load_s", "encode_s", "bytes"    --time: seconds to build the tokenizer (JSON parse included)
//                                    and to encode the job's text (in-process, performance.now()),
//                                    and the input's UTF-8 bytes
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Tokenizer } from "@huggingface/tokenizers";

function usage(msg) {
  process.stderr.write(`encode.mjs: ${msg}\n` +
    "usage: node encode.mjs --dir DIR --input FILE [--whole] [--add-special] [--roundtrip] " +
    "[--tokens] [--time] [--out OUT.json] [--input FILE2 ... --out OUT2.json ...]\n");
  process.exit(2);
}

const jobs = [];
let dir = null;
let cur = { input: null, whole: false, addSpecial: false, roundtrip: false, tokens: false, time: false };
let pending = false;  // arguments given since the last --out
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  const a = argv[i];
  const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
  if (a !== "--dir") pending = true;
  if (a === "--dir") dir = value();
  else if (a === "--input") cur.input = value();
  else if (a === "--whole") cur.whole = true;
  else if (a === "--add-special") cur.addSpecial = true;
  else if (a === "--roundtrip") cur.roundtrip = true;
  else if (a === "--tokens") cur.tokens = true;
  else if (a === "--time") cur.time = true;
  else if (a === "--out") {
    jobs.push({ ...cur, out: value() });
    pending = false;
  } else usage(`unknown argument ${a}`);
}
if (pending || jobs.length === 0) jobs.push({ ...cur, out: "-" });
if (!dir) usage("--dir is required");
for (const job of jobs) if (!job.input) usage("every job needs --input");

const t0 = performance.now();
const tokenizerJson = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
const configPath = join(dir, "tokenizer_config.json");
const config = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
const tokenizer = new Tokenizer(tokenizerJson, config);
const t1 = performance.now();

function run(job) {
  const raw = readFileSync(job.input);
  const text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
  let inputs;
  if (job.whole) {
    inputs = [text];
  } else {
    inputs = text.length === 0 ? [] : text.split("\n");
    if (text.endsWith("\n")) inputs.pop();  // a final "\n" ends the last line
  }

  const t2 = performance.now();
  const encoded = inputs.map((s) => tokenizer.encode(s, { add_special_tokens: job.addSpecial }));
  const t3 = performance.now();

  const pick = (list) => (job.whole ? list[0] : list);
  const result = { ids: pick(encoded.map((e) => e.ids)) };
  if (job.tokens) result.tokens = pick(encoded.map((e) => e.tokens));
  if (job.roundtrip) {
    const decoded = (ids, skip) => (ids.length === 0 ? "" :
      tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }));
    result.roundtrip = pick(encoded.map((e, i) => decoded(e.ids, false) === inputs[i]));
    result.roundtrip_skip_special = pick(encoded.map((e, i) => decoded(e.ids, true) === inputs[i]));
  }
  if (job.time) {
    result.load_s = (t1 - t0) / 1000;
    result.encode_s = (t3 - t2) / 1000;
    result.bytes = raw.length;
  }
  const json = JSON.stringify(result) + "\n";
  if (job.out === "-") process.stdout.write(json);
  else writeFileSync(job.out, json);
}

for (const job of jobs) run(job);
