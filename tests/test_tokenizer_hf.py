"""test_tokenizer_hf: vktrain's hf tokenizer against Hugging Face `tokenizers`
as the oracle, for the tokenizer.json kinds of the published families. No
file can be downloaded, so each kind is built here with tokenizers itself,
its pipeline written as the family's tokenizer.json has it, and trained on a
small corpus:

  gpt2     ByteLevel (the GPT-2 split inside), <|endoftext|>
  llama3   Split(Llama 3 regex) + ByteLevel(use_regex=false),
           ignore_merges, <|begin_of_text|> ... <|eot_id|> and 200 reserved
           special tokens
  qwen2    NFC + Split(Qwen2 regex) + ByteLevel, <|im_start|> <|im_end|>
  smollm   Digits(individual_digits) + ByteLevel(use_regex=true)
  phi4     Split(o200k regex, as Phi-4-mini and GPT-4o) + ByteLevel,
           <|endoftext|> <|system|> <|user|> <|assistant|> <|end|>
  llama2   SentencePiece-style BPE (TinyLlama, Llama 2): Prepend("▁") +
           Replace(" ", "▁") normalizer, byte_fallback with <0x00>..<0xFF>,
           <unk> (fuse_unk), <s> </s>; decoder Replace + ByteFallback +
           Fuse + Strip
  mistral  the same model after Metaspace(prepend_scheme first, split
           false), Metaspace decoder
  gemma    Gemma's SentencePiece-style BPE: Replace(" ", "▁") normalizer
           without Prepend, no pre-tokenizer (the whole text is one piece),
           byte_fallback; decoder Replace + ByteFallback + Fuse
  and variants: Metaspace(always, split), no byte fallback (unknowns fused
  or not), a merge across a word start ("s" + "▁"), added tokens with lstrip / rstrip / single_word / normalized,
  ids past 65535 (a vocab with gaps).

Checks:
 1. every kind encodes a corpus of ASCII, accents (composed and combining),
    CJK, emoji, whitespace runs, digits, code, contractions, Unicode white
    space and its special tokens written in the text, plus random text, to
    the ids tokenizers gives; and decodes tokenizers' ids to the text
    tokenizers.decode gives;
 2. byte-level kinds: decode(encode(x)) == x for any bytes, invalid UTF-8
    included;
 3. the classes \\p{L}, \\p{N}, \\s of the split regexes agree with
    tokenizers' (Oniguruma's) at every boundary of vktrain's Unicode tables
    and at random code points; each split regex cuts the corpus into the
    pieces tokenizers' Split does; NFC agrees with tokenizers' NFC normalizer on
    strings of combining marks, Hangul, singletons and exclusions;
 4. special ids: bos = eos = pad = <|endoftext|> for GPT-2, the names of
    Llama 3, tokenizer_config.json's when it lies beside tokenizer.json;
 5. `vktrain tokenize` writes a uint16 shard for a small vocab and a uint32
    one (magic 20240801) for ids past 65535, holding BOS + ids + EOS per
    document as tokenizers gives them; the tokens dataset reads the uint32
    shard; errors name the file and leave no shard;
 6. end to end: a text dataset trains 2 steps with tokenizer.type hf and
    tokenizer.path a folder holding tokenizer.json, the model's vocab_size defaults to the tokenizer's size, the data pipeline
    stores exactly BOS + ids + EOS per document, and generate reads the
    saved tokenizer.json.

Needs the PyPI package `tokenizers` (Debian has none); scripts/test.sh
installs it. Without it this test fails: it is the only oracle here.
"""
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

try:
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                            trainers)
except ImportError:
    print("FAIL: the Python package 'tokenizers' is missing (it is the oracle of this test); install it with\n"
          "  /usr/bin/python3 -m pip install --break-system-packages tokenizers\n"
          "(scripts/test.sh does this)")
    sys.exit(1)

TOOLS = os.environ.get("TOOLS", os.path.join(os.getcwd(), "tools"))
VKTRAIN = os.environ.get("VKTRAIN")
DRIVER = os.path.join(TOOLS, "tokenize_driver")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
                 r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
META = "\u2581"

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
    "it's don't I'm we've you're they'll he'd 'S 'LL ''s ?'s x's IT'S We'Re x'ſ x'ſt 'Ll 'ſthe",
    "'", "'s", "''", "' s", " 's", "'hello", "x'Kelvin",
    "digits 123 4567890 3.14159 1,000,000 v2 x86_64 0x1F 12345678901234567890",
    "punctuation!!! ??? ... --- ((()))[]{} <html> a+b=c; @user #tag $5 %d ^_^",
    "multiple   spaces    here     and  two",
    "   leading spaces", "trailing spaces   ", " ", "  ", "a b", "a  b", "a   b",
    "tabs\tand\t\ttabs \t mixed\t", "\t!!", " !!\n\nx", "  \n  x", "a\r\n\n b",
    "new\nlines\n\nand\r\nCRLF\n \n  \nend\n",
    "\n", "\n\n", " \n", "\n ", "x\n\n\ny", "x \n \n y",
    "café naïve résumé Straße ß Œuvre façade",
    "cafe\u0301 nai\u0308ve A\u030a \u212b \u2126 \u0958 \uf900 \u1100\u1161\u11a8 \uac00\u11a8",
    "中文 测试 中文测试, 日本語のテキスト 한국어 텍스트",
    "Привет мир Ελληνικά עברית العربية हिन्दी ภาษาไทย",
    "e\u0301 combining a\u0308 marks \u0915\u093f\u0924\u093e\u092c",
    "emoji 😀😃 👍🏽 👨‍👩‍👧 🇫🇷 ❤️ ✨x✨",
    "numbers ٣٤٥ ½ ² Ⅻ １２３ ߁ ①",
    "spaces\u00a0nbsp\u3000ideographic\u2009thin\u2028line\u2029para\u0085nel\x0bvt\x0cff",
    "\u00a0a \u00a0a\u00a0\u00a0b",
    "symbols € £ © ™ ° ± × ÷ → ∑ ∞",
    "mix3d w0rds and_under_scores CamelCase UPPER lower",
    "HTTPServer XMLHttpRequest iPhone McDonald's DON'T O'NEIL'S ALLCAPS'LL aB'Ve",
    "title \u01c5emal \u1f88b \u01c8X, modifiers \u02b0a a\u02b0 \u3005\u3005, marks e\u0301\u0301 \u0301a A\u0301B",
    "a/b/c !\n/x ?/\n\n/ //\r\n/ http://x.y/z /\n",
    "under▁score ▁▁ already▁has▁meta ▁",
    "<0x41> <unk> <s> </s> literal",
    "x" * 300,
    " " * 100 + "y",
    "ab" * 150,
    "",
]

CODE = '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


for i in range(10):
    print(f"{i:3d} -> {fib(i):>5}")  # 0x1F, 1e-9
'''

C_CODE = '''static int add(int a, int b) { return a + b; }\r\n\tint main(void) {\n\t\tprintf("%d\\n", add(2, 3));\n}\n'''


def random_text(rng, n_chars):
    pool = (list("abcdefghijklmnopqrstuvwxyz") * 6 + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ") + list("0123456789") * 2 +
            list(" " * 30) + list("\n\t\r") + list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`") +
            list("éèàüößñçøåÆŒЖжΩλ中文日本語한국") + ["e\u0301", "\u093f", "\u0301", "\u0323", "\u1161"] +
            list("\u01c5\u1f88\u02b0\u3005\u0488\u0903ÉÀÜ") +
            list("٣٤½²Ⅻ１２") + list("\u00a0\u3000\u2009\u2028\u0085\x0b\x0c") +
            ["😀", "👍🏽", "👨‍👩‍👧", "€", "©", "\u200d", "\ue000", META] +
            ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "  ", "   ", " \n", "\n\n", "\r\n"])
    return "".join(rng.choice(pool) for _ in range(n_chars))


def training_text(rng):
    words = ("the quick brown fox jumps over lazy dog it's don't we'll they're I've café Straße 中文 测试 日本語 "
             "Привет мир 12 345 2024 3.14 hello world !!! ... -- :) 😀 👍 naïve résumé def return print "
             "int main ( ) { } ; == != ->").split()
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
    lines += [CODE, C_CODE] * 20
    return lines


def with_specials(rng, specials, n):
    """Texts with the given special tokens written among ordinary text."""
    out = ["".join(specials), specials[0] + "x" + specials[-1], "a" + specials[-1] + "b",
           specials[0][:-1], specials[0][1:], " " + specials[0] + " ", specials[0] + specials[0]]
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(specials) if rng.random() < 0.4 else random_text(rng, rng.randint(0, 40)))
        out.append("".join(parts))
    return out


# ---- building the tokenizers ----

def train_byte_level(rng, normalizer, pre_tokenizer, specials, vocab_size=1000):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(rng), trainer)
    return json.loads(tok.to_str())


def sentencepiece_json(rng, normalizer, pre_tokenizer, decoder, byte_fallback=True, fuse_unk=True):
    """A Llama-2-style tokenizer.json: <unk> <s> </s>, the 256 <0xNN>
    tokens, then BPE tokens trained with Metaspace on a limited alphabet
    (so that rarer characters need the byte fallback or <unk>)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=700, limit_alphabet=90, show_progress=False)
    tok.train_from_iterator(training_text(rng), trainer)
    trained = json.loads(tok.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = 3 + b
    for t, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(t, len(vocab))
    added = [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
             for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": decoder,
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
                      "ignore_merges": False, "vocab": vocab, "merges": trained["merges"]}}


GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"]


def gemma_json(rng):
    """Gemma's tokenizer.json kind: spaces become "▁" (nothing prepended),
    no pre-tokenizer, byte fallback, and its special tokens."""
    j = sentencepiece_json(rng, state(normalizers.Replace(" ", META)), None, state(decoders.Sequence([
        decoders.Replace(META, " "), decoders.ByteFallback(), decoders.Fuse()])))
    t = Tokenizer.from_str(json.dumps(j))
    t.add_special_tokens(GEMMA_SPECIALS)
    return json.loads(t.to_str())


def state(obj):
    return json.loads(obj.__getstate__())


def build_kinds(rng):
    """name -> (tokenizer.json dict, special tokens to write in texts, byte-level?)"""
    kinds = {}
    kinds["gpt2"] = (train_byte_level(rng, None, pre_tokenizers.ByteLevel(add_prefix_space=False),
                                      ["<|endoftext|>"]), ["<|endoftext|>"], True)
    l3_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"] + [f"<|reserved_special_token_{i}|>" for i in range(200)]
    j = train_byte_level(rng, None, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), l3_specials)
    j["model"]["ignore_merges"] = True
    kinds["llama3"] = (j, l3_specials[:5] + l3_specials[5:8], True)
    qw = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    kinds["qwen2"] = (train_byte_level(rng, normalizers.NFC(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), qw), qw, True)
    kinds["smollm"] = (train_byte_level(rng, None, pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]), qw), qw, True)
    phi = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
    kinds["phi4"] = (train_byte_level(rng, None, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), phi), phi, True)

    sp_specials = ["<s>", "</s>", "<unk>"]
    sp_decoder = state(decoders.Sequence([decoders.Replace(META, " "), decoders.ByteFallback(), decoders.Fuse(),
                                          decoders.Strip(" ", 1, 0)]))
    legacy = state(normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)]))
    kinds["llama2"] = (sentencepiece_json(rng, legacy, None, sp_decoder), sp_specials, False)
    kinds["mistral"] = (sentencepiece_json(
        rng, None, state(pre_tokenizers.Metaspace(replacement=META, prepend_scheme="first", split=False)),
        state(decoders.Metaspace(replacement=META, prepend_scheme="first"))), sp_specials, False)
    kinds["metaspace_split"] = (sentencepiece_json(
        rng, None, state(pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)),
        state(decoders.Metaspace(replacement=META, prepend_scheme="always"))), sp_specials, False)
    kinds["gemma"] = (gemma_json(rng), sp_specials + GEMMA_SPECIALS, False)
    kinds["sp_unk_fused"] = (sentencepiece_json(rng, legacy, None, sp_decoder, byte_fallback=False), sp_specials,
                             False)
    kinds["sp_unk_unfused"] = (sentencepiece_json(rng, legacy, None, sp_decoder, byte_fallback=False,
                                                  fuse_unk=False), sp_specials, False)

    # a merge across a word start ("s" + "▁"): the text must not be cut
    # into words before "▁" (vktrain does so only when no merge joins there)
    j = json.loads(json.dumps(kinds["llama2"][0]))
    j["model"]["vocab"]["s" + META] = len(j["model"]["vocab"])
    j["model"]["merges"] = [["s", META]] + j["model"]["merges"]
    kinds["sp_cross"] = (j, sp_specials, False)

    # added tokens that strip white space, match single words, or match
    # their normalized form (NFC: a decomposed content matches composed
    # text; Prepend: "▁" + content)
    extra = [AddedToken("<|ls|>", lstrip=True, special=True), AddedToken("[RS]", rstrip=True, special=True),
             AddedToken("<|both|>", lstrip=True, rstrip=True, special=False, normalized=False),
             AddedToken("word", single_word=True, normalized=False), AddedToken("wordy", normalized=False),
             AddedToken("cafe\u0301", normalized=True), AddedToken("<|a|>", special=True),
             AddedToken("<|a|>b", special=True), AddedToken("ab", normalized=True)]
    for base, name in (("qwen2", "added_qwen2"), ("llama2", "added_llama2")):
        t = Tokenizer.from_str(json.dumps(kinds[base][0]))
        t.add_tokens(extra)
        kinds[name] = (json.loads(t.to_str()), [str(a.content) for a in extra] + kinds[base][1], kinds[base][2])

    # ids past 65535: the llama3 vocab with its merged tokens moved up
    j = json.loads(json.dumps(kinds["llama3"][0]))
    moved = {t: (i if i < 256 else i + 70000) for t, i in j["model"]["vocab"].items()}
    j["model"]["vocab"] = moved
    for a in j["added_tokens"]:
        a["id"] = moved.get(a["content"], a["id"])
    kinds["big"] = (j, kinds["llama3"][1], True)
    return kinds


# ---- driving vktrain ----

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


def compare_decode(name, tok_path, hf, texts, work):
    dec = os.path.join(work, "dec.bin")
    bad = []
    for t in texts:
        ids = hf.encode(t, add_special_tokens=False).ids
        driver("decode", tok_path, dec, *ids)
        with open(dec, "rb") as f:
            got = f.read().decode("utf-8", errors="replace")
        want = hf.decode(ids, skip_special_tokens=False)
        if got != want:
            bad.append((t, got, want))
    detail = f"\n  {len(bad)} differ; first: {bad[0][0][:60]!r}\n  vktrain:    {bad[0][1][:80]!r}\n" \
             f"  tokenizers: {bad[0][2][:80]!r}" if bad else ""
    check(f"{name}: {len(texts)} texts decode like tokenizers", not bad, detail)


def roundtrip(tok_path, data, work, name):
    src = os.path.join(work, "rt_in.bin")
    dst = os.path.join(work, "rt_out.bin")
    with open(src, "wb") as f:
        f.write(data)
    driver("roundtrip", tok_path, src, dst)
    with open(dst, "rb") as f:
        back = f.read()
    check(f"round trip: {name}", back == data, f"{data[:60]!r} -> {back[:60]!r}")


def save(work, name, j):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    return path


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack("<3i", data[:12])
    width = 2 if magic == 20240520 else 4
    return magic, version, list(struct.unpack(f"<{count}{'H' if width == 2 else 'I'}", data[1024:])), \
        len(data) == 1024 + width * count


def text_documents(text, sep):
    """The documents of a text dataset file, as data_text.c cuts them."""
    def chomp(d):
        d = d[:-1] if d.endswith("\n") else d
        return d[:-1] if d.endswith("\r") else d
    docs, start, pos = [], 0, 0
    while pos < len(text):
        nl = text.find("\n", pos)
        end = nl if nl >= 0 else len(text)
        line = text[pos:end]
        if (line[:-1] if line.endswith("\r") else line) == sep:
            docs.append(chomp(text[start:pos]))
            start = end + 1
        pos = end + 1
    if start < len(text):
        docs.append(chomp(text[start:]))
    return [d for d in docs if d]


def check_tokenize(kinds, paths, work, rng):
    """vktrain tokenize: uint16 and uint32 shards, as tokenizers encodes."""
    if not VKTRAIN:
        check("VKTRAIN is set for vktrain tokenize", False)
        return
    docs = [random_text(rng, rng.randint(0, 300)) + rng.choice(["", "<|endoftext|>", "<|eot_id|>"])
            for _ in range(30)]
    f1, f2 = os.path.join(work, "in1.txt"), os.path.join(work, "in2.txt")
    with open(f1, "w", encoding="utf-8", newline="") as f:
        f.write("\n---\n".join(d.replace("\n---\n", "\n") for d in docs[:20]) + "\n")
    with open(f2, "w", encoding="utf-8", newline="") as f:
        f.write(CODE + "\n---\n" + C_CODE + "\n---\n\n---\n" + "".join(docs[20:]).replace("\n---\n", "\n"))
    texts = []
    for p in (f1, f2):
        with open(p, encoding="utf-8", newline="") as f:
            texts += text_documents(f.read(), "---")
    for name, want_magic in (("gpt2", 20240520), ("big", 20240801)):
        hf = Tokenizer.from_str(json.dumps(kinds[name][0]))
        info = driver("info", paths[name]).split()
        bos, eos = int(info[3]), int(info[5])
        out = os.path.join(work, f"{name}.bin")
        r = subprocess.run([VKTRAIN, "tokenize", "--tokenizer", os.path.dirname(paths[name]), "--input", f1, f2,
                            "--output", out, "--separator", "---"], capture_output=True, text=True)
        check(f"tokenize {name}: exit 0", r.returncode == 0, r.stdout + r.stderr)
        if r.returncode:
            continue
        want = []
        for d in texts:
            want += [bos] + hf.encode(d, add_special_tokens=False).ids + [eos]
        magic, version, got, size_ok = read_shard(out)
        check(f"tokenize {name}: magic {want_magic}, version {1 if want_magic == 20240520 else 7}, size",
              magic == want_magic and version == (1 if want_magic == 20240520 else 7) and size_ok,
              f"magic {magic} version {version} size ok {size_ok}")
        check(f"tokenize {name}: {len(texts)} documents as BOS + tokenizers' ids + EOS ({len(want)} tokens)",
              got == want, f"{len(got)} vs {len(want)} tokens; first difference at "
              f"{next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))}")
        check(f"tokenize {name}: the summary line", f"{len(texts)} documents" in r.stdout and
              f"{len(want)} tokens" in r.stdout, r.stdout)
        if name == "big":
            check("tokenize big: ids past 65535 are written", max(got) >= 65536, max(got))
            recipe = os.path.join(work, "shard.yaml")
            with open(recipe, "w") as f:
                f.write(f"output_dir: {work}/shard_out\nmodel: {{arch: llama, dim: 32, n_layers: 1, n_heads: 4, "
                        f"max_seq_len: 32, vocab_size: {max(got) + 1}}}\n"
                        f"dataset: {{type: tokens, path: {out}}}\nbatch_size: 2\n")
            r = subprocess.run([VKTRAIN, "train", "--config", recipe, "--data-only"], capture_output=True, text=True)
            m = re.search(r"(\d+) tokens", r.stdout + r.stderr)
            check("the tokens dataset reads the uint32 shard", r.returncode == 0 and m and int(m.group(1)) == len(got),
                  (r.stdout + r.stderr)[-1500:])
    # errors: a missing input names it and leaves no shard; usage errors exit 2
    out = os.path.join(work, "bad.bin")
    r = subprocess.run([VKTRAIN, "tokenize", "--tokenizer", paths["gpt2"], "--input", f1, "/nonexistent/x.txt",
                        "--output", out], capture_output=True, text=True)
    check("tokenize: a missing input is an error naming it, and no shard is left",
          r.returncode == 1 and "/nonexistent/x.txt" in r.stderr and not os.path.exists(out) and
          not [p for p in os.listdir(work) if p.startswith("bad.bin")], r.stderr)
    r = subprocess.run([VKTRAIN, "tokenize", "--tokenizer", paths["gpt2"], "--input", work, "--output", out],
                       capture_output=True, text=True)
    check("tokenize: a folder as input is an error naming it", r.returncode == 1 and
          f"{work}: is a directory" in r.stderr and not os.path.exists(out), r.stderr)
    r = subprocess.run([VKTRAIN, "tokenize", "--tokenizer", f1, "--input", f1, "--output", out],
                       capture_output=True, text=True)
    check("tokenize: a file that is not a tokenizer.json is an error naming it", r.returncode == 1 and
          "--tokenizer" in r.stderr and "in1.txt" in r.stderr, r.stderr)
    r = subprocess.run([VKTRAIN, "tokenize", "--tokenizer", paths["gpt2"], "--output", out], capture_output=True,
                       text=True)
    check("tokenize: no --input is a usage error", r.returncode == 2 and "--input" in r.stderr, r.stderr)


def check_special_ids(kinds, paths, work):
    def ids(path):
        return [int(x) for x in driver("info", path).split()[1::2]]
    g = Tokenizer.from_str(json.dumps(kinds["gpt2"][0]))
    eot = g.token_to_id("<|endoftext|>")
    check("special ids of GPT-2: bos = eos = pad = <|endoftext|>", ids(paths["gpt2"])[1:] == [eot] * 3,
          ids(paths["gpt2"]))
    l3 = Tokenizer.from_str(json.dumps(kinds["llama3"][0]))
    want = [l3.token_to_id("<|begin_of_text|>"), l3.token_to_id("<|end_of_text|>"), l3.token_to_id("<|end_of_text|>")]
    check("special ids of Llama 3 by name", ids(paths["llama3"])[1:] == want, ids(paths["llama3"]))
    folder = os.path.dirname(paths["llama3"])
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>", "special": True},
                   "pad_token": "<|reserved_special_token_2|>", "chat_template": "{{ x }}"}, f)
    want = [l3.token_to_id("<|begin_of_text|>"), l3.token_to_id("<|eot_id|>"),
            l3.token_to_id("<|reserved_special_token_2|>")]
    check("special ids from tokenizer_config.json beside tokenizer.json", ids(folder)[1:] == want, ids(folder))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|nope|>"}, f)
    r = subprocess.run([DRIVER, "info", folder], capture_output=True, text=True)
    check("an eos_token the tokenizer lacks is an error naming it", r.returncode == 1 and
          "tokenizer_config.json" in r.stderr and "eos_token '<|nope|>'" in r.stderr, r.stderr)
    os.remove(os.path.join(folder, "tokenizer_config.json"))


def check_split(texts, work):
    """The pieces of each split regex, against tokenizers' Split."""
    for name, pattern in (("gpt2", GPT2_PATTERN), ("llama3", LLAMA3_PATTERN), ("qwen2", QWEN2_PATTERN),
                          ("o200k", O200K_PATTERN)):
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
        bad = []
        for i, t in enumerate(texts):
            src = os.path.join(work, "split_in")
            with open(src, "wb") as f:
                f.write(t.encode())
            data, pieces, o = t.encode(), [], 0
            for n in driver("split", name, src).split():
                pieces.append(data[o:o + int(n)].decode())
                o += int(n)
            want = [p for p, _ in split.pre_tokenize_str(t)]
            if pieces != want:
                bad.append((t, pieces, want))
        check(f"the {name} split regex cuts {len(texts)} texts as tokenizers' Split does", not bad,
              f"{len(bad)} differ; first {bad[0][0][:60]!r}\n  vktrain:    {bad[0][1][:20]}\n"
              f"  tokenizers: {bad[0][2][:20]}" if bad else "")


def check_nfc(rng, work):
    pool = (list("aeiouAEIOUcnsCNSzZ") + ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030a", "\u0323",
                                          "\u0327", "\u031b", "\u0345", "\u05b0", "\u0f71", "\u0f72", "\u0f74"] +
            ["\u1100", "\u1161", "\u11a8", "\uac00", "\uac01", "\ud55c"] + ["\u212b", "\u2126", "\u0958", "\uf900",
                                                                            "\u0340", "\u0344", "\u1e0b\u0323"] +
            ["\u00c5", "\u00e9", "\u1e9b", "\u0b47", "\u0b3e", "\u0bc6", "\u0bbe", "中", "😀", " ", "\n"])
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 30))) for _ in range(300)]
    nfc = normalizers.NFC()
    bad = []
    for i, t in enumerate(texts):
        src, dst = os.path.join(work, "nfc_in"), os.path.join(work, "nfc_out")
        with open(src, "wb") as f:
            f.write(t.encode())
        driver("nfc", src, dst)
        with open(dst, "rb") as f:
            got = f.read().decode("utf-8", errors="replace")
        if got != nfc.normalize_str(t):
            bad.append((t, got, nfc.normalize_str(t)))
    check(f"NFC of {len(texts)} strings of marks, Hangul, singletons agrees with tokenizers", not bad,
          f"{len(bad)} differ, first {[ascii(x) for x in bad[0]] if bad else ''}")


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
    # tokenizer.path names the model folder that holds tokenizer.json
    r = subprocess.run([VKTRAIN, "train", "--config", recipe, "tokenizer.type=hf",
                        f"tokenizer.path={os.path.dirname(tok_path)}", "max_steps=2"], capture_output=True, text=True, env=dict(os.environ, LP_NUM_THREADS="2"))
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
    check("end to end: the folder's tokenizer.json is saved beside the model and in the checkpoint",
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


def table_code_points(rng):
    """The code points at every boundary of vktrain's Unicode tables, the
    first 0x250, and 20000 at random (no surrogates)."""
    table = os.path.join(os.environ.get("SRC", os.path.join(os.path.dirname(__file__), "..")),
                         "src", "tokenizer", "unicode_tables.h")
    cps = set(range(0, 0x250))
    for a, b in re.findall(r"\{0x([0-9a-f]+), 0x([0-9a-f]+)\}", open(table).read()):
        a, b = int(a, 16), int(b, 16)
        cps.update([a - 1, a, b, b + 1])
    cps.update(rng.randrange(0x110000) for _ in range(20000))
    cps = sorted(c for c in cps if 0 <= c < 0x110000 and not 0xd800 <= c <= 0xdfff)
    return cps


def check_classes(rng):
    cps = table_code_points(rng)
    r = subprocess.run([DRIVER, "classes", "-"], input="\n".join(map(str, cps)), capture_output=True, text=True)
    ours = r.stdout.split()
    split = pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated")
    bad = [(hex(c), o, hf_class(split, chr(c))) for c, o in zip(cps, ours) if o != hf_class(split, chr(c))]
    check(f"character classes of {len(cps)} code points agree with tokenizers", len(ours) == len(cps) and not bad,
          f"{len(bad)} differ (code point, vktrain, tokenizers): {bad[:10]} -- regenerate unicode_tables.h with "
          "tokenizers' Unicode version (scripts/gen_unicode_tables.py)")


def check_cases(rng):
    """The o200k regex's letter classes (Lu Lt / Ll / Lm Lo / M) of code
    points at every boundary of vktrain's tables and at random, against
    tokenizers' (Oniguruma's) \\p{..} classes: a class regex that removes
    the whole character holds it."""
    cps = table_code_points(rng)
    r = subprocess.run([DRIVER, "cases", "-"], input="\n".join(map(str, cps)), capture_output=True, text=True)
    ours = r.stdout.split()
    classes = [("U", r"[\p{Lu}\p{Lt}]"), ("l", r"\p{Ll}"), ("L", r"[\p{Lm}\p{Lo}]"), ("M", r"\p{M}")]
    splits = [(k, pre_tokenizers.Split(Regex(p), behavior="removed")) for k, p in classes]

    def theirs(c):
        for k, split in splits:
            if not split.pre_tokenize_str(c):
                return k
        return "-"
    bad = [(hex(c), o, theirs(chr(c))) for c, o in zip(cps, ours) if o != theirs(chr(c))]
    check(f"the o200k letter classes of {len(cps)} code points agree with tokenizers",
          len(ours) == len(cps) and not bad, f"{len(bad)} differ (code point, vktrain, tokenizers): {bad[:10]}")


def main():
    if not os.access(DRIVER, os.X_OK):
        print(f"FAIL: {DRIVER} is not built")
        return 1
    rng = random.Random(1234)
    with tempfile.TemporaryDirectory() as work:
        kinds = build_kinds(rng)
        paths = {name: save(work, name, j) for name, (j, _, _) in kinds.items()}
        rand = [random_text(rng, rng.randint(1, 300)) for _ in range(40)]
        rand.append(random_text(rng, 8000))
        base = TRICKY + [CODE, C_CODE] + rand
        for name, (j, specials, byte_level) in kinds.items():
            hf = Tokenizer.from_str(json.dumps(j))
            texts = base + with_specials(rng, specials, 30)
            compare(name, paths[name], hf, texts, work)
            compare_decode(name, paths[name], hf, [t for t in texts if t][:60], work)
            if byte_level and name in ("gpt2", "llama3"):
                for t in TRICKY:
                    roundtrip(paths[name], t.encode(), work, f"{name} {t[:30]!r}")
                roundtrip(paths[name], bytes(range(256)), work, f"{name} every byte")
                roundtrip(paths[name], b"\xff\xfe abc \xc3\x28 \xed\xa0\x80 \xf0\x9f\x98 it'll\x80 \xc0\xaf "
                          b"\xf4\x90\x80\x80 \xe2\x82", work, f"{name} invalid UTF-8")
                roundtrip(paths[name], bytes(rng.randrange(256) for _ in range(20000)), work,
                          f"{name} 20 KB of random bytes")
        check("trained byte-level vocabs of about 1000", 900 <= len(kinds["gpt2"][0]["model"]["vocab"]) <= 1000,
              str(len(kinds["gpt2"][0]["model"]["vocab"])))
        check("the SentencePiece kinds need the byte fallback",
              any(i in range(3, 259) for t in TRICKY for i in
                  Tokenizer.from_str(json.dumps(kinds["llama2"][0])).encode(t).ids))
        check_classes(rng)
        check_cases(rng)
        check_split(base, work)
        check_nfc(rng, work)
        check_special_ids(kinds, paths, work)

        # the same tokenizer written in other forms
        j = kinds["gpt2"][0]
        seq = dict(j)
        seq["pre_tokenizer"] = state(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
        seq_path = save(work, "seq", seq)
        compare("Sequence[Split(GPT-2), ByteLevel]", seq_path, Tokenizer.from_file(seq_path), base, work)
        merges = j["model"]["merges"]
        strs = dict(j, model=dict(j["model"], merges=[m if isinstance(m, str) else " ".join(m) for m in merges]))
        str_path = save(work, "strmerges", strs)
        compare("merges as \"a b\" strings", str_path, Tokenizer.from_file(str_path), base, work)
        ign = dict(j, model=dict(j["model"], ignore_merges=True))
        ign_path = save(work, "ignore", ign)
        compare("ignore_merges", ign_path, Tokenizer.from_file(ign_path), base, work)
        # a pair listed twice keeps its last rank (tokenizers' merge map)
        dup = dict(j, model=dict(j["model"], merges=merges + merges[:50]))
        dup_path = save(work, "dupmerges", dup)
        compare("merges listed twice", dup_path, Tokenizer.from_file(dup_path), base, work)

        check_tokenize(kinds, paths, work, rng)
        if VKTRAIN:
            end_to_end(paths["gpt2"], Tokenizer.from_file(paths["gpt2"]), work, rng)
        else:
            check("VKTRAIN is set for the end-to-end run", False)
    print("test_tokenizer_hf:", "all checks passed" if not failures else f"{failures} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
