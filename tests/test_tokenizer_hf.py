"""test_tokenizer_hf: vktrain's hf tokenizer (byte-level BPE from a
tokenizer.json) against Hugging Face `tokenizers` as the oracle.

 1. a byte-level BPE trained here (vocab ~1000, <|endoftext|>) encodes tricky
    strings (contractions, digits, punctuation runs, spaces, tabs, newlines,
    Unicode white space, letters and numbers of other scripts, combining
    marks, emoji) and a few KB of random text to the same ids as tokenizers;
 2. the same with the pre-tokenizer written as Sequence[Split(GPT-2 regex),
    ByteLevel(use_regex=false)], with merges as "a b" strings, and with
    model.ignore_merges;
 3. decode(encode(x)) == x for every byte string, invalid UTF-8 included;
    special ids decode to their content; text is plain (<|endoftext|> in the
    text is not the special token, like encode_special_tokens=True);
 4. bos = eos = pad = <|endoftext|> for a GPT-2-style file;
 4b. the classes \p{L}, \p{N}, \s of the split regex agree with tokenizers'
    (Oniguruma's) at every boundary of vktrain's Unicode tables and at
    random code points;
 5. end to end (then generate samples with the saved tokenizer.json): a
    text dataset trains 2 steps with tokenizer.type hf, the
    model's vocab_size defaults to the tokenizer's size, and the data
    pipeline stores exactly BOS + ids + EOS per document.

Needs the PyPI package `tokenizers` (Debian has none); scripts/test.sh
installs it. Without it this test fails: it is the only oracle here.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

try:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("FAIL: the Python package 'tokenizers' is missing (it is the oracle of this test); install it with\n"
          "  /usr/bin/python3 -m pip install --break-system-packages tokenizers\n"
          "(scripts/test.sh does this)")
    sys.exit(1)

TOOLS = os.environ.get("TOOLS", os.path.join(os.getcwd(), "tools"))
VKTRAIN = os.environ.get("VKTRAIN")
DRIVER = os.path.join(TOOLS, "tokenize_driver")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

failures = 0


def check(name, ok, detail=""):
    global failures
    if ok:
        print("ok:", name)
    else:
        failures += 1
        print("FAIL:", name, detail)


TRICKY = [
    "Hello world",
    "it's don't I'm we've you're they'll he'd 'S 'LL ''s ?'s x's",
    "'", "'s", "''", "' s", " 's",
    "digits 123 4567890 3.14159 1,000,000 v2 x86_64 0x1F",
    "punctuation!!! ??? ... --- ((()))[]{} <html> a+b=c; @user #tag $5 %d ^_^",
    "multiple   spaces    here     and  two",
    "   leading spaces", "trailing spaces   ", " ", "  ", "a b", "a  b", "a   b",
    "tabs\tand\t\ttabs \t mixed\t",
    "new\nlines\n\nand\r\nCRLF\n \n  \nend\n",
    "\n", "\n\n", " \n", "\n ", "x\n\n\ny",
    "café naïve résumé Straße ß Œuvre façade",
    "中文 测试 中文测试, 日本語のテキスト 한국어 텍스트",
    "Привет мир Ελληνικά עברית العربية हिन्दी ภาษาไทย",
    "e\u0301 combining a\u0308 marks \u0915\u093f\u0924\u093e\u092c",
    "emoji 😀😃 👍🏽 👨‍👩‍👧 🇫🇷 ❤️ ✨x✨",
    "numbers ٣٤٥ ½ ² Ⅻ １２３ ߁ ①",
    "spaces\u00a0nbsp\u3000ideographic\u2009thin\u2028line\u2029para\u0085nel\x0bvt\x0cff",
    "\u00a0a \u00a0a\u00a0\u00a0b",
    "symbols € £ © ™ ° ± × ÷ → ∑ ∞",
    "mix3d w0rds and_under_scores CamelCase UPPER lower",
    "x" * 300,
    " " * 100 + "y",
    "ab" * 150,
    "",
]


def random_text(rng, n_chars):
    pool = (list("abcdefghijklmnopqrstuvwxyz") * 6 + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ") + list("0123456789") * 2 +
            list(" " * 30) + list("\n\t\r") + list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`") +
            list("éèàüößñçøåÆŒЖжΩλ中文日本語한국") + ["e\u0301", "\u093f", "\u0301"] +
            list("٣٤½²Ⅻ１２") + list("\u00a0\u3000\u2009\u2028\u0085\x0b\x0c") +
            ["😀", "👍🏽", "👨‍👩‍👧", "€", "©", "\u200d", "\ue000"] +
            ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "  ", "   ", " \n", "\n\n"])
    return "".join(rng.choice(pool) for _ in range(n_chars))


def training_text(rng):
    words = ("the quick brown fox jumps over lazy dog it's don't we'll they're I've café Straße 中文 测试 日本語 "
             "Привет мир 12 345 2024 3.14 hello world !!! ... -- :) 😀 👍 naïve résumé").split()
    lines = []
    for _ in range(3000):
        k = rng.randint(3, 14)
        line = " ".join(rng.choice(words) for _ in range(k))
        if rng.random() < 0.2:
            line = "  " + line
        if rng.random() < 0.1:
            line += "\t" + str(rng.randint(0, 99999))
        lines.append(line)
    lines += [random_text(rng, 200) for _ in range(200)]
    return lines


def train(path, rng, vocab_size=1000):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(rng), trainer)
    tok.save(path)
    return tok


def driver(*args, binary=False):
    r = subprocess.run([DRIVER] + [str(a) for a in args], capture_output=True)
    if r.returncode:
        raise RuntimeError(f"tokenize_driver {' '.join(map(str, args))}: {r.stderr.decode(errors='replace')}")
    return r.stdout if binary else r.stdout.decode()


def vkt_encode_many(tok_path, texts, work):
    files = []
    for i, t in enumerate(texts):
        p = os.path.join(work, f"text{i}.bin")
        with open(p, "wb") as f:
            f.write(t if isinstance(t, bytes) else t.encode("utf-8"))
        files.append(p)
    out = driver("encode", tok_path, *files).split("\n")
    return [[int(x) for x in line.split()] for line in out[:len(texts)]]


def compare(name, tok_path, hf, texts, work):
    ours = vkt_encode_many(tok_path, texts, work)
    bad = []
    for t, o in zip(texts, ours):
        want = hf.encode(t, add_special_tokens=False).ids
        if o != want:
            bad.append((t, o, want))
    detail = ""
    if bad:
        t, o, w = bad[0]
        detail = (f"\n  {len(bad)} of {len(texts)} differ; first: {t[:80]!r}\n  vktrain: {o[:40]}\n"
                  f"  tokenizers: {w[:40]}\n  vktrain pieces: {[hf.id_to_token(i) for i in o[:20]]}\n"
                  f"  tokenizers pieces: {[hf.id_to_token(i) for i in w[:20]]}")
    check(f"{name}: {len(texts)} texts encode like tokenizers", not bad, detail)


def roundtrip(tok_path, data, work, name):
    src = os.path.join(work, "rt_in.bin")
    dst = os.path.join(work, "rt_out.bin")
    with open(src, "wb") as f:
        f.write(data)
    driver("roundtrip", tok_path, src, dst)
    with open(dst, "rb") as f:
        back = f.read()
    check(f"round trip: {name}", back == data, f"{data[:60]!r} -> {back[:60]!r}")


def end_to_end(tok_path, hf, work, rng):
    docs = [" ".join(rng.choice("the quick brown fox jumps over the lazy dog it's café 中文 42".split())
                     for _ in range(rng.randint(5, 40))) for _ in range(60)]
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n---\n".join(docs) + "\n")
    recipe = os.path.join(work, "recipe.yaml")
    with open(recipe, "w") as f:
        f.write(f"""seed: 3
output_dir: {work}/out
model: {{arch: gpt2, dim: 32, n_layers: 1, n_heads: 4, max_seq_len: 32}}
dataset: {{type: text, path: {corpus}, separator: "---"}}
batch_size: 4
""")
    r = subprocess.run([VKTRAIN, "train", "--config", recipe, "tokenizer.type=hf", f"tokenizer.path={tok_path}",
                        "max_steps=2"], capture_output=True, text=True, env=dict(os.environ, LP_NUM_THREADS="2"))
    log = r.stdout + r.stderr
    check("end to end: 2 training steps with tokenizer.type hf", r.returncode == 0, "\n" + log[-3000:])
    if r.returncode:
        return
    try:
        cfg = json.load(open(os.path.join(work, "out", "config.json")))
        vocab = cfg.get("vocab_size")
    except (OSError, ValueError) as e:
        vocab = f"unreadable config.json: {e}"
    check("end to end: model.vocab_size defaults to the tokenizer's size", vocab == hf.get_vocab_size(),
          f"{vocab} != {hf.get_vocab_size()}")
    want = sum(len(hf.encode(d, add_special_tokens=False).ids) + 2 for d in docs)
    m = re.search(r"(\d+) documents, (\d+) tokens", log)
    got = m and (int(m.group(1)), int(m.group(2)))
    check("end to end: the data pipeline stores BOS + ids + EOS per document", got == (len(docs), want),
          f"log says {got}, tokenizers gives {(len(docs), want)}:\n" + log[-2000:])
    out = os.path.join(work, "out")
    check("end to end: tokenizer.json is saved beside the model and in the checkpoint",
          open(os.path.join(out, "tokenizer.json"), "rb").read() == open(tok_path, "rb").read()
          and os.path.exists(os.path.join(out, "checkpoints", "step_2", "tokenizer.json")))
    prompt = "the quick brown"
    g = subprocess.run([VKTRAIN, "generate", "--model", out, "--prompt", prompt, "--max-new-tokens", "8",
                        "--temperature", "0"], capture_output=True, text=True)
    check("end to end: generate reads the model's tokenizer.json", g.returncode == 0 and
          g.stdout.startswith(prompt) and len(g.stdout.strip()) > len(prompt), g.stdout + g.stderr)


def hf_class(split, c):
    """The class tokenizers' regex gives c: it joins a run after x if L,
    after 1 if N, after ! if O; else it is white space."""
    n = lambda s: len(split.pre_tokenize_str(s))
    if n("x" + c) == 1:
        return "L"
    if n("1" + c) == 1:
        return "N"
    if n("!" + c) == 1:
        return "O"
    return "S" if n("\t" + c + "\t") == 1 else "?"


def check_classes(rng):
    table = os.path.join(os.environ.get("SRC", os.path.join(os.path.dirname(__file__), "..")),
                         "src", "tokenizer", "unicode_tables.h")
    cps = set(range(0, 0x250))
    for a, b in re.findall(r"\{0x([0-9a-f]+), 0x([0-9a-f]+)\}", open(table).read()):
        a, b = int(a, 16), int(b, 16)
        cps.update([a - 1, a, b, b + 1])
    cps.update(rng.randrange(0x110000) for _ in range(20000))
    cps = sorted(c for c in cps if 0 <= c < 0x110000 and not 0xd800 <= c <= 0xdfff)
    r = subprocess.run([DRIVER, "classes", "-"], input="\n".join(map(str, cps)), capture_output=True, text=True)
    ours = r.stdout.split()
    split = pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated")
    bad = [(hex(c), o, hf_class(split, chr(c))) for c, o in zip(cps, ours) if o != hf_class(split, chr(c))]
    check(f"character classes of {len(cps)} code points agree with tokenizers", len(ours) == len(cps) and not bad,
          f"{len(bad)} differ (code point, vktrain, tokenizers): {bad[:10]} -- regenerate unicode_tables.h with "
          "tokenizers' Unicode version (scripts/gen_unicode_tables.py)")


def main():
    if not os.access(DRIVER, os.X_OK):
        print(f"FAIL: {DRIVER} is not built")
        return 1
    rng = random.Random(1234)
    with tempfile.TemporaryDirectory() as work:
        tok_path = os.path.join(work, "tokenizer.json")
        hf = train(tok_path, rng)
        rand = [random_text(rng, rng.randint(1, 300)) for _ in range(40)]
        rand.append(random_text(rng, 8000))
        texts = TRICKY + rand
        check("trained a vocab of about 1000", 900 <= hf.get_vocab_size() <= 1000, str(hf.get_vocab_size()))
        compare("ByteLevel", tok_path, hf, texts, work)
        check_classes(rng)

        eot = hf.token_to_id("<|endoftext|>")
        info = driver("info", tok_path).split()
        check("size and special ids (bos = eos = pad = <|endoftext|>)",
              info == ["size", str(hf.get_vocab_size()), "bos", str(eot), "eos", str(eot), "pad", str(eot)], info)

        # special tokens written in the text are their ids, as in tokenizers
        compare("special tokens in text", tok_path, hf, ["a<|endoftext|>b", "<|endoftext|>", "<|endoftext|"], work)

        # decode: HF's ids of a text decode to the text; the eos id to its content
        dec = os.path.join(work, "dec.bin")
        sample = "it's 中文 😀\n\tx  y"
        driver("decode", tok_path, dec, *hf.encode(sample).ids, eot)
        with open(dec, "rb") as f:
            check("decode of tokenizers' ids, then eos", f.read() == (sample + "<|endoftext|>").encode(), "")

        # round trips, invalid UTF-8 included
        for t in TRICKY:
            roundtrip(tok_path, t.encode(), work, repr(t[:30]))
        roundtrip(tok_path, bytes(range(256)), work, "every byte")
        roundtrip(tok_path, b"\xff\xfe abc \xc3\x28 \xed\xa0\x80 \xf0\x9f\x98 it'll\x80 \xc0\xaf \xf4\x90\x80\x80 \xe2\x82",
                  work, "invalid UTF-8")
        roundtrip(tok_path, bytes(rng.randrange(256) for _ in range(20000)), work, "20 KB of random bytes")

        # the same tokenizer written in other forms
        j = json.load(open(tok_path))
        seq = dict(j)
        seq["pre_tokenizer"] = json.loads(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]).__getstate__())
        seq_path = os.path.join(work, "seq.json")
        json.dump(seq, open(seq_path, "w"))
        hf_seq = Tokenizer.from_file(seq_path)
        compare("Sequence[Split, ByteLevel]", seq_path, hf_seq, texts, work)

        merges = j["model"]["merges"]
        strs = dict(j, model=dict(j["model"], merges=[m if isinstance(m, str) else " ".join(m) for m in merges]))
        str_path = os.path.join(work, "strmerges.json")
        json.dump(strs, open(str_path, "w"))
        compare("merges as \"a b\" strings", str_path, Tokenizer.from_file(str_path), texts, work)

        ign = dict(j, model=dict(j["model"], ignore_merges=True))
        ign_path = os.path.join(work, "ignore.json")
        json.dump(ign, open(ign_path, "w"))
        compare("ignore_merges", ign_path, Tokenizer.from_file(ign_path), texts, work)

        if VKTRAIN:
            end_to_end(tok_path, hf, work, rng)
        else:
            check("VKTRAIN is set for the end-to-end run", False)
    print("test_tokenizer_hf:", "all checks passed" if not failures else f"{failures} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
