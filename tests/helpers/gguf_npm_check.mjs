// GGUF files as HF's own JS parser (@huggingface/gguf, pinned in tests/helpers/hf_tokenizers) reads them:
// the independent reader tests/reference/gguf_writer_test.py compares tools/convert/gguf.py's files against.
//
//   node tests/helpers/gguf_npm_check.mjs FILE.gguf [FILE.gguf ...]
//
// Prints one JSON array, an object per file: version, littleEndian, tensorDataOffset (the data
// section's start), parameterCount, metadata {key: {type, subType?, value}} (GGUF value type
// numbers) and tensorInfos [{name, shape, dtype, offset}]. 64-bit integers (u64/i64 values,
// shapes, offsets) are printed as decimal strings so none loses precision.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "hf_tokenizers", "package.json"));
const { gguf } = await import(require.resolve("@huggingface/gguf"));

const bigints = (_key, value) => (typeof value === "bigint" ? value.toString() : value);
const out = [];
for (const file of process.argv.slice(2)) {
  const r = await gguf(path.resolve(file), { allowLocalFile: true, typedMetadata: true, computeParametersCount: true });
  const metadata = {};
  for (const [key, entry] of Object.entries(r.typedMetadata)) {
    if (!["version", "tensor_count", "kv_count"].includes(key)) metadata[key] = entry;
  }
  out.push({
    file,
    version: r.metadata.version,
    littleEndian: r.littleEndian,
    tensorDataOffset: r.tensorDataOffset,
    parameterCount: r.parameterCount,
    metadata,
    tensorInfos: r.tensorInfos.map(({ name, shape, dtype, offset }) => ({ name, shape, dtype, offset })),
  });
}
process.stdout.write(JSON.stringify(out, bigints) + "\n");
