"""The attention lab without a browser: transformer.lab.translate_with_mask (masking through the
source mask, the beam tree), and viz.lab's server (its JSON, bad input, path traversal, 127.0.0.1)."""
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

from tinygrad_lite import fast
from transformer.decoding import BeamTrace, beam_search
from transformer.lab import KINDS, translate_with_mask
from transformer.masks import padding_mask
from transformer.translator import load_translator
from viz.__main__ import build_parser
from viz.lab import LabServer, server

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "32", "--heads", "2", "--layers", "2", "--d-ff", "64", "--max-tokens", "600", "--no-progress"]
TEXT = "我喜欢猫"


def train_tiny_checkpoint(out: Path) -> Path:
    """A 2-layer, 2-head translator after a few steps on the built-in corpus: seconds to train."""
    env = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "transformer", "train", "--out", str(out), "--max-steps", "6",
                          *TINY], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return out / "best.safetensors"


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    return train_tiny_checkpoint(tmp_path_factory.mktemp("lab") / "run")


@pytest.fixture(scope="session")
def translator(checkpoint):
    return load_translator(checkpoint)


@pytest.fixture(scope="session")
def lab(translator):
    running = LabServer(lambda text, mask: translate_with_mask(translator, text, mask)).start()
    yield running
    running.stop()


def request(lab, method: str, path: str, body=None):
    """(status, parsed JSON or raw bytes) for `path` sent exactly as written (no normalising)."""
    host, port = lab.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=60)
    payload = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    connection.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    is_json = response.getheader("Content-Type", "").startswith("application/json")
    return response.status, json.loads(data) if is_json else data


# ---------------------------------------------------------------- the data
def test_a_masked_token_gets_no_attention_in_any_layer_or_head(translator):
    plain = translate_with_mask(translator, TEXT)
    masked = translate_with_mask(translator, TEXT, [1])
    assert plain["masked"] == [] and masked["masked"] == [1]
    assert masked["source_tokens"] == plain["source_tokens"] == list("我喜欢猫。")
    for kind in ("encoder self-attention", "cross-attention"):
        before, after = np.array(plain["attention"][kind]["weights"]), np.array(masked["attention"][kind]["weights"])
        assert after.shape[:2] == (2, 2)                          # layers, heads
        assert (before[..., 1] > 0).all()                         # it was attended to
        assert (after[..., 1] == 0).all()                         # now never, in every layer, head and query
        np.testing.assert_allclose(after.sum(-1), 1, atol=1e-5)   # the rest still sums to 1
    decoder = np.array(masked["attention"]["decoder self-attention"]["weights"])
    np.testing.assert_allclose(decoder.sum(-1), 1, atol=1e-5)


def test_the_mask_is_the_source_mask_on_the_original_tokens(translator):
    """Reading a masked token as <pad> is the same as keeping it and hiding it in the source mask."""
    masked = translate_with_mask(translator, TEXT, [0, 2])
    src = translator.source_ids(TEXT)[None]
    mask = padding_mask(src, translator.model.config.pad_id).copy()
    mask[..., [0, 2]] = False
    v = translator.tgt_vocab
    target = v.encode(masked["target_tokens"])
    tgt_in = np.array([[v.bos_id] + target[:-1]])
    cross = [layer.cross_attn for layer in translator.model.decoder.layers]
    for m in cross:
        m.keep_weights = True
    try:
        with fast.plain():
            translator.model(src, tgt_in, src_mask=mask)
        expected = np.stack([m.weights[0] for m in cross])
    finally:
        for m in cross:
            m.keep_weights, m.weights = False, None
    np.testing.assert_allclose(masked["attention"]["cross-attention"]["weights"], expected, atol=1e-6)


def test_the_labels_fit_the_weights(translator):
    result = translate_with_mask(translator, TEXT, [3])
    for kind in KINDS:
        part = result["attention"][kind]
        weights = np.array(part["weights"])
        assert weights.shape[2:] == (len(part["queries"]), len(part["keys"]))
    assert result["attention"]["cross-attention"]["queries"][0] == "<bos>"
    assert result["attention"]["cross-attention"]["keys"] == result["source_tokens"]


def path_to(nodes, node_id) -> list:
    tokens = []
    while nodes[node_id]["parent"] is not None:
        tokens.append(nodes[node_id]["token"])
        node_id = nodes[node_id]["parent"]
    return tokens[::-1]


@pytest.mark.parametrize("mask", [[], [1]])
def test_the_beam_trees_best_leaf_is_beam_searchs_answer(translator, mask):
    result = translate_with_mask(translator, TEXT, mask)
    nodes, best = result["beam"]["nodes"], result["beam"]["best"]
    src = translator.source_ids(TEXT)
    src[mask] = translator.model.config.pad_id
    v = translator.tgt_vocab
    with fast.plain():
        tokens, logp, _ = beam_search(translator.model, src, v.bos_id, v.eos_id, 4, translator._max_len(len(src)),
                                      0.6)
    assert path_to(nodes, best) == [int(t) for t in tokens]
    assert nodes[best]["finished"] and nodes[best]["logp"] == pytest.approx(logp, abs=1e-4)
    assert v.decode(path_to(nodes, best), strip_special=False) == result["target_tokens"]
    assert all(n["text"] == v.decode([n["token"]], strip_special=False)[0] for n in nodes[1:])


def test_the_beam_tree_holds_what_the_beam_kept(translator):
    """With the default tricks and backend (the decoder kernel under Numba): a trace changes nothing."""
    trace = BeamTrace()
    src = translator.source_ids(TEXT)
    v = translator.tgt_vocab
    traced = beam_search(translator.model, src, v.bos_id, v.eos_id, 3, 20, 0.6, trace=trace)
    untraced = beam_search(translator.model, src, v.bos_id, v.eos_id, 3, 20, 0.6)
    assert [int(t) for t in traced[0]] == [int(t) for t in untraced[0]] and traced[1:] == untraced[1:]
    nodes = trace.nodes
    assert nodes[0]["parent"] is None and len(nodes) > 3
    for node in nodes[1:]:
        parent = nodes[node["parent"]]
        assert node["step"] == parent["step"] + 1 and not parent["token"] == v.eos_id
        if node["logp"] is not None and parent["logp"] is not None:
            assert node["logp"] <= parent["logp"] + 1e-6              # log-probs only add up downwards
    for step in range(1, max(n["step"] for n in nodes) + 1):
        alive = [n for n in nodes if n["step"] == step and n["token"] != v.eos_id and not n["greedy"]]
        assert len(alive) <= 3
    assert all(n["logp"] is not None for n in nodes if not n["greedy"])
    finished = [n for n in nodes if n["finished"]]
    assert finished and all(n["token"] == v.eos_id or n["step"] == 20 for n in finished)
    assert trace.best in [n["id"] for n in finished]


def test_bad_input_is_a_clear_value_error(translator):
    with pytest.raises(ValueError, match="outside the source's 5 tokens"):
        translate_with_mask(translator, TEXT, [5])
    with pytest.raises(ValueError, match="every source token is masked"):
        translate_with_mask(translator, TEXT, range(5))
    with pytest.raises(ValueError, match="empty"):
        translate_with_mask(translator, "  ")


# ---------------------------------------------------------------- the server
def test_the_servers_json_is_the_python_apis(lab, translator):
    expected = json.loads(json.dumps(translate_with_mask(translator, TEXT, [1, 3])))
    status, got = request(lab, "GET", f"/api/translate?text={quote(TEXT)}&mask=1,3")
    assert status == 200 and got == expected
    status, posted = request(lab, "POST", "/api/translate", {"text": TEXT, "mask": [3, 1]})
    assert status == 200 and posted == expected


def test_the_page_and_its_files_are_served(lab):
    status, page = request(lab, "GET", "/")
    assert status == 200 and b"/static/lab.js" in page
    for name in ("lab.js", "lab.css"):
        status, body = request(lab, "GET", f"/static/{name}")
        assert status == 200 and body == (Path(server.STATIC) / name).read_bytes()


@pytest.mark.parametrize("path", [
    "/../../etc/passwd", "/static/../__main__.py", "/static/../server.py", "/static/%2e%2e/server.py",
    "/static/..%2fserver.py", "/static/%2e%2e%2f..%2f__main__.py", "/static/%2Fetc%2Fpasswd", "//etc/passwd",
    "/static//etc/passwd", "/static/..\\server.py", "/etc/passwd", "/server.py", "/static/", "/font/../server.py"])
def test_nothing_outside_the_static_folder_is_served(lab, path):
    status, body = request(lab, "GET", path)
    assert status == 404 and set(body) == {"error"}


def test_a_symlink_out_of_the_static_folder_is_not_followed(tmp_path, monkeypatch):
    (tmp_path / "static").mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "static" / "page.js").write_text("ok")
    (tmp_path / "static" / "link.txt").symlink_to(tmp_path / "secret.txt")
    monkeypatch.setattr(server, "STATIC", (tmp_path / "static").resolve())
    assert server.static_file("/static/page.js") == (tmp_path / "static" / "page.js").resolve()
    assert server.static_file("/static/link.txt") is None


@pytest.mark.parametrize("query, message", [
    ("text=", "text: empty"), ("text=%20%20", "text: empty"), ("mask=1", "text: empty"),
    (f"text={quote('猫' * (server.MAX_TEXT + 1))}", "too long"),
    (f"text={quote(TEXT)}&mask=7", "masked position 7 is outside"),
    (f"text={quote(TEXT)}&mask=-1", "masked position -1 is outside"),
    (f"text={quote(TEXT)}&mask=a", "mask: expected"),
    (f"text={quote(TEXT)}&mask=0,1,2,3,4", "every source token is masked"),
])
def test_bad_input_gets_400_with_the_reason(lab, query, message):
    status, body = request(lab, "GET", f"/api/translate?{query}")
    assert status == 400 and message in body["error"]


@pytest.mark.parametrize("body, message", [(b"not json", "not JSON"), ([1, 2], "expected a JSON object"),
                                           ({"text": 5}, "text: empty"), ({"text": TEXT, "mask": [1.5]}, "mask"),
                                           ({"text": TEXT, "mask": "x"}, "mask")])
def test_a_bad_post_gets_400(lab, body, message):
    status, answer = request(lab, "POST", "/api/translate", body)
    assert status == 400 and message in answer["error"]


def test_it_binds_this_machine_only_by_default(translator):
    lab = LabServer(lambda text, mask: {})
    try:
        assert lab.server_address[0] == "127.0.0.1" and lab.url.startswith("http://127.0.0.1:")
    finally:
        lab.server_close()
    assert build_parser().parse_args(["lab", "--checkpoint", "x"]).host == "127.0.0.1"


def ctrl_c_as_in_a_terminal():
    """A job started in the background of a shell (as CI may be) inherits SIGINT ignored, and
    Python then leaves Ctrl-C ignored; the test's Ctrl-C is a terminal's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_command_prints_its_url_and_serves(checkpoint):
    env = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "viz", "lab", "--checkpoint", str(checkpoint), "--port", "0"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        line = proc.stdout.readline()
        assert line.startswith("attention lab: http://127.0.0.1:"), line + proc.stderr.read()
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", f"/api/translate?text={quote(TEXT)}")
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["source_tokens"] == list("我喜欢猫。")
    finally:
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0


def test_a_missing_checkpoint_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "viz", "lab", "--checkpoint", str(tmp_path / "none.safetensors")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "does not exist" in run.stderr and "Traceback" not in run.stderr
