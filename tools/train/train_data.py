#!/usr/bin/env python3
"""The family's training data, for tools/train/train.py: the text sources, the mix a batch is drawn
from, synthetic pass-key rows and the held-out windows. Its command shows what a run trains on:

    train_data.py RUN_CONFIG [--data-dir DIR] [--rows N]

prints each source's size and passes at the run's step count, then N decoded rows of each source
(the tokenizer must exist: models/tokenizer, see train.py).

Sources (the run config's "data" block names the files, in data.dir, relative to the repository
root, or --data-dir):
  tinystories  stories split at blank lines; the last validation_fraction of them are held out
               (never trained on; tools/train/heldout.py writes them, val_loss reads them).
  wikitext     WikiText-2 valid, split into articles at its top-level " = Title = " lines
               (WikiText-2 test is never read here).
  shakespeare  tinyshakespeare, one document.
  passkey      synthetic rows in `pert passkey`'s prompt format (tools/reference/passkey_reference.py's
               rebuild builds the prompt), each followed by its answer " NNNNN".
  ruler        synthetic rows of `pert ruler`'s tasks (tools/reference/ruler_tasks.py, short wording; the
               run config's "ruler" block: tasks, lengths, essay source, seed), each prompt
               followed by its answer.
  copy         synthetic rows of short copies: a list of 1-4 random 5-digit numbers said twice
               ("Numbers: 48213 90127. Again: 48213 90127."), so that copying a key digit by
               digit, the step the pass key's answer needs after its first digit, is trained
               on its own (issue 33: they took the blur out of xl's copies; not deberta's).
Each text source is one token stream, BOS before each document. A training row draws its source
with the "mix" weights, then a random window of context + 1 tokens of that stream.

"mix_phases" (optional): [{"steps": N, "mix": {...}}, ...], mixes for the run's first steps, in
order, each for its N steps; "mix" holds from the step the last phase ends. A curriculum: more
retrieval rows early, say, so a copy that a layout learns late is learnt while the learning rate
is still high (issue 69's hybrids). Without it, a run's rows are as they were.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from reference import passkey_reference  # noqa: E402  (the pass-key prompt format, written once)

TEXT_SOURCES = ("tinystories", "wikitext", "shakespeare")
SYNTHETIC = ("passkey", "ruler", "copy")
BOS = 1


# ----------------------------------------------------------------------------- files
WHOLE_BLOCKS = ("mix", "mix_phases", "position", "layers")  # one distribution, one layout: a run file states them whole


def load_run_config(path):
    """A run file, laid over its "base" (relative to it): a block named in the run file replaces
    the base's key by key ("train": {"steps": 3900} keeps the other settings), except "mix" and
    "position" (and "layers"), which it replaces whole."""
    with open(path) as f:
        run = json.load(f)
    if "base" in run:
        base = load_run_config(os.path.join(os.path.dirname(path), run.pop("base")))
        for key, value in run.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict) and key not in WHOLE_BLOCKS:
                base[key] = {**base[key], **value}
            else:
                base[key] = value
        run = base
    return run


def data_path(cfg, source, data_dir=None):
    """The file of a text source: data_dir (as given, e.g. relative to the working directory),
    else the config's data.dir relative to the repository root."""
    d = data_dir if data_dir is not None else os.path.join(ROOT, cfg["data"]["dir"])
    return os.path.join(d, cfg["data"][source])


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        sys.exit(f"train.py: {path}: {e.strerror} (the data directory is data.dir or --data-dir)")


def stories(path):
    return [s.strip() for s in read_text(path).split("\n\n") if s.strip()]


def split(cfg, data_dir=None):
    """TinyStories' (training, held-out) stories: the last validation_fraction held out."""
    all_stories = stories(data_path(cfg, "tinystories", data_dir))
    n_val = int(round(len(all_stories) * cfg["validation_fraction"]))
    return all_stories[:-n_val], all_stories[-n_val:]


def wikitext_articles(path):
    """WikiText's articles: each starts at a top-level heading line " = Title = " (" = = Section
    = = " lines stay inside their article); text before the first heading is dropped."""
    articles = []
    for line in read_text(path).splitlines(keepends=True):
        s = line.strip()
        if s.startswith("= ") and s.endswith(" =") and not s.startswith("= ="):
            articles.append([])
        if articles:
            articles[-1].append(line)
    return [t for t in ("".join(a).strip() for a in articles) if t]


def encode(sp, texts):
    """BOS + each text, concatenated into one stream."""
    out = []
    for ids in sp.encode(texts):
        out.append(BOS)
        out.extend(ids)
    return np.array(out, dtype=np.int64)


def documents(cfg, source, data_dir=None):
    if source == "tinystories":
        return split(cfg, data_dir)[0]
    if source == "wikitext":
        return wikitext_articles(data_path(cfg, source, data_dir))
    text = read_text(data_path(cfg, source, data_dir)).strip()
    return [text] if text else []


def mix_weights(cfg, mix=None):
    """A mix (default: the run's "mix") as {source: probability}, sources of weight 0 left out;
    bad mixes exit."""
    mix = cfg["mix"] if mix is None else mix
    if not isinstance(mix, dict):
        sys.exit(f"train.py: mix {mix!r}: must be an object of weights")
    unknown = sorted(set(mix) - set(TEXT_SOURCES) - set(SYNTHETIC))
    if unknown or any(not isinstance(w, (int, float)) or w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
        sys.exit(f"train.py: mix {mix}: weights must be numbers >= 0 with a positive sum, over "
                 f"{', '.join(TEXT_SOURCES + SYNTHETIC)}")
    total = sum(mix.values())
    return {k: w / total for k, w in mix.items() if w > 0}


def mix_schedule(cfg):
    """[(end_step, weights)]: each of "mix_phases" up to the step it ends (exclusive), then "mix"
    (end None). Bad phases exit."""
    phases = cfg.get("mix_phases", [])
    if not isinstance(phases, list):
        sys.exit(f"train.py: mix_phases {phases!r}: must be a list of {{\"steps\": N, \"mix\": {{...}}}}")
    out, end = [], 0
    for ph in phases:
        if not isinstance(ph, dict) or set(ph) != {"steps", "mix"} or not isinstance(ph["steps"], int) \
                or isinstance(ph["steps"], bool) or ph["steps"] < 1:
            sys.exit(f"train.py: mix_phases entry {ph!r}: must be {{\"steps\": N >= 1, \"mix\": {{...}}}}")
        end += ph["steps"]
        out.append((end, mix_weights(cfg, ph["mix"])))
    return out + [(None, mix_weights(cfg))]


def mix_sources(schedule):
    """Every source some phase of a mix_schedule draws from, the final mix's first (in its order)."""
    names = []
    for _, weights in reversed(schedule):
        names += [n for n in weights if n not in names]
    return names


# ----------------------------------------------------------------------------- synthetic rows
def filled(ids, more, width):
    """A row of `width` ids: ids, then more() appended until it is long enough, the last cut."""
    while len(ids) < width:
        ids = ids + more()
    return np.array(ids[:width], dtype=np.int64)


def examples(ids):
    """(start, end) of each BOS-led example of a synthetic row, BOS included; the last one may
    have been cut by the row's end."""
    starts = [i for i, t in enumerate(ids) if t == BOS] + [len(ids)]
    return list(zip(starts, starts[1:]))


# ----------------------------------------------------------------------------- pass-key rows
class Passkey:
    """Rows of pass-key examples, each BOS + `pert passkey`'s prompt of N tokens + the answer's
    tokens, N + answer drawn uniformly in passkey.lengths (clamped to what the key sentence and
    question need and to context + 1), the key 10000..99999, the depth uniform in passkey.depths
    (default [0, 1]; [0, 0.6] puts most keys of long rows past a local layer's window), the
    filler's start in the cycle uniform. A row starts with an example at position 0 (where
    `pert passkey` puts its prompt) and is filled up with more, the last cut at context + 1."""

    def __init__(self, sp, cfg, depths=None):
        self.sp, self.width = sp, cfg["train"]["context"] + 1
        self.lo, self.hi = cfg["passkey"]["lengths"]
        self.depths = cfg["passkey"].get("depths", [0, 1]) if depths is None else depths
        if not (isinstance(self.depths, list) and len(self.depths) == 2
                and all(isinstance(d, (int, float)) and not isinstance(d, bool) for d in self.depths)
                and 0 <= self.depths[0] <= self.depths[1] <= 1):
            sys.exit(f"train.py: passkey.depths {self.depths!r}: must be [lo, hi] with 0 <= lo <= hi <= 1")
        self.hi = min(self.hi, self.width)
        self.question = sp.encode(passkey_reference.QUESTION)
        longest = self.shortest(99999) + len(self.answer(99999))  # byte-fallback digits: the longest
        if self.hi < longest:
            sys.exit(f"train.py: passkey.lengths {cfg['passkey']['lengths']}: a prompt and answer need up to "
                     f"{longest} tokens, more than the longest allowed ({self.hi})")

    def answer(self, key):
        """The answer's ids: what follows the question in the text "... The pass key is NNNNN"."""
        whole = self.sp.encode(f"{passkey_reference.QUESTION} {key}")
        assert whole[:len(self.question)] == self.question
        return whole[len(self.question):]

    def shortest(self, key):
        """The shortest prompt for a key: BOS, the key sentence and the question."""
        return 1 + len(self.sp.encode(" ".join([passkey_reference.key_sentence(key), passkey_reference.QUESTION])))

    def example(self, rng):
        """(ids, answer's start, answer's length)."""
        total = int(rng.integers(self.lo, self.hi + 1))
        lo, hi = self.depths  # [0, 1] draws as rng.random() itself: runs without passkey.depths unchanged
        key, depth, offset = int(rng.integers(10000, 100000)), lo + (hi - lo) * float(rng.random()), int(rng.integers(0, 5))
        answer = self.answer(key)
        n = max(total - len(answer), self.shortest(key))
        prompt, _ = passkey_reference.rebuild(self.sp, n, depth, key, offset)
        return prompt + answer, n, len(answer)

    def row(self, rng):
        """A row of context + 1 ids and its first example's answer (start, length)."""
        ids, start, length = self.example(rng)
        return filled(ids, lambda: self.example(rng)[0], self.width), (start, length)


# ----------------------------------------------------------------------------- retrieval rows
class RulerRows:
    """Rows of retrieval-task examples (tools/reference/ruler_tasks.py's rules, short wording): each example
    a task drawn uniformly from ruler.tasks, its prompt and answer together N tokens, N uniform in
    ruler.lengths (clamped to context + 1), the depth uniform in [0, 1], the trial a draw below
    2^31 under ruler.seed (`pert ruler` evaluates under its own --seed); the essay haystack is the
    source ruler.essay names (WikiText-2 valid: the test split stays unseen). A row starts with
    an example at position 0 and is filled up with more, the last cut at context + 1."""

    def __init__(self, sp, cfg, data_dir=None):
        from reference import ruler_tasks
        r = cfg["ruler"]
        self.sp, self.width, self.tasks = sp, cfg["train"]["context"] + 1, list(r["tasks"])
        self.lo, self.hi = r["lengths"]
        self.hi = min(self.hi, self.width)
        self.seed, self.build = int(r.get("seed", 777)), ruler_tasks.build
        self.essay = data_path(cfg, r["essay"], data_dir) if r.get("essay") else None
        unknown = sorted(set(self.tasks) - set(ruler_tasks.TASKS))
        if unknown or not self.tasks:
            sys.exit(f"train.py: ruler.tasks {self.tasks}: each one of {', '.join(ruler_tasks.TASKS)}")
        for task in self.tasks:  # each must fit the longest row with its answer
            try:
                self.example_of(task, self.hi, 0.5, 0)
            except ValueError as e:
                sys.exit(f"train.py: ruler.lengths {r['lengths']}: {task} does not fit {self.hi} tokens ({e})")

    def example_of(self, task, total, depth, trial):
        """The ids of a prompt and its answer, at most `total` of them (ValueError: too short)."""
        p = self.build(self.sp, task, total, depth, trial, self.seed, "short", self.essay)
        answer = self.sp.encode(p.answer)
        p = self.build(self.sp, task, total - len(answer), depth, trial, self.seed, "short", self.essay)
        return p.ids + answer

    def example(self, rng):
        while True:  # a draw too short for its task is drawn again
            task = self.tasks[int(rng.integers(0, len(self.tasks)))]
            total, depth, trial = int(rng.integers(self.lo, self.hi + 1)), float(rng.random()), int(rng.integers(0, 2 ** 31))
            try:
                return self.example_of(task, total, depth, trial)
            except ValueError:
                continue

    def row(self, rng):
        return filled(self.example(rng), lambda: self.example(rng), self.width)


# ----------------------------------------------------------------------------- copy rows
class CopyRows:
    """Rows of short copies: each example "Numbers: K1 ... Kn. Again: K1 ... Kn." with n uniform
    in 1..4 and each K uniform in 10000..99999, examples one after another (BOS before each) up to
    context + 1 ids. The repeat is what is learnt: each of its digits is the one after the digit
    just written, at the same place in the first list."""
    MAX_NUMBERS = 4

    def __init__(self, sp, cfg):
        self.sp, self.width = sp, cfg["train"]["context"] + 1

    def example(self, rng):
        n = int(rng.integers(1, self.MAX_NUMBERS + 1))
        keys = " ".join(str(int(k)) for k in rng.integers(10000, 100000, size=n))
        return [BOS] + self.sp.encode(f"Numbers: {keys}. Again: {keys}.")

    def row(self, rng):
        return filled(self.example(rng), lambda: self.example(rng), self.width)


# ----------------------------------------------------------------------------- the mix
class Mix:
    """The training rows: each row's source drawn with the mix weights, then a window of its
    stream (or a pass-key row). Draws from two generators, one for sources and windows, one for
    pass-key rows, so a pass-key share of 0 leaves the text windows as they were."""

    def __init__(self, cfg, sp, data_dir=None):
        schedule = mix_schedule(cfg)
        self.weights = schedule[-1][1]  # the final mix
        self.names = mix_sources(schedule)
        # [(end_step, p over names)]: the phases, then the final mix (end None)
        self.schedule = [(end, np.array([w.get(n, 0.0) for n in self.names])) for end, w in schedule]
        self.width = cfg["train"]["context"] + 1
        self.streams = {n: encode(sp, documents(cfg, n, data_dir)) for n in self.names if n not in SYNTHETIC}
        for n, s in self.streams.items():
            if len(s) < self.width:
                sys.exit(f"train.py: {n}: {len(s)} tokens, fewer than a window of {self.width}")
        self.passkey = Passkey(sp, cfg) if "passkey" in self.names else None
        self.ruler = RulerRows(sp, cfg, data_dir) if "ruler" in self.names else None
        self.copy = CopyRows(sp, cfg) if "copy" in self.names else None

    def p_at(self, step):
        """The source probabilities of the batch at 0-based `step`."""
        return next(p for end, p in self.schedule if end is None or step < end)

    def row(self, name, rng, pk_rng):
        """One row of a source: synthetic rows draw from pk_rng, text windows from rng."""
        if name == "passkey":
            return self.passkey.row(pk_rng)[0]
        if name == "ruler":
            return self.ruler.row(pk_rng)
        if name == "copy":
            return self.copy.row(pk_rng)
        s = int(rng.integers(0, len(self.streams[name]) - self.width + 1))
        return self.streams[name][s:s + self.width]

    def batch(self, rng, pk_rng, rows, step=0):
        """[rows, context + 1] int64, the sources drawn with the mix of `step` (0-based)."""
        which = rng.choice(len(self.names), size=rows, p=self.p_at(step))
        out = np.empty((rows, self.width), dtype=np.int64)
        for r, i in enumerate(which):
            out[r] = self.row(self.names[i], rng, pk_rng)
        return out

    def summary(self, steps, batch):
        """One line per source: tokens, share and passes over it in `steps` batches (the share a
        step-weighted mean over the phases, each phase's own shares listed after)."""
        starts = [0] + [end for end, _ in self.schedule[:-1]]
        spans = [max(0, min(end if end is not None else steps, steps) - start)
                 for start, (end, _) in zip(starts, self.schedule)]
        share = sum(n * p for n, (_, p) in zip(spans, self.schedule)) / max(1, sum(spans))
        lines = []
        for i, n in enumerate(self.names):
            rows = steps * batch * share[i]
            if n in SYNTHETIC:
                lines.append(f"  {n:<12} synthetic, share {share[i]:.2f}: ~{rows:,.0f} rows")
            else:
                size = len(self.streams[n])
                lines.append(f"  {n:<12} {size:>9,} tokens, share {share[i]:.2f}: "
                             f"{rows * self.width / size:.1f} passes")
        for start, (end, p) in zip(starts, self.schedule[:-1]):
            lines.append(f"  steps {start}..{end - 1}: " + ", ".join(
                f"{n} {w:.2f}" for n, w in zip(self.names, p) if w > 0))
        return "\n".join(lines)


def heldout_passkey(sp, cfg, rng):
    """passkey.eval_windows rows from their own generator: ids [n, context + 1] and each row's
    first answer (start, length)."""
    pk = Passkey(sp, cfg, depths=[0, 1])  # every depth, whatever the training rows' range
    rows = [pk.row(rng) for _ in range(cfg["passkey"]["eval_windows"])]
    return np.stack([r[0] for r in rows]), [r[1] for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_config", metavar="RUN_CONFIG", help="configs/train/NAME.json")
    ap.add_argument("--data-dir", help="directory of the text files (default: the config's data.dir)")
    ap.add_argument("--rows", type=int, default=2, help="rows to print per source (default %(default)s)")
    a = ap.parse_args()
    import sentencepiece as spm
    cfg = load_run_config(a.run_config)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, cfg["tokenizer"]["dir"], "tokenizer.model"))
    mix = Mix(cfg, sp, a.data_dir)
    print(mix.summary(cfg["train"]["steps"], cfg["train"]["batch_size"]))
    rng = np.random.default_rng(0)
    for name in mix.names:
        for _ in range(a.rows):
            ids = mix.row(name, rng, rng)
            print(f"--- {name}: {sp.decode(ids.tolist())!r}")


if __name__ == "__main__":
    main()
