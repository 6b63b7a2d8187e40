#!/usr/bin/env python3
"""`pert generate --temp 0` against the PyTorch reference's greedy decode.

    generate_test.py PERT

stories260K from ../shared, converted (weights + tokenizer.json), prompt "Once upon a time",
200 tokens: pert's prompt ids must equal llama2.c's encoding, its generated ids the reference's
greedy ids (argmax of a float64 forward over the whole sequence each step, no cache), and its
text (JSON and streamed) the decoding of those ids. Then 10,000 sampled tokens through a
256-token context: every one made (the generator stops on non-finite logits), 77 shifts.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from convert import llama2c_tokenizer  # noqa: E402
from reference import reference  # noqa: E402

MODEL = os.path.join(HERE, "..", "..", "..", "shared", "data", "models", "stories260K")
PROMPT, N = "Once upon a time", 200


def main():
    pert = sys.argv[1]
    pieces, scores = llama2c_tokenizer.read_tokenizer_bin(os.path.join(MODEL, "tok512.bin"))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "convert", "convert_llama2c.py"),
                        os.path.join(MODEL, "stories260K.bin"), os.path.join(MODEL, "tok512.bin"), tmp], check=True)
        args = [pert, "generate", "-m", tmp, "-p", PROMPT, "-n", str(N), "--temp", "0"]
        got = json.loads(subprocess.run(args + ["--json"], check=True, capture_output=True, text=True).stdout)
        streamed = subprocess.run(args, check=True, capture_output=True).stdout.decode("utf-8")
        long = json.loads(subprocess.run([pert, "generate", "-m", tmp, "-p", PROMPT, "-n", "10000", "-c", "256",
                                          "--ignore-eos", "--seed", "1", "--json"],
                                         check=True, capture_output=True, text=True).stdout)
        prompt = llama2c_tokenizer.encode(PROMPT, pieces, scores, bos=True)
        want = reference.greedy(tmp, prompt, N)

    def text(ids):  # llama2.c's decoding: byte tokens are bytes, pieces are text
        return b"".join(bytes([i - 3]) if 3 <= i < 259 else pieces[i] for i in ids).decode("utf-8", "replace")

    failures = []
    if got["prompt_tokens"] != prompt:
        failures.append(f"prompt ids {got['prompt_tokens']} != llama2.c's {prompt}")
    agree = next((i for i, (a, b) in enumerate(zip(got["tokens"], want)) if a != b), min(len(got["tokens"]), N))
    if got["tokens"] != want:
        failures.append(f"generated ids differ from the reference's from token {agree} on")
    if got["text"] != text(want):
        failures.append(f"JSON text {got['text'][:80]!r} != reference {text(want)[:80]!r}")
    if streamed != PROMPT + text(want) + "\n":
        failures.append(f"streamed text {streamed[:80]!r} != {(PROMPT + text(want))[:80]!r}")
    # 5 prompt tokens fill 256 positions after 251; each shift then frees (256 - 1) // 2 = 127.
    if len(long["tokens"]) != 10000 or long["stop"] != "length" or long["context_shifts"] != 77:
        failures.append(f"10,000 tokens at -c 256: {len(long['tokens'])} made, {long['context_shifts']} shifts")
    print(f"10,000 tokens at -c 256: {long['context_shifts']} context shifts, {long['tokens_per_second']:.0f} tokens/s")
    print(f"greedy decode of {N} tokens: {agree} agree with the reference; text: {PROMPT + text(want)[:120]!r}...")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
