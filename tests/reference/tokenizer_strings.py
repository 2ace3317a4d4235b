"""Seeded generator of varied test strings for the tokenizer reference tests.

Every string is valid UTF-8 text. The mix covers what pre-tokenizer regexes
and BPE get wrong: many scripts (CJK, Cyrillic, Arabic, Devanagari, Greek,
Hebrew, Thai, Hangul), combining marks, emoji with ZWJ sequences, skin tones,
flags and keycaps, runs of every kind of whitespace (including the Unicode
spaces where regex engines disagree about \\s), digits in several scripts
and numbers, English contractions in any case, code, and chat-formatted text
with special-token texts (whole, broken and adjacent).
"""

import random

SCRIPTS = {
    "cjk": [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF)],
    "hangul": [(0xAC00, 0xD7A3)],
    "cyrillic": [(0x0410, 0x044F), (0x0451, 0x045F)],
    "arabic": [(0x0621, 0x064A), (0x064B, 0x0652)],
    "devanagari": [(0x0905, 0x0939), (0x093E, 0x094D), (0x0966, 0x096F)],
    "greek": [(0x0391, 0x03A9), (0x03B1, 0x03C9), (0x0386, 0x038F)],
    "hebrew": [(0x05D0, 0x05EA), (0x05B0, 0x05BC)],
    "thai": [(0x0E01, 0x0E3A), (0x0E40, 0x0E5B)],
    "latin": [(0x61, 0x7A), (0x41, 0x5A), (0xC0, 0xFF), (0x100, 0x17F)],
}

WORDS = {
    "cjk": ["你好", "世界", "東京", "こんにちは", "カタカナ", "漢字", "中文测试"],
    "hangul": ["안녕하세요", "한국어"],
    "cyrillic": ["Привет", "мир", "Ёлка", "съешь", "ещё"],
    "arabic": ["مرحبا", "بالعالم", "العَرَبِيَّة"],
    "devanagari": ["नमस्ते", "हिन्दी", "क्षत्रिय"],
    "greek": ["Καλημέρα", "κόσμε", "ΑΘΗΝΑ"],
    "hebrew": ["שלום", "עוֹלָם"],
    "thai": ["สวัสดี", "ภาษาไทย"],
    "latin": ["hello", "World", "naïve", "café", "Straße", "ÆØÅ", "ſtraße", "İstanbul", "ﬁle"],
}

EMOJI = [
    "😀", "😂", "🤖", "🚀", "❤️", "👍", "👍🏽", "👋🏿", "🧑🏻‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️",
    "🇫🇷", "🇯🇵", "1️⃣", "#️⃣", "☺", "✨", "🫠", "🦄", "👩🏾‍🚀", "🤷‍♀️", "💁🏼‍♂️",
]

SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n ", "\u00a0", "\u2002", "\u2003",
          "\u2009", "\u200a", "\u3000", "\u2028", "\u2029", "\u202f", "\u205f", "\u1680", "\u0085",
          "\u180e", "\u200b", "\ufeff", "\x0b", "\x0c", "\x1c", "\x1f", " \u00a0 ", "\t \n", "    \n\t"]

NUMBERS = ["0", "7", "42", "123", "2024", "1234567890", "3.14159", "1,000,000", "-17", "+1e-9", "0x1F",
           "٣٤٥", "१२३", "²³", "½", "Ⅻ", "①②", "五百", "99.9%", "$1,299.99", "12:30", "v2.0.1"]

CONTRACTIONS = ["it's", "we're", "I'LL", "they've", "don't", "I'd", "She'S", "you'RE", "'s", "'t",
                "o'clock", "rock'n'roll", "'ll've", "’s", "it ' s", "'ſ", "''", "'"]

CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    '{"key": [1, 2, 3], "nested": {"a": null}}',
    "<div class=\"x\">&nbsp;</div>",
    "SELECT * FROM t WHERE id = 42;",
    "if x != y and not z:\n        pass  # comment",
    "std::vector<int> v{1,2,3};",
    "    \n    \n",
    "x=>x**2 // arrow",
    "$ ls -la | grep '.cc'",
]

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>", "<|im_start|", "<|im_end",
            "<im_start>", "<|im_start|><|im_end|>", "<<|im_end|>>", "<jupyter_code>"]


def _random_char(rng, script):
    lo, hi = rng.choice(SCRIPTS[script])
    return chr(rng.randint(lo, hi))


def _random_word(rng, script):
    if rng.random() < 0.5:
        return rng.choice(WORDS[script])
    return "".join(_random_char(rng, script) for _ in range(rng.randint(1, 8)))


def _random_codepoint(rng):
    while True:
        cp = rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xFFFF),
                         rng.randint(0x10000, 0x10FFFF)])
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _atom(rng):
    kind = rng.random()
    if kind < 0.30:
        return _random_word(rng, rng.choice(list(SCRIPTS)))
    if kind < 0.42:
        return rng.choice(SPACES)
    if kind < 0.52:
        return rng.choice(EMOJI)
    if kind < 0.62:
        return rng.choice(NUMBERS) if rng.random() < 0.6 else str(rng.randint(0, 10 ** rng.randint(1, 12)))
    if kind < 0.70:
        return rng.choice(CONTRACTIONS)
    if kind < 0.76:
        return rng.choice(CODE)
    if kind < 0.82:
        return rng.choice(SPECIALS)
    if kind < 0.92:
        return "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 10)))
    return "".join(_random_codepoint(rng) for _ in range(rng.randint(1, 4)))


def _chat(rng):
    turns = []
    for _ in range(rng.randint(1, 4)):
        role = rng.choice(["system", "user", "assistant"])
        body = "".join(_atom(rng) for _ in range(rng.randint(1, 6)))
        turns.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
    if rng.random() < 0.5:
        turns.append("<|im_start|>assistant\n")
    return "".join(turns)


def _separator(rng):
    return rng.choice([" ", " ", " ", "", "\n", rng.choice(SPACES)])


FIXED = [
    "", " ", "  ", "\n", "\r\n", "\t", "a", "Hello world", " Hello world", "Hello  world ",
    "a" * 300, " " * 257, "\n" * 40, "ab" * 200, "9" * 50, "😀" * 30, "Привет" * 40,
    "It's a test: 1234 apples, 3.5 pears; don't you think?",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "\u00a0\u00a0x\u3000\u3000y\u2028z", "x\u180ey", "a\u200bb\ufeffc", "\x00\x01\x02 control\x7f",
    "e\u0301 n\u0303 a\u0308", "👨‍👩‍👧‍👦👨‍👩‍👧‍👦", "🇫🇷🇯🇵🇺🇸", "COMBINING\u0336STRIKE",
]


def generate(count, seed):
    """Returns `count` strings (at least len(FIXED)), the same for the same seed."""
    rng = random.Random(seed)
    out = list(FIXED)
    while len(out) < count:
        kind = rng.random()
        if kind < 0.12:
            out.append(_chat(rng))
        elif kind < 0.22:
            out.append(rng.choice(SPACES) * rng.randint(1, 6) + _atom(rng) + rng.choice(SPACES) * rng.randint(1, 4))
        else:
            n = rng.randint(1, 12)
            out.append("".join(_atom(rng) + _separator(rng) for _ in range(n)))
    return out[:count] if count >= len(FIXED) else out
