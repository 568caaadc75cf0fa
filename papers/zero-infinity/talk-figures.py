#!/usr/bin/env python3
"""Reads Fig. 5a, Fig. 5b and Fig. 6's two panels off the authors' SC'21 talk.

The slides of the ZeRO-Infinity talk at SC'21 are in DeepSpeed's repository
(docs/assets/files/SC21-ZeRO-Infinity.pdf). Page 15 ("Excellent Efficiency")
is Fig. 5a: TFLOPS per GPU on 512 V100s for ZeRO-Infinity at 0.5T to 20T and
for 3D parallelism at 0.5T. Page 16 ("Super-linear Scalability") is Fig. 5b:
PFLOPS of the 1T model on 64 to 512 GPUs. Both charts are vector drawings, so
each bar's height and each marker's position are numbers in the PDF, not
pixels: this script converts pages 15 and 16 to SVG with poppler's pdftocairo
and measures them against the charts' own gridlines (0-60 TFLOPS in steps of
10 on page 15; 0-30 PFLOPS in steps of 5, 64-512 GPUs in steps of 64, on page
16: the axis labels are glyph outlines, so their values are written here).

Page 18 ("Impact of System Features on Performance") holds two of the paper's
Fig. 6 panels as raster images: the speedup from prefetching and overlapping
for an 8B model on 64 GPUs against the batch size (0.9-1.4 in steps of 0.1,
batch 2-16 in steps of 2), and the overhead of offloading activation
checkpoints to CPU memory against the hidden dimension (1.00-1.25 in steps of
0.05, 0-64K in steps of 16K). pdfimages extracts them; each marker's centre is
measured in pixels against the images' gridlines (about 1/270 of the y range
per pixel).

Given a second file, DeepSpeed's docs/assets/images/zero3-offload-200B-scalability.png
(Figure 4 of the ZeRO-3 Offload announcement, March 2021: a 200B model's
speedup from 64 to 512 GPUs), it reads the observed markers the same way
(decoded with Pillow).

Usage: papers/zero-infinity/talk-figures.py path/to/SC21-ZeRO-Infinity.pdf [path/to/zero3-offload-200B-scalability.png]
Needs pdftocairo and pdfimages (Debian: poppler-utils) and Pillow (python3-pil). Exit 2 on a missing
file or tool, 1 when a chart does not have the shapes described above.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ORANGE = "94.099426%,56.498718%,31.399536%"  # 3D parallelism's bars
BLUE = "45.098877%,66.699219%,85.899353%"    # ZeRO-Infinity's bars and markers
GRID = "85.099792%,85.099792%,85.099792%"    # the gridlines
AXIS = "74.899292%,74.899292%,74.899292%"    # Fig. 5b's axis lines and ticks
NUM = re.compile(r"-?\d+(?:\.\d+)?")


def paths(svg):
    """(style, points) of every <path>, points in the PDF's y-up frame."""
    height = float(re.search(r'height="([\d.]+)pt"', svg).group(1))
    out = []
    for m in re.finditer(r"<path ([^>]*)/>", svg):
        attrs = m.group(1)
        style = re.search(r'style="([^"]*)"', attrs)
        d = re.search(r' d="([^"]*)"', attrs)
        if not style or not d:
            continue
        nums = [float(x) for x in NUM.findall(d.group(1))]
        pts = list(zip(nums[0::2], nums[1::2]))
        # pdftocairo writes stroked shapes in the PDF's own frame under a flip,
        # filled ones already flipped into the SVG's y-down frame.
        if "matrix(1,0,0,-1,0," not in attrs:
            pts = [(x, height - y) for x, y in pts]
        out.append((style.group(1), pts))
    return out


def straight(ps, colour, along):
    """The point lists of the paths stroked in `colour` whose every segment
    keeps coordinate `along` constant: horizontal lines (along=1) or
    vertical ones (along=0)."""
    return [pts for style, pts in ps if f"stroke:rgb({colour})" in style and len(pts) >= 2 and all(
        abs(pts[i][along] - pts[i + 1][along]) < 0.01 for i in range(0, len(pts) - 1, 2))]


def grid(ps, along):
    """The gridlines' positions: their y (along=1, horizontal lines) or x
    (along=0, vertical), from the one gray path of such segments."""
    for pts in straight(ps, GRID, along):
        if len(pts) >= 8:
            return sorted({round(p[along], 3) for p in pts})
    raise ValueError("no " + ("horizontal" if along else "vertical") + " gridlines")


def fig5a(svg):
    ps = paths(svg)
    grid_y = grid(ps, 1)  # 10, 20, ..., 60 TFLOPS
    if len(grid_y) != 6:
        raise ValueError(f"page 15: {len(grid_y)} gridlines, expected 6")
    bars = []
    for style, pts in ps:
        for colour, name in ((ORANGE, "3D parallelism"), (BLUE, "ZeRO-Infinity")):
            if f"fill:rgb({colour})" in style and "stroke:" not in style.replace("stroke:none", ""):
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                if max(xs) - min(xs) > 15:  # the legend's squares are 7.5 pt wide
                    bars.append((min(xs), name, min(ys), max(ys)))
    base = min(b[2] for b in bars)
    per_tflop = (grid_y[-1] - base) / 60.0
    models = ["0.5T", "1T", "5T", "10T", "20T"]
    zi = sorted(b for b in bars if b[1] == "ZeRO-Infinity")
    d3 = sorted(b for b in bars if b[1] == "3D parallelism")
    if len(zi) != 5 or len(d3) != 5:
        raise ValueError(f"page 15: {len(zi)} ZeRO-Infinity and {len(d3)} 3D bars, expected 5 each")
    print("Fig. 5a (talk page 15), TFLOPS per GPU on 512 V100s:")
    print("| model | ZeRO-Infinity | 3D parallelism |")
    print("|---|---|---|")
    for m, z, t in zip(models, zi, d3):
        tv = (t[3] - t[2]) / per_tflop
        # the chart draws a stub of 1 TFLOPS under a red cross where 3D parallelism cannot run
        tcell = f"{tv:.1f}" if tv > 2 else "does not fit (stub)"
        print(f"| {m} | {(z[3] - z[2]) / per_tflop:.1f} | {tcell} |")


def fig5b(svg):
    ps = paths(svg)
    grid_y = grid(ps, 1)  # 5, 10, ..., 30 PFLOPS
    grid_x = grid(ps, 0)  # 128, 192, ..., 512 GPUs
    # the axis lines: single segments (the ticks are paths of many)
    axis = [pts[0][1] for pts in straight(ps, AXIS, 1) if len(pts) == 2]
    yaxis = [pts[0][0] for pts in straight(ps, AXIS, 0) if len(pts) == 2]
    if len(grid_y) != 6 or len(grid_x) != 7 or not axis or not yaxis:
        raise ValueError("page 16: the axes are not as described")
    y0, x0 = min(axis), min(yaxis)
    per_pflop = (grid_y[-1] - y0) / 30.0
    per_gpu = (grid_x[-1] - x0) / 448.0
    print("Fig. 5b (talk page 16), the 1T model's measured throughput:")
    print("| GPUs | PFLOPS | TFLOPS per GPU |")
    print("|---|---|---|")
    for style, pts in ps:
        if f"fill:rgb({BLUE})" in style and len(pts) > 6:  # a marker: a filled circle
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
            gpus = 64 + (cx - x0) / per_gpu
            if abs(gpus / 64 - round(gpus / 64)) > 0.05:
                continue  # the legend's marker
            n, pf = 64 * round(gpus / 64), (cy - y0) / per_pflop
            print(f"| {n} | {pf:.2f} | {1000 * pf / n:.1f} |")


def image(path):
    """(width, height, pixel(x, y) -> (r, g, b)) of a raster image (Pillow,
    python3-pil: PPM from pdfimages, PNG; transparency composited over
    white, as a viewer shows it)."""
    from PIL import Image, UnidentifiedImageError
    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in ("RGBA", "LA", "P"):
                im = im.convert("RGBA")
                white = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(white, im)
            rgb = im.convert("RGB")
    except (OSError, UnidentifiedImageError) as e:
        raise ValueError(f"{path}: not a readable image ({e})")
    w, h = rgb.size
    px = rgb.load()
    return w, h, lambda x, y: px[x, y]


def runs(indices):
    """[first, last] of each stretch of consecutive integers in the
    ascending list `indices`."""
    out = []
    for i in indices:
        if out and i - out[-1][1] == 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def raster_lines(w, h, pixel, along):
    """Centres of the gray gridlines of a raster chart: rows (along=1) or
    columns (along=0) of which a third or more is gray, adjacent ones merged."""
    n, m = (h, w) if along else (w, h)
    at = (lambda i, j: pixel(j, i)) if along else (lambda i, j: pixel(i, j))
    hits = [i for i in range(n) if sum(
        1 for j in range(m) if (lambda c: max(c) - min(c) < 8 and 190 < c[0] < 240)(at(i, j))) > m / 3]
    return [(a + b) / 2 for a, b in runs(hits)]


def raster_markers(path, xs, x_range, y_range, load=image):
    """The y value at each x in xs of a raster line chart's blue markers: the
    middle of the longest blue run in the marker's column, against the
    gridlines that span x_range and y_range (top to bottom); `load` reads
    the image (ppm or png)."""
    w, h, pixel = load(path)
    cols, rows = raster_lines(w, h, pixel, 0), raster_lines(w, h, pixel, 1)
    (x0, x1), (y0, y1) = x_range, y_range
    out = []
    for x in xs:
        col = round(cols[0] + (x - x0) * (cols[-1] - cols[0]) / (x1 - x0))
        ys = [y for y in range(h) if (lambda c: c[2] > 150 and c[2] - c[0] > 80)(pixel(col, y))]
        if not ys:
            raise ValueError(f"{path}: no marker at {x}")
        a, b = max(runs(ys), key=lambda r: r[1] - r[0])
        out.append((x, y0 + ((a + b) / 2 - rows[0]) * (y1 - y0) / (rows[-1] - rows[0])))
    return out, len(cols), len(rows)


def fig6(images):
    """The two panels of page 18, told apart by their vertical gridlines
    (8: batch 2-16; 5: hidden 0-64K)."""
    panels = {}
    for path in images:
        w, h, pixel = image(path)
        n = len(raster_lines(w, h, pixel, 0))
        if n in panels:
            raise ValueError(f"page 18: two images with {n} vertical gridlines")
        panels[n] = path
    if sorted(panels) != [5, 8]:
        raise ValueError(f"page 18: charts with {sorted(panels)} vertical gridlines, expected 5 and 8")
    speedup, _, rows = raster_markers(panels[8], [2, 4, 8, 10, 14, 16], (2, 16), (1.4, 0.9))
    if rows != 6:
        raise ValueError(f"page 18: {rows} horizontal gridlines in the prefetch panel, expected 6")
    overhead, _, rows = raster_markers(panels[5], [2, 8, 16, 32, 64], (0, 64), (1.25, 1.0))
    if rows != 6:
        raise ValueError(f"page 18: {rows} horizontal gridlines in the checkpoint panel, expected 6")
    print("Fig. 6 (talk page 18): prefetching and overlapping, 8B model on 64 GPUs:")
    print("| batch size | speedup |")
    print("|---|---|")
    for b, v in speedup:
        print(f"| {b} | {v:.3f} |")
    print()
    print("Fig. 6 (talk page 18): activation checkpoint offload:")
    print("| hidden dimension | overhead |")
    print("|---|---|")
    for k, v in overhead:
        print(f"| {k}K | {v:.3f} |")


def scaling_200b(path):
    """ZeRO-3 Offload's announcement, Figure 4: the speedup of a 200B model
    from 64 GPUs (1.00 to 9.00 in steps of 2, 64 to 512 GPUs in steps of 64;
    the blue markers are the observed scaling, the orange ones linear)."""
    out, cols, rows = raster_markers(path, [128, 256, 512], (64, 512), (9.0, 1.0), load=image)
    if cols != 8 or rows != 5:
        raise ValueError(f"{path}: {cols} vertical and {rows} horizontal gridlines, expected 8 and 5")
    print("ZeRO-3 Offload announcement, Figure 4: a 200B model, speedup over 64 GPUs:")
    print("| GPUs | speedup | per GPU, over 64 GPUs |")
    print("|---|---|---|")
    print("| 64 | 1.00 | 1.000 |")
    for gpus, s in out:
        print(f"| {gpus} | {s:.2f} | {s / (gpus / 64):.3f} |")


def main():
    if len(sys.argv) not in (2, 3):
        print(next(p for p in __doc__.split("\n\n") if p.startswith("Usage:")), file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        if not os.path.isfile(path):
            print(f"talk-figures: {path}: no such file", file=sys.stderr)
            return 2
    try:
        import PIL  # noqa: F401 (image() reads the rasters with it)
    except ImportError:
        print(f"talk-figures: Pillow not found for {sys.executable} (Debian: python3-pil, "
              "scripts/install-deps.sh --papers)", file=sys.stderr)
        return 2
    tool, images = shutil.which("pdftocairo"), shutil.which("pdfimages")
    if not tool or not images:
        print("talk-figures: pdftocairo or pdfimages not found (apt-get install poppler-utils)", file=sys.stderr)
        return 2
    pages = {}
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([images, "-f", "18", "-l", "18", sys.argv[1], f"{tmp}/p18"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"talk-figures: {sys.argv[1]}: {r.stderr.strip()}", file=sys.stderr)
            return 2
        # RGB images come out as .ppm (masks, if any, as .pbm or .pgm)
        pages[18] = sorted(f"{tmp}/{name}" for name in os.listdir(tmp) if name.startswith("p18") and name.endswith(".ppm"))
        for page in (15, 16):
            out = f"{tmp}/p{page}.svg"
            r = subprocess.run([tool, "-svg", "-f", str(page), "-l", str(page), sys.argv[1], out],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"talk-figures: {sys.argv[1]}: {r.stderr.strip()}", file=sys.stderr)
                return 2
            with open(out) as f:
                pages[page] = f.read()
        try:
            fig5a(pages[15])
            print()
            fig5b(pages[16])
            print()
            fig6(pages[18])
        except ValueError as e:
            print(f"talk-figures: {sys.argv[1]}: {e}", file=sys.stderr)
            return 1
    if len(sys.argv) == 3:
        print()
        try:
            scaling_200b(sys.argv[2])  # its messages name the PNG
        except ValueError as e:
            print(f"talk-figures: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
