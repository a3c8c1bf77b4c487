"""The workloads every experiment draws from: prompt texts, documents for rerank, images and videos.

One module, as vLLM's ``benchmarks/datasets.py`` is one: experiments that measure the same quantity send the
same inputs, and no experiment imports another to borrow them. Everything is generated from fixed seeds, so a
run on another machine sends byte-identical requests.
"""

from __future__ import annotations

import base64
import io
import random

from PIL import Image, ImageDraw, ImageFont

# Words for the random sentences: common English words, so every tokenizer splits them similarly.
WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education"
).split()
SEED = 20261027


def sentences(count: int, words: int, seed: int = SEED) -> list[str]:
    """``count`` random sentences of ``words`` common English words each."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) + "." for _ in range(count)]


def random_words(count: int, rng: random.Random) -> str:
    """``count`` random words, drawn with the caller's generator (a prefix shared by several requests, say)."""
    return " ".join(rng.choice(WORDS) for _ in range(count))


QUERY = "How does an inference engine reuse a shared prompt prefix?"
DOC_KINDS = {
    "prefix-cache": "The engine hashes each block of prompt tokens and reuses cached KV blocks when a new request starts with the same prefix.",
    "kv-cache": "Key and value tensors of past tokens are kept in GPU memory so decoding does not recompute attention over the whole prompt.",
    "tokenizer": "A tokenizer splits text into subword pieces and maps each piece to an integer id.",
    "scheduling": "Continuous batching adds new requests to the running batch at every decoding step.",
    "cooking": "Simmer the onions slowly in butter until they turn golden and sweet.",
    "weather": "Tomorrow will be windy along the coast with showers in the afternoon.",
}


def documents(count: int) -> list[tuple[str, str]]:
    kinds = list(DOC_KINDS.items())
    return [kinds[i % len(kinds)] for i in range(count)]


# ---- images ----------------------------------------------------------------------------------------------

COLOURS = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (30, 70, 220), "yellow": (235, 200, 20),
           "purple": (140, 50, 170), "orange": (245, 130, 20)}
QUESTION_DIGITS = "What is the four-digit number in the image? Answer with the number only."
QUESTION_COLOUR = "What colour is the rectangle in the image? Answer with one word."

# Bytes of formats the 0.32.0 release notes say untrusted images may no longer be opened as; a PNG for control.
UNTRUSTED_PAYLOADS = {
    "EPS": b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 16 16\nnewpath 0 0 moveto 16 16 lineto stroke\nshowpage\n%%EOF\n",
    "PostScript": b"%!PS-Adobe-3.0\n%%Pages: 1\n%%EndComments\nnewpath 0 0 moveto 72 72 lineto stroke\nshowpage\n%%EOF\n",
    "WMF (placeable)": bytes.fromhex("d7cdc69a0000000000001000100048000000000000000000") + bytes.fromhex("010009000003") + bytes(12),
}


def _png_bytes() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), "white").save(buf, format="PNG")
    return buf.getvalue()


UNTRUSTED_PAYLOADS["PNG (control)"] = _png_bytes()


def draw(side: int, index: int) -> tuple[str, str, str]:
    """One test image as a PNG data URL, with its colour name and digits."""
    rng = random.Random(SEED + 7919 * index + side)
    colour = rng.choice(sorted(COLOURS))
    digits = f"{rng.randint(1000, 9999)}"
    img = Image.new("RGB", (side, side), "white")
    pen = ImageDraw.Draw(img)
    pen.rectangle([side // 10, side // 10, side // 2, side // 2], fill=COLOURS[colour])
    font = ImageFont.load_default(size=max(12, side // 8))
    pen.text((side // 10, int(side * 0.62)), digits, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode(), colour, digits


def image_message(url: str, question: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": question}]}]


# ---- videos -----------------------------------------------------------------------------------------------

QUESTION_VIDEO = "Which way does the rectangle move in the video? Answer with one word."


def video(side: int, frames: int, index: int) -> str:
    """A square video as vLLM's "video/jpeg" data URL (base64 JPEG frames joined by commas): a coloured rectangle
    crossing a white frame, the frame number drawn below it. Decoded by the server like any video, with no video
    codec needed on either side."""
    rng = random.Random(SEED + 104_729 * index + side)
    colour = COLOURS[rng.choice(sorted(COLOURS))]
    font = ImageFont.load_default(size=max(12, side // 10))
    parts = []
    for f in range(frames):
        img = Image.new("RGB", (side, side), "white")
        pen = ImageDraw.Draw(img)
        x = int((side * 0.6) * f / max(1, frames - 1))
        pen.rectangle([x, side // 5, x + side // 3, side // 2], fill=colour)
        pen.text((side // 10, int(side * 0.65)), f"{index}:{f}", fill="black", font=font)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=85)
        parts.append(base64.b64encode(buf.getvalue()).decode())
    return "data:video/jpeg;base64," + ",".join(parts)


def video_message(url: str, question: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}},
                                         {"type": "text", "text": question}]}]
