"""viz.pdf_page: a png wrapped in a one-page pdf, read back by hand (no pdf library needed):
the cross-reference table points at each object, the page has the picture's physical size,
and the image stream holds the picture's pixels flattened onto white."""
import io
import re
import zlib

import numpy as np
from PIL import Image

from viz.pdf_page import png_to_pdf


def picture() -> tuple:
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(30, 50, 4), dtype=np.uint8)
    rgba[:10, :, 3] = 0  # a transparent band: white in the pdf
    rgba[10:, :, 3] = 255
    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, format="png")
    return rgba, out.getvalue()


def test_xref_points_at_every_object():
    _, png = picture()
    pdf = png_to_pdf(png, dpi=144)
    assert pdf.startswith(b"%PDF-1.4") and pdf.endswith(b"%%EOF\n")
    start = int(re.search(rb"startxref\n(\d+)\n", pdf).group(1))
    assert pdf[start:].startswith(b"xref\n0 6\n")
    offsets = [int(n) for n in re.findall(rb"(\d{10}) 00000 n ", pdf[start:])]
    assert len(offsets) == 5
    for number, offset in enumerate(offsets, start=1):
        assert pdf[offset:].startswith(f"{number} 0 obj\n".encode())


def test_page_size_and_pixels():
    rgba, png = picture()
    pdf = png_to_pdf(png, dpi=144)
    assert b"/MediaBox [0 0 25.000 15.000]" in pdf  # 50 x 30 pixels at 144 dpi, in points
    header, rest = re.search(rb"/Width 50 /Height 30 [^>]*/Length (\d+) >>\nstream\n", pdf).group(0, 1)
    begin = pdf.index(header) + len(header)
    pixels = np.frombuffer(zlib.decompress(pdf[begin:begin + int(rest)]), dtype=np.uint8).reshape(30, 50, 3)
    assert (pixels[:10] == 255).all()
    assert (pixels[10:] == rgba[10:, :, :3]).all()
