#!/usr/bin/env python3
"""Retrieval tasks after RULER (Hsieh et al. 2024, NVIDIA/RULER's scripts/data/synthetic) and
Lost in the Middle's key-value retrieval (Liu et al. 2023): the rules, in Python. pert's own
generator follows the same rules; this file is the independent statement of them that checks it
prompt by prompt, and the training data's generator (tools/train/train_data.py).

    ruler_tasks.py --task niah_single_1 --length 128 --depth 0.5 --trial 0 [--seed 1234]
                   [--template short|ruler] [--essay FILE]       one prompt, its answer and references

Tasks (RULER's names and settings; `needle` haystacks are made of distractor needles):

    task              haystack  key   value   keys values queries
    niah_single_1     noise     word  number  1    1      1
    niah_single_2     essay     word  number  1    1      1
    niah_single_3     essay     word  uuid    1    1      1
    niah_multikey_1   essay     word  number  4    1      1
    niah_multikey_2   needle    word  number  1    1      1
    niah_multikey_3   needle    uuid  uuid    1    1      1
    niah_multivalue   essay     word  number  1    4      1
    niah_multiquery   essay     word  number  4    1      4
    vt                noise     variable tracking: one chain of 4 hops (5 variables)
    cwe               -         common words: 10 words 6 times each among words 1 time each (a numbered list)
    fwe               -         frequent words: coded words with Zipf counts (alpha 2), the 2nd-4th most frequent
    kv                -         JSON of uuid keys and values, one asked for

Draws: every random choice of a trial comes from SplitMix64 seeded with seed + trial · 0x9E3779B97F4A7C15
(mod 2^64); an integer below n is (next() · n) >> 64. A trial draws the same keys, values and
haystack in every cell (length, depth): first the task's fixed draws in the order below, then,
as far as a prompt needs them, its haystack's. Words: "adjective-noun" from
src/tasks/ruler_words.txt (64 × 64); numbers: 7 digits, 1000000 + below(9000000); uuids: two
draws as 32 hex digits a then b (high bits first), version nibble 4 and variant 8 + below-2-bits,
8-4-4-4-12 lowercase. Keys of one trial are distinct (a repeated draw is drawn again).

Prompt: BOS, the template's head, the body, the template's question (which ends with the answer
prefix), each piece encoded on its own and the ids joined (as `pert passkey` joins sentences).
Haystack tasks are exactly `length` tokens: the body is F = length − the rest tokens of haystack
units (noise: the five filler sentences of pass-key in cycle from a drawn start; essay: the
sentences of a text from a drawn start, cycling; needle: distractor needles with fresh key and
value draws) with the needles (or the chain's lines) between units: the last F tokens of the
stream's first m units, m the fewest that hold F (so the haystack may start mid-unit: a window
onto a longer text). A needle at depth d stands at the unit boundary whose count of
haystack tokens before it is nearest d·F (ties: the earlier). The cell's depth places the first
needle of the first queried key (vt: the chain's first line); the other needles stand at depths
drawn per trial (below(1001) / 1000; vt: d + (1 − d) · that, sorted, in chain order); needles at
one boundary keep their order of depth, then of drawing. cwe, fwe and kv fill at most `length`
tokens with whole items; kv's asked record stands at index floor(d · (records − 1) + 0.5).

Scoring (RULER's string_match_all): the greedy answer, up to the reference answer's tokens + 4,
scores the share of references found in it, case-insensitive; a cell's score is the mean × 100.
"""
import argparse
import functools
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
WORDS = os.path.join(ROOT, "src", "tasks", "ruler_words.txt")
GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1
ANSWER_SLACK = 4  # tokens an answer may take beyond the reference answer's
ASCII_SPACE = " \t\n\r\f\v"
ZETA2 = math.pi * math.pi / 6  # ζ(2), fwe's Zipf normaliser at alpha 2
NOISE = ["The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.", "There and back again."]


class Rng:
    """SplitMix64 (Steele, Lea, Flood 2014)."""

    def __init__(self, seed, trial):
        self.state = (seed + trial * GOLDEN) & M64

    def next(self):
        self.state = (self.state + GOLDEN) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next() * n) >> 64


def read_words(path=WORDS):
    lists, current = {}, None
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith(":"):
            current = lists.setdefault(line[:-1], [])
        else:
            current.append(line)
    return lists["adjectives"], lists["nouns"]


ADJECTIVES, NOUNS = read_words()


def draw_word(rng):
    a = rng.below(len(ADJECTIVES))
    return f"{ADJECTIVES[a]}-{NOUNS[rng.below(len(NOUNS))]}"


def draw_number(rng):
    return str(1000000 + rng.below(9000000))


def draw_uuid(rng):
    a, b = rng.next(), rng.next()
    a = (a & ~(0xF << 12)) | (0x4 << 12)  # version 4: the 13th hex digit
    b = (b & ~(0x3 << 62)) | (0x2 << 62)  # variant 10xx: the 17th hex digit is 8..b
    h = f"{a:016x}{b:016x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


DRAW = {"word": draw_word, "number": draw_number, "uuid": draw_uuid}


def shuffle(items, rng):
    """Fisher-Yates: i from the last down to 1 swaps with below(i + 1)."""
    for i in range(len(items) - 1, 0, -1):
        j = rng.below(i + 1)
        items[i], items[j] = items[j], items[i]


def draw_distinct(rng, kind, n):
    out = []
    while len(out) < n:
        x = DRAW[kind](rng)
        if x not in out:
            out.append(x)
    return out


@functools.lru_cache(maxsize=4)
def essay_sentences(path):
    """A text's sentences: heading lines (" = Title = ") left out, runs of ASCII white space
    between words, a sentence ending with a word that ends in '.', '!' or '?'. Read once per
    path (a tuple, so no caller can change another's): training draws thousands of prompts."""
    words = []
    for line in open(path, encoding="utf-8", newline="\n"):
        s = line.strip(ASCII_SPACE)
        if s.startswith("=") and s.endswith("="):
            continue
        words += [w for w in re.split(f"[{ASCII_SPACE}]+", s) if w]
    sentences, current = [], []
    for w in words:
        current.append(w)
        if w[-1] in ".!?":
            sentences.append(" ".join(current))
            current = []
    if current:
        sentences.append(" ".join(current))
    return tuple(sentences)


# ----------------------------------------------------------------------------- templates
def plural(noun, n):
    return noun if n == 1 else noun + "s"


def listing(items):
    """RULER's query list: "a", "a and b", "a, b, and c"."""
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + ", and " + items[-1]


def niah_text(template, value_kind, query, n_answers):
    """(head, needle format, question) of a NIAH task."""
    t = {"number": "number", "word": "word", "uuid": "uuid"}[value_kind]
    one = n_answers == 1
    if template == "ruler":
        ts = plural(t, 1 if one else 2)
        head = (f"{'A' if one else 'Some'} special magic {ts} {'is' if one else 'are'} hidden within the following "
                f"text. Make sure to memorize it. I will quiz you about the {ts} afterwards.")
        needle = "One of the special magic " + t + "s for {key} is: {value}."
        question = (f"{'What is the' if one else 'What are all the'} special magic {ts} for {query} mentioned in the "
                    f"provided text? The special magic {ts} for {query} mentioned in the provided text "
                    f"{'is' if one else 'are'}")
    else:
        head = ""
        needle = "The magic " + t + " for {key} is {value}."
        ts = plural(t, 1 if one else 2)
        question = f"What {'is' if one else 'are'} the magic {ts} for {query}? The magic {ts} for {query} {'is' if one else 'are'}"
    return head, needle, question


# ----------------------------------------------------------------------------- tasks
NIAH = {
    "niah_single_1": ("noise", "word", "number", 1, 1, 1),
    "niah_single_2": ("essay", "word", "number", 1, 1, 1),
    "niah_single_3": ("essay", "word", "uuid", 1, 1, 1),
    "niah_multikey_1": ("essay", "word", "number", 4, 1, 1),
    "niah_multikey_2": ("needle", "word", "number", 1, 1, 1),
    "niah_multikey_3": ("needle", "uuid", "uuid", 1, 1, 1),
    "niah_multivalue": ("essay", "word", "number", 1, 4, 1),
    "niah_multiquery": ("essay", "word", "number", 4, 1, 4),
}
TASKS = list(NIAH) + ["vt", "cwe", "fwe", "kv"]
HAYSTACK_TASKS = set(NIAH) | {"vt"}


def exact_length(task):
    """Haystack tasks fill a length exactly; cwe, fwe and kv with whole items up to it."""
    return task in HAYSTACK_TASKS


class Stream:
    """A trial's haystack units, drawn as far as a prompt needs them (the same for every cell)."""

    def __init__(self, kind, rng, needle_kinds=None, needle_format=None, essay=None, taken=()):
        self.kind, self.rng, self.units, self.taken = kind, rng, [], set(taken)
        self.needle_kinds, self.needle_format, self.essay = needle_kinds, needle_format, essay
        if kind == "noise":
            self.start = rng.below(len(NOISE))
        elif kind == "essay":
            self.start = rng.below(len(essay))

    def unit(self, i):
        while len(self.units) <= i:
            j = len(self.units)
            if self.kind == "noise":
                self.units.append(NOISE[(self.start + j) % len(NOISE)])
            elif self.kind == "essay":
                self.units.append(self.essay[(self.start + j) % len(self.essay)])
            else:  # a distractor: a fresh key (never one of the trial's) and value
                k, v = self.needle_kinds
                key = DRAW[k](self.rng)
                while key in self.taken:
                    key = DRAW[k](self.rng)
                self.units.append(self.needle_format.format(key=key, value=DRAW[v](self.rng)))
        return self.units[i]


class Prompt:
    """A built prompt: ids, the reference answers, and the answer a model is trained to give (a
    piece like the others: encoded on its own, it follows the question's last word)."""

    def __init__(self, ids, references, answer, needles=()):
        self.ids, self.references, self.answer, self.needles = ids, references, answer, list(needles)


def encoder(sp):
    cache = {}

    def enc(text):
        if text not in cache:
            cache[text] = sp.encode(text)
        return cache[text]
    return enc


def fill(enc, length, fixed, stream, inserts):
    """The body of a haystack prompt: `inserts` [(depth, text)] among units of `stream`, exactly
    length − fixed tokens in all. Returns (ids, [token index of each insert in the body])."""
    pieces = [enc(t) for _, t in inserts]
    F = length - fixed - sum(len(p) for p in pieces)
    if F < 0:
        raise ValueError(f"length {length} cannot hold the task's fixed text ({length - F} tokens)")
    flat, ends = [], []  # the stream's first units, the fewest that hold F tokens; their last F kept
    while len(flat) < F:
        flat += enc(stream.unit(len(ends)))
        ends.append(len(flat))
    drop = len(flat) - F
    haystack = flat[drop:]
    bounds = [0] + [e - drop for e in ends if e > drop]
    def boundary(d):
        target = d * F
        return min(range(len(bounds)), key=lambda b: (abs(bounds[b] - target), b))
    order = sorted(range(len(inserts)), key=lambda i: (boundary(inserts[i][0]), inserts[i][0], i))
    at = {}
    for i in order:
        at.setdefault(boundary(inserts[i][0]), []).append(i)
    ids, where = [], [0] * len(inserts)
    for b in range(len(bounds)):
        for i in at.get(b, []):
            where[i] = len(ids)
            ids += pieces[i]
        if b + 1 < len(bounds):
            ids += haystack[bounds[b]:bounds[b + 1]]
    return ids, where


def build(sp, task, length, depth, trial, seed=1234, template="short", essay=None):
    """The prompt of one (task, length, depth, trial); .budget: the tokens its answer may take."""
    enc = encoder(sp)
    p = build_with(enc, sp.bos_id(), task, length, depth, trial, seed, template, essay)
    p.budget = len(enc(p.answer)) + ANSWER_SLACK
    return p


def build_with(enc, bos_id, task, length, depth, trial, seed, template, essay):
    rng = Rng(seed, trial)
    bos = [bos_id]
    if task in NIAH:
        haystack, key_kind, value_kind, k, v, q = NIAH[task]
        keys = draw_distinct(rng, key_kind, k)
        values = [[DRAW[value_kind](rng) for _ in range(v)] for _ in keys]
        queried = []
        while len(queried) < q:
            i = rng.below(k)
            if i not in queried:
                queried.append(i)
        depths = [depth] + [rng.below(1001) / 1000 for _ in range(k * v - 1)]
        query = listing([keys[i] for i in queried])
        refs = [x for i in queried for x in values[i]]
        head, needle, question = niah_text(template, value_kind, query, len(refs))
        if haystack == "essay" and essay is None:
            raise ValueError(f"{task}: an essay haystack needs a text (--essay)")
        stream = Stream(haystack, rng, (key_kind, value_kind), needle, essay_sentences(essay) if essay else None, keys)
        first = queried[0]
        order = [(first, 0)] + [(i, j) for i in range(k) for j in range(v) if (i, j) != (first, 0)]
        inserts = [(d, needle.format(key=keys[i], value=values[i][j])) for d, (i, j) in zip(depths, order)]
        fixed = 1 + len(enc(head) if head else []) + len(enc(question))
        body, where = fill(enc, length, fixed, stream, inserts)
        ids = bos + (enc(head) if head else []) + body + enc(question)
        answer = (refs[0] if len(refs) == 1 else listing(refs)) + "."
        return Prompt(ids, refs, answer, [1 + len(enc(head) if head else []) + w for w in where])
    if task == "vt":
        letters = 5 if template == "ruler" else 3
        names = []
        while len(names) < 5:
            n = "".join(chr(65 + rng.below(26)) for _ in range(letters))
            if n not in names:
                names.append(n)
        value = str(10000 + rng.below(90000))
        later = sorted(rng.below(1001) / 1000 for _ in range(4))
        depths = [depth] + [depth + (1 - depth) * u for u in later]
        lines = [f"VAR {names[0]} = {value}."] + [f"VAR {names[i + 1]} = VAR {names[i]}." for i in range(4)]
        if template == "ruler":
            head = "Memorize and track the chain(s) of variable assignment hidden in the following text."
            question = (f"Question: Find all variables that are assigned the value {value} in the text above. Answer: "
                        f"According to the chain(s) of variable assignment in the text above, 5 variables are "
                        f"assigned the value {value}, they are:")
        else:
            head, question = "", f"Which variables are {value}? They are"
        stream = Stream("noise", rng)
        fixed = 1 + len(enc(head) if head else []) + len(enc(question))
        body, where = fill(enc, length, fixed, stream, list(zip(depths, lines)))
        ids = bos + (enc(head) if head else []) + body + enc(question)
        return Prompt(ids, names, " ".join(names), [1 + len(enc(head) if head else []) + w for w in where])
    if task == "cwe":
        pool = ADJECTIVES + NOUNS
        shuffle(pool, rng)
        common = pool[:10]
        freq_common, freq_other = (30, 3) if length >= 4096 else (6, 1)  # RULER's, and its rule below 4096
        if template == "ruler":
            head = ("Below is a numbered list of words. In these words, some appear more often than others. "
                    "Memorize the ones that appear most often.")
            question = ("Question: What are the 10 most common words in the above list? Answer: The top 10 words that "
                        "appear most often in the list are:")
        else:
            head, question = "", "Which 10 words appear most often? They are"
        fixed = 1 + len(enc(head) if head else []) + len(enc(question))

        def items(u):  # the numbered list with u other words, in a fixed shuffle
            words = common * freq_common + pool[10:10 + u] * freq_other
            shuffle(words, Rng(seed + 1, trial))
            return [enc(f"{i + 1}. {w}") for i, w in enumerate(words)]
        if fixed + sum(map(len, items(0))) > length:
            raise ValueError(f"length {length} cannot hold the common words and the question")
        u = 0
        while 10 + u < len(pool) and fixed + sum(map(len, items(u + 1))) <= length:
            u += 1
        body = [t for x in items(u) for t in x]
        answer = " ".join(f"{i + 1}. {w}" for i, w in enumerate(common))
        return Prompt(bos + (enc(head) if head else []) + body + enc(question), common, answer)
    if task == "fwe":
        V = max(4, (length - 50) // 50)  # RULER's vocabulary size, at least the four ranks asked about
        words = []
        while len(words) < V:
            w = "".join(chr(97 + rng.below(26)) for _ in range(6))
            if w not in words:
                words.append(w)
        words[0] = "..."  # rank 1: noise
        if template == "ruler":
            head = ("Read the following coded text and track the frequency of each coded word. Find the three most "
                    "frequently appeared coded words.")
            question = ("Question: Do not provide any explanation. Please ignore the dots '....'. What are the three "
                        "most frequently appeared words in the above coded text? Answer: According to the coded text "
                        "above, the three most frequently appeared words are:")
        else:
            head, question = "", "Which three words appear most often, the dots aside? They are"
        fixed = 1 + len(enc(head) if head else []) + len(enc(question))

        def text(N):  # rank k appears floor(N / k² / ζ(2)) times, shuffled
            out = [w for k, w in enumerate(words, 1) for _ in range(int(N / (k * k) / ZETA2))]
            shuffle(out, Rng(seed + 1, trial))
            return [enc(w) for w in out]
        step, N = max(1, length // 32), length // 6
        if fixed + sum(map(len, text(N))) > length:
            raise ValueError(f"length {length} cannot hold the coded text and the question")
        while fixed + sum(map(len, text(N + step))) <= length:
            N += step
        body = [t for x in text(N) for t in x]
        return Prompt(bos + (enc(head) if head else []) + body + enc(question), words[1:4], " ".join(words[1:4]))
    if task == "kv":
        head = "Extract the value corresponding to the specified key in the JSON object below. JSON data:"
        records = [(draw_uuid(rng), draw_uuid(rng))]  # the asked one first
        def pieces(n):  # n records, the asked one at round(depth · (n − 1))
            order = records[1:n]
            order.insert(math.floor(depth * (n - 1) + 0.5), records[0])
            return [("{" if i == 0 else "") + f'"{k}": "{v}"' + ("}" if i == n - 1 else ",") for i, (k, v) in enumerate(order)]
        question = f'Key: "{records[0][0]}" Corresponding value:'
        fixed = 1 + len(enc(head)) + len(enc(question))
        def fits(n):
            while len(records) < n:
                records.append((draw_uuid(rng), draw_uuid(rng)))
            return fixed + sum(len(enc(x)) for x in pieces(n)) <= length
        n = 1
        while fits(n + 1):
            n += 1
        if n < 2:
            raise ValueError(f"length {length} cannot hold two records and the question")
        body = [t for x in pieces(n) for t in enc(x)]
        return Prompt(bos + enc(head) + body + enc(question), [records[0][1]], records[0][1])
    raise ValueError(f"unknown task {task} (tasks: {', '.join(TASKS)})")


def ascii_lower(s):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def score(answer, references):
    """RULER's string_match_all for one sample: the share of references in the answer, letters
    compared without case (ASCII's: the references are ASCII)."""
    a = ascii_lower(answer)
    return sum(ascii_lower(r) in a for r in references) / len(references)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", required=True, choices=TASKS)
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--depth", type=float, default=0.5)
    ap.add_argument("--trial", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--template", choices=["short", "ruler"], default="short")
    ap.add_argument("--essay", help="text whose sentences make the essay haystack (e.g. WikiText-2 test)")
    ap.add_argument("--spm", default=os.path.join(ROOT, "models", "tokenizer", "tokenizer.model"))
    a = ap.parse_args()
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=a.spm)
    p = build(sp, a.task, a.length, a.depth, a.trial, a.seed, a.template, a.essay)
    print(json.dumps({"length": len(p.ids), "text": sp.decode(p.ids), "answer": p.answer, "budget": p.budget,
                      "references": p.references, "needle_tokens": p.needles}, indent=1))


if __name__ == "__main__":
    main()
