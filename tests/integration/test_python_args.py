"""The Python module's str and path arguments (src/python/convert_bindings.cpp: text_arg, path_arg): a str
that is not text (a lone surrogate) or not a str at all is a one-line pert.Error naming the
argument, never pybind11's "Unable to cast Python instance to C++ type"; a path is the bytes
os.fsencode gives, so a file whose name is not UTF-8 opens, by str (surrogate-escaped) or bytes.

Run by ctest (test python_module) with PYTHONPATH=build/python; reads models/rope and
build/data/tinystories_heldout.txt (PERT_BUILD_DIR).
"""
import os
import shutil

import pytest

import pert

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PERT_BUILD_DIR", os.path.join(ROOT, "build"))
ROPE = os.path.join(ROOT, "models", "rope")
TEXT = os.path.join(BUILD, "data", "tinystories_heldout.txt")
LONE = "\udc80"  # a lone surrogate: what os.fsdecode makes of the byte 0x80, and no text


@pytest.fixture(scope="module")
def rope():
    pert.set_threads(1)
    yield pert.load(ROPE)
    pert.set_threads(0)


def raises_naming(call, message):
    """call() raises pert.Error, its message one line starting with `message`."""
    with pytest.raises(pert.Error) as e:
        call()
    text = str(e.value)
    assert text.startswith(message) and "\n" not in text and "cast" not in text, text
    return text


def test_a_lone_surrogate_in_a_text_argument_is_an_error_naming_it(rope):
    story = "Once " + LONE + " upon"
    for call, name in [
        (lambda: rope.attention(text=story * 40, n_ctx=32), "text"),  # the calls
        (lambda: rope.perplexity(text=story * 40, n_ctx=32), "text"),
        (lambda: pert.perplexity(rope, text=story * 40, n_ctx=32), "text"),
        (lambda: rope.tokenize(story), "text"),
        (lambda: rope.generate(story, n_predict=2), "prompt"),
        (lambda: rope.perplexity(text="a b c", mode="chunks" + LONE), "mode"),
        (lambda: rope.perplexity(text="a b c", buckets=LONE), "buckets"),
        (lambda: rope.logits([1], cache_type="f32" + LONE), "cache_type"),
        (lambda: rope.session(cache_type=LONE), "cache_type"),
        (lambda: rope.passkey([64], cache_type=LONE), "cache_type"),
        (lambda: rope.ruler(["vt", LONE], [128]), "tasks"),
        (lambda: rope.ruler(["vt"], [128], template=LONE), "template"),
        (lambda: pert.load(ROPE, dtype=LONE), "dtype"),
        (lambda: pert.load(ROPE, set={"rope_theta" + LONE: 1}), "set"),
        (lambda: pert.load(ROPE, set={"rope_scaling.rope_type": LONE}), "set"),
        (lambda: pert.load(ROPE, config={"rope_scaling": {"rope_type": LONE}}), "config"),
        (lambda: pert.sweep([ROPE], [32], text=story * 40), "text"),
        (lambda: pert.sweep([ROPE], [32], labels=[LONE], text="a b c"), "labels"),
        (lambda: pert.sweep([ROPE], [32], dtype=LONE, text="a b c"), "dtype"),
        (lambda: pert.merge([{"index": 0, "cells": 1, "grid": LONE}]), "merge: part 1, record 0: grid"),
    ]:
        text = raises_naming(call, name + ": '\\udc80' (character ")
        assert "is a lone surrogate, which is not text UTF-8 can encode" in text, text
    # where in a long text: the character's index and what is around it
    assert "(character 5, in 'Once \\udc80 uponOnce \\udc80 ')" in raises_naming(
        lambda: rope.attention(text=story * 40, n_ctx=32), "text")


def test_a_text_argument_that_is_not_a_str_is_an_error_naming_it(rope):
    for call, message in [
        (lambda: rope.tokenize(b"Once"), "text: a str expected, got bytes"),
        (lambda: rope.perplexity(text=b"a b c"), "text: a str expected, got bytes"),
        (lambda: rope.generate(7), "prompt: a str expected, got int"),
        (lambda: rope.logits([1], cache_type=None), "cache_type: a str expected, got NoneType"),
        (lambda: rope.perplexity(text="a b c", mode=1), "mode: a str expected, got int"),
        (lambda: pert.load(ROPE, dtype=16), "dtype: a str expected, got int"),
        (lambda: rope.ruler("vt", [128]), "tasks: a list expected, got a str (put it in [])"),
        (lambda: rope.ruler(5, [128]), "tasks: a list expected, got int"),
        (lambda: rope.ruler([5], [128]), "tasks: a str expected, got int"),
    ]:
        raises_naming(call, message)


def test_paths_are_the_file_systems_bytes(rope, tmp_path):
    # A directory and files whose names are not UTF-8 (the byte 0x80), as os.listdir gives them.
    model = tmp_path / ("rope" + LONE)
    shutil.copytree(ROPE, model)
    text = tmp_path / ("text" + LONE + ".txt")
    with open(TEXT, encoding="utf-8") as f:
        text.write_text(f.read()[:20000], encoding="utf-8")
    patch = tmp_path / ("patch" + LONE + ".json")
    patch.write_text('{"position": {"base": 20000}}')
    assert os.fsencode(model).endswith(b"rope\x80")
    for given in (str(model), model, os.fsencode(model)):  # str, os.PathLike, bytes: one directory
        m = pert.load(given)
        assert m.dir == str(model) and os.path.isdir(m.dir)  # Model.dir opens again
    assert repr(m).startswith("<pert.Model ") and "rope\\x80: rope" in repr(m)
    ids = rope.tokenize("Once upon a time")
    assert (m.logits(ids) == rope.logits(ids)).all()
    got = m.perplexity(file=text, n_ctx=64, chunks=2)
    assert got["model_dir"] == str(model)
    assert got["ppl"] == rope.perplexity(file=os.fsencode(text), n_ctx=64, chunks=2)["ppl"]
    assert m.attention(file=text, n_ctx=64, chunks=1)["model_dir"] == str(model)
    assert pert.load(ROPE, config=patch).config["position"]["base"] == 20000
    # A name that does not exist says so, its byte shown as \x80 (the message is text).
    raises_naming(lambda: pert.load(str(tmp_path / LONE)), str(tmp_path) + "/\\x80: ")
    raises_naming(lambda: rope.attention(file=tmp_path / ("none" + LONE), n_ctx=32), str(tmp_path) + "/none\\x80: cannot open")


def test_a_path_no_file_can_have_is_an_error_naming_it(rope, tmp_path):
    for call, message in [
        # a surrogate that stands for no byte (os.fsencode refuses it)
        (lambda: pert.load(ROPE + "\ud800"), "dir: '\\ud800' (character "),
        (lambda: rope.perplexity(file="t\ud800.txt"), "file: '\\ud800' (character 1"),
        (lambda: pert.load(ROPE, config="c\ud800.json"), "config: '\\ud800'"),
        (lambda: rope.ruler(["niah_single_2"], [128], essay="\ud800"), "essay: '\\ud800'"),
        (lambda: pert.sweep(["m\ud800"], [32], text="a b c"), "models: '\\ud800'"),
        # a NUL: open() would stop at it and read another file
        (lambda: pert.load(ROPE + "\0junk"), "dir: b'"),
        (lambda: rope.attention(file=TEXT + "\0.txt", n_ctx=32), "file: b'"),
        (lambda: pert.load(5), "dir: a path expected"),
        (lambda: rope.perplexity(file=1.5), "file: a path expected"),
    ]:
        text = raises_naming(call, message)
        assert "NUL" in text or "surrogate" in text or "a path expected" in text, text
    # pert.sweep's records and grid are JSON, which names each path: one not UTF-8 is refused by name
    model = tmp_path / ("rope" + LONE)
    shutil.copytree(ROPE, model)
    raises_naming(lambda: pert.sweep([model], [32], text="a b c"), "models: " + str(tmp_path) + "/rope\\x80 is not UTF-8")
    raises_naming(lambda: pert.sweep([ROPE], [32], file=tmp_path / LONE), "file: " + str(tmp_path) + "/\\x80 is not UTF-8")
    raises_naming(lambda: pert.sweep([ROPE], [32], configs=[os.fsencode(tmp_path) + b"/\xff.json"], text="a b c"),
                  "configs: " + str(tmp_path) + "/\\xff.json is not UTF-8")
