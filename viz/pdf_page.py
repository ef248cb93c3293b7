"""A one-page PDF that holds one picture: how a graph drawn as png becomes a pdf (graphviz-pure
writes no pdf itself).

The page is the picture's physical size at its dpi; the pixels, flattened onto white, go in as
they are, Flate-compressed. Wrapping the picture in a matplotlib figure did the same in 20-30 s
for a 300-node graph (it resamples the picture, then encodes colour and alpha as two more
pngs); this takes a few seconds.
"""
from __future__ import annotations

import io
import zlib

_COMPRESS_LEVEL = 3


def png_to_pdf(png: bytes, dpi: float) -> bytes:
    """`png` as a one-page pdf whose page measures the picture at `dpi` pixels per inch."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGBA")
    flat = Image.new("RGB", image.size, "white")
    flat.paste(image, mask=image.getchannel("A"))
    width, height = image.size
    page_width, page_height = width * 72 / dpi, height * 72 / dpi
    pixels = zlib.compress(flat.tobytes(), _COMPRESS_LEVEL)
    drawing = f"q {page_width:.3f} 0 0 {page_height:.3f} 0 0 cm /Picture Do Q".encode("ascii")
    return pdf_document([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {page_width:.3f} {page_height:.3f}] "
        "/Resources << /XObject << /Picture 4 0 R >> >> /Contents 5 0 R >>".encode("ascii"),
        _stream(f"/Type /XObject /Subtype /Image /Width {width} /Height {height} /ColorSpace /DeviceRGB "
                "/BitsPerComponent 8 /Filter /FlateDecode", pixels),
        _stream("", drawing),
    ])


def _stream(dictionary: str, data: bytes) -> bytes:
    return (f"<< {dictionary} /Length {len(data)} >>\nstream\n".encode("ascii") + data + b"\nendstream")


def pdf_document(objects: list) -> bytes:
    """A PDF file of `objects` (numbered from 1, the first the catalog) with its cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode("ascii") + body + b"\nendobj\n")
    table = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode("ascii"))
    out.write("".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode("ascii"))
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{table}\n%%EOF\n".encode("ascii"))
    return out.getvalue()
